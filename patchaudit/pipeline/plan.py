"""The plan: which patch goes to which engine, in which order, with which command.

`build_plan(files, settings)` reads the run's recipes (Dockerfiles, shell scripts and
quilt `series` files among `files`: patchaudit/inputs/recipes.py) and the bindings of
`[tool.patchaudit.engines.NAME] patches = [...]` (config/bindings.py), and gives each
patch of the run at most one `Assignment`:

1. a binding (a glob of the configuration) wins: it is the user's word;
2. else the first recipe step that applies the patch (a `git apply` that is not
   `--check`, a `patch` that is not `--dry-run`; a patch only ever checked keeps its
   check): its engine is the checkout the command runs in (`cd`, `WORKDIR`,
   `git -C`, a `git clone` folder) named by `engine_name`; its order is the order the
   recipe applies its patches in (a list keeps its order, a glob is sorted bytewise, as
   the shell sorts in the C locale of a build); its version is what the recipe pins
   for that checkout (`git checkout REV`, `pip install NAME==V`, a `NAME_VERSION`
   variable, the tag of a base image whose name holds the engine's name);
3. else nothing (`unnamed`): the check keeps today's behaviour for it.

A recipe that picks a folder with a variable (`COPY docker/patch/${PATCH_VERSION}/...`)
selects one of several sibling folders: the patches of the other folders that the same
step would have taken with another value are `alternatives` of that engine, each with
its folder's name (a version, such as `v0.5.9`, or another label).  The check applies an
alternative only to an engine whose version is that folder's version.

Docker paths are the container's: a patch named `/sgl-workspace/sglang/x.patch` is the
file a `COPY` put there, found in the build context (the Dockerfile's folder or one of
its parents up to the scanned root, the first where the source exists).
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

from patchaudit.files.observe import note, unstable
from patchaudit.inputs.recipes import BOUNDS, CheckoutStep, CopyStep, PatchStep, PinStep, Recipe, SedStep, read_recipe
from patchaudit.model.findings import FileError
from patchaudit.patching.appliers import DEFAULT_APPLIER, Applier
from patchaudit.pipeline import recipe_paths

#: a folder or repository name -> the engine it is (lower case, `_` as `-`)
ENGINE_NAMES = {
    "sglang": "sglang",
    "sgl-workspace": "sglang",
    "vllm": "vllm",
    "vllm-patch": "vllm",
    "megatron-lm": "megatron",
    "megatron": "megatron",
    "megatron-core": "megatron",
    "transformers": "transformers",
    "trl": "trl",
    "deepspeed": "deepspeed",
    "transformerengine": "transformer-engine",
    "transformer-engine": "transformer-engine",
    "flash-attention": "flash-attn",
    "deepgemm": "deepgemm",
    "deepep": "deepep",
    "apex": "apex",
}
#: a recipe larger than this is not read (a Dockerfile or build script is a few KB)
MAX_RECIPE_FILE = 1024 * 1024
#: parent folders of a Dockerfile tried as its build context
MAX_CONTEXT_UP = 4
_VERSION = re.compile(r"v?(\d+(?:\.\d+)+(?:(?:\.?(?:post|rc|dev|a|b))\d+)*)")


@dataclass
class Assignment:
    path: str  # the patch, as discovery reports it
    engine: str | None
    applier: Applier = DEFAULT_APPLIER
    via: str = "recipe"  # recipe | binding | alternative
    recipe: str | None = None
    line: int | None = None
    set_id: str | None = None  # "recipe:line" of the set (one checkout of one recipe)
    position: int = 0
    pins: list[str] = field(default_factory=list)  # versions / commits the recipe names
    selector: tuple[str, str] | None = None  # (variable, folder) the recipe chose
    folder: str | None = None  # alternatives: the folder's name (`v0.5.9`)

    def version(self) -> str | None:
        """The first pin that reads as a version (`v0.5.15.post1-cu129` -> 0.5.15.post1)."""
        for p in self.pins:
            v = version_of(p)
            if v:
                return v
        return None


@dataclass
class PatchSet:
    set_id: str
    recipe: str
    line: int
    engine: str | None
    cwd: str
    paths: list[str] = field(default_factory=list)  # absolute, in the order applied


@dataclass
class Plan:
    recipes: list[Recipe] = field(default_factory=list)
    assigned: dict[str, Assignment] = field(default_factory=dict)  # absolute patch path ->
    alternatives: dict[str, Assignment] = field(default_factory=dict)
    sets: list[PatchSet] = field(default_factory=list)
    unnamed: list[str] = field(default_factory=list)  # absolute paths
    ordered: dict[str, Assignment] = field(default_factory=dict)  # series: order only, no engine
    seds: list[tuple[SedStep, str | None]] = field(default_factory=list)  # (step, engine)
    errors: list[FileError] = field(default_factory=list)
    shown: dict[str, str] = field(default_factory=dict)  # absolute -> as reported

    @property
    def empty(self) -> bool:
        return not self.assigned and not self.alternatives


def version_of(text: str) -> str | None:
    m = _VERSION.search(text or "")
    if not m or re.fullmatch(r"[0-9a-f]{7,40}", text or ""):
        return None
    return m.group(1)


def engine_name(folder: str, clones: dict[str, str] | None = None) -> str | None:
    """The engine a checkout folder is (`/sgl-workspace/sglang` -> sglang, `/root/Megatron-LM`
    -> megatron), by the folder's own name, a `git clone` URL that made it, or a parent's."""
    parts = [p for p in folder.split("/") if p]
    if clones and folder in clones:
        name = posixpath.basename(clones[folder].rstrip("/")).removesuffix(".git")
        got = ENGINE_NAMES.get(name.lower().replace("_", "-"))
        if got:
            return got
    for part in reversed(parts):
        got = ENGINE_NAMES.get(part.lower().replace("_", "-"))
        if got:
            return got
    return parts[-1].lower() if parts else None


def recipe_kind(path: str, kind: str) -> str | None:
    """The recipe kind of a discovered file (dockerfile, shell), or None."""
    return kind if kind in ("dockerfile", "shell") else None


def build_plan(files: list, settings: Any, root: str | None = None) -> Plan:
    """The plan of a run: `files` are discovery's SourceFiles (patches and recipes)."""
    from patchaudit.files.reader import ReadError, read_text
    from patchaudit.inputs.discover import PATCH

    plan = Plan()
    patches = [os.path.abspath(f.path) for f in files if f.kind == PATCH]
    plan.shown = {os.path.abspath(f.path): f.path for f in files}
    top = os.path.abspath(root) if root else _common_root(patches + [os.path.abspath(f.path) for f in files])
    series = sorted({os.path.join(os.path.dirname(p), "series") for p in patches})
    sources = [(f.path, f.kind) for f in files if recipe_kind(f.path, f.kind)]
    sources += [(_display(s), "series") for s in series if _isfile(s)]
    for path, kind in sources:
        try:
            text = read_text(path, MAX_RECIPE_FILE)
        except (ReadError, OSError, UnicodeDecodeError):
            continue  # the per-file pass reports a file it cannot read
        try:
            recipe = read_recipe(path, kind, text, folder=os.path.dirname(os.path.abspath(path)))
        except Exception as exc:  # RecursionError too: one recipe never costs the run
            plan.errors.append(
                FileError(path, f"internal error reading the recipe: {exc!r}; its patches are unplanned")
            )
            continue
        plan.recipes.append(recipe)
        if kind == "series":
            # a quilt series orders its folder's patches (PA304); it names no engine: the
            # patches keep the engine their paths match
            before = set(plan.assigned)
            _walk_recipe(plan, recipe, top)
            for p in set(plan.assigned) - before:
                plan.ordered[p] = plan.assigned.pop(p)
            continue
        plan.errors.extend(FileError(path, message, line) for line, message in recipe.problems if message in BOUNDS)
        _walk_recipe(plan, recipe, top)
    _apply_bindings(plan, patches, settings)
    _find_alternatives(plan, patches, top)
    plan.unnamed = [p for p in patches if p not in plan.assigned and p not in plan.alternatives]
    return plan


def _display(path: str) -> str:
    from pathlib import Path

    from patchaudit.inputs.discover import display

    return display(Path(path))


def _common_root(paths: list[str]) -> str:
    if not paths:
        return os.getcwd()
    try:
        common = os.path.commonpath(paths)
    except ValueError:
        return os.getcwd()
    return common if _isdir(common) else os.path.dirname(common)


def _walk_recipe(plan: Plan, recipe: Recipe, top: str) -> None:
    """Turn one recipe's steps into assignments and sets."""
    folder = os.path.dirname(os.path.abspath(recipe.path))
    copies: list[CopyStep] = []
    clones: dict[str, str] = {}
    pins: dict[str, list[str]] = {}  # checkout folder -> revs
    pip_pins: dict[str, str] = {}
    images: list[tuple[str, str]] = []
    sets: dict[str, PatchSet] = {}
    for step in recipe.steps:
        if isinstance(step, CopyStep):
            copies.append(step)
        elif isinstance(step, CheckoutStep):
            if step.url:
                clones[step.folder] = step.url
            if step.rev:
                pins.setdefault(step.folder, []).append(step.rev)
        elif isinstance(step, PinStep):
            if step.image:
                images.append((step.package, step.version))
            else:
                pip_pins[step.package] = step.version
        elif isinstance(step, SedStep):
            plan.seds.append((step, engine_name(step.cwd, clones)))
        elif isinstance(step, PatchStep):
            engine = engine_name(step.cwd, clones)
            cut: list[str] = []
            found, copy_used = _locate(step, recipe, copies, folder, top, cut)
            plan.errors.extend(FileError(recipe.path, message, step.line) for message in cut)
            if not found:
                continue
            if copy_used:
                step.used = {**copy_used, **step.used}
            key = f"{engine}@{step.cwd}"
            pset = sets.get(key)
            if pset is None:
                pset = sets[key] = PatchSet(f"{recipe.path}:{step.line}", recipe.path, step.line, engine, step.cwd)
            for path in found:
                if path not in plan.assigned and pset not in plan.sets:
                    plan.sets.append(pset)
                _assign(plan, recipe, step, pset, path, engine, _pins(engine, step.cwd, pins, pip_pins, images, recipe))


def _pins(engine, cwd, pins, pip_pins, images, recipe: Recipe) -> list[str]:
    out = list(pins.get(cwd, []))
    if engine:
        want = engine.upper().replace("-", "_")
        out += [v for k, v in recipe.env.items() if k in (f"{want}_VERSION", f"{want}_COMMIT") and v]
        if engine in pip_pins:
            out.append(pip_pins[engine])
        out += [tag for name, tag in images if engine in name.lower() and tag]
    return out


def _assign(plan: Plan, recipe: Recipe, step: PatchStep, pset: PatchSet, path: str, engine, pins) -> None:
    applier = _applier(step)
    have = plan.assigned.get(path)
    if have is not None:
        # a later real application replaces a check of the same patch in the same set
        if have.set_id == pset.set_id and have.applier.check_only and not applier.check_only:
            have.applier, have.line = applier, step.line
        return
    if path not in pset.paths:
        pset.paths.append(path)
    selector = None
    rel_parts = path.split(os.sep)
    for var, value in step.used.items():
        if value and value in rel_parts[:-1] and var.isupper():
            selector = (var, value)
    plan.assigned[path] = Assignment(
        plan.shown.get(path, path),
        engine,
        applier,
        "recipe",
        recipe.path,
        step.line,
        pset.set_id,
        pset.paths.index(path),
        pins,
        selector,
    )


def _applier(step: PatchStep) -> Applier:
    o = step.options
    try:
        return Applier(
            step.tool,
            o.get("strip"),
            o.get("fuzz"),
            bool(o.get("three_way")),
            bool(o.get("reverse")),
            bool(o.get("check_only")),
        )
    except ValueError:
        return DEFAULT_APPLIER


def _locate(
    step: PatchStep, recipe: Recipe, copies: list[CopyStep], folder: str, top: str, cut: list[str]
) -> tuple[list[str], dict]:
    """The repository files a step's patch path names (absolute; a glob sorted bytewise),
    and the variables of the COPY that put them there: inside the project root only
    (`_root`; a glob bounded: pipeline/recipe_paths.py, whose messages go to `cut`)."""
    root = _root(folder, top)
    if recipe.kind != "dockerfile":
        return _existing(step.path, step.from_glob, root, cut), {}
    out: list[str] = []
    for cp in reversed(copies):
        if cp.line > step.line:
            continue
        for src in cp.sources:
            for context in _contexts(folder, top):
                got = _through_copy(step.path, src, cp.dest, context, step.from_glob, (root, cut))
                if got:
                    out.extend(g for g in got if g not in out)
                    break
        if out:
            return out, cp.used
    return out, {}


def _contexts(folder: str, top: str) -> list[str]:
    """Where a Dockerfile's build context may be: its folder, then its parents up to the
    repository's top (a folder holding `.git`), the scanned root or the current folder,
    at most `MAX_CONTEXT_UP` levels up."""
    out = [folder]
    cur = folder
    limit = _root(folder, top)
    for _ in range(MAX_CONTEXT_UP):
        if _exists(os.path.join(cur, ".git")) or os.path.dirname(cur) == cur or cur == limit:
            break
        cur = os.path.dirname(cur)
        out.append(cur)
    return out


def _root(folder: str, top: str) -> str:
    """The folder a recipe's files are looked for in: the current folder when the recipe is
    below it (a build context may be a parent of the scanned folder), else the scanned root."""
    cwd = os.getcwd()
    return cwd if recipe_paths.inside(folder, cwd) and cwd != os.sep else top


def _through_copy(path: str, src: str, dest: str, context: str, glob: bool, scope: tuple[str, list]) -> list[str]:
    """The context files a COPY of `src` to `dest` put at container `path` (a glob too),
    inside `scope`'s root (its list: why a glob was cut)."""
    root, cut = scope
    src_abs = os.path.normpath(os.path.join(context, src))
    if not recipe_paths.inside(src_abs, root):
        return []
    if dest.endswith("/"):
        ddir = dest.rstrip("/") or "/"
        if _isdir(src_abs) and not any(c in src for c in "*?["):
            if path == ddir or not path.startswith(ddir + "/"):
                return []
            return _existing(os.path.join(src_abs, path[len(ddir) + 1 :]), glob, root, cut)
        if posixpath.dirname(path) != ddir:
            return []
        name = posixpath.basename(path)
        cands = _existing(os.path.join(os.path.dirname(src_abs), name), glob, root, cut)
        pattern = os.path.basename(src_abs)
        return [c for c in cands if fnmatch.fnmatchcase(os.path.basename(c), pattern)]
    if _isdir(src_abs):
        if path == dest or not path.startswith(dest + "/"):
            return []
        return _existing(os.path.join(src_abs, path[len(dest) + 1 :]), glob, root, cut)
    return [src_abs] if path == dest and _isfile(src_abs) else []


def _existing(path: str, glob: bool, root: str, cut: list[str]) -> list[str]:
    path = os.path.normpath(path)
    if not recipe_paths.inside(path, root):
        return []  # the build's own file system (a container's, the host's): not the project's
    if glob:
        import glob as globmod

        if globmod.has_magic(os.path.dirname(path)):
            unstable("a COPY source globs over folders")  # no one folder's stat tells its matches
        else:
            note(os.path.dirname(path) or os.curdir)  # its matches are names of that folder
        return recipe_paths.glob_inside(path, root, cut)
    return [path] if _isfile(path) else []


# the plan's probes of the file system, noted for a replayed run (files/observe.py)
def _isfile(path: str) -> bool:
    note(path)
    return os.path.isfile(path)


def _isdir(path: str) -> bool:
    note(path)
    return os.path.isdir(path)


def _exists(path: str) -> bool:
    note(path)
    return os.path.exists(path)


def _apply_bindings(plan: Plan, patches: list[str], settings: Any) -> None:
    """`[tool.patchaudit.engines.NAME] patches = [...]`: the configuration's word wins."""
    bindings = getattr(settings, "engine_bindings", None) or []
    for binding in bindings:
        for p in patches:
            if binding.matches(p):
                had = plan.assigned.get(p)
                plan.assigned[p] = Assignment(
                    plan.shown.get(p, p),
                    binding.engine,
                    had.applier if had else DEFAULT_APPLIER,
                    "binding",
                    binding.config,
                    binding.line,
                    had.set_id if had else None,
                    had.position if had else 0,
                    had.pins if had and had.engine == binding.engine else [],
                )
                plan.alternatives.pop(p, None)


def _find_alternatives(plan: Plan, patches: list[str], top: str) -> None:
    """Patches in sibling folders of a folder a recipe variable selected."""
    chosen: dict[tuple[str, str], Assignment] = {}
    for a in plan.assigned.values():
        if a.selector is None or a.via != "recipe":
            continue
        path = next(p for p, x in plan.assigned.items() if x is a)
        parts = path.split(os.sep)
        k = len(parts) - 2 - parts[:-1][::-1].index(a.selector[1])
        parent = os.sep.join(parts[:k])
        tail = os.sep.join(parts[k + 1 :])
        chosen.setdefault((parent, tail), a)
    for p in patches:
        if p in plan.assigned:
            continue
        here = [(parent, tail, a) for (parent, tail), a in chosen.items() if p.startswith(parent + os.sep)]
        for parent, tail, a in here:
            rest = p[len(parent) + 1 :].split(os.sep, 1)
            if len(rest) != 2 or not _same_family(rest[1], tail):
                continue
            # the same name as a chosen patch: the step applies it at that patch's place in
            # the set; another name of the family is taken by a glob, its place unknown
            same = next((b for q, t, b in here if q == parent and t == rest[1]), None)
            plan.alternatives[p] = Assignment(
                plan.shown.get(p, p),
                a.engine,
                a.applier,
                "alternative",
                a.recipe,
                a.line,
                same.set_id if same else None,
                same.position if same else 0,
                [rest[0]],
                a.selector,
                rest[0],
            )
            break


def stacks(plan: Plan) -> list[tuple[str, str, list[str]]]:
    """(name, set id, patches in the order applied) of every ordered set of the plan: each recipe
    set, then, per set and sibling folder, the alternatives that take the places of the
    set's patches of the same names (the same step applies them, in the same order, when
    the recipe's variable selects their folder)."""
    out = [(pset.set_id, pset.set_id, list(pset.paths)) for pset in plan.sets]
    folders: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for p, a in plan.alternatives.items():
        if a.set_id is not None:
            folders.setdefault((a.set_id, a.folder or ""), []).append((a.position, p))
    for (set_id, folder), members in folders.items():
        out.append((f"{set_id} ({folder})", set_id, [p for _, p in sorted(members)]))
    return out


def _same_family(name: str, chosen: str) -> bool:
    """`sglang-top_p.patch` is of the family of `sglang.patch` (the name before the first
    `-`, `_` or `.`): the step that took one would take the other."""

    def stem(s: str) -> str:
        return re.split(r"[-_.]", os.path.basename(s), maxsplit=1)[0]

    return os.path.dirname(name) == os.path.dirname(chosen) and stem(name) == stem(chosen)


def sed_warnings(plan: Plan) -> list[str]:
    """A `sed -i` of a Python file this reader cannot translate: no edit is judged, and the
    run says so (never a wrong edit: patchaudit/inputs/sedexpr.py lists what is read)."""
    from patchaudit.inputs.sedexpr import Unsupported, parse_substitution

    out = []
    for step, _ in plan.seds:
        if not any(f.endswith(".py") for f in step.files):
            continue
        try:
            parse_substitution(step.script, step.extended)
        except Unsupported as exc:
            out.append(f"{step.recipe}:{step.line}: sed {step.script!r} is not read ({exc}): its edit is not judged")
    return out
