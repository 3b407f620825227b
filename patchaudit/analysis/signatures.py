"""Call signatures compared across two engine versions.

Pure computations for `patchaudit bump`: how a call's shape binds to a
definition's parameters, which keyword OLD took that NEW renamed, which
positional argument now binds elsewhere, which defaulted parameters a call
leaves out and how many of upstream's own call sites pass them.  No findings,
no rule codes, no I/O: the bump pipeline (`patchaudit/pipeline/bump_audit.py`)
resolves the calls, the engine-pair rule on call-signature drift judges and
words what comes out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from patchaudit.engine.definitions import FuncInfo, Param
from patchaudit.engine.symbols import CallShape


@dataclass
class CallTarget:
    """A call in patched code, resolved: the definition it binds to in NEW with the patches
    applied, and the same definition as upstream has it in NEW and in OLD."""

    func: FuncInfo  # the patched definition
    how: Any  # how the callee is reached (Callee.how)
    params: list[Param]  # the parameters the call binds to
    up_new: FuncInfo | None  # upstream's own definition in NEW
    up_old: FuncInfo | None  # ... in OLD
    new_up_params: list[Param] | None
    old_params: list[Param] | None

    @property
    def name(self) -> str:
        f = self.func
        return f"`{f.name}()`" if f.name != "__init__" else f"`{f.qualname.rsplit('.', 1)[0]}()`"

    @property
    def where(self) -> str:
        return f"`{self.func.qualname}` at {self.func.where}"


def param_names(params: list[Param]) -> list[str]:
    return [p.name for p in params if p.kind not in ("vararg", "varkw")]


def positional_names(params: list[Param]) -> list[str]:
    return [p.name for p in params if p.kind in ("positional_only", "positional")]


def bind_problems(params: list[Param], shape: CallShape) -> tuple[list[str], int, list[str], list[str]]:
    """(unknown keywords, positional arguments too many, missing required parameters,
    parameters given twice) of a call with `shape` against `params`."""
    positional = [p for p in params if p.kind in ("positional_only", "positional")]
    has_var = any(p.kind == "vararg" for p in params)
    has_varkw = any(p.kind == "varkw" for p in params)
    by_name = {p.name: p for p in params if p.kind not in ("vararg", "varkw")}
    bound = {p.name for p in positional[: shape.positional]}
    too_many = 0 if has_var or shape.star_args else max(0, shape.positional - len(positional))
    unknown, twice = [], []
    for kw in shape.keywords:
        p = by_name.get(kw)
        if p is None or p.kind == "positional_only":
            if not has_varkw:
                unknown.append(kw)
            continue
        if kw in bound:
            twice.append(kw)
        bound.add(kw)
    missing = []
    if not shape.star_kwargs:
        for p in params:
            if p.kind in ("vararg", "varkw") or p.has_default or p.name in bound:
                continue
            if shape.star_args and p.kind in ("positional_only", "positional"):
                continue
            missing.append(p.name)
    return unknown, too_many, missing, twice


def renamed_keywords(unknown: list[str], params: list[Param], old_names: list[str] | None) -> dict[str, str]:
    """A keyword OLD took and NEW renamed: {old name: new name} when exactly one keyword
    of the call went and exactly one parameter is new."""
    renamed: dict[str, str] = {}
    if old_names is not None:
        gone = [kw for kw in unknown if kw in old_names]
        added = [p for p in param_names(params) if p not in old_names]
        if len(gone) == 1 and len(added) == 1:
            renamed[gone[0]] = added[0]
    return renamed


def shifted_positional(
    old_params: list[Param], new_params: list[Param], positional: int
) -> tuple[int, str, str] | None:
    """(index, OLD's name, NEW's name) of the first of a call's `positional` arguments that
    binds to another parameter in NEW than in OLD."""
    o_pos, n_pos = positional_names(old_params), positional_names(new_params)
    for i in range(min(positional, len(o_pos), len(n_pos))):
        if o_pos[i] != n_pos[i]:
            return i, o_pos[i], n_pos[i]
    return None


def left_out_defaults(params: list[Param], new_up_params: list[Param], shape: CallShape) -> Iterator[Param]:
    """The defaulted parameters of upstream's NEW definition that the call leaves out (and
    that the patched definition still has)."""
    for p in new_up_params:
        if p.kind in ("vararg", "varkw") or not p.has_default:
            continue  # required ones are "missing" (bind_problems)
        if p.name not in param_names(params):
            continue  # the patch itself removed it from the definition
        if shape.passes(params, p.name) is not False:
            continue
        yield p


def passing_sites(sites: list, params: list[Param], name: str) -> tuple[list, list]:
    """(the call sites whose passing of `name` is known, those that pass it)."""
    known = [s for s in sites if s.shape.passes(params, name) is not None]
    return known, [s for s in known if s.shape.passes(params, name)]


def accepts(params: list[Param], shape: CallShape) -> bool:
    """Whether a call of `shape` binds to `params` without a TypeError."""
    unknown, too_many, missing, twice = bind_problems(params, shape)
    return not (unknown or too_many or missing or twice)


def why_rejected(params: list[Param], shape: CallShape) -> str:
    """What of a call of `shape` the parameters `params` do not accept (one phrase)."""
    unknown, too_many, missing, twice = bind_problems(params, shape)
    if unknown:
        return ", ".join(f"`{k}=`" for k in unknown)
    if too_many:
        return f"{shape.positional} positional arguments"
    if missing:
        return "no " + ", ".join(f"`{p}`" for p in missing)
    return ", ".join(f"`{p}` twice" for p in twice)


def rejected_calls(
    patched: list[Param], upstream: list[Param], typed: list, by_name: list, name: str = ""
) -> list[tuple[Any, str, bool]]:
    """The call sites of NEW that bind to upstream's definition but not to the patched one,
    with what is rejected: `typed`, the sites that resolve to the definition; `by_name`, calls
    of a method called `name` on a receiver of unknown type, counted only when they pass a
    keyword that upstream's definition takes and the patched one does not (the link to it).
    Each as (site, what is rejected, found by name); the sites that resolve first, then the
    calls by name made from a definition of the same name (a delegating wrapper), then the rest."""
    patched_names = set(param_names(patched))
    link = {n for n in param_names(upstream) if n not in patched_names}
    out: list[tuple[Any, str, bool]] = []
    seen: set[tuple[str, int]] = set()
    for sites, linked in ((typed, False), (by_name, True)):
        for s in sites:
            key = (s.path, s.line)
            if key in seen or not accepts(upstream, s.shape) or accepts(patched, s.shape):
                continue
            if linked and not (set(s.shape.keywords) & link):
                continue
            seen.add(key)
            out.append((s, why_rejected(patched, s.shape), linked))

    def rank(item: tuple[Any, str, bool]) -> int:
        site, _, linked = item
        if not linked:
            return 0
        return 1 if site.symbol and site.symbol.rsplit(".", 1)[-1] == name else 2

    return sorted(out, key=rank)


def render_params(params: list[Param]) -> str:
    """`(self, indices, mamba_indices=None)`-like text of a parameter list (defaults elided)."""
    parts = []
    for p in params:
        prefix = {"vararg": "*", "varkw": "**"}.get(p.kind, "")
        parts.append(prefix + p.name + ("=..." if p.has_default else ""))
    return "(" + ", ".join(parts) + ")"
