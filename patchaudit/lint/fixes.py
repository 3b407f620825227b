"""Building a rule's fix in the coordinates of the file it reports in.

A rule judges a unit (a Python file, a window of a patch hunk, an engine file
with the patch applied); its fix must edit the file the user has: the `.py`
file itself, or the `+` lines of the `.patch` file.  These helpers map a unit
line to that file line through the unit's line map and refuse (None) what a
fix may not touch: a line the patch does not add (a context or removed line, an
engine line outside the patch), or a unit line whose text is not the file's.
The edits they return are `patchaudit.model.findings.Edit`s; applying them (and
repairing the hunk headers of a patch) is patchaudit/patching/patchedit.py's.
"""

from __future__ import annotations

from typing import Any, Iterable

from patchaudit.inputs import source_lines
from patchaudit.model.findings import Edit, Fix


def unit_line_text(unit: Any, line: int) -> str | None:
    """The text of `unit`'s line `line` (1-based), without its line end."""
    lines = getattr(unit, "lines", None)
    if lines is None:
        text = getattr(unit, "text", None)
        if text is None:
            return None
        lines = source_lines(text)  # numbered as the parser numbers them ("\r" ends a line)
    if 0 < line <= len(lines):
        return lines[line - 1]
    return None


def file_line(unit: Any, line: int, *, added_only: bool = True) -> tuple[int, str, int] | None:
    """(line in the reported file, its text, the column shift from unit to file) of unit
    line `line`, or None when a fix may not edit it.  In a patch only its `+` lines may be
    edited (`added_only=False` also accepts a context line: an insertion after it adds a line)."""
    own = unit_line_text(unit, line)
    info = unit.info(line)
    if own is None or info is None:
        return None
    if unit.lines_map is None:  # a file read directly: the unit is the file
        return info.line, own, 0
    patch = getattr(unit, "patch", None)
    if patch is None or not 0 < info.line <= len(patch.lines):
        return None
    text = patch.lines[info.line - 1]
    kinds = "+" if added_only else "+ "
    if info.col_shift != 1 or text[:1] not in kinds or text[1:] != own or not _in_hunk(patch, info.line):
        return None
    return info.line, text, 1


def _in_hunk(patch: Any, line: int) -> bool:
    for _, hunk in patch.iter_hunks():
        if hunk.header_line < line <= hunk.end_line:
            return any(l.patch_line == line for l in hunk.lines)
    return False


def replace_span(unit: Any, line: int, column: int, end_column: int, new: str) -> Edit | None:
    """The edit replacing unit columns `column`..`end_column` (0-based, end exclusive) of
    unit line `line` with `new`."""
    got = file_line(unit, line)
    if got is None:
        return None
    fl, text, shift = got
    return Edit(fl, fl, (text[: shift + column] + new + text[shift + end_column :],))


def replace_line(unit: Any, line: int, new: str | None) -> Edit | None:
    """The edit replacing unit line `line` by `new` (its text in the unit), or removing it (None)."""
    got = file_line(unit, line)
    if got is None:
        return None
    fl, text, shift = got
    return Edit(fl, fl, () if new is None else (text[:shift] + new,))


def insert_after(unit: Any, line: int, new: str) -> Edit | None:
    """The edit adding a line `new` (its text in the unit) after unit line `line`: in a
    patch a `+` line, after an added or a context line of the same hunk."""
    got = file_line(unit, line, added_only=False)
    if got is None:
        return None
    fl, _, shift = got
    return Edit(fl + 1, fl, (("+" if shift else "") + new,))


def make_fix(description: str, edits: Iterable[Edit | None], safe: bool = True) -> Fix | None:
    """A Fix of `edits`, or None when one of them could not be built (or there are none)."""
    got = list(edits)
    if not got or any(e is None for e in got):
        return None
    return Fix(description, tuple(e for e in got if e is not None), safe)
