"""Inputs: patch files, Python and text sources, engine sources."""

import re as _re

_EOL = _re.compile(r"\r\n|\r|\n")


def source_lines(text: str) -> list[str]:
    """Lines as Python, libcst, git and editors count them (\\r\\n, \\r, \\n).

    Not `str.splitlines()`, which also splits at \\f, \\v, \\x85, \\u2028 and so
    shifts every later line number of a file holding one of them.
    (`str.split` when there is no \\r: the same lines, ten times faster.)
    """
    lines = _EOL.split(text) if "\r" in text else text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines
