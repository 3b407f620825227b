"""The run of `patchaudit port PATCHES... --to NEW [--from OLD]`: the patches in the
build's order (the plan of the recipes given), the engines opened as `bump` opens
them, the port (`port.py`), the rules pass (`port_verify.py`) and, when it blames a
hunk, the port again with that hunk flagged (its change left out of the output)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable

from patchaudit.model.findings import FileError
from patchaudit.pipeline.port import Job, PortError, PortReport, port_patches

__all__ = ["PortOptions", "run_port"]


@dataclass
class PortOptions:
    paths: list[str]  # patches (and recipes: Dockerfiles, scripts, series)
    engine: str
    new: str
    old: str | None = None
    strip: int | None = None
    rules: bool = True  # the rules pass (the rules whose role is "port-check")
    progress: Callable[[str], None] | None = None
    repo: str | None = None  # the engine's repository, for a bare revision or the recipe's version
    resolve: Callable[[str, str | None], str] = field(default=lambda spec, repo: spec)


def _ordered(opts: PortOptions, settings: Any) -> tuple[list[str], dict[str, int], str | None, list[FileError]]:
    """(patches in the order applied, patch -> the recipe's fuzz, the recipe's version, errors)."""
    from patchaudit.inputs.discover import PATCH, discover
    from patchaudit.patching.appliers import GNU_PATCH
    from patchaudit.pipeline.plan import build_plan, version_of

    files, errors = discover(opts.paths, settings.exclude)
    patches = [os.path.abspath(f.path) for f in files if f.kind == PATCH]
    shown = {os.path.abspath(f.path): f.path for f in files}
    plan = build_plan(files, settings)
    assigned = {**plan.alternatives, **plan.assigned}
    chosen = {p: assigned[p] for p in patches if p in assigned}
    order = sorted(patches, key=lambda p: (0, chosen[p].position) if p in chosen else (1, patches.index(p)))
    fuzz = {}
    version = None
    for p in order:
        a = chosen.get(p)
        applier = a.applier if a is not None else None
        fuzz[shown[p]] = applier.max_fuzz if applier is not None and applier.tool == GNU_PATCH else 0
        if a is not None and version is None:
            version = a.version() or (version_of(a.folder) if a.folder else None)
    return [shown[p] for p in order], fuzz, version, list(errors) + list(plan.errors)


def run_port(opts: PortOptions, settings: Any) -> tuple[PortReport, list[str]]:
    """The port of the patches under `opts.paths`; (the report, the patches in order)."""
    from patchaudit.files.reader import ReadError, read_bytes
    from patchaudit.inputs.patches import read_patch
    from patchaudit.pipeline.bump import BumpError, open_pair

    order, fuzz, version, errors = _ordered(opts, settings)
    if not order:
        raise PortError("no patch files among the paths given")
    old_spec = opts.old
    if old_spec is None:
        if version is None:
            raise PortError("--from is not given and no recipe names the engine's version: give --from OLD")
        old_spec = opts.resolve(version, opts.repo)
    new_spec = opts.resolve(opts.new, opts.repo)
    patches = []
    for p in order:
        try:
            patches.append(read_patch(p, read_bytes(p, settings.max_file_size)))
        except (ReadError, OSError) as exc:
            raise PortError(f"{p}: cannot read: {exc}") from None
    try:
        old, new = open_pair(opts.engine, old_spec, new_spec)
    except BumpError as exc:
        raise PortError(str(exc)) from None
    try:
        job = Job(opts.engine, fuzz, settings, progress=opts.progress)
        names = [os.path.basename(p) for p in order]
        report = port_patches(patches, names, old, new, job, opts.strip)
        if opts.rules:
            _rules(report, opts, (old_spec, new_spec), settings, patches, names, old, new, job, order)
    finally:
        old.close()
        new.close()
    report.errors = errors + report.errors
    return report, order


def _rules(report, opts, specs, settings, patches, names, old, new, job, order) -> PortReport:
    from patchaudit.pipeline.bump import BumpError
    from patchaudit.pipeline.port_verify import port_check_codes, rules_pass

    if opts.progress is not None:
        opts.progress(f"rules pass ({', '.join(port_check_codes())})")
    try:
        forced = rules_pass(
            report.hunks,
            [(o.source, o.text) for o in report.outs],
            order,
            opts.engine,
            specs,
            settings,
            opts.strip,
        )
    except BumpError as exc:
        report.errors.append(FileError(order[0], f"the rules pass did not run: {exc}"))
        return report
    if forced:
        job.forced = {**job.forced, **forced}
        again = port_patches(patches, names, old, new, job, opts.strip)
        report.hunks, report.outs = again.hunks, again.outs
    report.rules_checked = True
    for r in report.hunks:
        if r.ported and r.status != "dropped" and not any(c.name == "rules" for c in r.checks):
            from patchaudit.pipeline.port_hunks import Check

            r.checks.append(Check("rules", True))
    return report
