"""What the check pipeline hands back: one file's result, the run's result, the run's stop."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from patchaudit.model.findings import FileError, Finding


@dataclass
class FileResult:
    path: str
    findings: list[Finding] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    parsed: int = 0  # libcst parses done (for the cache/speed tests)
    # suppression comments: (line, codes or None) that matched nothing
    unused_suppressions: list[tuple[int, tuple[str, ...] | None]] = field(default_factory=list)
    # exact mode: how each hunk applied (HunkRecord.to_json() dicts, picklable)
    hunks: list[dict] = field(default_factory=list)
    #: the other files its analysis read, with their signatures (files/observe.py);
    #: None: one changed while it was read, so the result is not kept
    reads: tuple | None = ()


@dataclass
class RunResult:
    findings: list[Finding] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    files: int = 0
    parsed: int = 0
    cached: int = 0
    hunks: list[Any] = field(default_factory=list)  # exact mode: per-hunk application records
    #: what the user should hear that is no error (exit code unchanged): engine archive
    #: members refused (a huge member, a lying header, a huge tar name)
    warnings: list[str] = field(default_factory=list)
    #: the result of an earlier run, replayed: nothing it read changed (pipeline/replay.py)
    replayed: bool = False
    #: findings `--fix` fixed (the text report's summary counts them apart)
    fixed: int = 0

    @property
    def exit_code(self) -> int:
        if self.errors:
            return 2
        return 1 if self.findings else 0


class RunError(Exception):
    """A usage or configuration problem that stops the run (exit code 2)."""


def unique_errors(errors: list[FileError]) -> list[FileError]:
    """`errors` without repeats (same path, line and message), in their order."""
    seen: set[tuple[str, int | None, str]] = set()
    out = []
    for e in errors:
        key = (e.path, e.line, e.message)
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out
