"""The hunk of a unified diff as the applier takes it: `HunkSpec`, its lines `HunkLine`.

Plain data, built from a parsed patch by `patchaudit.inputs.patches.Hunk.to_spec`
and applied by `patchaudit.patching.apply.apply_hunks`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: a line of a hunk: context, removed, added
LineKind = Literal[" ", "-", "+"]


@dataclass(frozen=True)
class HunkLine:
    kind: LineKind
    text: str  # the line WITHOUT its line terminator
    no_newline: bool = False  # followed by "\ No newline at end of file"


@dataclass(frozen=True)
class HunkSpec:
    source_start: int  # the "-a" of "@@ -a,b +c,d @@" (1-based; 0 for an empty source)
    source_length: int
    target_start: int
    target_length: int
    lines: tuple[HunkLine, ...]
