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


_VERSION_ASSIGN_RE = re.compile(
    r"""(?m)^(?:__version__|version|VERSION)\s*(?::[^=\n]*)?=\s*"""
    r"""(?:__version__\s*=\s*)?["']([^"'\n]+)["']"""
)
_PKG_INFO_RE = re.compile(r"(?m)^(MAJOR|MINOR|PATCH)\s*=\s*(\d+)")
_DIST_RE = re.compile(r"^([A-Za-z0-9_.]+?)-(\d[^-/]*)\.(?:dist|egg)-info$")


def cache_on(obj: Any, name: str, value: Any) -> Any:
    """Memoise on the object itself (ids are reused after garbage collection)."""
    try:
        setattr(obj, name, value)
    except AttributeError:  # pragma: no cover - a slotted object
        pass
    return value


def engine_versions(source) -> dict[str, str]:
    """Versions of the top-level packages of an engine source: from
    `*.dist-info`/`*.egg-info` names, then `PKG-INFO`, then `__version__ = "..."`
    in `_version.py`/`version.py`/`__init__.py`, then megatron's `package_info.py`,
    then a git revision that reads as a version (`v0.5.9`)."""
    cached = getattr(source, "_pa_versions", None)
    if cached is not None:
        return cached
    out: dict[str, str] = {}
    try:
        files = source.files()
    except Exception:
        files = []
    tops = top_packages(source)
    for f in files:
        for comp in f.split("/")[:-1]:
            m = _DIST_RE.match(comp)
            if m:
                out.setdefault(m.group(1).replace("-", "_").lower(), m.group(2))
    if not out:
        for f in files:
            if f.rsplit("/", 1)[-1] == "PKG-INFO" and f.count("/") <= 1:
                text = source.read_text(f) or ""
                n = re.search(r"(?m)^Name:\s*(\S+)", text)
                v = re.search(r"(?m)^Version:\s*(\S+)", text)
                if n and v:
                    out.setdefault(n.group(1).replace("-", "_").lower(), v.group(1))
    for pkg in tops:
        if pkg.lower() in out:
            out.setdefault(pkg, out[pkg.lower()])
            continue
        for mod in (f"{pkg}._version", f"{pkg}.version", pkg, f"{pkg}.core.package_info", f"{pkg}.package_info"):
            path = source.module_path(mod)
            text = source.read_text(path) if path else None
            if not text:
                continue
            m = _VERSION_ASSIGN_RE.search(text)
            if m and Version.parse(m.group(1)):
                out[pkg] = m.group(1)
                break
            parts = dict(_PKG_INFO_RE.findall(text))
            if {"MAJOR", "MINOR"} <= set(parts):
                out[pkg] = f"{parts['MAJOR']}.{parts['MINOR']}.{parts.get('PATCH', '0')}"
                break
    rev = getattr(source, "rev", None)
    if isinstance(rev, str) and Version.parse(rev) is not None:
        for pkg in tops:
            out.setdefault(pkg, rev.lstrip("vV"))
    cache_on(source, "_pa_versions", out)
    return out


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


def engine_title(ctx, pkg: str) -> str:
    ver = engine_versions(ctx.source).get(pkg)
    return f"{pkg} {ver}" if ver else ctx.source.label


def engine_summary(ctx) -> str:
    """An engine as a user names it: its packages' versions and where it comes from."""
    versions = engine_versions(ctx.source)
    tops = sorted(top_packages(ctx.source))
    named = [f"{p} {versions[p]}" for p in tops if p in versions and p in DEFAULT_PACKAGES] or [
        f"{p} {versions[p]}" for p in tops if p in versions
    ][:3]
    label = ctx.source.label
    return f"{', '.join(named)} ({label})" if named else label
