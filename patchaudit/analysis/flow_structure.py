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


def exclusive(a: frozenset, b: frozenset) -> bool:
    """Whether two sets of branch paths (FlowState.branch) can never hold together: every
    path of one takes another arm of some `if` than every path of the other (`if images:
    payload["image_data"] = ... else: payload["input_ids"] = ...`)."""
    if not a or not b:
        return False
    for pa in a:
        arms = dict(pa)
        for pb in b:
            if not any(arms.get(node, arm) != arm for node, arm in pb):
                return False
    return True


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


class _Bindings:
    """Every binding of a name by a statement of a body (not in nested functions or
    classes; a walrus inside an expression is not seen)."""

    def __init__(self) -> None:
        self.count: dict[str, int] = {}
        self.value: dict[str, Any] = {}
        self.globals: set[str] = set()

    def bind(self, target: cst.CSTNode, value: Any = UNKNOWN) -> None:
        if isinstance(target, cst.Name):
            self.count[target.value] = self.count.get(target.value, 0) + 1
            self.value[target.value] = value
        elif isinstance(target, (cst.Tuple, cst.List)):
            for e in target.elements:
                self.bind(e.value)
        elif isinstance(target, cst.StarredElement):
            self.bind(target.value)

    def small(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Assign):
            v = literal_value(node.value) if len(node.targets) == 1 else UNKNOWN
            for t in node.targets:
                self.bind(t.target, v)
        elif isinstance(node, cst.AnnAssign):
            self.bind(node.target, literal_value(node.value) if node.value is not None else UNKNOWN)
        elif isinstance(node, cst.AugAssign):
            self.bind(node.target)
        elif isinstance(node, (cst.Global, cst.Nonlocal)):
            self.globals.update(n.name.value for n in node.names)
        elif isinstance(node, (cst.Import, cst.ImportFrom)) and not isinstance(node.names, cst.ImportStar):
            for a in node.names:
                self.bind(a.asname.name if a.asname else a.name)

    def block(self, stmts: list[cst.CSTNode]) -> None:
        for stmt in stmts:
            if isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
                for small in stmt.body:
                    self.small(small)
            elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                self.bind(stmt.name)
            else:
                if isinstance(stmt, cst.For):
                    self.bind(stmt.target)
                elif isinstance(stmt, cst.With):
                    for item in stmt.items:
                        if item.asname is not None:
                            self.bind(item.asname.name)
                for h in getattr(stmt, "handlers", ()) or ():
                    if h.name is not None:
                        self.bind(h.name.name)
                for sub in sub_blocks(stmt):
                    self.block(sub)


@dataclass
class Constants:
    """Names bound exactly once in a body, to a literal (`DEBUG = False`), and the
    names bound there at all."""

    values: dict[str, Any]
    bound: set[str]
    rebound_elsewhere: set[str] = field(default_factory=set)


def constants(body: Any, params: list[str] | None = None) -> Constants:
    v = _Bindings()
    v.block(list(body.body) if isinstance(body, cst.Module) else block_body(body))
    bound = set(v.count) | set(params or ())
    values = {
        n: v.value[n]
        for n, c in v.count.items()
        if c == 1 and n not in (params or ()) and n not in v.globals and v.value[n] in (True, False, None, 0)
    }
    return Constants(values, bound, v.globals)


def truth(test: cst.BaseExpression, lookup: Any) -> bool | None:
    """The constant truth of an `if` test (`False`, `0`, `not True`, a name bound once to
    a literal: `lookup(name)`), or None when it is not constant."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = truth(test.expression, lookup)
        return None if inner is None else not inner
    if isinstance(test, cst.Name) and test.value not in ("True", "False", "None"):
        got = lookup(test.value)
        return None if got is UNKNOWN else bool(got)
    lit = literal_value(test)
    if lit is UNKNOWN or lit is MISSING or isinstance(lit, str):
        return None
    return bool(lit)
