"""Exact mode's scope: what each patch of a run is checked against, from the plan.

`engine_scope(plan, engines)` turns the plan (pipeline/plan.py) into one entry per patch:
the engine it is applied to, with the recipe's command and the patches applied before it
(the recipe's order, `stacks`), or why it is left to fragment mode; and the warnings the
run prints for what it does not apply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from patchaudit.patching.appliers import DEFAULT_APPLIER
from patchaudit.pipeline.plan import MAX_RECIPE_FILE, Plan, stacks, version_of


@dataclass
class Scope:
    """What exact mode does with each patch of a run (`Settings.patch_scope`), and what the
    run says about the patches it does not apply (`warnings`)."""

    entries: dict[str, tuple] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def engine_scope(plan: Plan, engines: Any) -> Scope:
    """Per patch: ("engine", NAME, Applier) to check it in exact mode against engine NAME
    only, with the recipe's command; ("skip", why) to leave it to fragment mode.  Without a
    recipe or binding (an empty plan) nothing is scoped: today's behaviour."""
    from patchaudit.engine.versions import Version, engine_versions

    out = Scope()
    if engines is None:
        return out
    if plan.empty:
        # no recipe: each patch goes to the engine its paths match best (units/engines.py),
        # except another project's patch, left out here (the per-file pass does not ask
        # the engines again) and said once
        foreign = [p for p in plan.unnamed if _foreign_patch(p, engines)]
        for p in foreign:
            out.entries[p] = ("skip", "another project's patch: its files are in no engine given")
        if foreign:
            out.warnings.append(
                f"{len(foreign)} patch{'es' if len(foreign) != 1 else ''} whose files are in no engine given and whose "
                f"paths name none of its packages (another project's): checked without the engine "
                f"({', '.join(plan.shown.get(p, p) for p in foreign[:3])}{', ...' if len(foreign) > 3 else ''})"
            )
        return out
    given: dict[str, str | None] = {}
    for src, _ in engines.engines:
        try:
            versions = engine_versions(getattr(src, "wrapped", src))
        except Exception:
            versions = {}
        given[src.name] = versions.get(src.name)
    missing: dict[str, int] = {}
    other: dict[tuple[str, str], list[str]] = {}
    pinned: dict[tuple[str, str], int] = {}

    def same(a: str | None, b: str | None) -> bool:
        va, vb = Version.parse(a or ""), Version.parse(b or "")
        return va is not None and vb is not None and va == vb

    for path, a in list(plan.assigned.items()) + list(plan.alternatives.items()):
        if a.engine not in given:
            missing[a.engine or "?"] = missing.get(a.engine or "?", 0) + 1
            out.entries[path] = ("skip", f"no engine given for {a.engine}")
            continue
        have = given[a.engine]
        if a.via == "alternative":
            if same(version_of(a.folder or ""), have):
                out.entries[path] = ("engine", a.engine, a.applier)
            else:
                other.setdefault((a.engine, a.selector[0] if a.selector else "folder"), []).append(a.folder or "")
                out.entries[path] = ("skip", f"{a.folder}: another {a.selector[0] if a.selector else 'folder'}")
            continue
        named = [v for v in (version_of(p) for p in a.pins) if v]
        if a.pins and not any(same(v, have) for v in named):
            what = ", ".join(named) if named else ", ".join(p[:12] for p in a.pins)
            pinned[(a.engine, f"{a.recipe} pins {what}")] = pinned.get((a.engine, f"{a.recipe} pins {what}"), 0) + 1
            out.entries[path] = (
                "skip",
                f"{a.recipe} pins {a.engine} {what}, the engine given is {have or 'unversioned'}",
            )
            continue
        out.entries[path] = ("engine", a.engine, a.applier)
    _stack(plan, out)
    unmatched = [p for p in plan.unnamed if _strict_engine(p, engines, out) is None]
    if unmatched:
        out.warnings.append(
            f"{len(unmatched)} patch{'es' if len(unmatched) != 1 else ''} no recipe or binding names and whose "
            f"files are not all in one engine given (the strict path rule): not applied "
            f"({', '.join(plan.shown.get(p, p) for p in unmatched[:3])}{', ...' if len(unmatched) > 3 else ''})"
        )
    for name, n in sorted(missing.items()):
        out.warnings.append(f"no engine given for {name} ({n} patch{'es' if n != 1 else ''}): not applied")
    for (name, var), folders in sorted(other.items()):
        shown = ", ".join(sorted(set(folders)))
        out.warnings.append(
            f"{len(folders)} {name} patch{'es' if len(folders) != 1 else ''} of other {var} folders "
            f"({shown}) not applied to {name} {given[name] or ''}".rstrip()
        )
    for (name, why), n in sorted(pinned.items()):
        out.warnings.append(
            f"{n} {name} patch{'es' if n != 1 else ''} not applied: {why}, the engine given is "
            f"{name} {given[name] or '(no version)'}"
        )
    return out


def _foreign_patch(path: str, engines: Any) -> bool:
    """Whether the patch is another project's: `EngineSet.for_patch` gives it no engine."""
    from patchaudit.files.reader import read_bytes
    from patchaudit.inputs.patches import read_patch

    try:
        patch = read_patch(path, read_bytes(path, MAX_RECIPE_FILE * 64))
        return any(s.raw_path for s in patch.sections) and engines.for_patch(patch) is None
    except Exception:  # the per-file pass reports a patch it cannot read, or an engine failing on it
        return False


def _strict_engine(path: str, engines: Any, out: Scope) -> str | None:
    """The engine a patch no recipe names goes to by its paths alone: the best-matching
    engine, if every file the patch changes (not creates) is there under the same path;
    else None (the patch is left out of exact mode)."""
    from patchaudit.files.reader import read_bytes
    from patchaudit.inputs.patches import read_patch

    try:
        patch = read_patch(path, read_bytes(path, MAX_RECIPE_FILE * 64))
        ctx = engines.for_patch(patch)
    except Exception:  # the per-file pass reports a patch it cannot read
        return None
    if ctx is None:
        out.entries[path] = ("skip", "its files are in no engine given")
        return None
    for section in patch.sections:
        if section.is_binary or (section.is_new and section.source_path is None):
            continue
        target = ctx.engine_path(section.raw_path)
        if not target or not ctx.source.has(target):
            out.entries[path] = ("skip", f"{section.path} is not in engine {ctx.source.name}")
            return None
    out.entries[path] = ("engine", ctx.source.name, DEFAULT_APPLIER)
    return ctx.source.name


def _stack(plan: Plan, out: Scope) -> None:
    """A patch of a recipe's set is checked on the engine with the set's earlier patches
    applied (units/stacked.py): the scope entry names them, in the recipe's order.  The
    alternatives of a sibling folder stack the same way, on that folder's earlier ones."""
    for _, set_id, paths in stacks(plan):
        earlier: list[str] = []
        for p in paths:
            entry = out.entries.get(p)
            a = plan.assigned.get(p) or plan.alternatives.get(p)
            if entry is None or entry[0] != "engine" or a is None or a.set_id != set_id:
                continue
            if earlier:
                out.entries[p] = (*entry[:3], tuple(earlier))
            earlier.append(p)
