"""`ocrbatch merge-manifests OUT`: one view of a folder that parts of a --shard run wrote into.

Each part (`--shard I/N`) records its pages in `OUT/manifest.shard-I-of-N.jsonl`. Once they have ended, this
folds every manifest of the folder into `OUT/manifest.jsonl` (of two records of one page, the one finished last;
manifest.merge) and removes the parts' files; later runs, with --shard or without, read it to resume. It holds the
folder's lock the while, so it is refused (exit 6) while any run, or any part, writes into the folder; and it
removes the temporary files a part killed with kill -9 left (nobody else can be writing them).
"""

from __future__ import annotations

from pathlib import Path

from .. import atomic, manifest
from ..errors import UsageError
from .lock import OutputLock


def merge_manifests(out: Path) -> tuple[int, int]:
    """(page records in OUT/manifest.jsonl, manifest files folded); UsageError when `out` holds none,
    OutputLockedError while a run writes into it."""
    if not out.is_dir():
        raise UsageError(f"{out}: no such folder")
    with OutputLock(out):
        if not manifest.manifest_files(out):
            raise UsageError(f"{out} holds no manifest ({manifest.NAME} or {manifest.SHARDS}) to merge")
        atomic.remove_temporaries(out)
        return manifest.merge(out)
