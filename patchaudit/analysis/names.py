"""Small libcst helpers shared by the rules of the pack (no I/O, no state).

(The dotted-name and string-literal readers are patchaudit/inputs/cst.py's
`dotted` and `string_literal`.)"""

from __future__ import annotations

import libcst as cst


def callee_name(func: cst.BaseExpression) -> str | None:
    """The last name of a call's callee: `self.a.b(...)` -> "b", `f(...)` -> "f"."""
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return None


def keyword(call: cst.Call, name: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def has_star_kwargs(call: cst.Call) -> bool:
    return any(arg.star == "**" for arg in call.args)


def positional(call: cst.Call) -> list[cst.Arg]:
    return [a for a in call.args if a.keyword is None and a.star == ""]
