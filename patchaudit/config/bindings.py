"""Engine bindings: `[tool.patchaudit.engines.NAME] patches = ["glob", ...]`.

A binding says which patches go to engine NAME where no recipe says it, or against
what a recipe says (the configuration wins: patchaudit/pipeline/plan.py).  The globs
are gitignore-style patterns (pathspec) relative to the folder of the pyproject.toml.
The same table may give the engine's source (`source = "..."`, as
`engines.NAME = "..."` does) or leave it to `--engine NAME=...`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Binding:
    engine: str
    patterns: list[str]
    base: str  # the folder the patterns are relative to
    config: str  # the pyproject.toml
    line: int | None = None
    _spec: Any = field(default=None, repr=False, compare=False)

    def matches(self, path: str) -> bool:
        """Whether the patch at `path` (absolute) is bound to this engine."""
        if self._spec is None:
            self._spec = _spec(self.patterns)
        rel = os.path.relpath(os.path.abspath(path), self.base)
        if rel.startswith(".."):
            return False
        return bool(self._spec.match_file(rel.replace(os.sep, "/")))

    def __getstate__(self) -> dict:  # the compiled spec is rebuilt in a worker
        state = dict(self.__dict__)
        state["_spec"] = None
        return state


def _spec(patterns: list[str]) -> Any:
    """The patterns as a pathspec matched by RE2 (linear time: the globs are the checkout's),
    or by Python's re only when each is safe for it (patchaudit/inputs/pattern_safety.py)."""
    import pathspec

    from patchaudit.inputs.linear_regex import re2_available

    if re2_available():
        return pathspec.PathSpec.from_lines("gitwildmatch", patterns, backend="re2")
    return pathspec.PathSpec.from_lines("gitwildmatch", patterns)


def parse_binding(config: Path, name: str, value: Any, line: int | None = None) -> Binding:
    """The binding of `engines.NAME.patches`; ValueError naming the file and key when it
    is not a list of strings (settings.py raises it as a ConfigError: exit 2)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise ValueError(
            f"{config}: [tool.patchaudit.engines.{name}] patches: expected a list of glob strings, got {value!r}"
        )
    from patchaudit.inputs.linear_regex import re2_available
    from patchaudit.inputs.pattern_safety import safe_for_backtracking

    for v in value:
        unsafe = None if re2_available() else safe_for_backtracking(v)
        if unsafe:
            raise ValueError(f"{config}: [tool.patchaudit.engines.{name}] patches: {unsafe}")
    try:
        _spec(list(value))
    except Exception as exc:  # a pattern pathspec refuses
        raise ValueError(f"{config}: [tool.patchaudit.engines.{name}] patches: bad pattern: {exc}") from None
    return Binding(name, list(value), os.path.dirname(os.path.abspath(config)), str(config), line)
