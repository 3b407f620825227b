"""Findings: what rules report, located in the file the user reads.

A rule reports in the coordinates of the unit it analysed (`Report`); the runner
turns a report into a `Finding` through the unit's line map, so a finding in a
patch carries the patch file's own line and, separately, the engine file line
(`Target`).  The JSON shape of `Finding.to_json` is a public interface
(documented in the README): keep it stable.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"error": 2, "warning": 1, "info": 0}[self.value]


@dataclass(frozen=True)
class TraceStep:
    path: str
    line: int
    note: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "note": self.note}


@dataclass(frozen=True)
class Target:
    """Where a finding in a patch lands in the engine (or patched) file."""

    path: str
    line: int | None
    symbol: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "symbol": self.symbol}


@dataclass(frozen=True)
class Edit:
    """Replace lines `line`..`end_line` (1-based, inclusive) of the reported file with
    `new_lines` (each without its line end); `end_line == line - 1` inserts before `line`.
    In a `.patch` file the lines are the patch's own lines: the hunk headers around an
    edit are recomputed when the fix is applied (patchaudit/patching/patchedit.py)."""

    line: int
    end_line: int
    new_lines: tuple[str, ...]


@dataclass(frozen=True)
class Fix:
    """What applying a finding's fix does to the file it is reported in (`--fix`, `--diff`).

    `safe`: it keeps the code's meaning (applied by `--fix`); an unsafe fix changes
    behaviour and is applied only with `--unsafe-fixes`, as ruff separates them."""

    description: str
    edits: tuple[Edit, ...]
    safe: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "message": self.description,
            "applicability": "safe" if self.safe else "unsafe",
            "edits": [{"line": e.line, "end_line": e.end_line, "content": list(e.new_lines)} for e in self.edits],
        }


@dataclass(frozen=True)
class Report:
    """A rule's report, in unit coordinates (1-based lines, 0-based columns)."""

    line: int
    column: int
    end_line: int
    end_column: int
    message: str
    trace: tuple[tuple[int, str], ...] = ()  # (unit line, note)
    severity: Severity | None = None  # overrides the rule's default
    # set when the reported construct runs into text the unit had to invent
    # (a fragment closed artificially at the end of a hunk)
    incomplete: bool = False
    #: the fix, in the coordinates of the *reported file* (patchaudit/lint/fixes.py maps them)
    fix: Fix | None = None


@dataclass
class Finding:
    code: str
    name: str
    severity: Severity
    message: str
    path: str
    line: int
    column: int = 1
    end_line: int | None = None
    end_column: int | None = None
    target: Target | None = None
    trace: list[TraceStep] = field(default_factory=list)
    # lines shown under the finding in text output (the hunk of a patch)
    context: list[str] = field(default_factory=list)
    # stable identity for baselines (filled by the runner)
    fingerprint: str | None = None
    #: how to fix it (`--fix`), or None; not part of the JSON shape
    fix: Fix | None = None
    #: the reported file's lines `line`.. (at most a few), for the text report's source frame;
    #: not part of the JSON shape (patchaudit/pipeline/suppression.py, `attach_source`)
    source: list[str] = field(default_factory=list)
    #: the line number, in the reported file, of `context[0]` (a patch's hunk), when known
    context_line: int | None = None

    def sort_key(self) -> tuple:
        return (self.path, self.line, self.column, self.code, self.message)

    def region(self) -> tuple[int, int, int, int]:
        """(line, column, end_line, end_column): 1-based, the end column exclusive (the
        column after the region, as SARIF counts it), and the end always after the start.
        The pipeline widens a region to the reported line's text
        (patchaudit/pipeline/suppression.py, `settle_regions`); a finding made elsewhere
        that ends where it starts still covers one character here."""
        line, column = max(1, self.line), max(1, self.column)
        end_line = self.end_line if self.end_line is not None else line
        end_column = self.end_column if self.end_column is not None else column
        if end_line < line:
            end_line, end_column = line, column
        if end_line == line and end_column <= column:
            end_column = column + 1
        return line, column, end_line, max(1, end_column)

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity.value,
            "message": self.message,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.region()[2],
            "end_column": self.region()[3],
            "target": self.target.to_json() if self.target else None,
            "trace": [s.to_json() for s in self.trace],
            "fingerprint": self.fingerprint,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Finding":
        target = data.get("target")
        return cls(
            code=data["code"],
            name=data["name"],
            severity=Severity(data["severity"]),
            message=data["message"],
            path=data["path"],
            line=data["line"],
            column=data.get("column", 1),
            end_line=data.get("end_line"),
            end_column=data.get("end_column"),
            target=Target(**target) if target else None,
            trace=[TraceStep(**s) for s in data.get("trace", [])],
            context=list(data.get("context", [])),
            fingerprint=data.get("fingerprint"),
        )


@dataclass(frozen=True)
class FileError:
    """A file that could not be read or analysed: exit code 2, the scan goes on."""

    path: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        """The line printed on stderr: path and message escaped (patchaudit/model/escape.py)."""
        from patchaudit.model.escape import safe

        where = f"{self.path}:{self.line}" if self.line else self.path
        return safe(f"{where}: error: {self.message}")

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "message": self.message}
