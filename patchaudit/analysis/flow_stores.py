"""The dataflow layer's stores: assignments, attribute and item stores, mutations, returns.

Part of the interpreter of patchaudit/analysis/dataflow.py.  Assignments bind names and
unpack tuples element by element; stores into attributes and items update the
environment, the heap and the records other methods and callers read (`self.x`, stores
into parameters); a mutation (`append`, `+=`) is a weak update; a `return` (or `yield`)
joins the frame's result and shows the spec a `ReturnSite`.  Statements
(flow_statements.py), expressions (flow_expressions.py: the walrus, comprehensions,
`yield`) and the library models (flow_builtins.py: `append`) store through here.
"""

from __future__ import annotations

import ast
from typing import Any, cast

from patchaudit.analysis.flow_api import FlowState, ReturnSite, StoreSite
from patchaudit.analysis.flow_structure import (
    Frame,
    is_none,
    path_last,
    path_of,
    path_root,
    set_path,
    subscript_key,
)
from patchaudit.analysis.flow_values import (
    ALL_KINDS,
    EMPTY,
    At,
    Env,
    Value,
    join,
    matches,
)


def ret(fl: FlowState, node: Any, v: Value, fr: Frame) -> None:
    if fr.fn is None:
        return
    line = fl._at(node)
    v = v.with_step(line, f"returned by `{fr.fn.name}()`")
    fr.ret = join(fr.ret, v)
    if v:
        fl.spec.ret(fl, ReturnSite(node, line, fr.fn.qualname, v))


def mutate(
    fl: FlowState,
    target: ast.expr,
    node: Any,
    cur: Value,
    added: Value,
    env: Env,
    fr: Frame,
    line: "int | At",
) -> None:
    """`target` grows by `added` (append/extend/insert/+=): a weak update and a store event."""
    path = path_of(target)
    if path is None:
        return
    added = added.with_step(line, f"appended to `{path}`")
    new = join(cur, added)
    set_path(env, path, new)
    remember(fl, path, added, fr)
    if added:
        last = path_last(path)
        if fl.spec.carriers and "." in path and matches(last, fl.spec.carriers):
            fl.carrier_store(last, added)
        fl.spec.store(fl, StoreSite(node, line, path, last, "mutate", added, bool(cur.refs)))


def remember(fl: FlowState, path: str, v: Value, fr: Frame) -> None:
    """Record a store for other methods (self.x) and for callers (stores into parameters)."""
    if not v:
        return
    root = path_root(path)
    if root == "self" and fr.cls is not None and path != "self":
        fields = fl.class_fields.setdefault(fr.cls, {})
        cur = fields.get(path, EMPTY)
        new = join(cur, v)
        if new.key() != cur.key():
            fields[path] = new
            fl._changed = True
    if root in fr.params:
        eff = fr.effects.setdefault(root, {})
        rest = path[len(root) :]
        eff[rest] = join(eff.get(rest, EMPTY), v)


def assign(
    fl: FlowState,
    target: ast.expr,
    v: Value,
    env: Env,
    fr: Frame,
    line: "int | At",
    how: str,
    value_node: Any | None = None,
) -> None:
    if isinstance(target, ast.Name):
        name = target.id
        set_path(env, name, v.with_step(line, f"{how} `{name}`"))
        fr.params.discard(name)
    elif isinstance(target, (ast.Tuple, ast.List)):
        elts = [e.value if isinstance(e, ast.Starred) else e for e in target.elts]
        star = next((i for i, e in enumerate(target.elts) if isinstance(e, ast.Starred)), None)
        if v.elems is not None and star is None and len(v.elems) == len(elts):
            parts = list(v.elems)
        elif v.elems is not None and star is not None and len(v.elems) >= len(elts) - 1:
            after = len(elts) - star - 1
            middle = v.elems[star : len(v.elems) - after]
            parts = (
                list(v.elems[:star])
                + [Value({}, tuple(middle)).flat() if middle else EMPTY]
                + list(v.elems[len(v.elems) - after :])
            )
        else:
            parts = [v.flat()] * len(elts)
        for t, part in zip(elts, parts):
            assign(fl, t, part, env, fr, line, "unpacked into" if how == "assigned to" else how)
    elif isinstance(target, ast.Starred):
        assign(fl, target.value, v, env, fr, line, how)
    elif isinstance(target, (ast.Attribute, ast.Subscript)):
        _store(fl, target, v, env, fr, line, is_none(value_node))


def _store(
    fl: FlowState,
    target: ast.Attribute | ast.Subscript,
    v: Value,
    env: Env,
    fr: Frame,
    line: "int | At",
    none: bool = False,
) -> None:
    base = fl.eval(target.value, env, fr)
    path = path_of(target)
    key = None
    if isinstance(target, ast.Subscript):
        key = subscript_key(target)
        if key is None:
            eval_slice(fl, target.slice, env, fr)
    shown = path or fl.snippet(target)
    vs = v.with_step(line, f"stored in `{shown}`")
    if isinstance(target, ast.Subscript) and base.refs:
        for ref in base.refs:
            fl._set_field(ref, key if key is not None else "?", vs, target, line, none)
    if path is not None:
        set_path(env, path, vs)
        remember(fl, path, vs, fr)
    elif isinstance(target, ast.Subscript):
        bpath = path_of(target.value)
        if bpath is not None and vs:  # `ids[i] = x`: the container now holds x too
            set_path(env, bpath, join(base, vs.keep(ALL_KINDS, fl.kind)))
            remember(fl, bpath, vs, fr)
    if vs:
        kind = "attr" if isinstance(target, ast.Attribute) else "item"
        attr = target.attr if isinstance(target, ast.Attribute) else key
        if kind == "attr" and fl.spec.carriers and matches(attr, fl.spec.carriers):
            fl.carrier_store(cast(str, attr), vs)
        fl.spec.store(fl, StoreSite(target, line, path, attr, kind, vs, bool(base.refs)))


def eval_slice(fl: FlowState, s: ast.expr, env: Env, fr: Frame) -> None:
    """A subscript's slice, for its effects: an index, a slice, or a tuple of them."""
    if isinstance(s, ast.Slice):
        for part in (s.lower, s.upper, s.step):
            fl.eval(part, env, fr)
    elif isinstance(s, ast.Tuple):
        for e in s.elts:
            eval_slice(fl, e, env, fr)
    else:
        fl.eval(s, env, fr)


def iter_elem(fl: FlowState, it: Value) -> Value:
    """What iterating over `it` yields: its elements (ids stay ids, dicts stay dicts)."""
    return it.flat()
