"""The report of `patchaudit bump`: per hunk, how it applies to OLD and to NEW.

`BumpReport` is what `patchaudit.pipeline.bump.run_bump` returns and every
renderer of the bump command reads (`patchaudit/reporters/bump.py`, the
markdown and JSON reporters).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from patchaudit.analysis.upstream import Relocation
from patchaudit.model.findings import FileError, Finding, Severity
from patchaudit.units.exact import HunkRecord

__all__ = ["BumpReport", "HunkRow", "Relocation", "Side"]


@dataclass
class Side:
    """How one hunk applies to one engine version."""

    status: str  # clean | offset | fuzz | failed | already-applied | missing-file
    path: str | None  # engine path
    offset: int = 0
    fuzz: int = 0
    line: int | None = None  # GNU's "succeeded at" (in the patched file)
    source_line: int | None = None  # where it matched (or was expected) in the engine file
    symbol: str | None = None
    nearest: tuple[int, int, int] | None = None

    @classmethod
    def of(cls, rec: HunkRecord) -> "Side":
        return cls(
            rec.status,
            rec.engine_path,
            rec.offset,
            rec.fuzz,
            rec.line,
            getattr(rec, "source_line", None),
            rec.symbol,
            rec.nearest,
        )

    def label(self) -> str:
        if self.status == "offset":
            return f"offset {self.offset:+d}"
        if self.status == "fuzz":
            return f"fuzz {self.fuzz}"
        return self.status

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "path": self.path,
            "offset": self.offset,
            "fuzz": self.fuzz,
            # the engine file's line (where it matched, or was expected); GNU's count in the
            # patched file as patched_line
            "line": self.source_line if self.source_line is not None else self.line,
            "patched_line": self.line,
            "symbol": self.symbol,
            "nearest": list(self.nearest) if self.nearest else None,
        }


@dataclass
class HunkRow:
    patch: str
    patch_line: int
    hunk: int  # 1-based within its file section
    target: str  # the path as the patch names it (no a/ b/)
    old: Side | None
    new: Side | None
    moved_to: str | None = None  # NEW lacks the file; its definitions are here
    section_line: int | None = None  # the patch line of the hunk's file section
    moved: Side | None = None  # the hunk applied to moved_to
    changed_upstream: bool | None = None  # its engine code changed upstream (None: not computed)
    moved_symbol: str | None = None  # where the OLD symbol it patches is defined in moved_to

    @property
    def symbol(self) -> str | None:
        for side in (self.old, self.new, self.moved):
            if side is not None and side.symbol:
                return side.symbol
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "patch": self.patch,
            "patch_line": self.patch_line,
            "hunk": self.hunk,
            "target": self.target,
            "symbol": self.symbol,
            "old": self.old.to_json() if self.old else None,
            "new": self.new.to_json() if self.new else None,
            "moved_to": self.moved_to,
            "moved": self.moved.to_json() if self.moved else None,
            "moved_symbol": self.moved_symbol,
            "changed_upstream": self.changed_upstream,
        }


@dataclass
class BumpReport:
    engine: str
    old_label: str  # full labels (path@rev (sha), wheel file name, directory)
    new_label: str
    old_name: str  # short names for messages ("v1", "sglang 0.5.12.post1")
    new_name: str
    findings: list[Finding] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    hunks: list[HunkRow] = field(default_factory=list)
    patches: list[str] = field(default_factory=list)
    relocations: list[Relocation] = field(default_factory=list)
    files: int = 0
    parsed: int = 0
    old_kind: str = ""  # the engine sources' kinds (git, wheel, sdist, directory)
    new_kind: str = ""

    @property
    def commits_note(self) -> str | None:
        """Why no upstream commit is named, when OLD and NEW are not two git revisions."""
        if self.old_kind == self.new_kind == "git" or not (self.old_kind or self.new_kind):
            return None
        plural = {"directory": "directories", "overlay": "overlays"}
        kinds = [plural.get(k, k + "s") for k in sorted({k for k in (self.old_kind, self.new_kind) if k != "git"})]
        return (
            f"Upstream commits are not named: the engine sources are {' and '.join(kinds)}, which carry no "
            f"history. Give two revisions of the engine's git repository (`--from REPO@OLD --to REPO@NEW`, "
            f"or `--engine {self.engine}=REPO --from OLD --to NEW`) to see the commits that changed each hunk's code."
        )

    @property
    def exit_code(self) -> int:
        if self.errors:
            return 2
        return 1 if any(f.severity is Severity.ERROR for f in self.findings) else 0

    def hunk_counts(self, patch: str | None = None) -> dict[str, int]:
        """Hunks by their status on NEW (`moved`: NEW lacks the file)."""
        out = {"clean": 0, "offset": 0, "fuzz": 0, "failed": 0, "already-applied": 0, "missing-file": 0}
        for row in self.hunks:
            if patch is not None and row.patch != patch:
                continue
            status = row.new.status if row.new else "missing-file"
            out[status] = out.get(status, 0) + 1
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "from": {"label": self.old_label, "name": self.old_name},
            "to": {"label": self.new_label, "name": self.new_name},
            "findings": [f.to_json() for f in self.findings],
            "hunks": [h.to_json() for h in self.hunks],
            "relocations": [r.to_json() for r in self.relocations],
            "errors": [e.to_json() for e in self.errors],
        }
