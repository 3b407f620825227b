"""`--diff`: the unified diff of what `--fix` would write, one file after the other (as ruff
prints it): `--- a/PATH` / `+++ b/PATH`, so `git apply` or `patch -p1` can apply it."""

from __future__ import annotations

import difflib
from typing import Iterable

from patchaudit.model.escape import safe, visible


def _lines(text: str) -> list[str]:
    out = text.split("\n")
    lines = [l + "\n" for l in out[:-1]]
    if out[-1]:
        lines.append(out[-1])
    return lines


def render(changes: Iterable[tuple[str, str, str]]) -> str:
    """The diff of each (path, old text, new text).  A line without a final newline is
    followed by `\\ No newline at end of file`.  Paths and lines are escaped for the
    terminal (patchaudit/model/escape.py), tabs and carriage returns kept, so the diff of
    ordinary text applies as printed."""
    out: list[str] = []
    for path, old, new in changes:
        if old == new:
            continue
        name = safe(path)
        for line in difflib.unified_diff(_lines(old), _lines(new), f"a/{name}", f"b/{name}"):
            end = "\n" if line.endswith("\n") else ""
            out.append(visible(line[: len(line) - len(end)], keep="\t\r") + "\n")
            if not end:
                out.append("\\ No newline at end of file\n")
    return "".join(out)
