"""The dataflow layer's expressions: names, attributes, subscripts, literals, calls.

Part of the interpreter of patchaudit/analysis/dataflow.py.  `_eval` dispatches
on the node's type (`_EVAL`); an expression it does not know is analysed for
the effects of its parts and gives a clean value.  A call is resolved to a
function of the module (flow_summaries.py) or judged by the library models
(flow_builtins.py), then shown to the spec's `call` hook.
"""

from __future__ import annotations

import ast
from typing import Any, Callable

from patchaudit.analysis.flow_api import Arg, CallSite, FlowState
from patchaudit.analysis.flow_structure import (
    Frame,
    is_none,
    literal_value,
    path_of,
    path_root,
    string_literal,
    subscript_key,
)
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


class Expressions(FlowState):
    """Expressions (`Flow._eval` and one `_e_*` method per kind of node)."""

    # ----- expressions ------------------------------------------------------------------
    def _eval(self, node: ast.expr | None, env: Env, fr: Frame) -> Value:
        if node is None:
            return EMPTY
        meth = _EVAL.get(type(node))
        if meth is not None:
            return meth(self, node, env, fr)
        for child in ast.iter_child_nodes(node):  # unknown expression: analyse its parts for their effects
            if isinstance(child, ast.expr):
                self._eval(child, env, fr)
        return EMPTY

    def _e_name(self, node: ast.Name, env: Env, fr: Frame) -> Value:
        n = node.id
        v = env.get(n)
        if v is not None:
            return v
        if fr.fn is not None:
            g = self.globals.get(n)
            if g is not None:
                return g
        return self._unknown(n, node)

    def _unknown(self, name: str, node: Any) -> Value:
        v = self._unknown_cache.get(name)
        if v is None:
            v = self.spec.unknown(self, name, node) or EMPTY
            self._unknown_cache[name] = v
        return v

    def _lookup_path(self, path: str | None, env: Env, fr: Frame) -> Value | None:
        if path is None:
            return None
        v = env.get(path)
        if v is not None:
            return v
        if path.startswith("self.") and fr.cls is not None:
            v = self._class_field(fr.cls, path)
            if v:
                return v
        if fr.fn is not None and path_root(path) not in env:
            return self.globals.get(path)
        return None

    def _e_attribute(self, node: ast.Attribute, env: Env, fr: Frame) -> Value:
        v = self._lookup_path(path_of(node), env, fr)
        if v is not None:
            return v
        base = self._eval(node.value, env, fr)
        attr = node.attr
        r = self._field(base, attr, node)
        if not r:
            r = self._unknown(attr, node)
        if self.spec.carriers and matches(attr, self.spec.carriers):
            stored = self.carrier_load(attr)
            if stored:
                shown = path_of(node) or attr
                r = join(r, stored.with_step(self._at(node), f"`{shown}` read here"))
        return r

    def _e_subscript(self, node: ast.Subscript, env: Env, fr: Frame) -> Value:
        v = self._lookup_path(path_of(node), env, fr)
        if v is not None:
            return v
        base = self._eval(node.value, env, fr)
        key = subscript_key(node)
        if key is not None:
            return self._field(base, key, node)
        idx = None
        self._eval_slice(node.slice, env, fr)
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
            return join_all(fe.value for ref in sorted(base.refs) for fe in self._heap[ref].fields.values())
        return base.flat()

    def _eval_slice(self, s: ast.expr, env: Env, fr: Frame) -> None:
        """A subscript's slice, for its effects: an index, a slice, or a tuple of them."""
        if isinstance(s, ast.Slice):
            for part in (s.lower, s.upper, s.step):
                self._eval(part, env, fr)
        elif isinstance(s, ast.Tuple):
            for e in s.elts:
                self._eval_slice(e, env, fr)
        else:
            self._eval(s, env, fr)

    def _e_binop(self, node: ast.BinOp, env: Env, fr: Frame) -> Value:
        l = self._eval(node.left, env, fr)
        r = self._eval(node.right, env, fr)
        op = node.op
        if isinstance(op, (ast.Add, ast.Mult)):
            return join(l.keep(SEQ_KINDS, self.kind), r.keep(SEQ_KINDS, self.kind))
        if isinstance(op, ast.Mod):
            if (
                string_literal(node.left) is not None
                or isinstance(node.left, ast.JoinedStr)
                or any(self.kind(x) == TEXT for x in l.labels())
            ):
                return join(l.keep(STR_KINDS, self.kind), r.keep(STR_KINDS, self.kind))
        return EMPTY

    def _e_boolop(self, node: ast.BoolOp, env: Env, fr: Frame) -> Value:
        out = self._eval(node.values[0], env, fr)
        for v in node.values[1:]:
            out = join(out, self._eval(v, env, fr))
        return out

    def _e_ifexp(self, node: ast.IfExp, env: Env, fr: Frame) -> Value:
        self._eval(node.test, env, fr)
        return join(self._eval(node.body, env, fr), self._eval(node.orelse, env, fr))

    def _e_clean(self, node: ast.expr, env: Env, fr: Frame) -> Value:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self._eval(child, env, fr)
        return EMPTY

    def _e_literal(self, node: ast.expr, env: Env, fr: Frame) -> Value:
        return EMPTY

    def _e_seq(self, node: ast.Tuple | ast.List, env: Env, fr: Frame) -> Value:
        elems = []
        starred = EMPTY
        has_star = False
        for e in node.elts:
            if isinstance(e, ast.Starred):
                has_star = True
                starred = join(starred, self._eval(e.value, env, fr).flat())
            else:
                elems.append(self._eval(e, env, fr))
        if has_star:
            return join(join_all(x.flat() for x in elems), starred)
        return tuple_value(elems)

    def _e_set(self, node: ast.Set, env: Env, fr: Frame) -> Value:
        return join_all(self._eval(e.value if isinstance(e, ast.Starred) else e, env, fr).flat() for e in node.elts)

    def _e_dict(self, node: ast.Dict, env: Env, fr: Frame) -> Value:
        ref = self._alloc_obj(node)
        for el in self.nodes.elements(node):
            if el.key is not None:
                key = string_literal(el.key)
                if key is None:
                    self._eval(el.key, env, fr)
                v = self._eval(el.value, env, fr)
                line = self._at(el)
                k = key if key is not None else "?"
                note = f"put under `{k}` in a dict" if key is not None else "put in a dict"
                self._set_field(ref, k, v.with_step(line, note), el, line, is_none(el.value))
            else:  # **other
                v = self._eval(el.value, env, fr)
                self._copy_fields(ref, v, el)
        return Value({}, None, frozenset({ref}))

    def _comp_env(self, node: Any, env: Env, fr: Frame) -> Env:
        e = dict(env)
        line = self._at(node)
        for f in node.generators:
            it = self._eval(f.iter, e, fr)
            self._assign(f.target, self._iter_elem(it), e, fr, line, "iterated into")
            for cond in f.ifs:
                self._eval(cond, e, fr)
        return e

    def _e_comp(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp, env: Env, fr: Frame) -> Value:
        e = self._comp_env(node, env, fr)
        return self._eval(node.elt, e, fr).flat()

    def _e_dictcomp(self, node: ast.DictComp, env: Env, fr: Frame) -> Value:
        ref = self._alloc_obj(node)
        e = self._comp_env(node, env, fr)
        key = self._eval(node.key, e, fr)
        v = self._eval(node.value, e, fr)
        line = self._at(node)
        self._set_field(ref, "?", join(key, v).with_step(line, "put in a dict"), node, line, False)
        return Value({}, None, frozenset({ref}))

    def _e_fstring(self, node: ast.JoinedStr, env: Env, fr: Frame) -> Value:
        out = EMPTY
        for part in node.values:
            if isinstance(part, ast.FormattedValue):
                out = join(out, self._eval(part.value, env, fr).keep(STR_KINDS, self.kind))
                if isinstance(part.format_spec, ast.JoinedStr):
                    for sub in part.format_spec.values:
                        if isinstance(sub, ast.FormattedValue):
                            self._eval(sub.value, env, fr)
        return out

    def _e_await(self, node: ast.Await, env: Env, fr: Frame) -> Value:
        return self._eval(node.value, env, fr)

    def _e_yield(self, node: ast.Yield, env: Env, fr: Frame) -> Value:
        v = self._eval(node.value, env, fr)
        self._return(node, v, fr)
        return EMPTY

    def _e_yield_from(self, node: ast.YieldFrom, env: Env, fr: Frame) -> Value:
        v = self._iter_elem(self._eval(node.value, env, fr))
        self._return(node, v, fr)
        return EMPTY

    def _e_named(self, node: ast.NamedExpr, env: Env, fr: Frame) -> Value:
        v = self._eval(node.value, env, fr)
        self._assign(node.target, v, env, fr, self._at(node), "assigned to")
        return v

    def _e_starred(self, node: ast.Starred, env: Env, fr: Frame) -> Value:
        return self._eval(node.value, env, fr).flat()

    def _iter_elem(self, it: Value) -> Value:
        """What iterating over `it` yields: its elements (ids stay ids, dicts stay dicts)."""
        return it.flat()

    # ----- calls ---------------------------------------------------------------------------
    def _e_call(self, node: ast.Call, env: Env, fr: Frame) -> Value:
        func = node.func
        receiver = None
        receiver_path = None
        if isinstance(func, ast.Attribute):
            receiver = self._eval(func.value, env, fr)
            receiver_path = path_of(func.value)
            fv = self._lookup_path(path_of(func), env, fr)
            if fv is None:
                fv = self._field(receiver, func.attr, func) if receiver else EMPTY
                if not fv:
                    fv = self._unknown(func.attr, func)
            func_value = fv
            name: str | None = func.attr
        else:
            func_value = self._eval(func, env, fr)
            name = func.id if isinstance(func, ast.Name) else None
        args = [Arg(a.keyword, a.star, self._eval(a.value, env, fr), a) for a in self.nodes.args(node)]
        line = self._at(node)
        resolved = self._resolve(func, env, fr)
        foreign = None
        if resolved is not None:
            result = self._invoke(resolved[0], resolved[1], args, node, line, env, fr)
        elif self.repo is not None and (foreign := self._resolve_foreign(func, env, fr)) is not None:
            result = self._invoke_foreign(foreign[0], foreign[1], args, node, line, env, fr)
        else:
            result = self._builtin(node, name, receiver, receiver_path, args, line, env, fr)
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
            self,
            fr.fn.node if fr.fn is not None else None,
        )
        if result and self.spec.clean(self, site):
            result = EMPTY
        extra = self.spec.call(self, site)
        if extra:
            result = join(result, extra)
        return result


_EVAL: dict[type, Callable[[Any, Any, Env, Frame], Value]] = {
    ast.Name: Expressions._e_name,
    ast.Attribute: Expressions._e_attribute,
    ast.Subscript: Expressions._e_subscript,
    ast.Call: Expressions._e_call,
    ast.BinOp: Expressions._e_binop,
    ast.BoolOp: Expressions._e_boolop,
    ast.IfExp: Expressions._e_ifexp,
    ast.Compare: Expressions._e_clean,
    ast.UnaryOp: Expressions._e_clean,
    ast.Tuple: Expressions._e_seq,
    ast.List: Expressions._e_seq,
    ast.Set: Expressions._e_set,
    ast.Dict: Expressions._e_dict,
    ast.ListComp: Expressions._e_comp,
    ast.SetComp: Expressions._e_comp,
    ast.GeneratorExp: Expressions._e_comp,
    ast.DictComp: Expressions._e_dictcomp,
    ast.JoinedStr: Expressions._e_fstring,
    ast.Constant: Expressions._e_literal,
    ast.Lambda: Expressions._e_literal,
    ast.Await: Expressions._e_await,
    ast.Yield: Expressions._e_yield,
    ast.YieldFrom: Expressions._e_yield_from,
    ast.NamedExpr: Expressions._e_named,
    ast.Starred: Expressions._e_starred,
}
