"""The dataflow layer's statements: assignments, stores, mutations and control flow.

Part of the interpreter of patchaudit/analysis/dataflow.py.  Branches are
analysed separately and joined, loops are iterated until their environment is
stable (at most three times), exceptions join the states of the `try` body;
assignments bind names and unpack tuples element by element, stores into
attributes and items update the environment, the heap and the records other
methods and callers read (`self.x`, stores into parameters).
"""

from __future__ import annotations

from typing import Any, Callable, cast

import libcst as cst

from patchaudit.analysis.flow_api import FlowState, ReturnSite, StoreSite
from patchaudit.analysis.flow_structure import (
    UNKNOWN,
    Frame,
    block_body,
    constants,
    is_none,
    path_last,
    path_of,
    path_root,
    replace_env,
    set_path,
    sub_blocks,
    subscript_key,
    target_paths,
    truth,
)
from patchaudit.analysis.flow_values import (
    ALL_KINDS,
    EMPTY,
    SEQ_KINDS,
    STR_KINDS,
    At,
    Env,
    Value,
    env_key,
    join,
    join_env,
    matches,
)


class Statements(FlowState):
    """Statements and stores (`Flow._block`, `Flow._stmt`, `Flow._assign`, ...)."""

    # ----- statements ------------------------------------------------------------------
    def _block(self, body: Any, env: Env, fr: Frame) -> Env:
        for stmt in block_body(body):
            self._stmt(stmt, env, fr)
        return env

    def _stmt(self, stmt: cst.CSTNode, env: Env, fr: Frame) -> None:
        if isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            for small in stmt.body:
                self._small(small, env, fr)
        elif isinstance(stmt, cst.If):
            self._if(stmt, env, fr)
        elif isinstance(stmt, cst.For):
            it = self._eval(stmt.iter, env, fr)
            elem = self._iter_elem(it)
            line = self._at(stmt)

            def once(e: Env) -> Env:
                e = dict(e)
                self._assign(stmt.target, elem, e, fr, line, "iterated into")
                return self._block(stmt.body, e, fr)

            out = self._loop(env, once, fr)
            if stmt.orelse is not None:
                out = self._block(stmt.orelse.body, out, fr)
            replace_env(env, out)
        elif isinstance(stmt, cst.While):

            def once_w(e: Env) -> Env:
                e = dict(e)
                self._eval(stmt.test, e, fr)
                return self._block(stmt.body, e, fr)

            self._eval(stmt.test, env, fr)
            out = self._loop(env, once_w, fr)
            if stmt.orelse is not None:
                out = self._block(stmt.orelse.body, out, fr)
            replace_env(env, out)
        elif isinstance(stmt, (cst.Try, cst.TryStar)):
            e_body = self._block(stmt.body, dict(env), fr)
            acc = join_env(env, e_body)
            outs = [e_body]
            for h in stmt.handlers:
                eh = dict(acc)
                if h.type is not None:
                    self._eval(h.type, eh, fr)
                if h.name is not None and isinstance(h.name.name, cst.Name):
                    set_path(eh, h.name.name.value, EMPTY)
                outs.append(self._block(h.body, eh, fr))
            if stmt.orelse is not None:
                outs[0] = self._block(stmt.orelse.body, outs[0], fr)
            res = outs[0]
            for o in outs[1:]:
                res = join_env(res, o)
            if stmt.finalbody is not None:
                res = self._block(stmt.finalbody.body, res, fr)
            replace_env(env, res)
        elif isinstance(stmt, cst.With):
            line = self._at(stmt)
            for item in stmt.items:
                v = self._eval(item.item, env, fr)
                if item.asname is not None:
                    self._assign(item.asname.name, v, env, fr, line, "assigned to")
            self._block(stmt.body, env, fr)
        elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            env.pop(stmt.name.value, None)
        elif isinstance(stmt, cst.Match):
            self._eval(stmt.subject, env, fr)
            res = dict(env)
            for case in stmt.cases:
                res = join_env(res, self._block(case.body, dict(env), fr))
            replace_env(env, res)
        else:  # unknown compound statement: analyse its blocks in order
            for sub in sub_blocks(stmt):
                self._block(sub, env, fr)

    def _if(self, stmt: cst.If, env: Env, fr: Frame) -> None:
        """Both arms, joined; an arm behind a constant test (`if False:`, `DEBUG = False`
        ... `if DEBUG:`) is dead.  Each arm is analysed under its branch (FlowState.branch)."""
        self._eval(stmt.test, env, fr)
        known = self._truth(stmt.test, fr)
        outer = self.branch
        try:
            self.branch = outer + ((id(stmt), 0),)
            e1 = self._block(stmt.body, dict(env), fr) if known is not False else None
            self.branch = outer + ((id(stmt), 1),)
            if known is True:
                e2 = None
            elif stmt.orelse is None:
                e2 = env
            elif isinstance(stmt.orelse, cst.If):
                e2 = dict(env)
                self._stmt(stmt.orelse, e2, fr)
            else:
                e2 = self._block(stmt.orelse.body, dict(env), fr)
        finally:
            self.branch = outer
        if e1 is None:
            replace_env(env, e2 if e2 is not None else env)
        elif e2 is None:
            replace_env(env, e1)
        else:
            replace_env(env, join_env(e1, e2))

    def _truth(self, test: cst.BaseExpression, fr: Frame) -> bool | None:
        if not isinstance(test, (cst.Name, cst.UnaryOperation, cst.Integer)):
            return None
        return truth(test, lambda name: self._constant(name, fr))

    def _constant(self, name: str, fr: Frame) -> Any:
        """The literal `name` is bound to once, in the function or the module, else UNKNOWN."""
        f = fr.fn
        while f is not None:
            got = self._consts.get(id(f.node))
            if got is None:
                got = self._consts[id(f.node)] = constants(f.node.body, f.params())
            if name in got.values:
                return got.values[name]
            if name in got.bound or name in got.rebound_elsewhere:
                return UNKNOWN
            f = f.parent
        mod = self._consts.get(id(self.module))
        if mod is None:
            mod = self._consts[id(self.module)] = constants(self.module)
        if name in mod.values and name not in mod.rebound_elsewhere:
            return mod.values[name]
        return UNKNOWN

    def _loop(self, env: Env, once: Callable[[Env], Env], fr: Frame) -> Env:
        rounds = 3 if fr.loops < 2 else 1
        fr.loops += 1
        try:
            cur = env
            for _ in range(rounds):
                nxt = join_env(cur, once(cur))
                if env_key(nxt) == env_key(cur):
                    return nxt
                cur = nxt
            return cur
        finally:
            fr.loops -= 1

    def _small(self, s: cst.CSTNode, env: Env, fr: Frame) -> None:
        if isinstance(s, cst.Assign):
            v = self._eval(s.value, env, fr)
            line = self._at(s)
            for t in s.targets:
                self._assign(t.target, v, env, fr, line, "assigned to", s.value)
        elif isinstance(s, cst.AnnAssign):
            if s.value is not None:
                v = self._eval(s.value, env, fr)
                self._assign(s.target, v, env, fr, self._at(s), "assigned to", s.value)
        elif isinstance(s, cst.AugAssign):
            self._augassign(s, env, fr)
        elif isinstance(s, cst.Expr):
            self._eval(s.value, env, fr)
        elif isinstance(s, cst.Return):
            v = self._eval(s.value, env, fr) if s.value is not None else EMPTY
            self._return(s, v, fr)
        elif isinstance(s, cst.Del):
            for p in target_paths(s.target):
                set_path(env, p, EMPTY)
        elif isinstance(s, (cst.Import, cst.ImportFrom)):
            names = s.names if not isinstance(s.names, cst.ImportStar) else []
            for alias in names:
                n = alias.asname.name if alias.asname else alias.name
                if isinstance(n, cst.Name):
                    env.pop(n.value, None)
                elif isinstance(n, cst.Attribute):
                    env.pop(path_root(path_of(n) or ""), None)
        elif isinstance(s, (cst.Raise, cst.Assert)):
            for child in s.children:
                if isinstance(child, cst.BaseExpression):
                    self._eval(child, env, fr)

    def _return(self, node: cst.CSTNode, v: Value, fr: Frame) -> None:
        if fr.fn is None:
            return
        line = self._at(node)
        v = v.with_step(line, f"returned by `{fr.fn.name}()`")
        fr.ret = join(fr.ret, v)
        if v:
            self.spec.ret(self, ReturnSite(node, line, fr.fn.qualname, v))

    def _augassign(self, s: cst.AugAssign, env: Env, fr: Frame) -> None:
        cur = self._eval(s.target, env, fr)
        v = self._eval(s.value, env, fr)
        line = self._at(s)
        if isinstance(s.operator, (cst.AddAssign, cst.MultiplyAssign, cst.BitOrAssign)):
            added = v.keep(SEQ_KINDS, self.kind)
            if isinstance(s.operator, cst.BitOrAssign):
                added = join(added, v)
        elif isinstance(s.operator, cst.ModuloAssign):
            added = v.keep(STR_KINDS, self.kind)
        else:
            added = EMPTY
        self._mutate(s.target, s.target, join(cur, EMPTY), added, env, fr, line)

    def _mutate(
        self,
        target: cst.BaseExpression,
        node: cst.CSTNode,
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
        self._remember(path, added, fr)
        if added:
            last = path_last(path)
            if self.spec.carriers and "." in path and matches(last, self.spec.carriers):
                self.carrier_store(last, added)
            self.spec.store(self, StoreSite(node, line, path, last, "mutate", added, bool(cur.refs)))

    def _remember(self, path: str, v: Value, fr: Frame) -> None:
        """Record a store for other methods (self.x) and for callers (stores into parameters)."""
        if not v:
            return
        root = path_root(path)
        if root == "self" and fr.cls is not None and path != "self":
            fields = self.class_fields.setdefault(fr.cls, {})
            cur = fields.get(path, EMPTY)
            new = join(cur, v)
            if new.key() != cur.key():
                fields[path] = new
                self._changed = True
        if root in fr.params:
            eff = fr.effects.setdefault(root, {})
            rest = path[len(root) :]
            eff[rest] = join(eff.get(rest, EMPTY), v)

    def _assign(
        self,
        target: cst.BaseExpression,
        v: Value,
        env: Env,
        fr: Frame,
        line: "int | At",
        how: str,
        value_node: cst.CSTNode | None = None,
    ) -> None:
        if isinstance(target, cst.Name):
            name = target.value
            set_path(env, name, v.with_step(line, f"{how} `{name}`"))
            fr.params.discard(name)
        elif isinstance(target, (cst.Tuple, cst.List)):
            elts = [e.value for e in target.elements]
            star = next((i for i, e in enumerate(target.elements) if isinstance(e, cst.StarredElement)), None)
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
                self._assign(t, part, env, fr, line, "unpacked into" if how == "assigned to" else how)
        elif isinstance(target, cst.StarredElement):
            self._assign(target.value, v, env, fr, line, how)
        elif isinstance(target, (cst.Attribute, cst.Subscript)):
            self._store(target, v, env, fr, line, is_none(value_node))

    def _store(
        self, target: cst.Attribute | cst.Subscript, v: Value, env: Env, fr: Frame, line: "int | At", none: bool = False
    ) -> None:
        base = self._eval(target.value, env, fr)
        path = path_of(target)
        key = None
        if isinstance(target, cst.Subscript):
            key = subscript_key(target)
            if key is None:
                for el in target.slice:
                    self._eval_slice(el.slice, env, fr)
        shown = path or self.snippet(target)
        vs = v.with_step(line, f"stored in `{shown}`")
        if isinstance(target, cst.Subscript) and base.refs:
            for ref in base.refs:
                self._set_field(ref, key if key is not None else "?", vs, target, line, none)
        if path is not None:
            set_path(env, path, vs)
            self._remember(path, vs, fr)
        elif isinstance(target, cst.Subscript):
            bpath = path_of(target.value)
            if bpath is not None and vs:  # `ids[i] = x`: the container now holds x too
                set_path(env, bpath, join(base, vs.keep(ALL_KINDS, self.kind)))
                self._remember(bpath, vs, fr)
        if vs:
            kind = "attr" if isinstance(target, cst.Attribute) else "item"
            attr = target.attr.value if isinstance(target, cst.Attribute) else key
            if kind == "attr" and self.spec.carriers and matches(attr, self.spec.carriers):
                self.carrier_store(cast(str, attr), vs)
            self.spec.store(self, StoreSite(target, line, path, attr, kind, vs, bool(base.refs)))
