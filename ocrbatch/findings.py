"""A finding of `ocrbatch doctor`: one check's verdict and what it saw. Its own module, so that an engine's
checks (engines/NAME/doctor.py, named by its plug-in) make them without importing doctor.py."""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Finding:
    name: str
    ok: bool | None  # None: a fact, neither good nor bad
    detail: str
    data: dict[str, Any] = field(default_factory=dict)


def version(*dists: str) -> str | None:
    """The installed version of the first of `dists` that is installed, or None."""
    for dist in dists:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None
