"""`python tests/run_with_engines.py ARGS`: the ocrbatch CLI with the fault-injecting engines of tests/engines
registered, for tests that must run it as a separate process (signals, resource limits)."""

import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

import engines  # noqa: E402
from ocrbatch.cli import main  # noqa: E402
from ocrbatch.engines import registry  # noqa: E402

for cls in (engines.MarkingEngine, engines.SlowEngine):
    registry.register(cls.name, cls)
sys.argv[0] = "ocrbatch"
main()
