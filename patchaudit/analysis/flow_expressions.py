"""The dataflow layer's expressions: names, attributes, subscripts, literals, calls.

Part of the interpreter of patchaudit/analysis/dataflow.py.  `FlowState.eval`
dispatches on the `ast` node's type to its evaluator here (`EVAL`); an expression
without one is analysed for the effects of its parts and gives a clean value.  A call is resolved to a
function of the module (flow_summaries.py) or judged by the library models
(flow_builtins.py), then shown to the spec's `call` hook.
"""

from __future__ import annotations

import ast
from typing import Any

from patchaudit.analysis.flow_api import Arg, CallSite, Evaluator, FlowState
from patchaudit.analysis.flow_builtins import builtin
from patchaudit.analysis.flow_stores import assign, eval_slice, iter_elem, ret
from patchaudit.analysis.flow_structure import (
    Frame,
    is_none,
    literal_value,
    path_of,
    path_root,
    string_literal,
    subscript_key,
)
from patchaudit.analysis.flow_summaries import class_field, invoke, invoke_foreign, resolve, resolve_foreign
from patchaudit.analysis.flow_values import (
    EMPTY,
    SEQ_KINDS,
    STR_KINDS,
    TEXT,
    Env,
    Value,
    join,
    join_all,
    matches,
    tuple_value,
)
from patchaudit.inputs.astnames import ANY_CALL, dotted


def _e_name(fl: FlowState, node: ast.Name, env: Env, fr: Frame) -> Value:
    n = node.id
    v = env.get(n)
    if v is not None:
        return v
    if fr.fn is not None:
        g = fl.globals.get(n)
        if g is not None:
            return g
    return _unknown(fl, n, node)


def _unknown(fl: FlowState, name: str, node: Any) -> Value:
    v = fl._unknown_cache.get(name)
    if v is None:
        v = fl.spec.unknown(fl, name, node) or EMPTY
        fl._unknown_cache[name] = v
    return v


def _lookup_path(fl: FlowState, path: str | None, env: Env, fr: Frame) -> Value | None:
    if path is None:
        return None
    v = env.get(path)
    if v is not None:
        return v
    if path.startswith("self.") and fr.cls is not None:
        v = class_field(fl, fr.cls, path)
        if v:
            return v
    if fr.fn is not None and path_root(path) not in env:
        return fl.globals.get(path)
    return None


def _e_attribute(fl: FlowState, node: ast.Attribute, env: Env, fr: Frame) -> Value:
    v = _lookup_path(fl, path_of(node), env, fr)
    if v is not None:
        return v
    base = fl.eval(node.value, env, fr)
    attr = node.attr
    r = fl._field(base, attr, node)
    if not r:
        r = _unknown(fl, attr, node)
    if fl.spec.carriers and matches(attr, fl.spec.carriers):
        stored = fl.carrier_load(attr)
        if stored:
            shown = path_of(node) or attr
            r = join(r, stored.with_step(fl._at(node), f"`{shown}` read here"))
    return r


def _e_subscript(fl: FlowState, node: ast.Subscript, env: Env, fr: Frame) -> Value:
    v = _lookup_path(fl, path_of(node), env, fr)
    if v is not None:
        return v
    base = fl.eval(node.value, env, fr)
    key = subscript_key(node)
    if key is not None:
        return fl._field(base, key, node)
    idx = None
    eval_slice(fl, node.slice, env, fr)
    s = node.slice
    lit = literal_value(s)
    if isinstance(lit, int) and not isinstance(lit, bool):
        idx = lit
    elif isinstance(s, ast.UnaryOp) and isinstance(s.op, ast.USub):
        inner = literal_value(s.operand)
        if isinstance(inner, int):
            idx = -inner
    if idx is not None and base.elems is not None and -len(base.elems) <= idx < len(base.elems):
        return base.elems[idx]
    if base.refs and not base.t and base.elems is None:
        return join_all(fe.value for ref in sorted(base.refs) for fe in fl._heap[ref].fields.values())
    return base.flat()


def _e_binop(fl: FlowState, node: ast.BinOp, env: Env, fr: Frame) -> Value:
    l = fl.eval(node.left, env, fr)
    r = fl.eval(node.right, env, fr)
    op = node.op
    if isinstance(op, (ast.Add, ast.Mult)):
        return join(l.keep(SEQ_KINDS, fl.kind), r.keep(SEQ_KINDS, fl.kind))
    if isinstance(op, ast.Mod):
        if (
            string_literal(node.left) is not None
            or isinstance(node.left, ast.JoinedStr)
            or any(fl.kind(x) == TEXT for x in l.labels())
        ):
            return join(l.keep(STR_KINDS, fl.kind), r.keep(STR_KINDS, fl.kind))
    return EMPTY


def _e_boolop(fl: FlowState, node: ast.BoolOp, env: Env, fr: Frame) -> Value:
    out = fl.eval(node.values[0], env, fr)
    for v in node.values[1:]:
        out = join(out, fl.eval(v, env, fr))
    return out


def _e_ifexp(fl: FlowState, node: ast.IfExp, env: Env, fr: Frame) -> Value:
    fl.eval(node.test, env, fr)
    return join(fl.eval(node.body, env, fr), fl.eval(node.orelse, env, fr))


def _e_clean(fl: FlowState, node: ast.expr, env: Env, fr: Frame) -> Value:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.expr):
            fl.eval(child, env, fr)
    return EMPTY


def _e_literal(fl: FlowState, node: ast.expr, env: Env, fr: Frame) -> Value:
    return EMPTY


def _e_seq(fl: FlowState, node: ast.Tuple | ast.List, env: Env, fr: Frame) -> Value:
    elems = []
    starred = EMPTY
    has_star = False
    for e in node.elts:
        if isinstance(e, ast.Starred):
            has_star = True
            starred = join(starred, fl.eval(e.value, env, fr).flat())
        else:
            elems.append(fl.eval(e, env, fr))
    if has_star:
        return join(join_all(x.flat() for x in elems), starred)
    return tuple_value(elems)


def _e_set(fl: FlowState, node: ast.Set, env: Env, fr: Frame) -> Value:
    return join_all(fl.eval(e.value if isinstance(e, ast.Starred) else e, env, fr).flat() for e in node.elts)


def _e_dict(fl: FlowState, node: ast.Dict, env: Env, fr: Frame) -> Value:
    ref = fl._alloc_obj(node)
    for el in fl.nodes.elements(node):
        if el.key is not None:
            key = string_literal(el.key)
            if key is None:
                fl.eval(el.key, env, fr)
            v = fl.eval(el.value, env, fr)
            line = fl._at(el)
            k = key if key is not None else "?"
            note = f"put under `{k}` in a dict" if key is not None else "put in a dict"
            fl._set_field(ref, k, v.with_step(line, note), el, line, is_none(el.value))
        else:  # **other
            v = fl.eval(el.value, env, fr)
            fl._copy_fields(ref, v, el)
    return Value({}, None, frozenset({ref}))


def _comp_env(fl: FlowState, node: Any, env: Env, fr: Frame) -> Env:
    e = dict(env)
    line = fl._at(node)
    for f in node.generators:
        it = fl.eval(f.iter, e, fr)
        assign(fl, f.target, iter_elem(fl, it), e, fr, line, "iterated into")
        for cond in f.ifs:
            fl.eval(cond, e, fr)
    return e


def _e_comp(fl: FlowState, node: ast.ListComp | ast.SetComp | ast.GeneratorExp, env: Env, fr: Frame) -> Value:
    e = _comp_env(fl, node, env, fr)
    return fl.eval(node.elt, e, fr).flat()


def _e_dictcomp(fl: FlowState, node: ast.DictComp, env: Env, fr: Frame) -> Value:
    ref = fl._alloc_obj(node)
    e = _comp_env(fl, node, env, fr)
    key = fl.eval(node.key, e, fr)
    v = fl.eval(node.value, e, fr)
    line = fl._at(node)
    fl._set_field(ref, "?", join(key, v).with_step(line, "put in a dict"), node, line, False)
    return Value({}, None, frozenset({ref}))


def _e_fstring(fl: FlowState, node: ast.JoinedStr, env: Env, fr: Frame) -> Value:
    out = EMPTY
    for part in node.values:
        if isinstance(part, ast.FormattedValue):
            out = join(out, fl.eval(part.value, env, fr).keep(STR_KINDS, fl.kind))
            if isinstance(part.format_spec, ast.JoinedStr):
                for sub in part.format_spec.values:
                    if isinstance(sub, ast.FormattedValue):
                        fl.eval(sub.value, env, fr)
    return out


def _e_await(fl: FlowState, node: ast.Await, env: Env, fr: Frame) -> Value:
    return fl.eval(node.value, env, fr)


def _e_yield(fl: FlowState, node: ast.Yield, env: Env, fr: Frame) -> Value:
    v = fl.eval(node.value, env, fr)
    ret(fl, node, v, fr)
    return EMPTY


def _e_yield_from(fl: FlowState, node: ast.YieldFrom, env: Env, fr: Frame) -> Value:
    v = iter_elem(fl, fl.eval(node.value, env, fr))
    ret(fl, node, v, fr)
    return EMPTY


def _e_named(fl: FlowState, node: ast.NamedExpr, env: Env, fr: Frame) -> Value:
    v = fl.eval(node.value, env, fr)
    assign(fl, node.target, v, env, fr, fl._at(node), "assigned to")
    return v


def _e_starred(fl: FlowState, node: ast.Starred, env: Env, fr: Frame) -> Value:
    return fl.eval(node.value, env, fr).flat()


def _e_call(fl: FlowState, node: ast.Call, env: Env, fr: Frame) -> Value:
    func = node.func
    receiver = None
    receiver_path = None
    if isinstance(func, ast.Attribute):
        receiver = fl.eval(func.value, env, fr)
        receiver_path = path_of(func.value)
        fv = _lookup_path(fl, path_of(func), env, fr)
        if fv is None:
            fv = fl._field(receiver, func.attr, func) if receiver else EMPTY
            if not fv:
                fv = _unknown(fl, func.attr, func)
        func_value = fv
        name: str | None = func.attr
    else:
        func_value = fl.eval(func, env, fr)
        name = func.id if isinstance(func, ast.Name) else None
    args = [Arg(a.keyword, a.star, fl.eval(a.value, env, fr), a) for a in fl.nodes.args(node)]
    line = fl._at(node)
    resolved = resolve(fl, func, env, fr)
    foreign = None
    if resolved is not None:
        result = invoke(fl, resolved[0], resolved[1], args, node, line, env, fr)
    elif fl.repo is not None and (foreign := resolve_foreign(fl, func, env, fr)) is not None:
        result = invoke_foreign(fl, foreign[0], foreign[1], args, node, line, env, fr)
    else:
        result = builtin(fl, node, name, receiver, receiver_path, args, line, env, fr)
    site = CallSite(
        node,
        line,
        dotted(func, ANY_CALL),
        name,
        func_value,
        receiver,
        receiver_path,
        args,
        resolved is not None,
        fl,
        fr.fn.node if fr.fn is not None else None,
    )
    if result and fl.spec.clean(fl, site):
        result = EMPTY
    extra = fl.spec.call(fl, site)
    if extra:
        result = join(result, extra)
    return result


#: the evaluator of each expression type (FlowState.eval dispatches on it)
EVAL: dict[type, Evaluator] = {
    ast.Name: _e_name,
    ast.Attribute: _e_attribute,
    ast.Subscript: _e_subscript,
    ast.Call: _e_call,
    ast.BinOp: _e_binop,
    ast.BoolOp: _e_boolop,
    ast.IfExp: _e_ifexp,
    ast.Compare: _e_clean,
    ast.UnaryOp: _e_clean,
    ast.Tuple: _e_seq,
    ast.List: _e_seq,
    ast.Set: _e_set,
    ast.Dict: _e_dict,
    ast.ListComp: _e_comp,
    ast.SetComp: _e_comp,
    ast.GeneratorExp: _e_comp,
    ast.DictComp: _e_dictcomp,
    ast.JoinedStr: _e_fstring,
    ast.Constant: _e_literal,
    ast.Lambda: _e_literal,
    ast.Await: _e_await,
    ast.Yield: _e_yield,
    ast.YieldFrom: _e_yield_from,
    ast.NamedExpr: _e_named,
    ast.Starred: _e_starred,
}
