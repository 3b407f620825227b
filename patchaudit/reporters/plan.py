"""`patchaudit plan`: the build's patch plan as text or JSON (pipeline/plan.py)."""

from __future__ import annotations

from patchaudit.model.escape import json_text, safe


def plan_json(plan) -> dict:
    def entry(a) -> dict:
        return {
            "patch": a.path,
            "engine": a.engine,
            "applier": a.applier.describe(),
            "via": a.via,
            "recipe": a.recipe,
            "line": a.line,
            "position": a.position,
            "version": a.version(),
            "pins": list(a.pins),
            "folder": a.folder,
        }

    sets = []
    for s in plan.sets:
        sets.append(
            {
                "recipe": s.recipe,
                "line": s.line,
                "engine": s.engine,
                "checkout": s.cwd,
                "patches": [entry(a) for a in _members(plan, s)],
            }
        )
    return {
        "sets": sets,
        "bound": [entry(a) for a in plan.assigned.values() if a.via == "binding"],
        "alternatives": [entry(a) for a in plan.alternatives.values()],
        "unnamed": [plan.shown.get(p, p) for p in plan.unnamed],
        "sed": [
            {"recipe": st.recipe, "line": st.line, "script": st.script, "files": st.files, "engine": engine}
            for st, engine in plan.seds
        ],
    }


def render_plan(plan, fmt: str = "text") -> str:
    if fmt == "json":
        return json_text(plan_json(plan)) + "\n"  # `##[` and controls as JSON escapes
    out: list[str] = []
    for s in plan.sets:
        members = _members(plan, s)
        if not members:
            continue
        version = next((a.version() for a in members if a.version()), None)
        pins = members[0].pins
        pinned = version or (pins[-1][:12] if pins else "version not named")
        if (
            members[0].via == "recipe"
            and members[0].path
            and members[0].recipe
            and members[0].recipe.endswith("series")
        ):
            out.append(f"{s.recipe}: quilt series (order only; the engine is the one the paths match)")
        else:
            out.append(f"{s.recipe}:{s.line}: {s.engine} ({pinned}) in {s.cwd}")
        for k, a in enumerate(members, 1):
            out.append(f"  {k}. {a.path}  [{a.applier.describe()}]  line {a.line}")
    bound = [a for a in plan.assigned.values() if a.via == "binding"]
    if bound:
        out.append("bound by the configuration:")
        out.extend(f"  {a.path} -> {a.engine} ({a.recipe}:{a.line})" for a in bound)
    if plan.alternatives:
        out.append("other folders of a recipe variable (applied only to an engine of that version):")
        for a in plan.alternatives.values():
            var = a.selector[0] if a.selector else "folder"
            out.append(f"  {a.path} -> {a.engine} ({var}={a.folder}, {a.recipe}:{a.line})")
    # the sed edits the audit reads: of Python files (units/sed.py); a system file's are not the engine's
    seds = [(st, engine) for st, engine in plan.seds if any(f.endswith(".py") for f in st.files)]
    if seds:
        out.append("sed edits of Python files:")
        for st, engine in seds:
            of = engine or "no engine named: the file's path picks one"
            out.append(f"  {st.recipe}:{st.line}: sed {st.script!r} on {', '.join(st.files)} ({of})")
    if plan.unnamed:
        out.append("patches no recipe or binding assigns to an engine:")
        out.extend(f"  {plan.shown.get(p, p)}" for p in plan.unnamed)
    if not out:
        out.append("no recipe applies a patch here")
    return "\n".join(safe(line) for line in out) + "\n"


def _members(plan, s) -> list:
    """The patches of a set, in order (a series' patches are ordered but keep no engine)."""
    out = []
    for p in s.paths:
        a = plan.assigned.get(p) or plan.ordered.get(p)
        if a is not None and a.set_id == s.set_id:
            out.append(a)
    return out
