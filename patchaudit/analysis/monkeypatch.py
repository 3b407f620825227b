"""Runtime monkey-patches of the engine: recognition and engine checks.

Most RL frameworks patch the inference engine from Python at run time rather
than with `.patch` files (`Scheduler.method = ours`, `setattr(module, "fn",
wrapped)`, `unittest.mock.patch("sglang.srt....", new)`, whole per-version
patch packages chosen by `sglang.__version__`).  They break on engine bumps
exactly like `.patch` files, so patchaudit treats them as patches:

* **recognition** (`collect`, `Collector` in `monkeypatch_collector.py`):
  libcst with ScopeProvider and QualifiedNameProvider.  A site is an
  assignment (or `setattr`, or a `mock.patch`/`patch.object`/`patch.multiple`
  call) whose target resolves, through the module's imports (aliases included,
  and local names bound to an engine object, `importlib.import_module("...")`,
  `sys.modules["..."]`, `getattr(X, "...")`), to an attribute of an engine
  package.  The metadata is computed only for files that can match
  (`monkeypatch_filter.py`: an engine package name in an import or a string
  literal, then a cheaper `ast` pass).
* **engine checks** (`check_site`): the target looked up in an engine source
  (`patchaudit/engine/lookups.py`, on the `ast` index of `engine/symbols.py`;
  a missing target is an issue), and the replacement's signature compared with
  the original's as callers see them, binding included.  Enclosing version
  gates (`if version.parse(sglang.__version__) >= ...`, `monkeypatch_gates.py`)
  are evaluated against the engine's version (`engine/versions.py`); a module
  of a per-version patch package (a path component like `v0_5_9`,
  `sglang_0_5_9` or `0.5.9`) is checked only against the engine of that version.
* **bump** (`changed_upstream`): a patched target whose definition changed
  between two engine versions.

This module finds facts (`Issue`: a kind of problem, a message, the lookup);
the rules (rules/_monkeypatch.py, PA203, PA206, PA207) decide what to report.
Nothing here imports or runs the code it reads.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from patchaudit.analysis.monkeypatch_filter import engine_packages, may_have_sites
from patchaudit.analysis.monkeypatch_gates import Gate
from patchaudit.analysis.monkeypatch_records import POSITIONAL, MonkeyPatch
from patchaudit.engine.definitions import Param
from patchaudit.engine.lookups import Lookup, definition_text, lookup
from patchaudit.engine.versions import DEFAULT_PACKAGES, engine_title, engine_versions, tag_matches, top_packages

# --------------------------------------------------------------------------
# recognition (libcst, imported only for a file that can match)


def collector_class():
    """The libcst visitor of recognition (importing it imports libcst)."""
    from patchaudit.analysis.monkeypatch_collector import Collector

    return Collector


def collect(
    path: str,
    text: str,
    packages: Iterable[str] = DEFAULT_PACKAGES,
    include_tests: bool = False,
    read: Callable[[str], str | None] | None = None,
) -> list[MonkeyPatch]:
    """Monkey-patches of the engine packages in one Python file.  Parses (and
    computes scope/qualified-name metadata) only when `can_match` says it can.
    Assignments in test files (stubs) are left out unless `include_tests`.  With
    `read` (the caller's guarded reader), the gates of the enclosing packages'
    `__init__.py` on importing this module are added (`monkeypatch_imports.py`)."""
    patches = _collect(path, text, tuple(packages), include_tests)
    return with_import_gates(patches, path, packages, read)


def with_import_gates(
    patches: list[MonkeyPatch], path: str, packages: Iterable[str], read: Callable[[str], str | None] | None
) -> list[MonkeyPatch]:
    """`patches` with the version gates the importing packages put on their module."""
    if not patches or read is None:
        return patches
    from patchaudit.analysis.monkeypatch_imports import import_gates

    gates = import_gates(path, packages, read)
    for mp in patches:
        mp.gates = tuple(mp.gates) + gates
    return patches


def _collect(path: str, text: str, packages: tuple[str, ...], include_tests: bool) -> list[MonkeyPatch]:
    if not may_have_sites(text, packages):
        return []
    import libcst as cst

    from patchaudit.inputs.pyast import over_limit
    from patchaudit.units.nesting import too_deep

    if over_limit(text) is not None:  # over max-parse-size: libcst would take gigabytes
        return []
    if too_deep(text, 200) is not None:  # libcst's native parser would crash the process (SIGSEGV)
        return []
    try:
        module = cst.parse_module(text)
    except (cst.ParserSyntaxError, RecursionError):
        return []
    col = collector_class()(path, packages, include_tests)
    try:  # positions computed only when a site is found (patchaudit/analysis/lazy_metadata.py)
        from patchaudit.analysis.lazy_metadata import metadata_wrapper

        wrapper = metadata_wrapper(module)
    except ImportError:  # pragma: no cover
        from libcst.metadata import MetadataWrapper

        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    try:
        wrapper.visit(col)
    except RecursionError:
        return []
    return col.patches


def collect_with(rule, module, packages: Iterable[str], include_tests: bool = False) -> list[MonkeyPatch]:
    """Recognition inside a rule's batched traversal: reuses the metadata the
    runner computed for the rule (the rule declares the collector's providers)."""
    col = collector_class()(rule.unit.path, tuple(packages), include_tests)
    col.metadata = rule.metadata
    module.visit(col)
    return col.patches


# --------------------------------------------------------------------------
# the checks (shared by the rules, inventory and bump)


#: the kinds of problem the checks find (the rules decide what to report)
TARGET_MISSING = "target-missing"  # the target does not exist in the engine
SIGNATURE_MISMATCH = "signature-mismatch"  # the replacement cannot accept the original's calls
CHANGED_UPSTREAM = "changed-upstream"  # the target's definition changed between two engines


@dataclass
class Issue:
    kind: str  # TARGET_MISSING | SIGNATURE_MISMATCH | CHANGED_UPSTREAM
    message: str
    patch: MonkeyPatch
    lookup: Lookup | None = None


def engine_contexts(engine: Any) -> list:
    """Every engine context of a run, from the one a unit carries."""
    if engine is None:
        return []
    es = getattr(engine, "engine_set", None)
    if es is not None and hasattr(es, "contexts"):
        return list(es.contexts())
    return [engine]


def contexts_for(mp: MonkeyPatch, ctxs: list, packages: Iterable[str] = ()) -> tuple[list, str]:
    """The engines a patch is checked against, and why others were left out:
    engines that have the target's package; for a module of a per-version
    patch package, only the engine of that version."""
    pkg = mp.top
    have = [c for c in ctxs if pkg in top_packages(c.source)]
    if not have:
        return [], f"no engine given for `{pkg}`"
    if mp.version_tag is not None:
        tag_pkg, tag = mp.version_tag
        if tag_pkg is not None and tag_pkg != pkg:
            return [], f"module is for {tag_pkg} {tag}"
        match = [c for c in have if tag_matches(tag, engine_versions(c.source).get(pkg))]
        if not match:
            known = ", ".join(sorted({engine_versions(c.source).get(pkg) or "?" for c in have}))
            return [], f"module is for {pkg} {tag}; engine(s) given: {known}"
        return match, ""
    return have, ""


def gated_off(mp: MonkeyPatch, ctx) -> Gate | None:
    """The enclosing condition that is false for this engine, if any: version
    comparisons against its version, `hasattr(EngineThing, "x")` against its source."""
    versions = engine_versions(ctx.source)

    def has(dotted: str) -> bool | None:
        return {"found": True, "missing": False}.get(lookup(ctx, dotted).state)

    for g in mp.gates:
        if g.evaluate(versions, has) is False:
            return g
    return None


def resolve_target(mp: MonkeyPatch, ctx) -> tuple[str, Lookup]:
    """The first candidate target that exists (or the first one's lookup)."""
    first: tuple[str, Lookup] | None = None
    for t in mp.targets:
        got = lookup(ctx, t)
        if got.state == "found":
            return t, got
        if first is None or (first[1].state == "missing" and got.state == "unknown"):
            first = (t, got)
    assert first is not None
    return first


def check_site(mp: MonkeyPatch, ctx, title: str | None = None) -> list[Issue]:
    """The problems of one patch against one engine: a missing target, a replacement
    whose signature does not fit."""
    if gated_off(mp, ctx) is not None:
        return []
    title = title or engine_title(ctx, mp.top)
    target, got = resolve_target(mp, ctx)
    if got.state == "unknown":
        got = _through_import(mp, ctx, target, got)
    if got.state == "unknown":
        return []
    if got.state == "missing":
        if mp.how == "added":
            return []
        hint = ""
        if got.suggestions:
            hint = f"; renamed to {' or '.join(f'`{s}`' for s in got.suggestions)}?"
        effect = {
            "assign": "the assignment adds an attribute the engine never uses, so the patch silently does nothing",
            "setattr": "setattr adds an attribute the engine never uses, so the patch silently does nothing",
            "__dict__": "the write to its namespace adds a name the engine never uses, so the patch silently "
            "does nothing",
        }.get(mp.form, "patch() raises AttributeError when it starts")
        if got.reason.startswith("module "):
            effect = "importing it fails"
        return [
            Issue(
                TARGET_MISSING,
                f"monkey-patch target `{target}` does not exist in {title}: {got.reason}{hint}; {effect}",
                mp,
                got,
            )
        ]
    return check_signature(mp, ctx, target, got)


def _through_import(mp: MonkeyPatch, ctx, target: str, got: Lookup) -> Lookup:
    """An "unknown" lookup (a package with a module-level `__getattr__`) decided by what the
    fork's import statement can reach: `import a.b.c` / `from a.b.c import X` needs the
    module `a.b.c` itself, which no `__getattr__` of `a.b` provides."""
    from patchaudit.engine.versions import package_dirs

    for module in sorted(mp.imported, key=len, reverse=True):
        if target != module and not target.startswith(module + "."):
            continue
        if ctx.index.module(module) is None and module not in package_dirs(ctx.source):
            return Lookup(
                "missing",
                reason=f"module `{module}` does not exist (the fork imports it by name, which a package's "
                f"`__getattr__` cannot provide)",
            )
        break
    return got


def check_signature(mp: MonkeyPatch, ctx, target: str, got: Lookup) -> list[Issue]:
    rep = mp.replacement
    if rep is None or got.kind != "function" or got.func is None:
        return []
    params, is_async, binding = rep.params, rep.is_async, rep.binding
    if rep.engine_ref is not None:
        other = lookup(ctx, rep.engine_ref)
        if other.state != "found" or other.func is None:
            return []
        f = other.func
        params, is_async = list(f.params), f.is_async
        binding = "function"
        if other.owner_is_class and f.is_classmethod:
            params, binding = params[1:], "unbound"
    if params is None:
        return []
    orig = got.func
    where = f"`{orig.qualname}` ({got.where} in {engine_title(ctx, mp.top)})"
    rname = f"`{rep.name}`" + (
        f" ({rep.note[len('defined at ') :]})"
        if rep.note.startswith("defined at ")
        else f" (line {rep.line})"
        if rep.line
        else ""
    )
    problems: list[str] = []
    on_class = got.owner_is_class
    o_view = list(orig.params)
    if on_class and not orig.is_static and o_view and o_view[0].kind in POSITIONAL:
        o_view = o_view[1:]
    r_view = list(params)
    if on_class and binding in ("function", "class"):
        if r_view and r_view[0].kind in POSITIONAL:
            r_view = r_view[1:]
        elif not any(p.kind == "vararg" for p in r_view):
            problems.append("the replacement takes no parameter for the instance the engine binds it to")
    if on_class and orig.is_static and binding == "function":
        problems.append(
            "the original is a @staticmethod: a plain function set on the class is bound and "
            "receives the instance as its first argument; wrap it in staticmethod()"
        )
    elif on_class and orig.is_classmethod and binding == "function":
        problems.append(
            "the original is a @classmethod: a plain function set on the class is not bound to "
            "the class; wrap it in classmethod()"
        )
    if not problems:
        problems = compare_params(o_view, r_view)
    if is_async is not None and orig.is_async != is_async:
        if orig.is_async:
            problems.append("the original is async (callers `await` it) but the replacement is a plain function")
        else:
            problems.append(
                "the original is a plain function but the replacement is async (callers get a coroutine, never awaited)"
            )
    if not problems:
        return []
    msg = f"replacement {rname} for {where} cannot accept the calls the original accepts: {problems[0]}"
    if len(problems) > 1:
        msg += f" (and {len(problems) - 1} more: {'; '.join(problems[1:])})"
    return [Issue(SIGNATURE_MISMATCH, msg, mp, got)]


def compare_params(orig: list[Param], repl: list[Param]) -> list[str]:
    """Why calls valid for `orig` can fail on `repl` (caller views: bound
    parameters removed).  `*args`/`**kwargs` accept everything."""
    out: list[str] = []
    o_pos = [p for p in orig if p.kind in POSITIONAL]
    r_pos = [p for p in repl if p.kind in POSITIONAL]
    r_var = any(p.kind == "vararg" for p in repl)
    r_kw = any(p.kind == "varkw" for p in repl)
    r_names = {p.name: p for p in repl if p.kind in ("positional", "keyword_only")}
    for i, p in enumerate(o_pos):
        pos_ok = i < len(r_pos) or r_var
        name_ok = p.kind == "positional_only" or p.name in r_names or r_kw
        if not pos_ok and r_kw and p.has_default and p.kind == "positional":
            continue  # `**kwargs` passed on takes it by keyword, the way callers pass an optional one
        if not pos_ok and p.name not in r_names and not r_kw:
            out.append(f"parameter `{p.name}` of the original is missing from the replacement")
        elif not name_ok:
            if i < len(r_pos):
                out.append(
                    f"parameter `{p.name}` of the original is missing from the replacement (position "
                    f"{i + 1} is `{r_pos[i].name}`: a call passing `{p.name}=` fails)"
                )
            else:
                out.append(f"parameter `{p.name}` of the original is missing from the replacement")
        elif not pos_ok:
            out.append(
                f"parameter `{p.name}` (position {i + 1}) of the original cannot be passed positionally "
                f"to the replacement"
            )
        elif (
            i < len(r_pos)
            and p.kind == "positional"
            and r_pos[i].name != p.name
            and p.name in r_names
            and not (r_kw and p.has_default and r_pos[i].has_default)  # optional ones go by keyword
        ):
            added = [q.name for q in o_pos[:i] if q.name not in r_names]
            cause = (
                f" (the original has {', '.join(f'`{n}`' for n in added)} before it, which the replacement lacks)"
                if added
                else ""
            )
            out.append(
                f"parameter `{p.name}` is at position {i + 1} in the original, where the replacement "
                f"has `{r_pos[i].name}`{cause}: positional calls bind the wrong parameter"
            )
    for p in orig:
        if p.kind == "keyword_only" and p.name not in r_names and not r_kw:
            out.append(f"keyword parameter `{p.name}` of the original is missing from the replacement")
    if any(p.kind == "vararg" for p in orig) and not r_var:
        out.append("the original accepts extra positional arguments (*args), the replacement does not")
    if any(p.kind == "varkw" for p in orig) and not r_kw:
        out.append("the original accepts any keyword argument (**kwargs), the replacement does not")
    o_by_name = {p.name: p for p in orig}
    for i, p in enumerate(repl):
        if p.has_default or p.kind in ("vararg", "varkw"):
            continue
        op = o_by_name.get(p.name)
        if op is None:
            # a required positional slot the original also always fills is not an addition
            if p.kind in POSITIONAL and i < len(o_pos) and not o_pos[i].has_default:
                continue  # every call fills this slot; a name mismatch is reported above
            out.append(f"the replacement requires parameter `{p.name}`, which the original does not have")
        elif op.has_default:
            out.append(f"the replacement makes `{p.name}` required (it has a default in the original)")
    return out


# --------------------------------------------------------------------------
# rule support: one recognition and one check per unit, shared by the monkey-patch rules


def unit_issues(
    rule, module, include_tests: bool = False, read: Callable[[str], str | None] | None = None
) -> list[Issue]:
    """Issues of the unit a rule runs on (cached on the unit)."""
    unit = rule.unit
    cached = getattr(unit, "_monkeypatch_issues", None)
    if cached is not None:
        return cached
    settings = getattr(rule.context, "settings", None)
    packages = engine_packages(settings)
    patches = with_import_gates(collect_with(rule, module, packages, include_tests), unit.path, packages, read)
    issues: list[Issue] = []
    ctxs = engine_contexts(getattr(unit, "engine", None))
    for mp in patches:
        chosen, _ = contexts_for(mp, ctxs, packages)
        for ctx in chosen:
            issues.extend(check_site(mp, ctx))
    try:
        unit._monkeypatch_issues = issues
    except AttributeError:  # pragma: no cover
        pass
    return issues


def changed_upstream(mp: MonkeyPatch, old_ctx, new_ctx) -> Issue | None:
    """A patch whose target exists in both versions and whose definition's text differs."""
    t_old, old = resolve_target(mp, old_ctx)
    t_new, new = resolve_target(mp, new_ctx)
    if old.state != "found" or new.state != "found":
        return None
    a, b = definition_text(old_ctx, old), definition_text(new_ctx, new)
    if a is None or b is None or a == b:
        return None
    diff = [
        l
        for l in difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="", n=0)
        if l[:1] in "+-" and not l.startswith(("---", "+++"))
    ]
    added = sum(1 for l in diff if l.startswith("+"))
    removed = len(diff) - added
    old_title, new_title = engine_title(old_ctx, mp.top), engine_title(new_ctx, mp.top)
    moved = "" if (old.path, old.line) == (new.path, new.line) else f", now at {new.where}"
    verb = {"wrapped": "wraps", "added": "adds", "mocked": "mocks"}.get(mp.how, "replaces")
    return Issue(
        CHANGED_UPSTREAM,
        f"`{t_new}` changed upstream between {old_title} and {new_title} "
        f"(+{added}/-{removed} lines{moved}); this monkey-patch {verb} it: re-check the "
        f"replacement against the new definition",
        mp,
        new,
    )
