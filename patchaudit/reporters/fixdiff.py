"""`--diff`: the unified diff of what `--fix` would write, one file after the other (as ruff
prints it): `--- a/PATH` / `+++ b/PATH`, so `git apply` or `patch -p1` can apply it."""

from __future__ import annotations

import difflib
from typing import Iterable

from patchaudit.model.escape import safe, safe_lines, visible


def _lines(text: str) -> list[str]:
    out = text.split("\n")
    lines = [l + "\n" for l in out[:-1]]
    if out[-1]:
        lines.append(out[-1])
    return lines


def render(changes: Iterable[tuple[str, str, str]]) -> str:
    """The diff of each (path, old text, new text), its lines git's (split at "\\n").  A
    line without a final newline is followed by `\\ No newline at end of file`.  Paths
    and lines are escaped for the terminal and a CI log (patchaudit/model/escape.py):
    tabs and the "\\r" of a CRLF line end are kept, so the diff of ordinary text applies
    as printed; any other "\\r" (a lone one starts a new line in a CI log) is shown as
    `\\r`, and a context line that would start a workflow command (` ::error`) has its
    first `:` shown as `\\x3a`."""
    out: list[str] = []
    for path, old, new in changes:
        if old == new:
            continue
        name = safe(path)
        for line in difflib.unified_diff(_lines(old), _lines(new), f"a/{name}", f"b/{name}"):
            end = "\n" if line.endswith("\n") else ""
            body = line[: len(line) - len(end)]
            crlf = "\r" if end and body.endswith("\r") else ""
            out.append(visible(body[: len(body) - len(crlf)], keep="\t") + crlf + "\n")
            if not end:
                out.append("\\ No newline at end of file\n")
    return safe_lines("".join(out))
