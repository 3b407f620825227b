"""The plan is the project's, whatever the paths of a run.

`patchaudit check docker/patch/latest/b.patch` (what pre-commit runs on one changed
file) must check `b.patch` as the root run does: on top of `a.patch`, with the
Dockerfile's `git apply`.  So the recipes, `series` files and patches the plan is made
from are those of the project root (`plan_root`), and the run's PATHS only choose which
findings are reported (`plan_files`): a patch outside them is never analysed, only
stacked under one that is, or named in its set (PA304).

The root: the folder of the run's configuration (a `pyproject.toml` with
`[tool.patchaudit]`) when it holds the paths, else the top of the git work tree
holding them (the nearest `.git`, a folder or a `gitdir:` file), else their common
folder.
"""

from __future__ import annotations

import os
from typing import Any

from patchaudit.files.observe import note
from patchaudit.inputs.discover import PATCH

#: the kinds of file the plan is made from (pipeline/plan.py)
PLAN_KINDS = (PATCH, "shell", "dockerfile")


def _common_folder(paths: list[str]) -> str:
    absolute = [os.path.abspath(p) for p in paths] or [os.getcwd()]
    try:
        common = os.path.commonpath(absolute)
    except ValueError:  # different drives
        return os.getcwd()
    return common if os.path.isdir(common) else os.path.dirname(common)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _git_top(folder: str) -> str | None:
    cur = folder
    while True:
        dotgit = os.path.join(cur, ".git")
        note(dotgit)  # where the root is decides the plan (files/observe.py)
        if os.path.lexists(dotgit):
            return cur
        up = os.path.dirname(cur)
        if up == cur:
            return None
        cur = up


def plan_root(paths: list[str], settings: Any) -> str:
    """The project root of a run (the module docstring): absolute."""
    common = _common_folder(paths)
    config = getattr(settings, "config_path", None)
    if config:
        folder = os.path.dirname(os.path.abspath(config))
        if _inside(common, folder):
            return folder
    return _git_top(common) or common


def plan_files(paths: list[str], files: list, settings: Any, cache_root: Any = None) -> tuple[list, list, str]:
    """(the files the plan is made from, those of them outside the run, the root): the
    run's recipes and patches first (as the run names them), then the root's others.
    The root's listing honours the run's excludes and `.gitignore`; what it cannot read
    is the root run's error, not this one's."""
    from patchaudit.pipeline.replay import discovered

    root = plan_root(paths, settings)
    own = [f for f in files if f.kind in PLAN_KINDS]
    seen = {os.path.abspath(f.path) for f in files}
    try:
        listed, _ = discovered([root], settings.exclude, cache_root)
    except OSError:
        listed = []
    extra = [f for f in listed if f.kind in PLAN_KINDS and os.path.abspath(f.path) not in seen]
    return own + extra, extra, root


def project_plan(paths: list[str], settings: Any) -> tuple[Any, list]:
    """`patchaudit plan PATHS`: (the plan of the project root, shown for the patches under
    PATHS: the sets that hold one, whole; discovery's errors)."""
    from patchaudit.inputs.discover import discover
    from patchaudit.pipeline.plan import build_plan

    files, errors = discover(paths, settings.exclude)
    planned, extra, top = plan_files(paths, files, settings)
    plan = build_plan(planned, settings, root=top)
    if not extra:
        return plan, errors
    run = {os.path.abspath(f.path) for f in files}
    plan.sets = [s for s in plan.sets if run & set(s.paths)]
    held = {p for s in plan.sets for p in s.paths}
    plan.assigned = {p: a for p, a in plan.assigned.items() if p in run or p in held}
    plan.alternatives = {p: a for p, a in plan.alternatives.items() if p in run}
    plan.unnamed = [p for p in plan.unnamed if p in run]
    plan.seds = [(st, e) for st, e in plan.seds if os.path.abspath(st.recipe) in run]
    plan.errors = [e for e in plan.errors if os.path.abspath(e.path) in run]
    return plan, errors
