"""Engines found by the version a recipe names: `resolve_engine("sglang", "0.5.15.post1", settings)`.

When no `--engine`/`engines` entry names an engine the plan needs, the engine is looked
for, in this order:

1. `engine-dirs` (`[tool.patchaudit] engine-dirs = [...]`, `--engine-dir DIR`): a wheel,
   else an sdist, whose file name says that distribution and version (PEP 427 / PEP 625
   names, compared as PEP 440 versions: `0.5.15.post1` is `0.5.15-post1`);
2. an installed distribution of exactly that version (`importlib.metadata`, this
   interpreter's environment): its package folder;
3. the per-user cache (`files/usercache.engine_cache_dir()`), a file a run downloaded, its
   sha256 recorded beside it and checked on every reuse;
4. else `python -m pip download --no-deps --only-binary=:all: NAME==VERSION` into that
   cache, with pip as the user configured it (index, find-links, proxies), under a
   timeout; never with `offline` (`--offline`, `PATCHAUDIT_OFFLINE=1`, `offline = true`).

Only wheels are downloaded: pip prepares an sdist's metadata by running its build
backend (its `setup.py`), and patchaudit never runs the code it reads.  A git pin (a
commit, or a revision that is no version) is found as a clone in `engine-dirs`
(`DIR/NAME`, or a folder named NAME) that has the revision; else the note says to give
`--engine NAME=PATH@REV`.

A name or a version that could be read as an option (`-...`) or is no distribution
name / version at all never reaches pip or git.  What was not found comes back as None
with one note (in `notes`) naming the engine and the one line that gives it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from patchaudit.engine.versions import Version

#: where a resolved engine came from
ORIGINS = ("engine-dirs", "installed", "cache", "downloaded")
#: engine name (as the plan names it) -> the distribution on the package index
DISTRIBUTIONS = {"megatron": "megatron-core"}
#: the engines that may be downloaded (normalized names), besides `engine-packages`
KNOWN_ENGINES = frozenset(
    {"sglang", "vllm", "megatron", "megatron-core", "transformers", "trl", "deepspeed", "transformer-engine"}
    | {"flash-attn", "deepgemm", "deepep", "apex"}
)
#: the platforms a second `pip download` accepts when none fits this machine (engines run on Linux servers)
FALLBACK_PLATFORMS = (
    "manylinux_2_34_x86_64",
    "manylinux_2_28_x86_64",
    "manylinux2014_x86_64",
    "manylinux_2_34_aarch64",
    "manylinux_2_28_aarch64",
    "manylinux2014_aarch64",
    "any",
)
#: seconds `pip download` may take (a wheel of a few hundred MB on a slow link)
DOWNLOAD_TIMEOUT = 900.0
#: PEP 508 distribution names; nothing else reaches pip
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?")
#: a version as it may be written in a requirement (PEP 440 characters)
_VERSION_TEXT = re.compile(r"[0-9][0-9A-Za-z.!+_-]{0,63}|v[0-9][0-9A-Za-z.!+_-]{0,63}")
#: a git revision worth looking up (a sha, a tag or branch name); never an option
_REV = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._/-]{0,199}")
_HEX = re.compile(r"[0-9a-fA-F]{7,40}")
_WHEEL = re.compile(r"(?P<name>[^-]+)-(?P<ver>[^-]+)(?:-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl", re.I)
_SDIST_SUFFIXES = (".tar.gz", ".zip", ".tgz", ".tar.bz2", ".tar.xz")


@dataclass(frozen=True)
class ResolvedEngine:
    """An engine found by version: `source` works as `--engine NAME=SOURCE` (a wheel, an
    sdist, a folder, `PATH@REV`); `origin` is one of ORIGINS."""

    source: str
    version: str
    origin: str


_MEMO: dict[tuple, tuple[ResolvedEngine | None, list[str]]] = {}


def clear() -> None:
    """Forget this process's answers (tests; a long-lived process between runs)."""
    _MEMO.clear()


def resolve_engine(
    name: str,
    version: str,
    settings: Any,
    notes: list[str] | None = None,
    progress: Callable[[str], None] | None = None,
    download: bool = True,
) -> ResolvedEngine | None:
    """The engine `name` at `version` (a PEP 440 version, or a git revision), found as the
    module docstring says; None when it cannot be had, with one note appended to `notes`
    naming the engine and how to give it (each answer is kept for the process).
    `progress` is told before pip starts (a download may take minutes).  Only a known
    engine (`KNOWN_ENGINES`, the configuration's `engine-packages`) is downloaded: a
    name a recipe's folder happens to have is looked for here, never fetched.  `download=False`:
    local sources only (the caller's choice for versions it only might use), said as offline is."""
    dirs = tuple(getattr(settings, "engine_dirs", None) or ())
    offline = is_offline(settings) or not download
    known = KNOWN_ENGINES | {_norm(p) for p in getattr(settings, "engine_packages", None) or ()}
    key = (name, version, dirs, offline, _norm(name) in known)
    if key not in _MEMO:
        said: list[str] = []
        try:
            got = _resolve(name, version, dirs, (offline, _norm(name) in known, progress), said)
        except OSError as exc:  # a folder that vanished, a full disk: said, never a traceback
            said.append(f"{name} {version}: {exc}; {how_to_give(name, version)}")
            got = None
        _MEMO[key] = (got, said)
    got, said = _MEMO[key]
    if notes is not None:
        notes.extend(said)
    return got


def is_offline(settings: Any) -> bool:
    """`offline` in the settings, or `PATCHAUDIT_OFFLINE` set to a true value."""
    env = os.environ.get("PATCHAUDIT_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    return bool(getattr(settings, "offline", False)) or env


def distribution(name: str) -> str:
    """The distribution an engine name stands for on the package index."""
    return DISTRIBUTIONS.get(name.lower(), name)


def how_to_give(name: str, version: str) -> str:
    """The one line that gives an engine the run lacks."""
    if is_git_revision(version):
        return f"give it with `--engine {name}=PATH@{version}` (a clone of its repository) or `engines.{name}`"
    dist = distribution(name)
    return (
        f"give it with `--engine {name}=PATH` or `pip download --no-deps {dist}=={version} -d DIR` "
        f'and `engine-dirs = ["DIR"]`'
    )


def summary(engines: Mapping[str, ResolvedEngine]) -> str:
    """The summary line: each engine, its version and where it came from."""
    parts = [f"{n} {e.version} ({e.origin}: {e.source})" for n, e in sorted(engines.items())]
    return "engines: " + ", ".join(parts) if parts else ""


def is_git_revision(version: str) -> bool:
    """A pin that names a commit (a sha) or another revision rather than a version."""
    return bool(_HEX.fullmatch(version or "")) or Version.parse(version) is None


def _resolve(name: str, version: str, dirs: tuple[str, ...], how: tuple, notes: list[str]) -> ResolvedEngine | None:
    """`how`: (offline, a known engine, the progress callback)."""
    offline, known, progress = how
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        notes.append(f"engine name {name!r} is not a distribution name: not looked for")
        return None
    if not isinstance(version, str) or version.startswith("-"):
        notes.append(f"{name}: refusing the version {version!r}")
        return None
    if is_git_revision(version):
        return _git_clone(name, version, dirs, notes)
    if not _VERSION_TEXT.fullmatch(version):
        notes.append(f"{name}: {version!r} is not a version pip can be asked for")
        return None
    names = {_norm(name), _norm(distribution(name))}
    got = _in_dirs(names, version, dirs, notes) or _installed(names, version) or _cached(name, names, version, notes)
    if got is not None:
        return got
    if offline:
        where = "not in engine-dirs, not installed, not in the cache, and offline (nothing downloaded)"
        notes.append(f"{name} {version}: {where}: {how_to_give(name, version)}")
        return None
    if not known:
        notes.append(
            f"{name} {version}: not in engine-dirs, not installed, not in the cache; not a known engine "
            f"(engine-packages), so not downloaded: {how_to_give(name, version)}"
        )
        return None
    if progress is not None:
        progress(f"downloading {distribution(name)}=={version} with pip (--offline: never)")
    return _download(name, version, notes)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _same_version(text: str, version: str) -> bool:
    a, b = Version.parse(text), Version.parse(version)
    return a is not None and b is not None and a == b


def _archive_match(filename: str, names: set[str], version: str) -> int | None:
    """0 for a pure-Python wheel of that name and version, 1 another wheel, 2 an sdist; None if not."""
    m = _WHEEL.fullmatch(filename)
    if m:
        if _norm(m.group("name")) in names and _same_version(m.group("ver"), version):
            return 0 if filename.lower().endswith("-none-any.whl") else 1
        return None
    low = filename.lower()
    suffix = next((s for s in _SDIST_SUFFIXES if low.endswith(s)), None)
    if suffix is None:
        return None
    base = filename[: -len(suffix)]
    for i, c in enumerate(base):
        if c == "-" and _norm(base[:i]) in names and _same_version(base[i + 1 :], version):
            return 2
    return None


def _best(folder: str, names: set[str], version: str) -> str | None:
    try:
        entries = sorted(os.listdir(folder))
    except OSError:
        return None
    ranked = []
    for e in entries:
        rank = _archive_match(e, names, version)
        if rank is not None and os.path.isfile(os.path.join(folder, e)):
            ranked.append((rank, e))
    return os.path.join(folder, min(ranked)[1]) if ranked else None


def _in_dirs(names: set[str], version: str, dirs, notes: list[str]) -> ResolvedEngine | None:
    for d in dirs:
        if not os.path.isdir(d):
            notes.append(f"engine-dirs: {d} is not a folder")
            continue
        got = _best(d, names, version)
        if got:
            return ResolvedEngine(got, version, "engine-dirs")
    return None


def _installed(names: set[str], version: str) -> ResolvedEngine | None:
    """An installed distribution of exactly `version`: the folder of its package."""
    from importlib import metadata

    for dist_name in sorted(names):
        try:
            dist = metadata.distribution(dist_name)
        except (metadata.PackageNotFoundError, ValueError, OSError):
            continue
        if not _same_version(dist.version or "", version):
            continue
        tops = sorted({str(f).split("/")[0] for f in (dist.files or ()) if str(f).endswith("/__init__.py")})
        want = [t for t in tops if _norm(t) in names] or tops
        for top in want:
            folder = str(dist.locate_file(top))
            if os.path.isfile(os.path.join(folder, "__init__.py")):
                return ResolvedEngine(folder, version, "installed")
    return None


def _cache_folder(dist: str, version: str) -> str | None:
    """`<cache>/engines/<distribution>/<version>/` (both checked: no `/`, no `..`)."""
    from patchaudit.files.usercache import engine_cache_dir

    base = engine_cache_dir()
    return None if base is None else os.path.join(base, _norm(dist), version.lower())


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _cached(name: str, names: set[str], version: str, notes: list[str]) -> ResolvedEngine | None:
    folder = _cache_folder(distribution(name), version)
    got = _best(folder, names, version) if folder else None
    if got is None:
        return None
    from patchaudit.files.usercache import read_file

    recorded = (read_file(got + ".sha256") or b"").decode("ascii", "replace").split()
    actual = _sha256(got)
    if recorded and recorded[0] == actual:
        return ResolvedEngine(got, version, "cache")
    why = "has no recorded sha256" if not recorded else f"changed since it was downloaded (sha256 {actual[:12]}...)"
    notes.append(f"the cached {got} {why}: not used")
    try:
        os.unlink(got)
    except OSError:
        pass
    return None


def _download(name: str, version: str, notes: list[str]) -> ResolvedEngine | None:
    from patchaudit.files.usercache import atomic_write, location_of
    from patchaudit.inputs.gitrun import ProgramError, run_pip

    dist = distribution(name)
    names = {_norm(name), _norm(dist)}
    folder = _cache_folder(dist, version)
    if folder is None:
        notes.append(f"{name} {version}: no user cache folder to download into; {how_to_give(name, version)}")
        return None
    with location_of(folder).open(create=True):
        pass  # made as the user's private folders are (no symlink below the cache's base)
    tmp = tempfile.mkdtemp(prefix=".download-", dir=folder)
    try:
        args = ["download", "--no-deps", "--only-binary=:all:", "--ignore-requires-python", "-q", "-d", tmp]
        try:
            proc = run_pip([*args, f"{dist}=={version}"], cwd=tmp, timeout=DOWNLOAD_TIMEOUT)
            if proc.returncode != 0 and b"No matching distribution" in proc.stderr:
                # no wheel for this machine (a Mac, another Python): the engine's files are the
                # same in a wheel built for the servers it runs on
                platforms = [a for p in FALLBACK_PLATFORMS for a in ("--platform", p)]
                proc = run_pip([*args, *platforms, f"{dist}=={version}"], cwd=tmp, timeout=DOWNLOAD_TIMEOUT)
        except ProgramError as exc:
            notes.append(f"{name} {version}: {exc}; {how_to_give(name, version)}")
            return None
        got = _best(tmp, names, version)
        if proc.returncode != 0 or got is None:
            err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            last = next((e.strip() for e in reversed(err) if e.strip()), f"exit code {proc.returncode}")
            notes.append(
                f"{name} {version}: `pip download --no-deps --only-binary=:all: {dist}=={version}` failed "
                f"({last[:300]}); {how_to_give(name, version)}"
            )
            return None
        final = os.path.join(folder, os.path.basename(got))
        digest = _sha256(got)
        os.replace(got, final)
        atomic_write(final + ".sha256", f"{digest}  {os.path.basename(final)}\n".encode(), 0o600)
        return ResolvedEngine(final, version, "downloaded")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _git_clone(name: str, rev: str, dirs, notes: list[str]) -> ResolvedEngine | None:
    """A clone in `engine-dirs` that has the revision: `DIR/NAME`, or DIR itself named NAME."""
    from patchaudit.engine.base import EngineError
    from patchaudit.engine.gitsource import GitSource

    if not _REV.fullmatch(rev) or ".." in rev:
        notes.append(f"{name}: refusing the git revision {rev!r}")
        return None
    want = {_norm(name), _norm(distribution(name))}
    for d in dirs:
        cands = [os.path.join(d, n) for n in sorted(os.listdir(d)) if _norm(n) in want] if os.path.isdir(d) else []
        if _norm(os.path.basename(os.path.normpath(d))) in want:
            cands.insert(0, d)
        for path in cands:
            if not (os.path.exists(os.path.join(path, ".git")) or os.path.isfile(os.path.join(path, "HEAD"))):
                continue
            try:
                GitSource(path, rev, name=name).close()
            except EngineError:
                continue
            return ResolvedEngine(f"{os.path.abspath(path)}@{rev}", rev, "engine-dirs")
    notes.append(f"{name} at git revision {rev}: no clone that has it in engine-dirs; {how_to_give(name, rev)}")
    return None
