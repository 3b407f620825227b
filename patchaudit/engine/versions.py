"""Engine versions: a small PEP 440 `Version`, the versions of an engine
source's packages, its top-level packages, and the version tags of the
modules of a per-version patch package (`v0_5_9`, `sglang_0_5_9`)."""

from __future__ import annotations

import os
import re
from typing import Any, Iterable

#: the engine packages of a run when `engine-packages` is not configured
DEFAULT_PACKAGES = ("sglang", "vllm", "megatron")


# --------------------------------------------------------------------------
# versions (a small PEP 440 subset; `packaging` is not a dependency)

_VER_RE = re.compile(
    r"^\s*v?(\d+(?:\.\d+)*)"
    r"(?:[-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?(\d*))?"
    r"(?:[-_.]?(post|rev|r)[-_.]?(\d*))?"
    r"(?:[-_.]?(dev)[-_.]?(\d*))?"
    r"(?:\+[A-Za-z0-9.]+)?\s*$",
    re.I,
)
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}


class Version:
    """A parsed version that compares like packaging's `Version` (release,
    pre-release, post-release, dev; local labels ignored)."""

    __slots__ = ("text", "release", "key")

    def __init__(self, text: str):
        m = _VER_RE.match(text)
        if not m:
            raise ValueError(text)
        self.text = text
        rel = tuple(int(x) for x in m.group(1).split("."))
        self.release = rel
        trimmed = rel
        while len(trimmed) > 1 and trimmed[-1] == 0:
            trimmed = trimmed[:-1]
        pre = (_PRE_RANK[m.group(2).lower()], int(m.group(3) or 0)) if m.group(2) else None
        post = int(m.group(5) or 0) if m.group(4) else None
        dev = int(m.group(7) or 0) if m.group(6) else None
        if pre is None and post is None and dev is not None:
            pre_key: tuple = (-1,)
        elif pre is None:
            pre_key = (9,)
        else:
            pre_key = pre
        self.key = (trimmed, pre_key, -1 if post is None else post, float("inf") if dev is None else dev)

    @classmethod
    def parse(cls, text: Any) -> "Version | None":
        if isinstance(text, Version):
            return text
        if not isinstance(text, str):
            return None
        try:
            return cls(text)
        except ValueError:
            return None

    @property
    def base_version(self) -> str:
        return ".".join(str(x) for x in self.release)

    def __repr__(self) -> str:
        return f"Version({self.text!r})"

    def __str__(self) -> str:
        return self.text

    def _cmp(self, other: Any):
        o = Version.parse(other) if not isinstance(other, Version) else other
        if o is None:
            raise TypeError(other)
        return self.key, o.key

    def __eq__(self, other: Any) -> bool:  # type: ignore[override]
        a, b = self._cmp(other)
        return a == b

    def __lt__(self, other: Any) -> bool:
        a, b = self._cmp(other)
        return a < b

    def __le__(self, other: Any) -> bool:
        a, b = self._cmp(other)
        return a <= b

    def __gt__(self, other: Any) -> bool:
        a, b = self._cmp(other)
        return a > b

    def __ge__(self, other: Any) -> bool:
        a, b = self._cmp(other)
        return a >= b

    def __hash__(self) -> int:
        return hash(self.key)


#: `__version__ = "0.5.9"`, `version: str = '1.0'`, setuptools_scm's `__version__ = version = '0.5.15.post1'`
_VERSION_ASSIGN_RE = re.compile(
    r"""(?m)^(?:__version__|version|VERSION)\s*(?::[^=\n]*)?=\s*"""
    r"""(?:(?:__version__|version|VERSION)\s*=\s*)*["']([^"'\n]+)["']"""
)
#: `__version_tuple__ = version_tuple = (0, 5, 15, 'post1')`
_TUPLE_ASSIGN_RE = re.compile(
    r"""(?m)^(?:__version_tuple__|version_tuple|VERSION_TUPLE|version_info|VERSION_INFO)\s*(?::[^=\n]*)?=\s*"""
    r"""(?:(?:__version_tuple__|version_tuple|version_info)\s*=\s*)*\(([^()\n]*)\)"""
)
_SETUP_RE = re.compile(r"""\b(name|version)\s*=\s*["']([^"'\n]+)["']""")
_PKG_INFO_RE = re.compile(r"(?m)^(MAJOR|MINOR|PATCH)\s*=\s*(\d+)")
_DIST_RE = re.compile(r"^([A-Za-z0-9_.]+?)-(\d[^-/]*)\.(?:dist|egg)-info$")


def cache_on(obj: Any, name: str, value: Any) -> Any:
    """Memoise on the object itself (ids are reused after garbage collection)."""
    try:
        setattr(obj, name, value)
    except AttributeError:  # pragma: no cover - a slotted object
        pass
    return value


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def engine_versions(source) -> dict[str, str]:
    """Versions of the top-level packages of an engine source: from the metadata
    (`*.dist-info`/`*.egg-info`: their METADATA/PKG-INFO, else their names; an sdist's
    `PKG-INFO`; `pyproject.toml`'s `[project] version`, `setup.py`'s `version="..."`),
    then the package's own files (`__version__ = "..."`, setuptools_scm's
    `__version__ = version = '...'`, `version_tuple = (0, 5, 15, 'post1')` in
    `_version.py`/`version.py`/`__init__.py`, megatron's `package_info.py`), then git
    (a tag on the revision, `v0.5.15.post1`, or a revision that reads as a version).
    A package nested in another (a weak root inside `sglang/`) gets no version of its
    own: its `__init__.py`'s `__version__` is not the engine's."""
    cached = getattr(source, "_pa_versions", None)
    if cached is not None:
        return cached
    try:
        files = source.files()
    except Exception:
        files = []
    out = _metadata_versions(source, files)
    tops = outer_packages(source)
    for pkg in sorted(tops):
        if _norm(pkg) in out:
            out.setdefault(pkg, out[_norm(pkg)])
            continue
        found = _file_version(source, pkg)
        if found:
            out[pkg] = found
    for dist, ver in _git_versions(source).items():
        for top in tops:
            if dist is None or _norm(top) == dist:
                out.setdefault(top, ver)
    cache_on(source, "_pa_versions", out)
    return out


def _metadata_versions(source, files: list[str]) -> dict[str, str]:
    """{normalised distribution name: version} from the engine's packaging metadata."""
    out: dict[str, str] = {}
    for f in files:
        parts = f.split("/")
        for k, comp in enumerate(parts[:-1]):
            m = _DIST_RE.match(comp)
            if not m:
                continue
            name, ver = m.group(1), m.group(2)
            if k == len(parts) - 2 and parts[-1] in ("METADATA", "PKG-INFO"):
                meta = _pkg_info(source.read_text(f) or "")
                if meta:
                    name, ver = meta
            if parts[-1] in ("METADATA", "PKG-INFO") or _norm(name) not in out:
                out[_norm(name)] = ver
    for f in files:
        base, depth = f.rsplit("/", 1)[-1], f.count("/")
        if depth > 1:  # the engine's root, or one folder down (an sdist's, a checkout's python/)
            continue
        if base == "PKG-INFO" and not any(_DIST_RE.match(c) for c in f.split("/")[:-1]):
            meta = _pkg_info(source.read_text(f) or "")
        elif base == "pyproject.toml":
            meta = _pyproject(source.read_text(f) or "")
        elif base == "setup.py":
            meta = _setup_py(source.read_text(f) or "")
        else:
            continue
        if meta:
            out.setdefault(_norm(meta[0]), meta[1])
    return out


def _pkg_info(text: str) -> tuple[str, str] | None:
    n = re.search(r"(?m)^Name:\s*(\S+)", text)
    v = re.search(r"(?m)^Version:\s*(\S+)", text)
    return (n.group(1), v.group(1)) if n and v and Version.parse(v.group(1)) else None


def _pyproject(text: str) -> tuple[str, str] | None:
    """`[project] name` and a static `version` (a dynamic one is found in the package)."""
    import tomllib

    try:
        project = tomllib.loads(text).get("project")
    except (tomllib.TOMLDecodeError, ValueError):
        return None
    if not isinstance(project, dict):
        return None
    name, ver = project.get("name"), project.get("version")
    return (name, ver) if isinstance(name, str) and isinstance(ver, str) and Version.parse(ver) else None


def _setup_py(text: str) -> tuple[str, str] | None:
    """`setup(name="...", version="...")` with both literal."""
    found: dict[str, str] = {}
    for key, value in _SETUP_RE.findall(text):
        found.setdefault(key, value)
    name, ver = found.get("name"), found.get("version")
    return (name, ver) if name and ver and Version.parse(ver) else None


def _file_version(source, pkg: str) -> str | None:
    """The version a package's own files state."""
    for mod in (f"{pkg}._version", f"{pkg}.version", pkg, f"{pkg}.core.package_info", f"{pkg}.package_info"):
        path = source.module_path(mod)
        text = source.read_text(path) if path else None
        if not text:
            continue
        m = _VERSION_ASSIGN_RE.search(text)
        if m and Version.parse(m.group(1)):
            return m.group(1)
        t = _TUPLE_ASSIGN_RE.search(text)
        if t:
            ver = _from_tuple(t.group(1))
            if ver:
                return ver
        parts = dict(_PKG_INFO_RE.findall(text))
        if {"MAJOR", "MINOR"} <= set(parts):
            return f"{parts['MAJOR']}.{parts['MINOR']}.{parts.get('PATCH', '0')}"
    return None


def _from_tuple(items: str) -> str | None:
    """`0, 5, 15, 'post1'` -> 0.5.15.post1 (a further string is the local label)."""
    nums: list[str] = []
    words: list[str] = []
    for item in (x.strip() for x in items.split(",")):
        if not item:
            continue
        if item.isdigit() and not words:
            nums.append(item)
        elif len(item) >= 2 and item[0] == item[-1] and item[0] in "'\"":
            words.append(item[1:-1])
        else:
            return None
    if not nums:
        return None
    ver = ".".join(nums) + ("." + words[0] if words else "") + ("+" + ".".join(words[1:]) if len(words) > 1 else "")
    return ver if Version.parse(ver) else None


def _git_versions(source) -> dict[str | None, str]:
    """{package or None (every package): version} from git: a tag on the revision
    (`v0.5.15.post1`, `sglang-v0.5.9`), else the revision itself when it reads as one."""
    out: dict[str | None, str] = {}
    tags = source.tags() if callable(getattr(source, "tags", None)) else []
    rev = getattr(source, "rev", None)
    for tag in ([rev] if isinstance(rev, str) else []) + list(tags):
        if Version.parse(tag) is not None:
            out.setdefault(None, tag.lstrip("vV"))
            continue
        m = re.match(r"^([A-Za-z][A-Za-z0-9_.-]*?)[-_/]v?(\d[^/]*)$", tag)
        if m and Version.parse(m.group(2)):
            out.setdefault(_norm(m.group(1)), m.group(2))
    return out


def _in_package(root: str, fileset: set[str]) -> bool:
    """Whether a root ("a/b/") lies inside a package: some folder above it (itself
    included) has an `__init__.py`."""
    parts = root.strip("/").split("/")
    return any("/".join(parts[:k]) + "/__init__.py" in fileset for k in range(1, len(parts) + 1))


def outer_packages(source) -> frozenset[str]:
    """The top-level packages that are not inside another package (a weak package root
    under `sglang/`, `sglang/srt/`, holds no distribution of its own)."""
    cached = getattr(source, "_pa_outer", None)
    if cached is None:
        try:
            roots = list(dict.fromkeys(source.package_roots() + [""]))
            files = source.files()
            fileset = set(files)
        except Exception:
            roots, files, fileset = [""], [], set()
        inside = {r for r in roots if r and _in_package(r, fileset)}
        tops: set[str] = set()
        for f in files:
            if not f.endswith(".py"):
                continue
            for root in roots:
                if root in inside or not f.startswith(root):
                    continue
                first = f[len(root) :].split("/", 1)[0]
                name = first[:-3] if first.endswith(".py") else first
                if name.isidentifier():
                    tops.add(name)
        cached = cache_on(source, "_pa_outer", frozenset(tops))
    return cached


def _python_paths(source) -> list[str]:
    """Every .py file of an engine source, relative to each package root holding it
    ("" too: a namespace package at the top, megatron/core/..., has no root of its own)."""
    try:
        roots = list(dict.fromkeys(source.package_roots() + [""]))
        files = source.files()
    except Exception:
        roots, files = [""], []
    return [f[len(root) :] for f in files if f.endswith(".py") for root in roots if f.startswith(root)]


def top_packages(source) -> frozenset[str]:
    """Top-level importable names of an engine source (packages and modules)."""
    cached = getattr(source, "_pa_tops", None)
    if cached is None:
        tops: set[str] = set()
        for rel in _python_paths(source):
            first = rel.split("/", 1)[0]
            name = first[:-3] if first.endswith(".py") else first
            if name.isidentifier():
                tops.add(name)
        cached = cache_on(source, "_pa_tops", frozenset(tops))
    return cached


def package_dirs(source) -> frozenset[str]:
    """Dotted names of every directory holding Python files (namespace packages included)."""
    cached = getattr(source, "_pa_dirs", None)
    if cached is None:
        out: set[str] = set()
        for rel in _python_paths(source):
            parts = rel.split("/")[:-1]
            for k in range(1, len(parts) + 1):
                out.add(".".join(parts[:k]))
        cached = cache_on(source, "_pa_dirs", frozenset(out))
    return cached


_TAG_PLAIN = re.compile(r"^v?(\d+(?:[._]\d+){1,3})(?:[._]?((?:post|rc|dev|a|b)\d+))?$", re.I)


def path_version_tag(path: str, packages: Iterable[str]) -> tuple[str | None, str] | None:
    """The engine version a module of a per-version patch package is for, from
    its path: a component (directory or file stem) that is exactly a version
    (`v0_5_9`, `0.5.9`, `v0_5`) or a package name and a version
    (`sglang_0_5_9`, `vllm-0.11.0`, `sglang_v0_5_15_post1`).  Model names like
    `qwen2_5_vl` are not versions.  Returns (package or None, "0.5.9")."""
    comps = path.replace(os.sep, "/").split("/")
    if comps and comps[-1].endswith(".py"):
        comps[-1] = comps[-1][:-3]
    for comp in reversed(comps):
        pkg = None
        rest = comp
        for p in packages:
            if comp.lower().startswith(p.lower()) and len(comp) > len(p):
                tail = comp[len(p) :].lstrip("_-.")
                if tail and (tail[0].isdigit() or (tail[0] in "vV" and tail[1:2].isdigit())):
                    pkg, rest = p, tail
                    break
        m = _TAG_PLAIN.match(rest)
        if m:
            ver = re.sub(r"[._]", ".", m.group(1))
            if m.group(2):
                ver += "." + m.group(2).lower()
            return pkg, ver
    return None


def tag_matches(tag: str, version: str | None) -> bool:
    """A tag `0.5` matches 0.5.x; `0.5.15` matches 0.5.15 and 0.5.15.post1;
    `0.5.15.post1` only itself."""
    if version is None:
        return False
    v = Version.parse(version)
    t = Version.parse(tag.split(".post")[0].split(".rc")[0].split(".dev")[0])
    if v is None or t is None:
        return False
    if v.release[: len(t.release)] != t.release and not (
        len(v.release) < len(t.release)
        and t.release[len(v.release) :] == (0,) * (len(t.release) - len(v.release))
        and t.release[: len(v.release)] == v.release
    ):
        return False
    extra = tag[len(".".join(str(x) for x in t.release)) :].strip(".")
    if extra:
        full = Version.parse(tag)
        return full is not None and full == v
    return True


def expected_file(source, path: str | None) -> bool:
    """Whether the build's checkout of this engine has `path` when the engine lacks it: a
    checkout (a folder, a git revision, an sdist) has the build's files; an installed
    engine (a wheel, a folder with a `*.dist-info`) has no `sgl-kernel/csrc/` or `test/`,
    only the files of its packages."""
    if not path:
        return False
    installed = source.kind == "wheel" or any(f.split("/", 1)[0].endswith(".dist-info") for f in source.files())
    return not installed or path.split("/", 1)[0] in outer_packages(source)


def outside_source(source, patch_path: str, path: str | None) -> bool:
    """Whether a file a patch changes is outside what this kind of engine source holds: an
    installed engine (a wheel) has its packages only, not the checkout's `sgl-kernel/csrc/`,
    `test/`, `docs/`: a path (as the patch writes it) that names none of its packages and
    that `expected_file` does not expect."""
    return not expected_file(source, path) and not set(patch_path.split("/")[:-1]) & set(outer_packages(source))


def engine_title(ctx, pkg: str) -> str:
    ver = engine_versions(ctx.source).get(pkg)
    return f"{pkg} {ver}" if ver else ctx.source.label


def engine_summary(ctx) -> str:
    """An engine as a user names it: its packages' versions and where it comes from
    (the package `--engine NAME=` names first, then the known engines)."""
    versions = engine_versions(ctx.source)
    tops = sorted(outer_packages(ctx.source))
    own = getattr(ctx.source, "name", None)
    named = (
        [f"{p} {versions[p]}" for p in tops if p in versions and p == own]
        or [f"{p} {versions[p]}" for p in tops if p in versions and p in DEFAULT_PACKAGES]
        or [f"{p} {versions[p]}" for p in tops if p in versions][:3]
    )
    label = ctx.source.label
    return f"{', '.join(named)} ({label})" if named else label
