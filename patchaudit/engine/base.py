"""The abstract engine source, its error and the path helpers every kind shares.

An engine source is read-only: ``EngineSource`` lists and reads files, finds
package roots and maps dotted module names to paths and back; the kinds
(`directory`, `gitsource`, `wheel`, `sdist`) implement ``_list()`` and ``_read()``.
"""

from __future__ import annotations

import os
import re
from typing import Iterable

_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DRIVE_RE = re.compile(r"[A-Za-z]:")


class EngineError(Exception):
    """A bad engine spec or an unreadable engine source; the message names the source."""


# ---------------------------------------------------------------------------
# path helpers


def norm_rel(path: str) -> str | None:
    """Normalise a caller-given relative path; None if it is absolute or escapes."""
    if not isinstance(path, str) or not path or "\x00" in path:
        return None
    if path.startswith("/") or "\\" in path or _DRIVE_RE.match(path):
        return None
    parts = [p for p in path.split("/") if p and p != "."]
    if not parts or ".." in parts:
        return None
    return "/".join(parts)


def member_name(name: str) -> tuple[str | None, str]:
    """Normalise an archive member name; (None, reason) if it must be skipped.

    A reason of "" means the member is a directory entry (skipped silently)."""
    if "\x00" in name:
        return None, "NUL in member name"
    while name.startswith("./"):
        name = name[2:]
    if name.startswith("/"):
        return None, "absolute member name"
    if "\\" in name:
        return None, "backslash in member name"
    if _DRIVE_RE.match(name):
        return None, "drive letter in member name"
    parts = [p for p in name.split("/") if p and p != "."]
    if ".." in parts:
        return None, "'..' in member name"
    if not parts:
        return None, ""
    return "/".join(parts), ""


def within(root: str, path: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def fmt_size(n: int) -> str:
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.0f} MiB"
    return f"{n} bytes"


# ---------------------------------------------------------------------------
# the abstract source


class EngineSource:
    """A read-only view of an engine's files.  Subclasses implement
    ``_list()`` and ``_read(path)``; everything else is shared."""

    kind = "abstract"

    def __init__(self, name: str, spec: str, label: str) -> None:
        self.name = name
        self.spec = spec
        self.label = label
        # (path-or-member, reason) for every entry left out of files()
        self.skipped: list[tuple[str, str]] = []
        self._files: list[str] | None = None
        self._fileset: frozenset[str] | None = None
        self._by_base: dict[str, list[str]] | None = None
        self._roots: tuple[list[str], list[str]] | None = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}={self.label}>"

    def identity(self) -> tuple | None:
        """A stamp that changes whenever the source's content may have (exact mode's result
        cache is keyed by it, pipeline/exact_cache.py), or None when it has none: a
        directory, any file of which may change."""
        return None

    def warnings(self) -> list[str]:
        """What the user should hear about the members left out (archives: see
        WheelSource/SdistSource); a directory or git source says nothing."""
        return []

    # -- to implement ------------------------------------------------------
    def _list(self) -> Iterable[str]:
        raise NotImplementedError

    def _read(self, path: str) -> bytes | None:
        raise NotImplementedError

    # -- listing -----------------------------------------------------------
    def files(self) -> list[str]:
        """Sorted posix relative paths of the regular files (cached)."""
        if self._files is None:
            files = sorted(set(self._list()))
            self._files = files
            self._fileset = frozenset(files)
        return list(self._files)

    def _set(self) -> frozenset[str]:
        if self._fileset is None:
            self.files()
        assert self._fileset is not None
        return self._fileset

    def has(self, path: str) -> bool:
        p = norm_rel(path)
        return p is not None and p in self._set()

    # -- reading -----------------------------------------------------------
    def read_bytes(self, path: str) -> bytes | None:
        p = norm_rel(path)
        if p is None:
            return None
        return self._read(p)

    def read_text(self, path: str) -> str | None:
        data = self.read_bytes(path)
        if data is None:
            return None
        return data.decode("utf-8", "surrogateescape")

    def blob(self, sha_prefix: str) -> bytes | None:
        """The git blob a diff's ``index <sha>..<sha>`` line names; only a
        git source can have it."""
        return None

    def line_commits(self, path: str, start: int, end: int, since: "EngineSource") -> list[dict]:
        """Commits that changed lines start..end of path between ``since`` and
        this source; only git sources know (others return [])."""
        return []

    def close(self) -> None:
        """Release open files / helper processes.  Idempotent."""

    def __enter__(self) -> "EngineSource":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- indexes -----------------------------------------------------------
    def _basename_index(self) -> dict[str, list[str]]:
        if self._by_base is None:
            idx: dict[str, list[str]] = {}
            for f in self.files():
                idx.setdefault(f.rsplit("/", 1)[-1], []).append(f)
            self._by_base = idx
        return self._by_base

    def suffix_prefixes(self, rel: str) -> list[str]:
        """Every engine directory prefix P (``""`` or ending in ``/``) such
        that P + rel is a file of the engine."""
        out = []
        for f in self._basename_index().get(rel.rsplit("/", 1)[-1], ()):
            if f == rel:
                out.append("")
            elif f.endswith("/" + rel):
                out.append(f[: len(f) - len(rel)])
        return out

    def _root_sets(self) -> tuple[list[str], list[str]]:
        """(strong, weak) package roots, each "" or ending in "/".

        Strong roots are where an installer or a build puts packages on
        sys.path: a directory holding ``*.dist-info``/``*.egg-info`` (a wheel,
        site-packages), a wheel's ``*.data/purelib|platlib/``, a directory
        holding ``pyproject.toml``/``setup.py``/``setup.cfg`` (and its ``src/``).
        Weak roots come from ``__init__.py`` files: the parent of a package
        whose own parent is not a package.  Real engines mix regular and
        namespace packages (sglang's ``srt/`` has no ``__init__.py``), so weak
        roots are only a fallback."""
        if self._roots is None:
            files = self._set()
            strong: set[str] = set()
            weak: set[str] = set()
            dirs_with_src: set[str] = set()
            for f in files:
                parts = f.split("/")
                for k, comp in enumerate(parts[:-1]):
                    if comp.endswith((".dist-info", ".egg-info")):
                        strong.add("".join(c + "/" for c in parts[:k]))
                    elif comp.endswith(".data") and k + 1 < len(parts) - 1 and parts[k + 1] in ("purelib", "platlib"):
                        strong.add("".join(c + "/" for c in parts[: k + 2]))
                base = parts[-1]
                d = "".join(c + "/" for c in parts[:-1])
                if base in ("pyproject.toml", "setup.py", "setup.cfg"):
                    strong.add(d)
                if len(parts) >= 3 and parts[-3] == "src" and base.endswith(".py"):
                    dirs_with_src.add("".join(c + "/" for c in parts[:-3]))
                if base == "__init__.py" and len(parts) >= 2:
                    parent = "".join(c + "/" for c in parts[:-2])
                    if parent + "__init__.py" not in files:
                        weak.add(parent)
            for d in list(strong):
                if d in dirs_with_src:
                    strong.add(d + "src/")
            key = lambda r: (r.count("/"), r)  # noqa: E731
            self._roots = (sorted(strong, key=key), sorted(weak - strong, key=key))
        return self._roots

    def package_roots(self) -> list[str]:
        """The directories module_path() searches, in order (like sys.path):
        strong roots shallowest first, then weak roots (see _root_sets)."""
        strong, weak = self._root_sets()
        return strong + weak

    # -- modules -----------------------------------------------------------
    def module_path(self, dotted: str) -> str | None:
        """Relative path of the module ``dotted`` (``x.py`` or
        ``x/__init__.py``), searched under the package roots; failing that,
        under the shallowest directory that has it."""
        if not isinstance(dotted, str):
            return None
        parts = dotted.split(".")
        if not all(_IDENT_RE.fullmatch(p) for p in parts):
            return None
        base = "/".join(parts)
        cands = (base + ".py", base + "/__init__.py")
        files = self._set()
        for root in self.package_roots():
            for c in cands:
                if root + c in files:
                    return root + c
        best: tuple[int, str, str] | None = None
        for c in cands:
            for pre in self.suffix_prefixes(c):
                key = (pre.count("/"), pre, c)
                if best is None or key < best:
                    best = key
        if best is None:
            return None
        return best[1] + best[2]

    def module_name(self, path: str) -> str | None:
        """Dotted module name of the ``.py`` file at ``path``, the inverse of
        module_path().  The root is the deepest strong root above the file,
        else the deepest weak one, else the top of the package chain."""
        p = norm_rel(path)
        if p is None or not p.endswith(".py") or p not in self._set():
            return None
        strong, weak = self._root_sets()
        cands: list[str] = []
        for group in (strong, weak):
            cands += sorted((r for r in group if p.startswith(r)), key=lambda r: -len(r))
        # last resort: the top of the __init__.py chain above the file
        files = self._set()
        dirs = p.split("/")[:-1]
        i = len(dirs) - 1 if p.endswith("/__init__.py") or p == "__init__.py" else len(dirs)
        while i > 0 and "/".join(dirs[:i]) + "/__init__.py" in files:
            i -= 1
        cands.append("".join(c + "/" for c in dirs[:i]))
        first = None
        for root in cands:
            rest = p[len(root) : -3].split("/")
            if rest[-1] == "__init__":
                rest.pop()
            if not rest or not all(_IDENT_RE.fullmatch(c) for c in rest):
                continue
            name = ".".join(rest)
            if self.module_path(name) == p:
                return name
            if first is None:
                first = name
        return first


def archive_identity(kind: str, path: str) -> tuple | None:
    """An archive's stamp: its path, size, modification time and inode (how the result
    cache identifies its own code), or None when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (kind, path, st.st_size, st.st_mtime_ns, st.st_ino)
