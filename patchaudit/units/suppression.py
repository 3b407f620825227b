"""The suppression-comment grammar: `# patchaudit: ignore` and `# patchaudit: ignore[PA101, PA104]`.

Which lines of a file a comment counts on (`suppressible_patch_lines` for a
patch: the lines it adds, and those outside hunks) and how one is read
(`parse_suppression`).  Applying the comments to findings is the pipeline's
(patchaudit/pipeline/suppression.py); PA001 reads the same grammar to point at
a comment that suppresses nothing.
"""

from __future__ import annotations

import re

SUPPRESS_RE = re.compile(r"#\s*patchaudit:\s*ignore(?:\[(?P<codes>[A-Za-z0-9_,\s]*)\])?", re.I)


def parse_suppression(line: str) -> tuple[bool, tuple[str, ...] | None]:
    m = SUPPRESS_RE.search(line)
    if not m:
        return False, None
    codes = m.group("codes")
    if codes is None:
        return True, None
    return True, tuple(c.strip().upper() for c in codes.split(",") if c.strip())


def suppressible_patch_lines(patch) -> list[str]:
    """A patch's lines with its context and removed lines blanked: a suppression
    comment in a patch counts on the lines the patch adds (and outside hunks)."""
    out = list(patch.lines)
    for _, hunk in patch.iter_hunks():
        for l in hunk.lines:
            if l.kind != "+" and 0 < l.patch_line <= len(out):
                out[l.patch_line - 1] = ""
    return out
