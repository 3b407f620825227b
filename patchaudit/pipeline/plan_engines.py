"""The engines the plan asks for: one per (engine, version) its recipes name.

A recipe pins the engine it patches (`lmsysorg/sglang:v0.5.15.post1`, `git checkout
REV`), and a folder a recipe variable selects names another version
(`docker/patch/v0.5.9/`).  `wanted_engines` lists the (name, version) pairs the run's
patches are applied to; `engine_for` gives the engine of one pair, and
`complete_engines` adds what it finds to the run's engines (before they are opened).

`engine_for` is the one place an engine is found by its version: today among the
run's own `--engine` / `engines` entries (the source's version, engine/versions.py);
a resolver of `NAME==VERSION` (a folder of wheels, an installed distribution, a
download) is wired in here.
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


def engine_for(plan: Plan, name: str, version: str, settings: Any) -> EngineSpec | None:
    """The engine `name` at `version` for the plan's patches: a configured engine
    (`--engine`, `[tool.patchaudit] engines`) of that name whose source is that version;
    else None (the patches of that version are not applied, and the run says so)."""
    for spec in getattr(settings, "engines", None) or []:
        if spec.name == name and same_version(spec_version(spec), version):
            return spec
    # the resolver of NAME==VERSION (engine-dirs, an installed distribution, the user
    # cache, pip download) answers here: `got = resolve_engine(name, version, settings)`,
    # `return EngineSpec(name, got.source) if got else None`
    return None


def wanted_engines(plan: Plan, run: set[str] | None = None) -> list[tuple[str, str]]:
    """(engine, version) of every pin the plan gives the run's patches (`run`: absolute
    paths; None: all), in the plan's order: a recipe's version pin, a sibling folder's
    version."""
    out: list[tuple[str, str]] = []
    for path, a in list(plan.assigned.items()) + list(plan.alternatives.items()):
        if run is not None and path not in run or not a.engine:
            continue
        version = version_of(a.folder or "") if a.via == "alternative" else a.version()
        if version and (a.engine, version) not in out:
            out.append((a.engine, version))
    return out


def complete_engines(plan: Plan, settings: Any, run: set[str] | None = None) -> list[str]:
    """Add to `settings.engines` an engine for each (name, version) the run's patches
    need that no engine of the run is (`engine_for`); the notes say what was added."""
    notes: list[str] = []
    given = [(s.name, spec_version(s)) for s in settings.engines or []]
    for name, version in wanted_engines(plan, run):
        if any(n == name and same_version(v, version) for n, v in given):
            continue
        spec = engine_for(plan, name, version, settings)
        if spec is None or spec in settings.engines:
            continue
        settings.engines = [*settings.engines, spec]
        given.append((name, version))
        notes.append(f"engine {name} {version} for the plan: {os.fspath(spec.source)}")
    return notes
