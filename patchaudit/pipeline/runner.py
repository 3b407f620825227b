"""The check pipeline: inputs -> units -> rules -> findings, for a whole run.

`run_check` discovers the files, opens the run's engines and tokenizer
(`context.py`), has `parallel.scan` run the per-file job on each of them
(`analyse.analyse_file`: read, build units, run the selected rules
(`run_rules.py`), map reports to findings, apply inline suppressions
(`suppression.py`)), then runs the rules that see the whole set of patches
(`patch_set.py`).  The per-file job is a plain function of picklable arguments
so it can run in a worker process, and its result depends only on the file's
content and the run's settings, which is what makes the per-file cache sound.
"""

from __future__ import annotations

import os
from typing import Any

from patchaudit.config.settings import Settings
from patchaudit.inputs.discover import PATCH
from patchaudit.model.findings import Finding
from patchaudit.pipeline.context import engine_warnings, load_tokenizer, open_engines
from patchaudit.pipeline.plan_inputs import PLAN_KINDS
from patchaudit.pipeline.results import RunError, RunResult, unique_errors

__all__ = ["run_check"]


def run_check(paths: list[str], settings: Settings, progress: Any = None, replay: bool = False) -> RunResult:
    """Check `paths`; `progress(total)`, if given, is called once per finished file.

    The per-file work (`analyse_file`) is scheduled by `patchaudit.pipeline.parallel`:
    result cache, pre-filter on the libcst-free rule index, worker processes.
    Results come back in file order whatever the number of jobs, and a run
    that parses nothing never imports libcst or a rule module.

    `replay`: with the cache on, a run whose every input is unchanged since a recorded
    run returns that run's result, and a run is recorded (pipeline/replay.py).
    """
    from patchaudit import __version__
    from patchaudit.config.registry import rule_index, select_codes
    from patchaudit.pipeline.cache import cache_root, ensure_root

    root = cache_root(settings) if settings.cache else None
    if root is not None and not ensure_root(root):
        root = None
    index = rule_index(str(root / __version__) if root is not None else None)
    try:
        codes = select_codes(index, settings.select, settings.ignore, settings.extend_select)
    except KeyError as exc:
        raise RunError(f"unknown rule code or prefix {exc.args[0]!r} (see `patchaudit rules`)") from None
    # an engine's or a tokenizer's files are read in workers and archives: not observed
    if not replay or root is None or settings.engines or settings.tokenizer:
        return _check(paths, settings, [index[c] for c in codes], codes, root, progress)
    from patchaudit.files.observe import observing
    from patchaudit.pipeline.cache import run_key
    from patchaudit.pipeline.replay import Replay

    recorded = Replay(root, run_key(settings, codes), paths)
    got = recorded.result()
    if got is not None:
        return got
    with observing() as seen:
        result = _check(paths, settings, [index[c] for c in codes], codes, root, progress)
    if not settings.engines:  # engines the plan found (pipeline/plan_engines.py) are not observed
        recorded.record(seen, result)
    return result


def _check(paths: list[str], settings: Settings, metas: list, codes: list[str], root: Any, progress: Any) -> RunResult:
    """One run: every file it needs read once (files/reader.py `reading_once`), shared by the
    whole-repository pre-pass, the scan and the patch-set rules."""
    from patchaudit.files.reader import reading_once

    with reading_once():
        return _run(paths, settings, metas, codes, root, progress)


def _run(paths: list[str], settings: Settings, metas: list, codes: list[str], root: Any, progress: Any) -> RunResult:
    from patchaudit.pipeline.cache import ResultCache
    from patchaudit.pipeline.parallel import scan, scan_jobs
    from patchaudit.pipeline.replay import discovered

    files, errors = discovered(paths, settings.exclude, root)
    # the workers are decided once, before this run forks any: a reading of the idle CPUs
    # taken later could count the pre-pass's own workers as they exit
    jobs = scan_jobs(settings)
    if settings.whole_repository and any(f.kind == "python" for f in files):  # PA102's summaries
        from patchaudit.pipeline.repo_index import prepare_repo

        metas = prepare_repo(paths, files, settings, metas, root, jobs, errors)
    # the build's recipes and the configuration's bindings, from the project root: which
    # patch goes to which engine, in which order, with which command (pipeline/plan.py)
    planned = any(f.kind in PLAN_KINDS for f in files)
    plan, extra, said = _plan(paths, files, settings, root, errors) if planned else (None, [], [])
    engines = open_engines(settings)
    tokenizer = load_tokenizer(settings)
    # values of the configuration refused (a limit above its hard cap): errors of the run
    result = RunResult(errors=list(settings.problems) + list(errors), files=len(files))
    result.warnings.extend(engine_warnings(engines))
    if plan is not None:
        from patchaudit.pipeline.scope import engine_scope

        run = {os.path.abspath(f.path) for f in files}
        scope = engine_scope(plan, engines, run)
        settings.patch_scope = scope.entries
        result.warnings.extend(scope.warnings + said)
    # after the plan: in exact mode the key covers each patch's scope (pipeline/exact_cache.py)
    cache = ResultCache.for_run(settings, codes, engines) if root is not None else None
    done = (lambda: progress(len(files))) if progress is not None else None
    for fr, hit in scan(files, settings, metas, engines, tokenizer, cache, jobs=jobs, on_done=done):
        result.findings.extend(fr.findings)
        result.errors.extend(fr.errors)
        result.parsed += 0 if hit else fr.parsed  # a cached result was parsed by an earlier run
        result.cached += hit
        result.hunks.extend(fr.hunks)
        if fr.hunks and hasattr(progress, "note"):  # exact mode: the patch, its engine, its applier
            h = fr.hunks[0]
            engine = h.get("engine_title") or h["engine"]
            progress.note(f"{h['patch']} -> {engine}" + (f", {h['applier']}" if h.get("applier") else ""))
    result.warnings.extend(_outside_notes(result.hunks))
    if settings.whole_repository:
        from patchaudit.pipeline.repo_index import forget_kept

        forget_kept()  # the pre-pass's facts and modules kept for the scan: it is done
    # one refused engine file is one error of the run, however many worker processes met it
    result.errors = unique_errors(result.errors)
    if cache is not None:
        cache.save()
    # rules that see the whole set of patches (PA304): once per run, after the per-file
    # pass; with no patch file among `files` they have nothing to see
    if any(m.patch_set for m in metas) and any(f.kind == PATCH for f in files):
        from patchaudit.pipeline.patch_set import run_patch_set_rules

        run_patch_set_rules(files, [m.load() for m in metas], settings, result, plan=plan, others=extra)
    # `sed -i` edits of engine files in build scripts (units/sed.py): once per run
    if plan is not None and plan.seds:
        from patchaudit.pipeline.sed_edits import run_sed_rules

        run_sed_rules(plan, [m.load() for m in metas], settings, engines, tokenizer, result)
    if extra:  # the root's other patches and recipes were read for the plan: the run reports its own files
        own = {os.path.abspath(f.path) for f in files}
        result.findings = [f for f in result.findings if os.path.abspath(f.path) in own]
    result.findings.sort(key=Finding.sort_key)
    return result


def _plan(paths: list[str], files: list, settings: Settings, root: Any, errors: list) -> tuple[Any, list, list[str]]:
    """The plan of the project root (pipeline/plan_inputs.py), the engines it needs added
    to the run's (pipeline/plan_engines.py); (plan, the root's files outside the run, the
    run's warnings about it).  A recipe of the run that cannot be read is an error; one of
    the root's others, a warning."""
    from patchaudit.pipeline.plan import build_plan, sed_warnings
    from patchaudit.pipeline.plan_engines import complete_engines
    from patchaudit.pipeline.plan_inputs import plan_files

    planned, extra, top = plan_files(paths, files, settings, root)
    plan = build_plan(planned, settings, root=top)
    run = {os.path.abspath(f.path) for f in files}
    said: list[str] = []
    for e in plan.errors:
        if os.path.abspath(e.path) in run:
            errors.append(e)
        else:
            said.append(f"{e.path}{f':{e.line}' if e.line else ''}: {e.message} (a recipe of the project root)")
    said += complete_engines(plan, settings, run)
    said += [w for w in sed_warnings(plan) if os.path.abspath(w.split(":", 1)[0]) in run]
    return plan, extra, said


def _outside_notes(hunks: list[dict]) -> list[str]:
    """One note per patch whose targets the engine source cannot hold (units/exact.py
    NOT_IN_SOURCE: `sgl-kernel/`, `test/` in a wheel), with the paths as the patch writes them."""
    from patchaudit.units.exact import NOT_IN_SOURCE

    per: dict[tuple[str, str], list[str]] = {}
    for h in hunks:
        if h.get("status") == NOT_IN_SOURCE:
            got = per.setdefault((h["patch"], h.get("engine_title") or h.get("engine") or "the engine"), [])
            if h["target"] not in got:
                got.append(h["target"])
    out = []
    for (patch, engine), targets in per.items():
        n = len(targets)
        shown = ", ".join(targets[:3]) + (", ..." if n > 3 else "")
        out.append(
            f"{patch}: {n} file{'s' if n != 1 else ''} not in this engine source ({engine}: an installed engine "
            f"holds only its packages): {shown}; {'their' if n != 1 else 'its'} hunks are judged without the engine"
        )
    return out
