"""The dataflow layer's functions: the module's structure, callee resolution, summaries.

Part of the interpreter of patchaudit/analysis/dataflow.py.  Each function of
the module is analysed per *context* (the abstract values of its arguments,
ignoring traces), which gives its summary: the returned value and the stores it
makes into its parameters' attributes.  Contexts are memoised per pass; a
context too deep in the call stack is deferred to the end of the pass.  Calls
are resolved by the LEGB rule approximately: nested functions, module
functions, methods through `self`/`cls` and the class hierarchy of the module.
"""

from __future__ import annotations

import ast
from typing import Any, Iterable

from patchaudit.analysis.flow_api import Arg, FlowState
from patchaudit.analysis.flow_stores import remember
from patchaudit.analysis.flow_structure import (
    EMPTY_SUMMARY,
    Frame,
    Function,
    Summary,
    path_of,
    set_path,
    sub_blocks,
)
from patchaudit.analysis.flow_values import EMPTY, MAX_CALL_DEPTH, At, Env, Step, Value, add_step, join, settle
from patchaudit.analysis.repo_summaries import (
    FunctionSummary,
    ModuleSummary,
    Signature,
    as_value,
    in_file,
    is_symbolic,
    symbolic,
    taints_of,
)
from patchaudit.inputs.astnames import ANY_CALL, dotted


def collect(fl: FlowState, stmts: Iterable[ast.stmt], parent: Function | None, cls: str | None, prefix: str) -> None:
    for stmt in stmts:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            fn = _function(fl, stmt, parent, cls, prefix)
            fl.functions.append(fn)
            if cls is not None:
                fl.classes.setdefault(cls, {})[fn.name] = fn
            elif parent is not None:
                parent.nested[fn.name] = fn
            else:
                fl.module_functions[fn.name] = fn
            collect(fl, stmt.body, fn, None, fn.qualname + ".")
        elif isinstance(stmt, ast.ClassDef):
            name = stmt.name
            fl.classes.setdefault(name, {})
            fl.class_bases[name] = [b for b in (dotted(a, ANY_CALL) for a in stmt.bases) if b]
            collect(fl, stmt.body, parent, name, prefix + name + ".")
        else:
            for sub in sub_blocks(stmt):
                collect(fl, sub, parent, cls, prefix)


def _function(fl: FlowState, node: Any, parent: Function | None, cls: str | None, prefix: str) -> Function:
    decos = {dotted(d, ANY_CALL) for d in node.decorator_list}
    kind = "function"
    if cls is not None:
        kind = "static" if "staticmethod" in decos else "class" if "classmethod" in decos else "method"
    fn = Function(prefix + node.name, node.name, node, cls, kind, parent)
    ps = node.args
    for p in list(ps.posonlyargs) + list(ps.args):
        fn.positional.append(p.arg)
    for p in ps.kwonlyargs:
        fn.kwonly.append(p.arg)
    if ps.vararg is not None:
        fn.star = ps.vararg.arg
    if ps.kwarg is not None:
        fn.starstar = ps.kwarg.arg
    for p in (
        list(ps.posonlyargs) + list(ps.args) + list(ps.kwonlyargs) + [x for x in (ps.vararg, ps.kwarg) if x is not None]
    ):
        fn.annotations[p.arg] = p.annotation
        fn.param_nodes[p.arg] = p
    return fn


def _mro(fl: FlowState, cls: str) -> list[str]:
    """`cls` and its bases defined in this module, depth first (cached)."""
    got = fl._mros.get(cls)
    if got is None:
        got = []
        todo = [cls]
        while todo:
            c = todo.pop(0)
            if c in got or c not in fl.classes:
                continue
            got.append(c)
            todo.extend(b.rsplit(".", 1)[-1] for b in fl.class_bases.get(c, []))
        fl._mros[cls] = got
    return got


def _method(fl: FlowState, cls: str, name: str) -> Function | None:
    for c in _mro(fl, cls):
        fn = fl.classes[c].get(name)
        if fn is not None:
            return fn
    return None


def class_field(fl: FlowState, cls: str, path: str) -> Value:
    v = EMPTY
    for c in _mro(fl, cls):
        fields = fl.class_fields.get(c)
        if fields:
            v = join(v, fields.get(path, EMPTY))
    return v


def resolve(fl: FlowState, func: ast.expr, env: Env, fr: Frame) -> tuple[Function, bool] | None:
    if isinstance(func, ast.Name):
        n = func.id
        if n in env:
            return None  # a local shadows the function
        f = fr.fn
        while f is not None:
            if n in f.nested:
                return f.nested[n], False
            f = f.parent
        fn = fl.module_functions.get(n)
        return (fn, False) if fn is not None else None
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        base, m = func.value.id, func.attr
        if base in ("self", "cls") and fr.cls is not None:
            fn = _method(fl, fr.cls, m)
            if fn is not None:
                return fn, fn.kind != "static"
        if base in fl.classes and base not in env:
            fn = _method(fl, base, m)
            if fn is not None:
                return fn, fn.kind == "class"
    return None


def _param_seed(fl: FlowState, fn: Function, name: str) -> Value:
    key = (fn.qualname, name)
    if key not in fl._param_cache:
        v = fl.spec.param(fl, fn.qualname, name, fn.annotations.get(name), fn.param_nodes[name])
        fl._param_cache[key] = v or EMPTY
    return fl._param_cache[key]


def summary(
    fl: FlowState, fn: Function, key: tuple, args: dict[str, Value], subs: dict[str, Value], depth: int
) -> Summary:
    memo = fl._pass_memo.get(key)
    if memo is not None:
        return memo
    if key in fl._in_progress:
        return fl._summaries.get(key, EMPTY_SUMMARY)
    if depth > MAX_CALL_DEPTH:
        # too deep to analyse on this stack: analyse it from the top after this pass
        if key not in fl._deferred:
            fl._deferred[key] = (fn, args, subs)
        return fl._summaries.get(key, EMPTY_SUMMARY)
    fl._in_progress.add(key)
    try:
        fr = Frame(fn, depth)
        env: Env = {}
        for p in fn.params():
            env[p] = join(args.get(p, EMPTY), _param_seed(fl, fn, p))
        env.update(subs)
        fl.block(fn.node.body, env, fr)
        summ = Summary(fr.ret, fr.effects)
    finally:
        fl._in_progress.discard(key)
    old = fl._summaries.get(key)
    if (old.key() if old is not None else EMPTY_SUMMARY.key()) != summ.key():
        fl._changed = True
    fl._summaries[key] = summ
    fl._pass_memo[key] = summ
    return summ


def _bind(fl: FlowState, fn: Function | Signature, bound: bool, args: list[Arg]) -> dict[str, tuple[Value, Any]]:
    positional = list(fn.positional)
    if bound and fn.kind in ("method", "class") and positional:
        positional = positional[1:]
    binding: dict[str, tuple[Value, Any]] = {}
    i = 0
    for a in args:
        if a.keyword is None and a.star == "":
            if i < len(positional):
                binding[positional[i]] = (a.value, a.node)
                i += 1
            elif fn.star:
                prev = binding.get(fn.star, (EMPTY, None))[0]
                binding[fn.star] = (join(prev, a.value.flat()), None)
        elif a.star == "*":
            f = a.value.flat()
            for p in positional[i:]:
                binding.setdefault(p, (f, None))
            if fn.star:
                binding[fn.star] = (join(binding.get(fn.star, (EMPTY, None))[0], f), None)
            i = len(positional)
        elif a.star == "**":
            for p in positional[i:] + list(fn.kwonly):
                if p not in binding:
                    v = fl._field(a.value, p, a.node) if a.value.refs else EMPTY
                    if v:
                        binding[p] = (v, None)
        elif a.keyword is not None and (a.keyword in positional or a.keyword in fn.kwonly):
            binding[a.keyword] = (a.value, a.node)
        elif fn.starstar:
            prev = binding.get(fn.starstar, (EMPTY, None))[0]
            binding[fn.starstar] = (join(prev, a.value.flat()), None)
    return binding


def invoke(
    fl: FlowState, fn: Function, bound: bool, args: list[Arg], node: ast.Call, line: "int | At", env: Env, fr: Frame
) -> Value:
    binding = _bind(fl, fn, bound, args)
    values: dict[str, Value] = {}
    subs: dict[str, Value] = {}
    paths: dict[str, str] = {}
    for p, (v, anode) in binding.items():
        if v:
            values[p] = v.with_step(line, f"passed as `{p}` to `{fn.name}()`")
        apath = path_of(anode.value) if anode is not None else None
        if apath is None:
            continue
        paths[p] = apath
        for k, sv in env.items():
            if sv and len(k) > len(apath) and k.startswith(apath) and k[len(apath)] in ".[":
                subs[p + k[len(apath) :]] = sv.with_step(line, f"passed in `{apath}` to `{fn.name}()`")
        if apath.startswith("self.") and fr.cls is not None:
            for k, sv in fl.class_fields.get(fr.cls, {}).items():
                if sv and len(k) > len(apath) and k.startswith(apath) and k[len(apath)] in ".[":
                    subs.setdefault(p + k[len(apath) :], sv)
    key = (
        fn.qualname,
        tuple(sorted((k, v.key()) for k, v in values.items())),
        tuple(sorted((k, v.key()) for k, v in subs.items())),
    )
    summ = summary(fl, fn, key, values, subs, fr.depth + 1)
    for p, eff in summ.effects.items():
        apath = paths.get(p)
        if apath is None:
            continue
        for rest, v in eff.items():
            path = apath + rest
            v = v.with_step(line, f"`{path}` set by `{fn.name}()`")
            set_path(env, path, join(env.get(path, EMPTY), v))
            remember(fl, path, v, fr)
    return summ.ret


def resolve_foreign(fl: FlowState, func: ast.expr, env: Env, fr: Frame) -> tuple[FunctionSummary, bool] | None:
    """A function of another module of the repository: an imported name, a module's
    attribute (`mod.f`, `pkg.mod.f`), or a method of a base class defined elsewhere."""
    repo = fl.repo
    if repo is None:
        return None
    if isinstance(func, ast.Name):
        if func.id in env or func.id in fl.module_functions:
            return None
        fs = repo.function(func.id)
        return (fs, fs.signature.kind == "class") if fs is not None else None
    if not isinstance(func, ast.Attribute):
        return None
    if isinstance(func.value, ast.Name) and func.value.id in ("self", "cls") and fr.cls is not None:
        if _method(fl, fr.cls, func.attr) is not None:
            return None
        for c in _mro(fl, fr.cls):
            fs = repo.method(c, func.attr)
            if fs is not None:
                return fs, fs.signature.kind != "static"
        return None
    p = path_of(func)
    if p is None or "[" in p or p.split(".")[0] in env:
        return None
    fs = repo.function(p)
    return (fs, fs.signature.kind == "class") if fs is not None else None


def invoke_foreign(
    fl: FlowState,
    fs: FunctionSummary,
    bound: bool,
    args: list[Arg],
    node: ast.Call,
    line: "int | At",
    env: Env,
    fr: Frame,
) -> Value:
    """A call of another module's function, by its summary: what it returns whatever
    its arguments, what it stores into its parameters' fields, what its parameters carry
    to its return, and the sinks they reach inside it (reported here, at the argument,
    with the trace through the callee)."""
    where = f"`{fs.name}()` ({fs.path.replace(chr(92), '/').rsplit('/', 1)[-1]})"
    out = as_value(fs.returns).with_step(line, f"returned by {where}")
    if not fs.param_returns and not fs.param_sinks and not fs.param_stores:
        return out
    binding = _bind(fl, fs.signature, bound, args)
    if fs.param_stores:
        _foreign_stores(fl, fs, binding, where, line, env, fr)
    for p, (v, anode) in binding.items():
        if not v:
            continue
        passed = v.with_step(line, f"passed as `{p}` to {where}")
        for label, out_label, steps in fs.param_returns.get(p, ()):
            t = {(out_label, o): add_steps(s, steps) for (l, o), s in passed.flat().t.items() if l == label}
            if t:
                out = join(out, Value(t).with_step(line, f"returned by {where}"))
        for label, message, steps, severity in fs.param_sinks.get(p, ()):
            for _, origin, s in passed.find(label)[:1]:
                fl.report(
                    anode if anode is not None else node,
                    message,
                    add_steps(s, steps),
                    origin,
                    f"passed as `{p}` to {where}, which sends it on",
                    severity,
                )
    return out


def _foreign_stores(
    fl: FlowState, fs: FunctionSummary, binding: dict, where: str, line: "int | At", env: Env, fr: Frame
):
    """`fill(state)` of another module storing a source's taint into `state.prompt_ids`:
    the argument's field holds it after the call (as `_invoke` does for this module's own)."""
    for p, fields in fs.param_stores.items():
        got = binding.get(p)
        apath = path_of(got[1].value) if got is not None and got[1] is not None else None
        if apath is None:
            continue
        for rest, taints in fields:
            target = apath + rest
            v = as_value(taints).with_step(line, f"`{target}` set by {where}")
            set_path(env, target, join(env.get(target, EMPTY), v))
            remember(fl, target, v, fr)


def seeds(fl: FlowState, fn: Function) -> dict[str, Value]:
    """Summary mode: each parameter of `fn` (not `self`/`cls`) as a symbolic taint of
    every label the spec's sinks report."""
    labels = fl.spec.summary_labels
    params = fn.params()
    if fn.kind in ("method", "class") and fn.positional:
        params = [p for p in params if p != fn.positional[0]]
    out: dict[str, Value] = {}
    for p in params:
        # line 0: the def's line, looked up only for what is exported (positions are costly)
        note = f"parameter `{p}` of `{fn.name}()`"
        out[p] = Value({(l, symbolic(fn.qualname, p, l)): ((0, note),) for l in labels})
    return out


def _def_line(fl: FlowState, fn: Function, steps: tuple[Step, ...]) -> tuple[Step, ...]:
    steps = settle(steps)
    if steps and steps[0][0] == 0 and type(steps[0][0]) is int:
        return ((fn.node.lineno, steps[0][1]),) + steps[1:]
    return steps


def export(fl: FlowState, path: str) -> ModuleSummary:
    """Summary mode, after the fixed point: what this module shows the others."""
    out = ModuleSummary(path)
    for fn in fl.functions:
        if fn.parent is not None:
            continue  # nested functions are not reachable from other modules
        seeded = fl._summaries.get((fn.qualname, "seeded")) or fl._summaries.get((fn.qualname, (), ()))
        ret = seeded.ret if seeded is not None else EMPTY
        returns = taints_of(ret, path, concrete=True)
        param_returns: dict[str, list[tuple[str, str, tuple[Step, ...]]]] = {}
        for (label, origin), steps in ret.flat().t.items():
            if is_symbolic(origin) and origin[1] == fn.qualname:
                steps = in_file(_def_line(fl, fn, steps), path)
                param_returns.setdefault(origin[2], []).append((origin[3], label, steps))
        sinks = {
            p: tuple((l, m, in_file(_def_line(fl, fn, st), path), sev) for l, m, st, sev in entries)
            for p, entries in fl.param_sinks.get(fn.qualname, {}).items()
        }
        fs = FunctionSummary(
            fn.name,
            path,
            Signature(tuple(fn.positional), tuple(fn.kwonly), fn.star, fn.starstar, fn.kind),
            returns,
            {p: tuple(sorted(v, key=lambda e: e[:2])[:4]) for p, v in param_returns.items()},
            sinks,
            _param_stores(fn, seeded, path),
        )
        if not fs.empty():
            out.functions[fn.qualname] = fs
    for name, v in fl.carrier_stores.items():
        taints = taints_of(v, path)
        if taints:
            out.carriers[name] = taints
    return out


def _param_stores(fn: Function, summ: Summary | None, path: str) -> dict[str, tuple]:
    """The concrete taints `fn` stores into its parameters' fields (not `self`/`cls`'s: a
    class's fields are followed within its module): `FunctionSummary.param_stores`."""
    if summ is None:
        return {}
    skip = fn.positional[0] if fn.kind in ("method", "class") and fn.positional else None
    out: dict[str, tuple] = {}
    for p, eff in summ.effects.items():
        if p == skip:
            continue
        fields = tuple(
            (rest, taints) for rest, v in sorted(eff.items()) if rest and (taints := taints_of(v, path, concrete=True))
        )
        if fields:
            out[p] = fields
    return out


def add_steps(steps: tuple[Step, ...], more: tuple[Step, ...]) -> tuple[Step, ...]:
    for line, note in more:
        steps = add_step(steps, line, note)
    return steps
