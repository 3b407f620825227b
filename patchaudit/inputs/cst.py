"""libcst readers shared by every layer that walks a libcst tree (no I/O, no state).

The one copy of the dotted-name reader, of the string-literal reader and of the
node walk for libcst nodes (their stdlib `ast` twin is patchaudit/inputs/astnames.py).
Importing this module imports libcst: a module that must stay libcst-free on
text-only runs (tests/test_speed_invariants.py) imports it inside the function
that already imports libcst.
"""

from __future__ import annotations

from typing import Iterator

import libcst as cst

#: `dotted(..., calls=...)`: how a call inside the chain reads
PLAIN = ""  # `a.b.c` only; any call -> None
SUPER = "super"  # also `super().x` -> "super().x" (and `super()` itself -> "super()")
ANY_CALL = "any"  # a call's callee is kept with its parentheses: `f().g` -> "f().g"


def dotted(node: cst.CSTNode | None, calls: str = PLAIN) -> str | None:
    """`a.b.c` (a Name/Attribute chain) -> "a.b.c"; None for anything else.

    `calls` says what a call in the chain becomes: PLAIN, nothing (None);
    SUPER, `super()` (the rules' callee names: `super().x`); ANY_CALL, its
    callee with `()` (the dataflow layer's callees: `self.processor.apply_chat_template`,
    `AutoProcessor.from_pretrained`, `get_tokenizer().encode`)."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value, calls)
        if base is None and calls == ANY_CALL and isinstance(node.value, cst.Call):
            inner = dotted(node.value.func, calls)
            base = f"{inner}()" if inner else None
        return f"{base}.{node.attr.value}" if base else None
    if calls == SUPER and isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "super":
        return "super()"
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


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """`node` and every node below it, in source order (depth first, children as libcst lists them)."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        todo.extend(reversed(n.children))
