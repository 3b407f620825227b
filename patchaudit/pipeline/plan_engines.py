"""The engines the plan asks for: one per (engine, version) its recipes name.

A recipe pins the engine it patches (`lmsysorg/sglang:v0.5.15.post1`, `git checkout
REV`), and a folder a recipe variable selects names another version
(`docker/patch/v0.5.9/`).  `wanted_engines` lists the (name, version) pairs the run's
patches are applied to; `engine_for` gives the engine of one pair, and
`complete_engines` adds what it finds to the run's engines (before they are opened).

`engine_for` is the one place an engine is found by its version: among the run's own
`--engine` / `engines` entries (the source's version, engine/versions.py), else by
`engine/resolve.py` (`engine-dirs`, an installed distribution, the user cache, and for a
recipe's own pin a `pip download`, never with `--offline`).  A version a sibling folder's
name gives (`docker/patch/v0.5.9/`) is looked for locally only: the build does not
install it, so nothing is downloaded for it.
"""

from __future__ import annotations

import os
from typing import Any

from patchaudit.config.settings import EngineSpec
from patchaudit.pipeline.plan import Plan, version_of

#: versions of engine sources read once per process: (name, source) -> version or None
_VERSIONS: dict[tuple[str, str], str | None] = {}


def spec_version(spec: EngineSpec) -> str | None:
    """The version of the package `spec` names in its source (None: unknown, or the
    source does not open: the run's own opening reports that)."""
    key = (spec.name, spec.source)
    if key not in _VERSIONS:
        from patchaudit.engine.sources import open_named_engine
        from patchaudit.engine.versions import engine_versions

        try:
            _VERSIONS[key] = engine_versions(open_named_engine(spec.source, name=spec.name)).get(spec.name)
        except Exception:  # EngineError, an unreadable archive: opened again (and reported) by the run
            _VERSIONS[key] = None
    return _VERSIONS[key]


def same_version(a: str | None, b: str | None) -> bool:
    from patchaudit.engine.versions import Version

    va, vb = Version.parse(a or ""), Version.parse(b or "")
    return va is not None and vb is not None and va == vb


def engine_for(
    plan: Plan, name: str, version: str, settings: Any, notes: list[str] | None = None, download: bool = True
) -> EngineSpec | None:
    """The engine `name` at `version` for the plan's patches: a configured engine
    (`--engine`, `[tool.patchaudit] engines`) of that name whose source is that version;
    else the one `engine/resolve.py` finds (`download`: may it run pip); else None (the
    patches of that version are not applied; `notes` gets the line that gives it)."""
    for spec in getattr(settings, "engines", None) or []:
        if spec.name == name and same_version(spec_version(spec), version):
            return spec
    from patchaudit.engine.resolve import resolve_engine

    got = resolve_engine(name, version, settings, notes, download=download)
    return EngineSpec(name, got.source, origin=got.origin) if got else None


def wanted_engines(plan: Plan, run: set[str] | None = None) -> list[tuple[str, str, bool]]:
    """(engine, version, pinned) of every version the plan gives the run's patches (`run`:
    absolute paths; None: all), in the plan's order: a recipe's version pin (pinned), a
    sibling folder's version (not pinned: no recipe installs it)."""
    out: list[tuple[str, str, bool]] = []
    for path, a in list(plan.assigned.items()) + list(plan.alternatives.items()):
        if run is not None and path not in run or not a.engine:
            continue
        pinned = a.via != "alternative"
        version = a.version() if pinned else version_of(a.folder or "")
        if not version:
            continue
        known = [i for i, (n, v, _) in enumerate(out) if n == a.engine and v == version]
        if not known:
            out.append((a.engine, version, pinned))
        elif pinned:
            out[known[0]] = (a.engine, version, True)
    return out


def complete_engines(plan: Plan, settings: Any, run: set[str] | None = None) -> list[str]:
    """Add to `settings.engines` an engine for each (name, version) the run's patches
    need that no engine of the run is (`engine_for`); the notes say what was added."""
    notes: list[str] = []
    lacking: list[str] = []  # versions of sibling folders found nowhere: one note for all
    given = [(s.name, spec_version(s)) for s in settings.engines or []]
    for name, version, pinned in wanted_engines(plan, run):
        if any(n == name and same_version(v, version) for n, v in given):
            continue
        spec = engine_for(plan, name, version, settings, notes if pinned else [], download=pinned)
        if spec is None:
            if not pinned:
                lacking.append(f"{name} {version}")
            continue
        if spec in settings.engines:
            continue
        settings.engines = [*settings.engines, spec]
        given.append((name, version))
        origin = f" ({spec.origin})" if spec.origin else ""
        notes.append(f"engine {name} {version} for the plan{origin}: {os.fspath(spec.source)}")
    if lacking:
        notes.append(
            f"no engine of the version folders' versions ({', '.join(lacking)}): their patches are not "
            "applied; put their wheels in an `engine-dirs` folder (or give `--engine NAME=SOURCE`) to check them"
        )
    return notes
