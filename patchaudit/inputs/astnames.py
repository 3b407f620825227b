"""Dotted names of stdlib `ast` expressions (no I/O, no state, no libcst).

The one copy of the dotted-name reader for `ast` trees (its libcst twin is
patchaudit/inputs/cst.py): the engine symbol index (base classes, decorators,
callees) and the dataflow rules' `ast` pre-filter (patchaudit/analysis/gate.py)
read names with it.
"""

from __future__ import annotations

import ast
from typing import cast

#: `dotted(..., calls=...)`: how a call or subscript inside the chain reads
PLAIN = ""  # `a.b.c` only; anything else -> None
SUPER = "super"  # also `super().x` -> "super().x" (a callee as the symbol index resolves it)
ANY_CALL = "any"  # a call's callee is kept with its parentheses: `f().g` -> "f().g"
THROUGH = "through"  # calls and subscripts are looked through: `Generic[T]` -> "Generic", `f().g` -> "f.g"
KEYS = "keys"  # a string-key subscript is kept: `a["k"].b` -> 'a["k"].b' (rollout fields, payload keys)


def dotted(node: ast.AST, calls: str = PLAIN) -> str | None:
    """`a.b.c` (a Name/Attribute chain) -> "a.b.c"; None for anything else.

    `calls` says what a call (or subscript) in the chain becomes: PLAIN, nothing
    (None); SUPER, `super()` when it is the object of an attribute (`super().f`,
    the symbol index's callees; a bare `super()` stays None); ANY_CALL, its
    callee with `()` (the dataflow layer's callees: `get_tokenizer().encode`);
    THROUGH, the callee or subscripted value itself (`Generic[T]` bases,
    decorators `@functools.lru_cache(...)` -> "functools.lru_cache"); KEYS, a
    string-key subscript kept as `["k"]` (`sample["tokens"]`), anything else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        value = node.value
        if (
            calls == SUPER
            and isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "super"
        ):
            return f"super().{node.attr}"
        base = dotted(value, calls)
        if base is None and calls == ANY_CALL and isinstance(value, ast.Call):
            inner = dotted(value.func, calls)
            base = f"{inner}()" if inner else None
        return f"{base}.{node.attr}" if base else None
    if calls == KEYS:
        key = node.slice if isinstance(node, ast.Subscript) else None
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            base = dotted(cast(ast.Subscript, node).value, calls)
            return f'{base}["{key.value}"]' if base else None
        return None
    if calls == THROUGH:
        if isinstance(node, ast.Subscript):  # Generic[T] bases
            return dotted(node.value, calls)
        if isinstance(node, ast.Call):
            return dotted(node.func, calls)
    return None
