"""Import lines a hunk adds, merged into the new file's import block where the line-based
merge conflicts (upstream added its own imports next to the patch's: `git merge-file`
calls two insertions at one place a conflict).

Pure: texts in, text out.  Only a hunk whose changes are all added import lines (`import
x`, `from x import y`, or names of a parenthesized `from x import (...)` list) is merged;
each added line goes into the run of like lines around its anchor (the context line
before it in the hunk) at the place that keeps the run in isort's order (constants,
classes, then the rest, case-insensitively; `import` lines by module), and only when that
run is in that order in the new file already; a line the new file holds is not added twice.
"""

from __future__ import annotations

import re

_IMPORT = re.compile(r"^(import [\w.]+(?: as \w+)?|from [\w.]+ import [\w, ]+)$")
_NAME = re.compile(r"^(\s+)([A-Za-z_]\w*)(?: as \w+)?,$")


def _kind(line: str) -> str | None:
    if _IMPORT.match(line):
        return "import" if line.startswith("import ") else "from"
    if _NAME.match(line):
        return "name"
    return None


def _key(line: str, kind: str) -> tuple:
    if kind == "name":
        name = line.strip().rstrip(",").split(" ")[0]
        group = 0 if name.isupper() and len(name) > 1 else (1 if name[:1].isupper() else 2)
        return (group, name.lower())
    return (line.split(" ")[1].lower(),)


def _run(lines: list[str], at: int, kind: str) -> tuple[int, int]:
    """The run [lo, hi) of lines of `kind` around index `at`."""
    m = _NAME.match(lines[at]) if kind == "name" else None
    indent = m.group(1) if m else None

    def same(t: str) -> bool:
        if _kind(t) != kind:
            return False
        return indent is None or t.startswith(indent) and not t.startswith(indent + " ")

    lo = at
    while lo > 0 and same(lines[lo - 1]):
        lo -= 1
    hi = at + 1
    while hi < len(lines) and same(lines[hi]):
        hi += 1
    return lo, hi


def import_runs(hunk_lines: list[tuple[str, str]]) -> list[tuple[str, list[str]]] | None:
    """(anchor line, added import lines) per run of `+` lines, or None when the hunk does
    anything else (removes a line, adds a line that is not an import)."""
    out: list[tuple[str, list[str]]] = []
    anchor: str | None = None
    for kind, text in hunk_lines:
        if kind == "-":
            return None
        if kind == " ":
            anchor = text
            continue
        if _kind(text) is None or anchor is None:
            return None
        if out and out[-1][0] == anchor:
            out[-1][1].append(text)
        else:
            out.append((anchor, [text]))
    return out or None


def merge_imports(hunk_lines: list[tuple[str, str]], new: list[str], near: int, window: int = 80) -> list[str] | None:
    """`new` with the hunk's import lines in their sorted places, or None when the hunk is
    not only imports, an anchor is not found once near line `near` (1-based), or the run
    it goes into is not sorted."""
    runs = import_runs(hunk_lines)
    if runs is None:
        return None
    lines = list(new)
    for anchor, added in runs:
        lo, hi = max(0, near - 1 - window), min(len(lines), near - 1 + window)
        spots = [i for i in range(lo, hi) if lines[i] == anchor]
        if len(spots) != 1:
            return None
        at = spots[0]
        kind = _kind(added[0])
        if kind is None or any(_kind(a) != kind for a in added):
            return None
        if _kind(anchor) != kind:  # the anchor opens the list (`from x import (`): the run follows
            at += 1
            if at >= len(lines) or _kind(lines[at]) != kind:
                return None
        r0, r1 = _run(lines, at, kind)
        block = lines[r0:r1]
        keys = [_key(t, kind) for t in block]
        if keys != sorted(keys):
            return None
        for a in added:
            if a in block:
                continue
            k = _key(a, kind)
            pos = next((i for i, t in enumerate(block) if _key(t, kind) > k), len(block))
            block.insert(pos, a)
        lines[r0:r1] = block
    return lines
