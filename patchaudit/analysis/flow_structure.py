"""The dataflow layer's view of a module: its functions, their summaries, and CST paths.

Part of the interpreter of patchaudit/analysis/dataflow.py.  `Function` is a
`def` of the module with its parameters, `Summary` what analysing it in one
context gave (its return value and the stores it makes into its parameters),
`Frame` the state of one activation.  The helpers read `ast` nodes as the
interpreter names them: access paths (`a.b["k"].c`), literals, statement blocks.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from patchaudit.analysis.flow_values import EMPTY, Env, Value

# --------------------------------------------------------------------------
# module structure


@dataclass(eq=False)
class Function:
    qualname: str
    name: str
    node: Any  # ast.FunctionDef or ast.AsyncFunctionDef
    cls: str | None  # enclosing class (methods)
    kind: str  # function | method | static | class
    parent: "Function | None"
    positional: list[str] = field(default_factory=list)
    kwonly: list[str] = field(default_factory=list)
    star: str | None = None
    starstar: str | None = None
    annotations: dict[str, Any] = field(default_factory=dict)
    param_nodes: dict[str, Any] = field(default_factory=dict)
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


def path_of(node: Any) -> str | None:
    """`a.b["k"].c` -> 'a.b["k"].c'; None for anything that is not a plain access path."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = path_of(node.value)
        return f"{base}.{node.attr}" if base else None
    if isinstance(node, ast.Subscript):
        key = subscript_key(node)
        if key is None:
            return None
        base = path_of(node.value)
        return f'{base}["{key}"]' if base else None
    return None


def receiver_name(call: ast.Call) -> str | None:
    """The name of the object a method is called on: `self.tokenizer.decode(...)` -> "tokenizer",
    `get_tokenizer().encode(...)` -> "get_tokenizer"; None for a plain function call."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return None
    obj = func.value
    if isinstance(obj, ast.Call):
        obj = obj.func
    if isinstance(obj, ast.Name):
        return obj.id
    if isinstance(obj, ast.Attribute):
        return obj.attr
    return None


def subscript_key(node: ast.Subscript) -> str | None:
    return string_literal(node.slice)


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


def string_literal(node: Any) -> str | None:
    """The value of a string literal (implicit concatenation joined); None for anything
    else: a bytes literal, an f-string."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def literal_value(node: Any) -> Any:
    """True/False/None, an int (not a float) or a string literal; else UNKNOWN."""
    if isinstance(node, ast.Constant):
        v = node.value
        if v is None or isinstance(v, (bool, int, str)):
            return v
    return UNKNOWN


# --------------------------------------------------------------------------
# small AST helpers


def block_body(body: Any) -> list[Any]:
    """The statements of a block (a list of statements, or a Module)."""
    if isinstance(body, (list, tuple)):
        return list(body)
    if isinstance(body, ast.Module):
        return list(body.body)
    return []


COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.With, ast.AsyncWith, ast.Match) + (
    (ast.TryStar,) if hasattr(ast, "TryStar") else ()
)


def sub_blocks(stmt: Any) -> list[list[Any]]:
    """The statement lists nested in a compound statement (not function/class bodies).
    An `elif` is its own block (the `If` in `orelse`)."""
    out: list[list[Any]] = []
    if not isinstance(stmt, COMPOUND):
        return out
    for attr in ("body", "orelse", "finalbody"):
        b = getattr(stmt, attr, None)
        if b:
            out.append(list(b))
    for h in getattr(stmt, "handlers", ()) or ():
        out.append(list(h.body))
    for c in getattr(stmt, "cases", ()) or ():
        out.append(list(c.body))
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


def target_paths(target: Any) -> list[str]:
    if isinstance(target, (ast.Tuple, ast.List)):
        return [p for e in target.elts for p in target_paths(e.value if isinstance(e, ast.Starred) else e)]
    p = path_of(target)
    return [p] if p else []


def is_none(node: Any) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


class _Bindings:
    """Every binding of a name by a statement of a body (not in nested functions or
    classes; a walrus inside an expression is not seen)."""

    def __init__(self) -> None:
        self.count: dict[str, int] = {}
        self.value: dict[str, Any] = {}
        self.globals: set[str] = set()

    def name(self, name: str, value: Any = UNKNOWN) -> None:
        self.count[name] = self.count.get(name, 0) + 1
        self.value[name] = value

    def bind(self, target: Any, value: Any = UNKNOWN) -> None:
        if isinstance(target, ast.Name):
            self.name(target.id, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for e in target.elts:
                self.bind(e)
        elif isinstance(target, ast.Starred):
            self.bind(target.value)

    def small(self, node: Any) -> None:
        if isinstance(node, ast.Assign):
            v = literal_value(node.value) if len(node.targets) == 1 else UNKNOWN
            for t in node.targets:
                self.bind(t, v)
        elif isinstance(node, ast.AnnAssign):
            self.bind(node.target, literal_value(node.value) if node.value is not None else UNKNOWN)
        elif isinstance(node, ast.AugAssign):
            self.bind(node.target)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            self.globals.update(node.names)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                if a.name == "*":
                    continue
                if a.asname:
                    self.name(a.asname)
                elif isinstance(node, ast.ImportFrom) or "." not in a.name:
                    self.name(a.name)
                # libcst binds `import a.b` to its Attribute: no Name

    def block(self, stmts: list[Any]) -> None:
        for stmt in stmts:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.name(stmt.name)
            elif not isinstance(stmt, COMPOUND):
                self.small(stmt)
            else:
                if isinstance(stmt, (ast.For, ast.AsyncFor)):
                    self.bind(stmt.target)
                elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                    for item in stmt.items:
                        if item.optional_vars is not None:
                            self.bind(item.optional_vars)
                for h in getattr(stmt, "handlers", ()) or ():
                    if h.name is not None:
                        self.name(h.name)
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
    v.block(block_body(body))
    bound = set(v.count) | set(params or ())
    values = {
        n: v.value[n]
        for n, c in v.count.items()
        if c == 1 and n not in (params or ()) and n not in v.globals and v.value[n] in (True, False, None, 0)
    }
    return Constants(values, bound, v.globals)


def truth(test: Any, lookup: Any) -> bool | None:
    """The constant truth of an `if` test (`False`, `0`, `not True`, a name bound once to
    a literal: `lookup(name)`), or None when it is not constant."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = truth(test.operand, lookup)
        return None if inner is None else not inner
    if isinstance(test, ast.Name):
        got = lookup(test.id)
        return None if got is UNKNOWN else bool(got)
    lit = literal_value(test)
    if lit is UNKNOWN or lit is MISSING or isinstance(lit, str):
        return None
    return bool(lit)
