"""The dataflow layer's statements: control flow, and the statements that store.

Part of the interpreter of patchaudit/analysis/dataflow.py.  `execute` is the
interpreter of one `ast` statement (`FlowState.block` runs a block with it).
Branches are analysed separately and joined, loops are iterated until their
environment is stable (at most three times), exceptions join the states of the
`try` body; assignments and `+=` go to the stores (flow_stores.py).
"""

from __future__ import annotations

import ast
from typing import Any, Callable

from patchaudit.analysis.flow_api import FlowState
from patchaudit.analysis.flow_stores import assign, iter_elem, mutate, ret
from patchaudit.analysis.flow_structure import (
    COMPOUND,
    UNKNOWN,
    Frame,
    constants,
    replace_env,
    set_path,
    sub_blocks,
    target_paths,
    truth,
)
from patchaudit.analysis.flow_values import (
    EMPTY,
    SEQ_KINDS,
    STR_KINDS,
    Env,
    env_key,
    join,
    join_env,
)


def execute(fl: FlowState, stmt: ast.stmt, env: Env, fr: Frame) -> None:
    if not isinstance(stmt, COMPOUND + _DEFS):
        _small(fl, stmt, env, fr)
    elif isinstance(stmt, ast.If):
        _if(fl, stmt, env, fr)
    elif isinstance(stmt, (ast.For, ast.AsyncFor)):
        it = fl.eval(stmt.iter, env, fr)
        elem = iter_elem(fl, it)
        line = fl._at(stmt)

        def once(e: Env) -> Env:
            e = dict(e)
            assign(fl, stmt.target, elem, e, fr, line, "iterated into")
            return fl.block(stmt.body, e, fr)

        out = _loop(fl, env, once, fr)
        if stmt.orelse:
            out = fl.block(stmt.orelse, out, fr)
        replace_env(env, out)
    elif isinstance(stmt, ast.While):

        def once_w(e: Env) -> Env:
            e = dict(e)
            fl.eval(stmt.test, e, fr)
            return fl.block(stmt.body, e, fr)

        fl.eval(stmt.test, env, fr)
        out = _loop(fl, env, once_w, fr)
        if stmt.orelse:
            out = fl.block(stmt.orelse, out, fr)
        replace_env(env, out)
    elif isinstance(stmt, _TRY):
        _try(fl, stmt, env, fr)
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        line = fl._at(stmt)
        for item in stmt.items:
            v = fl.eval(item.context_expr, env, fr)
            if item.optional_vars is not None:
                assign(fl, item.optional_vars, v, env, fr, line, "assigned to")
        fl.block(stmt.body, env, fr)
    elif isinstance(stmt, _DEFS):
        env.pop(stmt.name, None)
    elif isinstance(stmt, ast.Match):
        fl.eval(stmt.subject, env, fr)
        res = dict(env)
        for case in stmt.cases:
            res = join_env(res, fl.block(case.body, dict(env), fr))
        replace_env(env, res)
    else:  # unknown compound statement: analyse its blocks in order
        for sub in sub_blocks(stmt):
            fl.block(sub, env, fr)


def _try(fl: FlowState, stmt: Any, env: Env, fr: Frame) -> None:
    e_body = fl.block(stmt.body, dict(env), fr)
    acc = join_env(env, e_body)
    outs = [e_body]
    for h in stmt.handlers:
        eh = dict(acc)
        if h.type is not None:
            fl.eval(h.type, eh, fr)
        if h.name is not None:
            set_path(eh, h.name, EMPTY)
        outs.append(fl.block(h.body, eh, fr))
    if stmt.orelse:
        outs[0] = fl.block(stmt.orelse, outs[0], fr)
    res = outs[0]
    for o in outs[1:]:
        res = join_env(res, o)
    if stmt.finalbody:
        res = fl.block(stmt.finalbody, res, fr)
    replace_env(env, res)


def _if(fl: FlowState, stmt: ast.If, env: Env, fr: Frame) -> None:
    """Both arms, joined; an arm behind a constant test (`if False:`, `DEBUG = False`
    ... `if DEBUG:`) is dead.  Each arm is analysed under its branch (FlowState.branch)."""
    fl.eval(stmt.test, env, fr)
    known = _truth(fl, stmt.test, fr)
    outer = fl.branch
    try:
        fl.branch = outer + ((id(stmt), 0),)
        e1 = fl.block(stmt.body, dict(env), fr) if known is not False else None
        fl.branch = outer + ((id(stmt), 1),)
        if known is True:
            e2 = None
        elif not stmt.orelse:
            e2 = env
        elif _is_elif(stmt):
            e2 = dict(env)
            execute(fl, stmt.orelse[0], e2, fr)
        else:
            e2 = fl.block(stmt.orelse, dict(env), fr)
    finally:
        fl.branch = outer
    if e1 is None:
        replace_env(env, e2 if e2 is not None else env)
    elif e2 is None:
        replace_env(env, e1)
    else:
        replace_env(env, join_env(e1, e2))


def _truth(fl: FlowState, test: ast.expr, fr: Frame) -> bool | None:
    if not isinstance(test, (ast.Name, ast.UnaryOp)) and not _int_literal(test):
        return None
    return truth(test, lambda name: _constant(fl, name, fr))


def _constant(fl: FlowState, name: str, fr: Frame) -> Any:
    """The literal `name` is bound to once, in the function or the module, else UNKNOWN."""
    f = fr.fn
    while f is not None:
        got = fl._consts.get(id(f.node))
        if got is None:
            got = fl._consts[id(f.node)] = constants(f.node.body, f.params())
        if name in got.values:
            return got.values[name]
        if name in got.bound or name in got.rebound_elsewhere:
            return UNKNOWN
        f = f.parent
    mod = fl._consts.get(id(fl.module))
    if mod is None:
        mod = fl._consts[id(fl.module)] = constants(fl.module)
    if name in mod.values and name not in mod.rebound_elsewhere:
        return mod.values[name]
    return UNKNOWN


def _loop(fl: FlowState, env: Env, once: Callable[[Env], Env], fr: Frame) -> Env:
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


def _small(fl: FlowState, s: ast.stmt, env: Env, fr: Frame) -> None:
    if isinstance(s, ast.Assign):
        v = fl.eval(s.value, env, fr)
        line = fl._at(s)
        for t in s.targets:
            assign(fl, t, v, env, fr, line, "assigned to", s.value)
    elif isinstance(s, ast.AnnAssign):
        if s.value is not None:
            v = fl.eval(s.value, env, fr)
            assign(fl, s.target, v, env, fr, fl._at(s), "assigned to", s.value)
    elif isinstance(s, ast.AugAssign):
        _augassign(fl, s, env, fr)
    elif isinstance(s, ast.Expr):
        fl.eval(s.value, env, fr)
    elif isinstance(s, ast.Return):
        v = fl.eval(s.value, env, fr) if s.value is not None else EMPTY
        ret(fl, s, v, fr)
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
        fl.eval(s.exc, env, fr)  # (libcst's `from` clause was never read: nor is it here)
    elif isinstance(s, ast.Assert):
        fl.eval(s.test, env, fr)
        fl.eval(s.msg, env, fr)


def _augassign(fl: FlowState, s: ast.AugAssign, env: Env, fr: Frame) -> None:
    cur = fl.eval(s.target, env, fr)
    v = fl.eval(s.value, env, fr)
    line = fl._at(s)
    if isinstance(s.op, (ast.Add, ast.Mult, ast.BitOr)):
        added = v.keep(SEQ_KINDS, fl.kind)
        if isinstance(s.op, ast.BitOr):
            added = join(added, v)
    elif isinstance(s.op, ast.Mod):
        added = v.keep(STR_KINDS, fl.kind)
    else:
        added = EMPTY
    mutate(fl, s.target, s.target, join(cur, EMPTY), added, env, fr, line)


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_TRY = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)


def _is_elif(stmt: ast.If) -> bool:
    """Whether `stmt`'s `else` is an `elif` (an `else:` block holding only an `if` reads the same in `ast`)."""
    return len(stmt.orelse) == 1 and isinstance(stmt.orelse[0], ast.If)


def _int_literal(node: ast.expr) -> bool:
    """An int, True, False or None: libcst's Integer or a name whose truth is constant (not a
    float or a string)."""
    return isinstance(node, ast.Constant) and (node.value is None or type(node.value) in (int, bool))
