"""The dataflow layer's statements: assignments, stores, mutations and control flow.

Part of the interpreter of patchaudit/analysis/dataflow.py.  Branches are
analysed separately and joined, loops are iterated until their environment is
stable (at most three times), exceptions join the states of the `try` body;
assignments bind names and unpack tuples element by element, stores into
attributes and items update the environment, the heap and the records other
methods and callers read (`self.x`, stores into parameters).
"""

from __future__ import annotations

import ast
from typing import Any, Callable, cast

from patchaudit.analysis.flow_api import FlowState, ReturnSite, StoreSite
from patchaudit.analysis.flow_structure import (
    COMPOUND,
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

    def _stmt(self, stmt: ast.stmt, env: Env, fr: Frame) -> None:
        if not isinstance(stmt, COMPOUND + _DEFS):
            self._small(stmt, env, fr)
        elif isinstance(stmt, ast.If):
            self._if(stmt, env, fr)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            it = self._eval(stmt.iter, env, fr)
            elem = self._iter_elem(it)
            line = self._at(stmt)

            def once(e: Env) -> Env:
                e = dict(e)
                self._assign(stmt.target, elem, e, fr, line, "iterated into")
                return self._block(stmt.body, e, fr)

            out = self._loop(env, once, fr)
            if stmt.orelse:
                out = self._block(stmt.orelse, out, fr)
            replace_env(env, out)
        elif isinstance(stmt, ast.While):

            def once_w(e: Env) -> Env:
                e = dict(e)
                self._eval(stmt.test, e, fr)
                return self._block(stmt.body, e, fr)

            self._eval(stmt.test, env, fr)
            out = self._loop(env, once_w, fr)
            if stmt.orelse:
                out = self._block(stmt.orelse, out, fr)
            replace_env(env, out)
        elif isinstance(stmt, _TRY):
            self._try(stmt, env, fr)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            line = self._at(stmt)
            for item in stmt.items:
                v = self._eval(item.context_expr, env, fr)
                if item.optional_vars is not None:
                    self._assign(item.optional_vars, v, env, fr, line, "assigned to")
            self._block(stmt.body, env, fr)
        elif isinstance(stmt, _DEFS):
            env.pop(stmt.name, None)
        elif isinstance(stmt, ast.Match):
            self._eval(stmt.subject, env, fr)
            res = dict(env)
            for case in stmt.cases:
                res = join_env(res, self._block(case.body, dict(env), fr))
            replace_env(env, res)
        else:  # unknown compound statement: analyse its blocks in order
            for sub in sub_blocks(stmt):
                self._block(sub, env, fr)

    def _try(self, stmt: Any, env: Env, fr: Frame) -> None:
        e_body = self._block(stmt.body, dict(env), fr)
        acc = join_env(env, e_body)
        outs = [e_body]
        for h in stmt.handlers:
            eh = dict(acc)
            if h.type is not None:
                self._eval(h.type, eh, fr)
            if h.name is not None:
                set_path(eh, h.name, EMPTY)
            outs.append(self._block(h.body, eh, fr))
        if stmt.orelse:
            outs[0] = self._block(stmt.orelse, outs[0], fr)
        res = outs[0]
        for o in outs[1:]:
            res = join_env(res, o)
        if stmt.finalbody:
            res = self._block(stmt.finalbody, res, fr)
        replace_env(env, res)

    def _if(self, stmt: ast.If, env: Env, fr: Frame) -> None:
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
            elif not stmt.orelse:
                e2 = env
            elif _is_elif(stmt):
                e2 = dict(env)
                self._stmt(stmt.orelse[0], e2, fr)
            else:
                e2 = self._block(stmt.orelse, dict(env), fr)
        finally:
            self.branch = outer
        if e1 is None:
            replace_env(env, e2 if e2 is not None else env)
        elif e2 is None:
            replace_env(env, e1)
        else:
            replace_env(env, join_env(e1, e2))

    def _truth(self, test: ast.expr, fr: Frame) -> bool | None:
        if not isinstance(test, (ast.Name, ast.UnaryOp)) and not _int_literal(test):
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

    def _small(self, s: ast.stmt, env: Env, fr: Frame) -> None:
        if isinstance(s, ast.Assign):
            v = self._eval(s.value, env, fr)
            line = self._at(s)
            for t in s.targets:
                self._assign(t, v, env, fr, line, "assigned to", s.value)
        elif isinstance(s, ast.AnnAssign):
            if s.value is not None:
                v = self._eval(s.value, env, fr)
                self._assign(s.target, v, env, fr, self._at(s), "assigned to", s.value)
        elif isinstance(s, ast.AugAssign):
            self._augassign(s, env, fr)
        elif isinstance(s, ast.Expr):
            self._eval(s.value, env, fr)
        elif isinstance(s, ast.Return):
            v = self._eval(s.value, env, fr) if s.value is not None else EMPTY
            self._return(s, v, fr)
        elif isinstance(s, ast.Delete):
            for t in s.targets:
                for p in target_paths(t):
                    set_path(env, p, EMPTY)
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            for alias in s.names:
                if alias.name == "*":
                    continue
                env.pop(alias.asname or alias.name.split(".", 1)[0], None)
        elif isinstance(s, ast.Raise):
            self._eval(s.exc, env, fr)  # (libcst's `from` clause was never read: nor is it here)
        elif isinstance(s, ast.Assert):
            self._eval(s.test, env, fr)
            self._eval(s.msg, env, fr)

    def _return(self, node: Any, v: Value, fr: Frame) -> None:
        if fr.fn is None:
            return
        line = self._at(node)
        v = v.with_step(line, f"returned by `{fr.fn.name}()`")
        fr.ret = join(fr.ret, v)
        if v:
            self.spec.ret(self, ReturnSite(node, line, fr.fn.qualname, v))

    def _augassign(self, s: ast.AugAssign, env: Env, fr: Frame) -> None:
        cur = self._eval(s.target, env, fr)
        v = self._eval(s.value, env, fr)
        line = self._at(s)
        if isinstance(s.op, (ast.Add, ast.Mult, ast.BitOr)):
            added = v.keep(SEQ_KINDS, self.kind)
            if isinstance(s.op, ast.BitOr):
                added = join(added, v)
        elif isinstance(s.op, ast.Mod):
            added = v.keep(STR_KINDS, self.kind)
        else:
            added = EMPTY
        self._mutate(s.target, s.target, join(cur, EMPTY), added, env, fr, line)

    def _mutate(
        self,
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
                self._assign(t, part, env, fr, line, "unpacked into" if how == "assigned to" else how)
        elif isinstance(target, ast.Starred):
            self._assign(target.value, v, env, fr, line, how)
        elif isinstance(target, (ast.Attribute, ast.Subscript)):
            self._store(target, v, env, fr, line, is_none(value_node))

    def _store(
        self, target: ast.Attribute | ast.Subscript, v: Value, env: Env, fr: Frame, line: "int | At", none: bool = False
    ) -> None:
        base = self._eval(target.value, env, fr)
        path = path_of(target)
        key = None
        if isinstance(target, ast.Subscript):
            key = subscript_key(target)
            if key is None:
                self._eval_slice(target.slice, env, fr)
        shown = path or self.snippet(target)
        vs = v.with_step(line, f"stored in `{shown}`")
        if isinstance(target, ast.Subscript) and base.refs:
            for ref in base.refs:
                self._set_field(ref, key if key is not None else "?", vs, target, line, none)
        if path is not None:
            set_path(env, path, vs)
            self._remember(path, vs, fr)
        elif isinstance(target, ast.Subscript):
            bpath = path_of(target.value)
            if bpath is not None and vs:  # `ids[i] = x`: the container now holds x too
                set_path(env, bpath, join(base, vs.keep(ALL_KINDS, self.kind)))
                self._remember(bpath, vs, fr)
        if vs:
            kind = "attr" if isinstance(target, ast.Attribute) else "item"
            attr = target.attr if isinstance(target, ast.Attribute) else key
            if kind == "attr" and self.spec.carriers and matches(attr, self.spec.carriers):
                self.carrier_store(cast(str, attr), vs)
            self.spec.store(self, StoreSite(target, line, path, attr, kind, vs, bool(base.refs)))


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_TRY = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)


def _is_elif(stmt: ast.If) -> bool:
    """Whether `stmt`'s `else` is an `elif` (an `else:` block holding only an `if` reads the same in `ast`)."""
    return len(stmt.orelse) == 1 and isinstance(stmt.orelse[0], ast.If)


def _int_literal(node: ast.expr) -> bool:
    """An int, True, False or None: libcst's Integer or a name whose truth is constant (not a
    float or a string)."""
    return isinstance(node, ast.Constant) and (node.value is None or type(node.value) in (int, bool))
