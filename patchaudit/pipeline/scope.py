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


def engine_scope(plan: Plan, engines: Any, run: set[str] | None = None) -> Scope:
    """Per patch: ("engine", NAME, Applier, EARLIER, K) to check it in exact mode against
    engine K of the run (named NAME) only, with the recipe's command, on the set's
    EARLIER patches; ("skip", why) to leave it to fragment mode.  Every patch of the plan
    gets its entry (a patch of the run is stacked on the others); the warnings count the
    run's own (`run`: absolute paths; None: all).  Without a recipe or binding (an empty
    plan) nothing is scoped: today's behaviour."""
    out = Scope()
    if engines is None:
        return out
    mine = (lambda p: True) if run is None else (lambda p: p in run)
    if plan.empty:
        # no recipe: each patch goes to the engine its paths match best (units/engines.py),
        # except another project's patch, left out here (the per-file pass does not ask
        # the engines again) and said once
        foreign = [p for p in plan.unnamed if mine(p) and _foreign_patch(p, engines)]
        for p in foreign:
            out.entries[p] = ("skip", "another project's patch: its files are in no engine given")
        if foreign:
            out.warnings.append(
                f"{len(foreign)} patch{'es' if len(foreign) != 1 else ''} whose files are in no engine given and whose "
                f"paths name none of its packages (another project's): checked without the engine "
                f"({', '.join(plan.shown.get(p, p) for p in foreign[:3])}{', ...' if len(foreign) > 3 else ''})"
            )
        return out
    given = _given(engines)
    said = _Said()
    for path, a in list(plan.assigned.items()) + list(plan.alternatives.items()):
        out.entries[path] = _entry(plan, path, a, given, said if mine(path) else _Said())
    _stack(plan, out)
    unmatched = [p for p in plan.unnamed if mine(p) and _strict_engine(p, engines, out) is None]
    if unmatched:
        out.warnings.append(
            f"{len(unmatched)} patch{'es' if len(unmatched) != 1 else ''} no recipe or binding names and whose "
            f"files are not all in one engine given (the strict path rule): not applied "
            f"({', '.join(plan.shown.get(p, p) for p in unmatched[:3])}{', ...' if len(unmatched) > 3 else ''})"
        )
    out.warnings.extend(said.lines(given))
    return out


def _given(engines: Any) -> list[tuple[int, str, str | None]]:
    """(index, name, version) of each engine of the run."""
    from patchaudit.engine.versions import engine_versions

    out = []
    for k, (src, _) in enumerate(engines.engines):
        try:
            versions = engine_versions(getattr(src, "wrapped", src))
        except Exception:
            versions = {}
        out.append((k, src.name, versions.get(src.name)))
    return out


@dataclass
class _Said:
    """What the run says about the patches it does not apply (counted per engine, folder, pin)."""

    missing: dict[str, list[str]] = field(default_factory=dict)  # engine -> versions the plan names
    other: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # (engine, variable) -> folders
    pinned: dict[tuple[str, str], int] = field(default_factory=dict)
    applied: dict[tuple[str, str], int] = field(default_factory=dict)  # (folder, engine title) -> patches

    def lines(self, given: list[tuple[int, str, str | None]]) -> list[str]:
        out = []
        for name, versions in sorted(self.missing.items()):
            n = len(versions)
            pins = sorted({v for v in versions if v})
            how = f"give --engine {name}=PATH" + (f" (the recipe pins {', '.join(pins)})" if pins else "")
            out.append(f"no engine given for {name} ({n} patch{'es' if n != 1 else ''}): not applied; {how}")
        for (name, var), folders in sorted(self.other.items()):
            shown = ", ".join(sorted(set(folders)))
            have = ", ".join(v or "(no version)" for _, e, v in given if e == name)
            n = len(folders)
            out.append(
                f"{n} {name} patch{'es' if n != 1 else ''} of other {var} folders ({shown}) not applied: "
                f"no engine of their version given (the engine given is {name} {have}); give "
                f"--engine {name}=PATH of that version to apply them"
            )
        for (folder, title), n in sorted(self.applied.items()):
            out.append(f"{n} patch{'es' if n != 1 else ''} of the folder {folder} applied to {title}, its version")
        for (name, why), n in sorted(self.pinned.items()):
            have = ", ".join(v or "(no version)" for _, e, v in given if e == name)
            out.append(
                f"{n} {name} patch{'es' if n != 1 else ''} not applied: {why}, the engine given is {name} {have}"
            )
        return out


def _entry(plan: Plan, path: str, a: Any, given: list[tuple[int, str, str | None]], said: _Said) -> tuple:
    """The scope entry of one planned patch (engine_scope), counting what is not applied."""
    from patchaudit.pipeline.plan_engines import same_version

    mine = [(k, v) for k, name, v in given if name == a.engine]
    if not mine:
        pin = "" if a.via == "alternative" else a.version() or next((p[:12] for p in a.pins), "")
        said.missing.setdefault(a.engine or "?", []).append(pin)
        return ("skip", f"no engine given for {a.engine}")
    if a.via == "alternative":
        k = next((k for k, v in mine if same_version(version_of(a.folder or ""), v)), None)
        if k is None:
            var = a.selector[0] if a.selector else "folder"
            said.other.setdefault((a.engine, var), []).append(a.folder or "")
            return ("skip", f"the {var} folder {a.folder}, whose {a.engine} engine was not given")
        if k != mine[0][0]:  # not the run's first engine of that name: say which one it went to
            folder = f"{a.selector[0]}={a.folder}" if a.selector else a.folder or "?"
            key = (folder, f"{a.engine} {dict(mine)[k]}")
            said.applied[key] = said.applied.get(key, 0) + 1
        return ("engine", a.engine, a.applier, (), k)
    named = [v for v in (version_of(p) for p in a.pins) if v]
    if not a.pins:
        return ("engine", a.engine, a.applier, (), mine[0][0])
    k = next((k for k, v in mine if any(same_version(n, v) for n in named)), None)
    if k is None:
        what = ", ".join(named) if named else ", ".join(p[:12] for p in a.pins)
        why = f"{a.recipe} pins {what}"
        said.pinned[(a.engine, why)] = said.pinned.get((a.engine, why), 0) + 1
        return ("skip", f"{a.recipe} pins {a.engine} {what}, the engine given is {mine[0][1] or 'unversioned'}")
    return ("engine", a.engine, a.applier, (), k)


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
    out.entries[path] = ("engine", ctx.source.name, DEFAULT_APPLIER, (), ctx.engine_index)
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
            # on the same engine only (one set of one checkout: its patches' pins agree)
            under = tuple(q for q in earlier if out.entries[q][4:] == entry[4:])
            if under:
                out.entries[p] = (*entry[:3], under, *entry[4:])
            earlier.append(p)
