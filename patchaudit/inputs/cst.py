"""libcst readers shared by the layers that walk a libcst tree (no I/O, no state).

The one copy of the dotted-name reader and of the string-literal reader for libcst
nodes (their stdlib `ast` twin is patchaudit/inputs/astnames.py; the read-only
analyses read `ast`).  Importing this module imports libcst: a module that must stay
libcst-free on text-only runs (tests/test_speed_invariants.py) imports it inside the
function that already imports libcst.
"""

from __future__ import annotations

import libcst as cst


def dotted(node: cst.CSTNode | None) -> str | None:
    """`a.b.c` (a Name/Attribute chain) -> "a.b.c"; None for anything else."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr.value}" if base else None
    return None


def string_literal(node: cst.CSTNode | None) -> str | None:
    """The value of a string literal (a SimpleString, or a ConcatenatedString of them);
    None for anything else, a bytes literal, an f-string or a malformed escape."""
    if isinstance(node, cst.SimpleString):
        try:
            v = node.evaluated_value
        except Exception:  # pragma: no cover - malformed escapes
            return None
        return v if isinstance(v, str) else None
    if isinstance(node, cst.ConcatenatedString):
        l, r = string_literal(node.left), string_literal(node.right)
        return l + r if l is not None and r is not None else None
    return None
