"""The suppression-comment grammar: `# patchaudit: ignore`, `# patchaudit: ignore[PA101, PA104]`
and flake8's/ruff's `# noqa: PA101`.

Which lines of a file a comment counts on (`suppressible_patch_lines` for a
patch: the lines it adds, and those outside hunks) and how one is read
(`parse_suppression`).  Applying the comments to findings is the pipeline's
(patchaudit/pipeline/suppression.py); PA001 reads the same grammar to point at
a comment that suppresses nothing.

`# noqa` is shared with other tools, so only its patchaudit codes (`PA` and
digits) count: `# noqa: PA101` suppresses PA101, `# noqa: E501, PA101` suppresses
PA101 (E501 is ruff's), and `# noqa: E501` or a bare `# noqa` are not patchaudit
suppressions at all: they suppress no patchaudit finding and PA001 never calls
them unused.  A blanket patchaudit suppression is `# patchaudit: ignore`.
"""

from __future__ import annotations

import re

_CODES = r"[A-Za-z]+[0-9]+(?:[\s,]*[A-Za-z]+[0-9]+)*"
#: a patchaudit suppression comment: `patchaudit: ignore[...]`, or a flake8-style noqa comment
#: that names at least one patchaudit code (`codes` / `noqa`: the listed codes)
SUPPRESS_RE = re.compile(
    r"#\s*(?:patchaudit:\s*ignore(?:\[(?P<codes>[A-Za-z0-9_,\s]*)\])?"
    rf"|noqa\s*:\s*(?=[A-Za-z0-9,\s]*\bPA[0-9])(?P<noqa>{_CODES}))",
    re.I,
)
_OURS = re.compile(r"PA[0-9]+", re.I)


def has_suppression_marker(line: str) -> bool:
    """A cheap test before `parse_suppression`: False when the line cannot hold a comment of ours."""
    return "patchaudit" in line or "noqa" in line or "NOQA" in line or "PATCHAUDIT" in line


def parse_suppression(line: str) -> tuple[bool, tuple[str, ...] | None]:
    """(whether `line` holds a patchaudit suppression, the codes it names or None for all).

    Every comment of the line counts (`# noqa: PA101  # patchaudit: ignore[PA104]` names
    both codes); only the patchaudit codes of a `# noqa` are taken."""
    found = False
    codes: list[str] = []
    for m in SUPPRESS_RE.finditer(line):
        found = True
        if m.group("noqa") is not None:
            codes += [c.upper() for c in re.split(r"[\s,]+", m.group("noqa")) if _OURS.fullmatch(c)]
        elif m.group("codes") is None:
            return True, None  # `# patchaudit: ignore`: every rule
        else:
            codes += [c.strip().upper() for c in m.group("codes").split(",") if c.strip()]
    if not found:
        return False, None
    return True, tuple(dict.fromkeys(codes))


def suppressible_patch_lines(patch) -> list[str]:
    """A patch's lines with its context and removed lines blanked: a suppression
    comment in a patch counts on the lines the patch adds (and outside hunks)."""
    out = list(patch.lines)
    for _, hunk in patch.iter_hunks():
        for l in hunk.lines:
            if l.kind != "+" and 0 < l.patch_line <= len(out):
                out[l.patch_line - 1] = ""
    return out
