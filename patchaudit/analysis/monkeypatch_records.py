"""What monkey-patch recognition produces: a `MonkeyPatch` (the site, its
targets, its gates) and its `Replacement` (what it installs, as far as one
file tells)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from patchaudit.analysis.monkeypatch_gates import Gate
from patchaudit.engine.definitions import Param

#: parameter kinds a positional argument can fill
POSITIONAL = ("positional_only", "positional")
#: decorators that keep a function's signature as written
TRANSPARENT_DECORATORS = {
    "functools.wraps",
    "wraps",
    "functools.lru_cache",
    "functools.cache",
    "typing.override",
    "typing_extensions.override",
    "override",
}


# --------------------------------------------------------------------------
# what recognition produces


@dataclass
class Replacement:
    """What a monkey-patch installs, as far as one file tells."""

    name: str | None = None  # as written (`new_forward`, `functools.partial(f, x=1)`)
    line: int | None = None  # where it is defined in the fork file
    params: list[Param] | None = None  # its own parameters (None: unknown)
    is_async: bool | None = None
    #: "function" (a plain function: bound when set on a class), "static",
    #: "class", "unbound" (partial, callable object: never bound), "unknown"
    binding: str = "unknown"
    engine_ref: str | None = None  # the replacement is itself an engine symbol
    fork_ref: str | None = None  # imported from another module of the fork (dotted)
    note: str = ""


@dataclass
class MonkeyPatch:
    path: str
    line: int
    column: int  # 0-based
    end_line: int
    end_column: int
    targets: tuple[str, ...]  # candidate dotted targets (usually one)
    form: str  # assign | setattr | mock.patch | mock.patch.object | mock.patch.multiple
    how: str  # replaced | wrapped | added | mocked
    replacement: Replacement | None = None
    function: str | None = None  # the fork function that applies the patch
    gates: tuple[Gate, ...] = ()
    version_tag: tuple[str | None, str] | None = None
    code: str = ""  # the statement, first line
    #: the engine modules the file imports by an import statement that prefix the target:
    #: they must exist as modules (a package's `__getattr__` cannot provide them)
    imported: tuple[str, ...] = ()

    @property
    def target(self) -> str:
        return self.targets[0]

    @property
    def top(self) -> str:
        return self.target.split(".", 1)[0]

    def to_json(self) -> dict[str, Any]:
        r = self.replacement
        return {
            "path": self.path,
            "line": self.line,
            "column": self.column + 1,
            "target": self.target,
            "alternatives": list(self.targets[1:]),
            "form": self.form,
            "how": self.how,
            "replacement": None
            if r is None
            else {"name": r.name, "line": r.line, "async": r.is_async, "binding": r.binding},
            "function": self.function,
            "gates": [g.describe() for g in self.gates],
            "version_tag": None if self.version_tag is None else self.version_tag[1],
        }
