"""Read-only engine sources and automatic strip-level detection.

An *engine source* is the code a patch set is carried against: a directory
(checkout, unpacked wheel, site-packages), a git repository at a revision, a
wheel/zip or an sdist tarball.  Every kind is read in place and never written:
archives are never extracted, git is only asked to read objects (the work tree
and the index are never touched).

``open_engine(spec)`` picks the kind from the spec; ``detect_strip`` finds the
``patch -pN`` strip level (and an engine-side directory prefix) that maps the
paths of a patch onto the engine's files; ``map_path`` applies it.

The kinds live in their own modules (`directory`, `gitsource`, `wheel`, `sdist`,
on `base.EngineSource`), their limits in `limits`; this module dispatches and
re-exports them.  Only the standard library is imported at module import time; git is run
(through `patchaudit.inputs.safegit`, never directly) only by the functions
that need it (start-up time matters for the pre-commit hook).
"""

from __future__ import annotations

import os

from patchaudit.engine import limits
from patchaudit.engine.base import EngineError, EngineSource
from patchaudit.engine.directory import DirectorySource
from patchaudit.engine.gitsource import GitSource
from patchaudit.engine.sdist import SdistSource
from patchaudit.engine.wheel import WheelSource

__all__ = [
    "EngineError",
    "EngineSource",
    "DirectorySource",
    "GitSource",
    "WheelSource",
    "SdistSource",
    "open_engine",
    "open_named_engine",
    "detect_strip",
    "map_path",
]
# (the limits, MAX_MEMBER_BYTES ..., live in patchaudit.engine.limits: set them there)

# ---------------------------------------------------------------------------
# dispatch


_ZIP_SUFFIXES = (".whl", ".zip")
_TAR_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")


def split_git_spec(spec: str) -> tuple[str, str] | None:
    """Split "PATH@REV" at the first '@' whose left side is an existing
    directory (paths may contain '@'; revisions like HEAD@{1} too)."""
    i = spec.find("@")
    while i != -1:
        left, right = spec[:i], spec[i + 1 :]
        if left and os.path.isdir(os.path.expanduser(left)):
            return os.path.expanduser(left), right
        i = spec.find("@", i + 1)
    return None


def open_engine(spec: str, name: str = "engine") -> EngineSource:
    """Open an engine source from a spec:

    - an existing directory: its files on disk (even if it is a git checkout);
    - ``PATH@REV`` where PATH is a git repository: the tree of REV;
    - ``*.whl``/``*.zip``: the archive, read in place;
    - ``*.tar.gz``/``*.tgz``/``*.tar`` (``.tar.bz2``/``.tar.xz``): an sdist.

    Raises EngineError for specs or revisions that start with '-', unknown
    revisions, missing paths and unreadable or hostile archives."""
    if not isinstance(spec, str) or not spec.strip():
        raise EngineError(f"engine {name!r}: empty engine source")
    if "\x00" in spec:
        raise EngineError(f"engine {name!r}: NUL in engine source {spec!r}")
    if spec.startswith("-"):
        raise EngineError(f"engine {name!r}: refusing engine source {spec!r} (starts with '-')")
    path = os.path.expanduser(spec)
    if os.path.isdir(path):
        return DirectorySource(path, name=name, spec=spec)
    if os.path.isfile(path):
        low = path.lower()
        if low.endswith(_ZIP_SUFFIXES):
            return WheelSource(path, name=name, spec=spec)
        if low.endswith(_TAR_SUFFIXES):
            return SdistSource(path, name=name, spec=spec)
        raise EngineError(
            f"engine {name!r}: {spec!r} is not a directory, a wheel/zip or an sdist "
            f"(.tar.gz/.tgz/.tar); for a git revision write PATH@REV"
        )
    split = split_git_spec(spec)
    if split is not None:
        repo_path, rev = split
        return GitSource(repo_path, rev, name=name, spec=spec)
    raise EngineError(f"engine {name!r}: {spec!r} does not exist")


def open_named_engine(spec: str, name: str) -> EngineSource:
    """`--engine NAME=SOURCE`: `open_engine`, and when NAME is a known engine (sglang,
    vllm, megatron) the source must hold that package: a folder that *is* the package
    (`.../site-packages/sglang`) is read from its parent (said in a note), anything else
    is an EngineError that says what was found."""
    from patchaudit.engine.versions import DEFAULT_PACKAGES, outer_packages, top_packages

    source = open_engine(spec, name=name)
    if name not in DEFAULT_PACKAGES or name in top_packages(source) or _has_folder(source, name):
        return source
    path = os.path.normpath(os.path.expanduser(spec))
    if (
        isinstance(source, DirectorySource)
        and os.path.basename(path) == name
        and any(f.endswith(".py") and "/" not in f for f in source.files())
    ):
        parent = os.path.dirname(os.path.abspath(path))
        folder = DirectorySource(parent, name=name, spec=spec, only=name)
        folder.notes.append(f"{spec} is the package folder itself: read as the package `{name}` of {parent}")
        return folder
    found = sorted(outer_packages(source))
    shown = ", ".join(found[:8]) + (f" and {len(found) - 8} more" if len(found) > 8 else "")
    source.close()
    raise EngineError(f"--engine {name}={spec}: no package `{name}` there (found: {shown or 'no Python package'})")


def _has_folder(source: EngineSource, name: str) -> bool:
    """A folder `name` holding Python files near the engine's top (`python/sglang/`,
    `Megatron-LM/megatron/`): a package, even without `__init__.py` files."""
    return any(f.endswith(".py") and name in f.split("/")[:3][:-1] for f in source.files())


# ---------------------------------------------------------------------------
# strip levels


def _patch_components(patch_path: str) -> list[str] | None:
    """Components of a patch path as ``patch -p`` counts them: repeated
    slashes are one separator; an absolute path's leading '/' makes an empty
    first component.  None for /dev/null and empty paths."""
    if not isinstance(patch_path, str):
        return None
    p = patch_path.strip()
    if not p or p == "/dev/null":
        return None
    comps = p.split("/")
    lead = [""] if comps[0] == "" else []
    rest = [c for c in comps if c]
    return lead + rest if rest else None


def _stripped(comps: list[str], strip: int) -> str | None:
    if len(comps) <= strip:
        return None
    rest = comps[strip:]
    if rest[0] == "":  # still absolute: never an engine path
        return None
    rest = [c for c in rest if c != "."]
    if not rest or ".." in rest:
        return None
    return "/".join(rest)


def map_path(patch_path: str, strip: int, prefix: str = "") -> str | None:
    """The engine path for a patch path: drop ``strip`` leading components
    (as ``patch -pN``) and put ``prefix`` in front.  None when the path has
    too few components, is /dev/null, stays absolute or contains '..'."""
    comps = _patch_components(patch_path)
    if comps is None or strip < 0:
        return None
    rest = _stripped(comps, strip)
    if rest is None:
        return None
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    return prefix + rest


def same_file(engine: EngineSource, comps: list[str], strip: int, prefix: str) -> bool:
    """Whether stripping `strip` components and putting `prefix` in front keeps the file
    the patch names: the result only drops leading folders of the path (after its first
    component, the diff's `a/`) or only adds some, or it is the module the path names (an
    archive's top folder for a checkout's `python/`: `sglang-1.0/sglang/x.py` for
    `python/sglang/x.py`); never another module that has the same file name
    (`python/sglang/jit_kernel/utils.py` is not `sglang/srt/utils.py`) and never a
    prefix inside a package."""
    if not prefix:
        return True
    rest = [c for c in comps[strip:] if c and c != "."]
    mapped = [c for c in prefix.split("/") if c] + rest
    named = [c for c in (comps[1:] if len(comps) > 1 else comps) if c and c != "."]
    if _ends_with(mapped, named) or _ends_with(named, mapped):
        return True
    pre = mapped[: len(mapped) - len(rest)]
    if any(engine.has("/".join(pre[: k + 1]) + "/__init__.py") for k in range(len(pre))):
        return False  # the prefix goes into a package: another package's file
    module = engine.module_name("/".join(mapped)) if rest[-1].endswith(".py") else None
    if not module:
        return False
    parts = module.split(".")
    stem = named[:-1] + [named[-1][:-3]]
    return _ends_with(stem, parts) or (stem[-1] == "__init__" and _ends_with(stem[:-1], parts))


def _ends_with(path: list[str], tail: list[str]) -> bool:
    return len(path) >= len(tail) and path[len(path) - len(tail) :] == tail


def detect_strip(patch_paths: list[str], engine: EngineSource) -> tuple[int, str]:
    """Find ``(N, prefix)`` such that ``map_path(p, N, prefix)`` exists in the
    engine for as many of ``patch_paths`` as possible, N in 0..4, and is the file
    the patch names (`same_file`: a coincidental file-name match elsewhere does
    not count).  Ties go to the smallest N, then the shallowest prefix.  Raises EngineError naming the
    paths tried when no path matches at any level."""
    if isinstance(patch_paths, str):
        patch_paths = [patch_paths]
    uniq: list[list[str]] = []
    seen: set[str] = set()
    for raw in patch_paths:
        comps = _patch_components(raw)
        if comps is None:
            continue
        key = "/".join(comps)
        if key not in seen:
            seen.add(key)
            uniq.append(comps)
    if not uniq:
        raise EngineError(f"engine {engine.name!r} ({engine.label}): no patch paths to match")
    score: dict[tuple[int, str], int] = {}
    for comps in uniq:
        for n in range(limits.MAX_STRIP + 1):
            rest = _stripped(comps, n)
            if rest is None:
                break
            for pre in set(engine.suffix_prefixes(rest)):
                if same_file(engine, comps, n, pre):
                    score[(n, pre)] = score.get((n, pre), 0) + 1
    if not score:
        tried = [p for p in patch_paths if _patch_components(p) is not None]
        shown = ", ".join(tried[:5]) + (f" (and {len(tried) - 5} more)" if len(tried) > 5 else "")
        raise EngineError(
            f"engine {engine.name!r} ({engine.label}): none of the patch paths exist in it "
            f"at strip levels 0..{limits.MAX_STRIP}: {shown}"
        )
    (n, pre), _count = min(score.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1].count("/"), kv[0][1]))
    return n, pre
