"""The dataflow layer's view of a module: its functions, their summaries, and CST paths.

Part of the interpreter of patchaudit/analysis/dataflow.py.  `Function` is a
`def` of the module with its parameters, `Summary` what analysing it in one
context gave (its return value and the stores it makes into its parameters),
`Frame` the state of one activation.  The helpers read libcst nodes as the
interpreter names them: access paths (`a.b["k"].c`), literals, statement blocks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from patchaudit.analysis.flow_values import EMPTY, Env, Value
from patchaudit.inputs.cst import string_literal

# --------------------------------------------------------------------------
# module structure


@dataclass(eq=False)
class Function:
    qualname: str
    name: str
    node: cst.FunctionDef
    cls: str | None  # enclosing class (methods)
    kind: str  # function | method | static | class
    parent: "Function | None"
    positional: list[str] = field(default_factory=list)
    kwonly: list[str] = field(default_factory=list)
    star: str | None = None
    starstar: str | None = None
    annotations: dict[str, cst.BaseExpression | None] = field(default_factory=dict)
    param_nodes: dict[str, cst.CSTNode] = field(default_factory=dict)
    nested: dict[str, "Function"] = field(default_factory=dict)

    def params(self) -> list[str]:
        out = list(self.positional) + list(self.kwonly)
        if self.star:
            out.append(self.star)
        if self.starstar:
            out.append(self.starstar)
        return out


@dataclass
class Summary:
    ret: Value
    effects: dict[str, dict[str, Value]]

    def key(self) -> tuple:
        return (self.ret.key(), frozenset((p, r, v.key()) for p, e in self.effects.items() for r, v in e.items() if v))


EMPTY_SUMMARY = Summary(EMPTY, {})


class Frame:
    __slots__ = ("fn", "cls", "ret", "effects", "params", "depth", "loops")

    def __init__(self, fn: Function | None, depth: int):
        self.fn = fn
        self.cls = fn.cls if fn else None
        self.ret = EMPTY
        self.effects: dict[str, dict[str, Value]] = {}
        self.params: set[str] = set(fn.params()) if fn else set()
        self.depth = depth
        self.loops = 0


def path_of(node: cst.CSTNode | None) -> str | None:
    """`a.b["k"].c` -> 'a.b["k"].c'; None for anything that is not a plain access path."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = path_of(node.value)
        return f"{base}.{node.attr.value}" if base else None
    if isinstance(node, cst.Subscript):
        key = subscript_key(node)
        if key is None:
            return None
        base = path_of(node.value)
        return f'{base}["{key}"]' if base else None
    return None


def receiver_name(call: cst.Call) -> str | None:
    """The name of the object a method is called on: `self.tokenizer.decode(...)` -> "tokenizer",
    `get_tokenizer().encode(...)` -> "get_tokenizer"; None for a plain function call."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    obj = func.value
    if isinstance(obj, cst.Call):
        obj = obj.func
    if isinstance(obj, cst.Name):
        return obj.value
    if isinstance(obj, cst.Attribute):
        return obj.attr.value
    return None


def subscript_key(node: cst.Subscript) -> str | None:
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return None
    return string_literal(node.slice[0].slice.value)


def path_root(path: str) -> str:
    for i, ch in enumerate(path):
        if ch in ".[":
            return path[:i]
    return path


class _Missing:
    def __repr__(self) -> str:  # pragma: no cover
        return "MISSING"


MISSING = _Missing()
UNKNOWN = object()


def literal_value(node: cst.BaseExpression) -> Any:
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[node.value]
    if isinstance(node, cst.Integer):
        try:
            return int(node.value, 0)
        except ValueError:
            return UNKNOWN
    s = string_literal(node)
    return s if s is not None else UNKNOWN


# --------------------------------------------------------------------------
# small CST helpers


def block_body(body: Any) -> list[cst.CSTNode]:
    """The statements of a block (IndentedBlock, SimpleStatementSuite, Module body, list)."""
    if isinstance(body, (list, tuple)):
        return list(body)
    if isinstance(body, cst.IndentedBlock):
        return list(body.body)
    if isinstance(body, cst.SimpleStatementSuite):
        return [body]
    return []


def sub_blocks(stmt: cst.CSTNode) -> list[list[cst.CSTNode]]:
    """The statement lists nested in a compound statement (not function/class bodies)."""
    out: list[list[cst.CSTNode]] = []
    for attr in ("body", "orelse", "finalbody"):
        b = getattr(stmt, attr, None)
        if b is None or isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            continue
        if isinstance(b, cst.If):
            out.append([b])
        elif isinstance(b, (cst.Else, cst.Finally)):
            out.append(block_body(b.body))
        else:
            out.append(block_body(b))
    for h in getattr(stmt, "handlers", ()) or ():
        out.append(block_body(h.body))
    for c in getattr(stmt, "cases", ()) or ():
        out.append(block_body(c.body))
    return out


def replace_env(env: Env, new: Env) -> None:
    if new is not env:
        env.clear()
        env.update(new)


def set_path(env: Env, path: str, v: Value) -> None:
    """Strong update of `path`; what was known below it (`path.x`, `path["k"]`) is forgotten."""
    n = len(path)
    for k in [k for k in env if len(k) > n and k.startswith(path) and k[n] in ".["]:
        del env[k]
    env[path] = v


def path_last(path: str) -> str:
    if path.endswith('"]'):
        return path[path.rfind('["') + 2 : -2]
    return path.rsplit(".", 1)[-1]


def target_paths(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, (cst.Tuple, cst.List)):
        return [p for e in target.elements for p in target_paths(e.value)]
    p = path_of(target)
    return [p] if p else []


def is_none(node: cst.CSTNode | None) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"
