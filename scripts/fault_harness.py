"""The fault-injection harness at full size: `make faults`. Runs tests/test_faults.py with SEEDS seeds per path
(hangs among them, each ended by the stall watchdog) and prints the tally: seeds, pages, failed pages (each
by the injected error), stalled pages, exit codes, per path. Any wrong outcome is a failed test, listed.

    python scripts/fault_harness.py [SEEDS] [PYTEST ARGS]   default 40 per path (6 paths: 240 seeds);
    e.g. `40 -k ray_with_continuous` runs one path
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0
    seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    with tempfile.TemporaryDirectory() as tmp:
        tally_path = Path(tmp) / "tally.json"
        env = {**os.environ, "OCRBATCH_FAULT_SEEDS": str(seeds), "OCRBATCH_FAULT_HANGS": "1",
               "OCRBATCH_FAULT_TALLY": str(tally_path)}
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_faults.py",
                               *sys.argv[2:]],
                              cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.monotonic() - t0
        tally = json.loads(tally_path.read_text()) if tally_path.exists() else {}
    paths = sorted({k.split(": ")[0] for k in tally})
    whats = sorted({k.split(": ")[1] for k in tally})
    print(f"fault harness: {seeds} seeds per path, {wall:.0f} s")
    print(f"{'path':20}" + "".join(f"{w:>15}" for w in whats))
    for p in paths:
        print(f"{p:20}" + "".join(f"{tally.get(f'{p}: {w}', 0):>15}" for w in whats))
    failed = [ln for ln in proc.stdout.splitlines() if ln.startswith(("FAILED", "ERROR"))]
    print(proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-2000:])
    for ln in failed:
        print(ln)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
