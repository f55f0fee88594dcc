"""What an engine brings to ocrbatch, declared in one place: its plug-in (`EnginePlugin`).

An engine is a package. Its `plugin.py` (a built-in's: `ocrbatch/engines/NAME/plugin.py`) holds `ENGINES`, a
tuple of `EnginePlugin`s, each naming:

- `name`: what `--engine` takes;
- `front`: its front class (engines/base.py), as "module:Class", imported only when the engine is used;
- `about`: a few words for `--engine`'s help ("embedded, CPU"); `title`: the heading of its options there;
- `backends`: the runtimes it runs on (`--backend`), each its front class, the default first; empty: one;
- `options`: its own rows of the option table (rows.Option, `to=ENGINE_OPTIONS`): flags, OCRBATCH_* variables,
  Converter keywords and EngineOptions fields, like every other row;
- `doctor`: its checks for `ocrbatch doctor`, as "module:function"; the function takes the findings so far (by
  name: "torch", "gpus", ...) and returns its own (findings.Finding), imported only by `doctor`.

Built-in engines are found by looking for `plugin.py` in the subpackages of ocrbatch.engines, so adding one edits
only its folder. An engine installed as a package of its own registers the same object through an entry point in
the group `ocrbatch.engines` (pyproject.toml: `[project.entry-points."ocrbatch.engines"] NAME =
"yourpackage.plugin:ENGINES"`; an `EnginePlugin` or a tuple of them). engines/catalog.py finds them both.

This module imports nothing heavier than the row machinery, so a plug-in module stays cheap to import:
`ocrbatch --help` imports every one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from ..findings import Finding  # noqa: F401 - what a plug-in's checks return
from ..rows import ENGINE_FLAG, ENGINE_OPTIONS, Option  # noqa: F401 - what a plug-in's rows are made of

GROUP = "ocrbatch.engines"  # the entry-point group of engines installed as packages of their own


@dataclass(frozen=True)
class EnginePlugin:
    name: str
    front: str  # "module:Class"
    about: str = ""
    title: str = ""  # the heading of its options in --help; default: "NAME engine"
    backends: Mapping[str, str] = field(default_factory=dict)  # backend → "module:Class", the default first
    options: tuple[Option, ...] = ()
    doctor: str | None = None  # "module:function"

    def front_for(self, backend: str) -> str | None:
        """The front class ("module:Class") on `backend`; None for a backend it does not run on."""
        return self.backends.get(backend) if self.backends else self.front
