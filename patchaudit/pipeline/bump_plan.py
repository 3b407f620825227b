"""`bump` with no versions given: what to bump, read from the plan.

- `bump --diff-base REF` (what a pull request that moves an engine pin runs): the plan
  of the project at REF (its recipes and patches read from git into a private folder)
  and the plan now (the work tree); the engine whose pinned version changed between
  them, its two versions, the patch folders that changed with it; both engines
  resolved by version (patchaudit/engine/resolve.py); the patches the plan applies to
  that engine now, in the recipe's order.
- `bump --to NEW` (no `--from`): the plan's current version of the engine is OLD.

`plan_bump` gives a `BumpTarget` that `run_bump` takes as it takes the explicit
`bump PATCHES --engine NAME --from OLD --to NEW`, so both give the same report.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any

from patchaudit.engine.resolve import is_git_revision, resolve_engine
from patchaudit.engine.versions import Version
from patchaudit.inputs.discover import PATCH, classify, discover
from patchaudit.pipeline.plan import MAX_RECIPE_FILE, Assignment, Plan, build_plan

#: a tree at REF with more files than this is not read for its plan
MAX_TREE_FILES = 200_000


class PlanBumpError(Exception):
    """What to bump cannot be told (exit code 2), with what the user can give instead."""


@dataclass
class EnginePin:
    version: str
    where: str  # recipe:line
    folders: list[str] = field(default_factory=list)  # the patch folders, relative to the root
    patches: list[str] = field(default_factory=list)  # absolute, in the order applied


@dataclass
class BumpTarget:
    engine: str
    old_spec: str
    new_spec: str
    paths: list[str]
    #: what changed and where the engines came from (printed on stderr)
    notes: list[str] = field(default_factory=list)


def pin_of(a: Assignment) -> str | None:
    """The version (or the git revision) a recipe pins for an assignment's engine."""
    return a.version() or next((p for p in a.pins if p and not p.startswith("-")), None)


def engine_pins(plan: Plan, root: str) -> dict[str, dict[str, EnginePin]]:
    """engine -> recipe (relative to `root`) -> the version it pins (the first, when it pins
    several), where, and the patches it applies to that engine in the order applied."""
    out: dict[str, dict[str, EnginePin]] = {}
    order = {p: i for i, p in enumerate(p for s in plan.sets for p in s.paths)}
    for path, a in sorted(plan.assigned.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])):
        pin = pin_of(a) if a.engine else None
        if a.engine is None or pin is None or a.recipe is None:
            continue
        recipe = os.path.relpath(os.path.abspath(a.recipe), root)
        got = out.setdefault(a.engine, {}).setdefault(recipe, EnginePin(pin, f"{recipe}:{a.line}"))
        if got.version != pin:
            continue
        folder = os.path.relpath(os.path.dirname(path), root)
        if folder not in got.folders:
            got.folders.append(folder)
        got.patches.append(path)
    return out


def project_plan(root: str, settings: Any) -> Plan:
    """The plan of the project at `root` (its recipes and patches, wherever the run's paths are)."""
    files, _ = discover([root], getattr(settings, "exclude", None))
    return build_plan(files, settings, root)


def project_root(settings: Any, top: str | None) -> str:
    """The project's root: the configuration's folder when it lies in the repository (a
    `--config` kept elsewhere, a trusted file in CI, does not move it), else the git top,
    else the current folder."""
    config = getattr(settings, "config_path", None)
    folder = os.path.dirname(os.path.abspath(config)) if config else None
    if folder and (top is None or os.path.commonpath([os.path.realpath(folder), top]) == top):
        return folder
    return top or os.getcwd()


def _safe_rel(path: str) -> bool:
    parts = path.split("/")
    return bool(path) and "\0" not in path and all(p not in ("", ".", "..") for p in parts) and parts[0] != ".git"


def _wanted(path: str) -> bool:
    return classify(path) in (PATCH, "shell", "dockerfile") or os.path.basename(path) == "series"


def _tree_files(wt: Any, commit: str) -> list[tuple[str, str, int]]:
    """(blob sha, path, size) of the recipes, series files and patches of `commit`."""
    out = wt.git("ls-tree", "-r", "-z", "-l", "--full-tree", commit).stdout.decode("utf-8", "surrogateescape")
    found = []
    for entry in out.split("\0")[:MAX_TREE_FILES]:
        meta, _, path = entry.partition("\t")
        fields = meta.split()
        if len(fields) != 4 or fields[1] != "blob" or fields[0] not in ("100644", "100755"):
            continue  # symlinks, submodules
        if _safe_rel(path) and _wanted(path) and fields[3].isdigit():
            found.append((fields[2], path, int(fields[3])))
    return found


def extract_at(wt: Any, ref: str, into: str, max_size: int) -> str:
    """Write the recipes and patches of the commit `ref` names into the folder `into`
    (read as git objects: nothing of the work tree changes); its full sha."""
    from patchaudit.inputs.safegit import GitError

    if not ref or ref.startswith("-") or any(c in ref for c in "\0\n\r "):
        raise PlanBumpError(f"--diff-base: {ref!r} is not a usable git revision")
    try:
        proc = wt.git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
        commit = proc.stdout.decode("ascii", "replace").strip()
        if proc.returncode != 0 or not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", commit):
            raise PlanBumpError(f"--diff-base: {ref!r} is not a commit of the repository at {wt.top}")
        files = [
            f for f in _tree_files(wt, commit) if f[2] <= (MAX_RECIPE_FILE if classify(f[1]) != PATCH else max_size)
        ]
        blob = wt.git("cat-file", "--batch", input="".join(f"{sha}\n" for sha, _, _ in files).encode()).stdout
    except GitError as exc:
        raise PlanBumpError(f"--diff-base: git failed in {wt.top}: {(exc.stderr or str(exc)).strip()}") from None
    pos = 0
    for _sha, path, _size in files:
        header_end = blob.find(b"\n", pos)
        if header_end < 0:
            break  # git stopped early: the files read so far
        header = blob[pos:header_end].split()
        pos = header_end + 1
        if len(header) != 3 or header[1] != b"blob" or not header[2].isdigit():
            continue  # `<sha> missing`
        n = int(header[2])
        data, pos = blob[pos : pos + n], pos + n + 1
        target = os.path.join(into, *path.split("/"))
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "xb") as fh:
                fh.write(data)
        except OSError:
            continue  # a path that is a folder in one place and a file in another
    return commit


def _one(pins: list[EnginePin], engine: str, when: str) -> EnginePin:
    """The one version the recipes pin for `engine` (several recipes may agree)."""
    versions = {p.version for p in pins}
    if len(versions) == 1:
        return pins[0]
    shown = ", ".join(f"{p.version} ({p.where})" for p in pins)
    raise PlanBumpError(f"{engine} is pinned at several versions {when}: {shown}; give --engine, --from and --to")


def resolve_revision(spec: str, repo: str | None) -> str:
    """A bare revision (`v2`, a tag or sha) of the engine's git repository -> `REPO@v2`.

    An existing path (directory, wheel, sdist) or a `PATH@REV` spec is kept as it is."""
    from patchaudit.engine.sources import split_git_spec

    if not repo or spec.startswith("-") or os.path.exists(os.path.expanduser(spec)) or split_git_spec(spec):
        return spec
    base = repo
    if not os.path.isdir(os.path.expanduser(base)):
        split = split_git_spec(base)
        if split is None:
            return spec
        base = split[0]
    base = os.path.expanduser(base)
    if os.path.exists(os.path.join(base, ".git")) or os.path.isfile(os.path.join(base, "HEAD")):
        return f"{base}@{spec}"
    return spec


def engine_spec(
    engine: str, spec: str, repo: str | None, settings: Any, notes: list[str], side: str, progress: Any = None
) -> str:
    """One side of a bump as an engine source: a path or `PATH@REV` as it is, a bare revision
    of the configured repository, else a bare version (`0.5.15.post1`) resolved by version."""
    got = resolve_revision(spec, repo)
    if got != spec or os.path.exists(os.path.expanduser(spec)) or "@" in spec:
        return got
    if Version.parse(spec) is None and not is_git_revision(spec):
        return spec
    said: list[str] = []
    found = resolve_engine(engine, spec, settings, said, progress)
    if found is None:
        raise PlanBumpError(f"{side}: " + ("; ".join(said) or f"{engine} {spec}: not found"))
    notes.append(f"{side} {engine} {found.version} ({found.origin}: {found.source})")
    return found.source


def _changed(engine: str | None, base: dict, now: dict, ref: str) -> tuple[str, EnginePin, EnginePin]:
    """The engine whose pin moved between REF and now (a recipe of both that pins another
    version now), with both pins."""
    names = [engine] if engine else sorted(set(base) & set(now))
    moved: dict[str, list[tuple[EnginePin, EnginePin]]] = {}
    for n in names:
        for recipe, pin in now.get(n, {}).items():
            was = base.get(n, {}).get(recipe)
            if was is not None and was.version != pin.version:
                moved.setdefault(n, []).append((was, pin))
    if not moved:
        if engine and (engine not in base or engine not in now):
            where = "at " + ref if engine not in base else "in the work tree"
            raise PlanBumpError(f"no recipe pins a version of {engine} {where}; give --from and --to")
        raise NoBump(f"no engine pin changed since {ref}: nothing to bump")
    if len(moved) > 1:
        raise PlanBumpError(f"several engine pins changed since {ref} ({', '.join(sorted(moved))}): give --engine NAME")
    n, pairs = next(iter(moved.items()))
    return n, _one([a for a, _ in pairs], n, f"at {ref}"), _one([b for _, b in pairs], n, "in the work tree")


class NoBump(Exception):
    """No engine pin changed: nothing to bump (exit code 0)."""


def plan_bump(
    paths: list[str],
    engine: str | None,
    old: str | None,
    new: str | None,
    diff_base: str | None,
    settings: Any,
    repo: str | None = None,
    progress: Any = None,
) -> BumpTarget:
    """What `bump` audits when the versions (or the engine, or the patches) are not all given."""
    from patchaudit.inputs.safegit import GitError, WorkTree

    wt = None
    try:
        wt = WorkTree.discover()
    except GitError as exc:
        if diff_base:
            raise PlanBumpError(f"--diff-base: {exc}") from None
    root = project_root(settings, wt.top if wt else None)
    now = engine_pins(project_plan(root, settings), root)
    notes: list[str] = []
    if diff_base:
        assert wt is not None
        tmp = tempfile.mkdtemp(prefix="patchaudit-base-")
        try:
            sub = os.path.relpath(root, wt.top)
            extract_at(wt, diff_base, tmp, settings.max_file_size)
            base_root = os.path.normpath(os.path.join(tmp, sub))
            base = engine_pins(project_plan(base_root, settings), base_root) if os.path.isdir(base_root) else {}
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        name, old_pin, new_pin = _changed(engine, base, now, diff_base)
        folders = (
            ""
            if old_pin.folders == new_pin.folders
            else f"; patches {', '.join(new_pin.folders)} (were {', '.join(old_pin.folders)})"
        )
        notes.append(f"{name}: {old_pin.version} at {diff_base} -> {new_pin.version} ({new_pin.where}){folders}")
    else:
        pinned = sorted(now) if engine is None else [engine]
        if len(pinned) != 1 or pinned[0] not in now:
            shown = ", ".join(sorted(now)) or "none"
            raise PlanBumpError(f"give --engine NAME and --from OLD (engines the recipes pin: {shown})")
        name = pinned[0]
        new_pin = old_pin = _one(list(now[name].values()), name, "in the work tree")
        if new is None:
            raise PlanBumpError("give --to NEW (or --diff-base REF)")
    repo = repo or next((e.source for e in getattr(settings, "engines", ()) if e.name == name), None)
    old_spec = engine_spec(name, old or old_pin.version, repo, settings, notes, "--from", progress)
    new_spec = engine_spec(name, new or new_pin.version, repo, settings, notes, "--to", progress)
    patches = list(paths) or [os.path.relpath(p) for p in new_pin.patches]
    return BumpTarget(name, old_spec, new_spec, patches, notes)
