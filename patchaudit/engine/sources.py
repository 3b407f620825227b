"""Read-only engine sources and automatic strip-level detection.

An *engine source* is the code a patch set is carried against: a directory
(checkout, unpacked wheel, site-packages), a git repository at a revision, a
wheel/zip or an sdist tarball.  Every kind is read in place and never written:
archives are never extracted, git is only asked to read objects (the work tree
and the index are never touched).

``open_engine(spec)`` picks the kind from the spec; ``detect_strip`` finds the
``patch -pN`` strip level (and an engine-side directory prefix) that maps the
paths of a patch onto the engine's files; ``map_path`` applies it.

Only the standard library is imported at module import time; git is run
(through `patchaudit.inputs.safegit`, never directly) only by the functions
that need it (start-up time matters for the pre-commit hook).
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import re
import stat
import struct
import tarfile
import zipfile
import zlib
from typing import Iterable

__all__ = [
    "EngineError",
    "EngineSource",
    "DirectorySource",
    "GitSource",
    "WheelSource",
    "SdistSource",
    "open_engine",
    "detect_strip",
    "map_path",
    "MAX_MEMBER_BYTES",
    "MAX_MEMBERS",
    "MAX_TOTAL_BYTES",
]

# Limits against hostile or runaway sources.  Module-level so callers (and
# tests) can adjust them; they are read at the time a source is opened/read.
# One file, uncompressed.  No engine source file is near this (SGLang's largest is
# ~200 KB); a 92 KB wheel holding one 60 MiB member took the run's memory.
MAX_MEMBER_BYTES = 16 * 1024 * 1024
MAX_MEMBERS = 200_000  # members of one archive
# A member name longer than this (a tar GNU long name, a pax path) is skipped with a
# warning, and a GNU long name or a pax header longer than the limits below is never
# read: tarfile reads them whole (a 1.5 GiB name in a 1.5 MB sdist took all memory).
MAX_NAME_BYTES = 4096
MAX_PAX_HEADER_BYTES = 1024 * 1024
# extension headers of one GNU sparse member (tarfile keeps every entry of each)
MAX_SPARSE_BLOCKS = 64
# a zip's central directory is read whole by zipfile (an entry is >= 46 bytes)
MAX_CENTRAL_DIRECTORY_BYTES = 64 * 1024 * 1024
MAX_TOTAL_BYTES = 2 * 1024 * 1024 * 1024  # all members of one archive, uncompressed
MAX_DIR_FILES = 1_000_000  # files listed from one directory source
# An sdist is decompressed once, in a single streaming pass; the contents of
# its files are kept in memory up to this budget.  Files beyond it are listed
# and read on demand by streaming the archive again (slow, but bounded).
SDIST_KEEP_BYTES = 256 * 1024 * 1024

MAX_STRIP = 4

# Names never listed from a directory source (nor read through a symlink):
# VCS metadata and caches.
SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__"})

_HEX_RE = re.compile(r"[0-9a-fA-F]{4,40}")
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DRIVE_RE = re.compile(r"[A-Za-z]:")


class EngineError(Exception):
    """A bad engine spec or an unreadable engine source; the message names the source."""


# ---------------------------------------------------------------------------
# path helpers


def _norm_rel(path: str) -> str | None:
    """Normalise a caller-given relative path; None if it is absolute or escapes."""
    if not isinstance(path, str) or not path or "\x00" in path:
        return None
    if path.startswith("/") or "\\" in path or _DRIVE_RE.match(path):
        return None
    parts = [p for p in path.split("/") if p and p != "."]
    if not parts or ".." in parts:
        return None
    return "/".join(parts)


def _member_name(name: str) -> tuple[str | None, str]:
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


def _within(root: str, path: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _fmt_size(n: int) -> str:
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
        p = _norm_rel(path)
        return p is not None and p in self._set()

    # -- reading -----------------------------------------------------------
    def read_bytes(self, path: str) -> bytes | None:
        p = _norm_rel(path)
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

    def _suffix_prefixes(self, rel: str) -> list[str]:
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
            for pre in self._suffix_prefixes(c):
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
        p = _norm_rel(path)
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


# ---------------------------------------------------------------------------
# directory


class DirectorySource(EngineSource):
    """Files on disk under a root directory (a checkout, an unpacked wheel,
    site-packages).  Symlinks are followed only while their target stays
    inside the root; ``.git``/``__pycache__`` and friends are not listed."""

    kind = "directory"

    def __init__(self, path: str, name: str = "engine", spec: str | None = None) -> None:
        if not os.path.isdir(path):
            raise EngineError(f"engine {name!r}: {path!r} is not a directory")
        self.root = os.path.realpath(path)
        super().__init__(name, spec if spec is not None else path, os.path.abspath(path))

    def _list(self) -> Iterable[str]:
        out: list[str] = []
        # (relative prefix, real directory, real ancestors for cycle checks)
        stack: list[tuple[str, str, tuple[str, ...]]] = [("", self.root, (self.root,))]
        while stack:
            rel, real, ancestors = stack.pop()
            try:
                it = os.scandir(real)
            except OSError as e:
                self.skipped.append((rel or ".", f"unreadable directory: {e.strerror}"))
                continue
            with it:
                for e in it:
                    if e.name in SKIP_DIRS:
                        continue
                    relp = rel + e.name
                    try:
                        if e.is_symlink():
                            target = os.path.realpath(e.path)
                            if not _within(self.root, target):
                                self.skipped.append((relp, "symlink leaves the engine root"))
                                continue
                            if self._in_skipped_dir(target):
                                continue
                            if os.path.isdir(target):
                                if any(_within(target, a) for a in ancestors):
                                    self.skipped.append((relp, "symlink loop"))
                                    continue
                                stack.append((relp + "/", target, ancestors + (target,)))
                            elif os.path.isfile(target):
                                out.append(relp)
                            continue
                        if e.is_dir(follow_symlinks=False):
                            sub = os.path.join(real, e.name)
                            stack.append((relp + "/", sub, ancestors + (sub,)))
                        elif e.is_file(follow_symlinks=False):
                            out.append(relp)
                    except OSError as err:
                        self.skipped.append((relp, f"unreadable: {err.strerror}"))
                        continue
                    if len(out) > MAX_DIR_FILES:
                        raise EngineError(
                            f"engine {self.name!r} ({self.label}): more than {MAX_DIR_FILES} files"
                        )
        return out

    def _resolve(self, p: str) -> str | None:
        parts = p.split("/")
        if any(c in SKIP_DIRS for c in parts):
            return None
        if self._fileset is not None:  # listed already: be exactly consistent
            if p not in self._fileset:
                return None
        full = os.path.realpath(os.path.join(self.root, *parts))
        if not _within(self.root, full) or self._in_skipped_dir(full) or not os.path.isfile(full):
            return None
        return full

    def _in_skipped_dir(self, real: str) -> bool:
        """True if the real path lies under .git/, __pycache__/ ... of the root."""
        rel = os.path.relpath(real, self.root)
        return any(c in SKIP_DIRS for c in rel.split(os.sep))

    def has(self, path: str) -> bool:
        p = _norm_rel(path)
        return p is not None and self._resolve(p) is not None

    def _read(self, p: str) -> bytes | None:
        full = self._resolve(p)
        if full is None:
            return None
        try:
            with open(full, "rb") as fh:
                data = fh.read(MAX_MEMBER_BYTES + 1)
        except OSError as e:
            raise EngineError(f"engine {self.name!r} ({self.label}): cannot read {p}: {e.strerror}") from e
        if len(data) > MAX_MEMBER_BYTES:
            raise EngineError(
                f"engine {self.name!r} ({self.label}): {p} is over the {_fmt_size(MAX_MEMBER_BYTES)} limit"
            )
        return data


# ---------------------------------------------------------------------------
# git


def _check_rev(rev: str, name: str) -> None:
    if not rev:
        raise EngineError(f"engine {name!r}: empty git revision")
    if rev.startswith("-"):
        raise EngineError(f"engine {name!r}: refusing git revision {rev!r} (starts with '-')")
    if any(ord(c) < 32 or c == "\x7f" for c in rev) or " " in rev:
        raise EngineError(f"engine {name!r}: invalid git revision {rev!r}")


class GitSource(EngineSource):
    """A git repository at a revision, read as objects only (ls-tree, cat-file,
    log -L) through `patchaudit.inputs.safegit.ObjectRepo`: git runs in a
    private git directory with the repository's objects, so the repository's
    own config, hooks and attributes are never read (it may be committed in a
    hostile checkout), and its work tree and index are never read or written."""

    kind = "git"

    def __init__(self, path: str, rev: str, name: str = "engine", spec: str | None = None) -> None:
        _check_rev(rev, name)
        if path.startswith("-"):
            raise EngineError(f"engine {name!r}: refusing path {path!r} (starts with '-')")
        from patchaudit.inputs.safegit import GitError, NotARepository, ObjectRepo

        try:
            repo = ObjectRepo(path)
        except FileNotFoundError as e:
            raise EngineError(f"engine {name!r}: {path!r} does not exist") from e
        except NotARepository as e:
            raise EngineError(f"engine {name!r}: {path!r} is not a git repository") from e
        except (GitError, OSError) as e:
            raise EngineError(f"engine {name!r}: cannot read the git repository {path!r}: {e}") from e
        try:
            # rev never starts with '-' (checked), so git cannot read it as an option
            sha = repo.resolve_commit(rev)
        except GitError as e:
            repo.close()
            raise EngineError(f"engine {name!r}: revision {rev!r} not found in {path}: {e}") from e
        if sha is None:
            repo.close()
            raise EngineError(f"engine {name!r}: revision {rev!r} not found in {path}")
        self.path = os.path.abspath(path)
        self.rev = rev
        self.sha = sha
        self._repo = repo
        self._blobs: dict[str, str] | None = None
        super().__init__(name, spec if spec is not None else f"{path}@{rev}", f"{self.path}@{rev} ({sha[:7]})")

    def close(self) -> None:
        repo = getattr(self, "_repo", None)
        if repo is not None:
            repo.close()

    def _tree(self) -> dict[str, str]:
        if self._blobs is None:
            from patchaudit.inputs.safegit import GitError

            try:
                out = self._repo.git("ls-tree", "-r", "-z", "--full-tree", self.sha).stdout
            except GitError as e:
                raise EngineError(f"engine {self.name!r} ({self.label}): {e}") from None
            blobs: dict[str, str] = {}
            entries = out.split(b"\x00")
            if len(entries) > MAX_MEMBERS + 1:
                raise EngineError(f"engine {self.name!r} ({self.label}): more than {MAX_MEMBERS} files")
            for ent in entries:
                if not ent:
                    continue
                meta, _, raw = ent.partition(b"\t")
                mode, typ, sha = meta.split(b" ")
                p = raw.decode("utf-8", "surrogateescape")
                if typ != b"blob" or mode not in (b"100644", b"100755"):
                    if mode == b"120000":
                        self.skipped.append((p, "symlink"))
                    continue
                norm, reason = _member_name(p)
                if norm is None:
                    if reason:
                        self.skipped.append((p, reason))
                    continue
                blobs[norm] = sha.decode("ascii")
            self._blobs = blobs
        return self._blobs

    def _list(self) -> Iterable[str]:
        return self._tree().keys()

    def _object(self, hexsha: str, what: str) -> bytes:
        from patchaudit.inputs.safegit import GitError

        try:
            info = self._repo.info(hexsha)
            if info is None:
                raise EngineError(f"engine {self.name!r} ({self.label}): {what}: object {hexsha} is missing")
            if info[2] > MAX_MEMBER_BYTES:
                raise EngineError(
                    f"engine {self.name!r} ({self.label}): {what} is over the {_fmt_size(MAX_MEMBER_BYTES)} limit"
                )
            return self._repo.read(info[0])
        except GitError as e:
            raise EngineError(f"engine {self.name!r} ({self.label}): cannot read {what}: {e}") from None

    def _read(self, p: str) -> bytes | None:
        sha = self._tree().get(p)
        if sha is None:
            return None
        return self._object(sha, p)

    def blob(self, sha_prefix: str) -> bytes | None:
        if not isinstance(sha_prefix, str) or not _HEX_RE.fullmatch(sha_prefix):
            return None
        if set(sha_prefix) == {"0"}:  # /dev/null side of a diff
            return None
        from patchaudit.inputs.safegit import GitError

        try:
            info = self._repo.info(sha_prefix.lower())   # a missing object is never fetched
        except GitError:
            return None
        if info is None or info[1] != "blob":
            return None
        return self._object(info[0], f"blob {sha_prefix}")

    def _has_commit(self, sha: str) -> bool:
        from patchaudit.inputs.safegit import GitError

        try:
            info = self._repo.info(sha)
        except GitError:
            return False
        return info is not None and info[1] == "commit"

    def line_commits(self, path: str, start: int, end: int, since: EngineSource) -> list[dict]:
        """Commits in ``since.sha..self.sha`` that changed lines start..end
        (1-based, inclusive, numbered as in *this* revision) of path, newest
        first, via ``git log -L``.  Best effort: returns [] when ``since`` is
        not a revision of this repository, the path is not in this revision,
        the range is empty or git fails."""
        from patchaudit.inputs.safegit import GitError

        if not isinstance(since, GitSource) or not self._has_commit(since.sha):
            return []
        p = _norm_rel(path)
        if p is None or p not in self._tree():
            return []
        try:
            start, end = int(start), int(end)
        except (TypeError, ValueError):
            return []
        text = self.read_text(p) or ""
        n = len(text.splitlines())
        start = max(start, 1)
        end = min(end, n)
        if start > end:
            return []
        try:
            out = self._repo.git(
                "log",
                f"-L{start},{end}:{p}",  # one argv element: the path cannot become an option
                "--no-ext-diff",
                "--no-textconv",
                "--no-color",
                "--no-show-signature",
                "--format=%x1e%H%x1f%an%x1f%aI%x1f%s",
                f"{since.sha}..{self.sha}",
            ).stdout
        except GitError:
            return []
        commits = []
        for rec in out.split(b"\x1e")[1:]:
            head = rec.split(b"\n", 1)[0].decode("utf-8", "replace")
            fields = head.split("\x1f")
            if len(fields) != 4:
                continue
            sha, author, date, summary = fields
            commits.append({"sha": sha, "summary": summary, "author": author, "date": date})
        return commits


# ---------------------------------------------------------------------------
# wheel / zip


#: skipped members not worth a warning: links and special files (they are never read)
_QUIET_REASONS = ("symlink member", "hard link member", "not a regular file")
#: members too large to be a source that no warning is needed for: binaries (a real
#: vllm wheel holds .so files of hundreds of MB)
_BINARY_SUFFIXES = (".so", ".pyd", ".dll", ".dylib", ".a", ".o", ".lib", ".bin", ".pt", ".pth", ".ckpt",
                    ".safetensors", ".onnx", ".cubin", ".fatbin", ".ptx", ".whl", ".zip", ".gz", ".tar",
                    ".xz", ".bz2", ".zst", ".npz", ".npy", ".pkl", ".jar", ".exe", ".dat")


def _shown_name(name: str, limit: int = 300) -> str:
    return name if len(name) <= limit else f"{name[:limit]}... ({len(name)} characters)"


def _archive_warnings(skipped: list[tuple[str, str]]) -> list[str]:
    out = []
    for name, reason in skipped:
        if not reason or reason in _QUIET_REASONS:
            continue
        if reason.startswith("over the") and name.lower().endswith(_BINARY_SUFFIXES):
            continue
        out.append(f"member {_shown_name(name)} skipped: {reason}")
    return out


def _zip_directory_entries(path: str) -> int | None:
    """How many entries a zip's central directory holds, counted from its bytes before
    zipfile builds a ZipInfo for each (None: zipfile will say what is wrong).  The
    directory is at most MAX_CENTRAL_DIRECTORY_BYTES."""
    try:
        with open(path, "rb") as fp:
            endrec = zipfile._EndRecData(fp)  # type: ignore[attr-defined]
            if not endrec:
                return None
            size_cd = endrec[zipfile._ECD_SIZE]  # type: ignore[attr-defined]
            offset_cd = endrec[zipfile._ECD_OFFSET]  # type: ignore[attr-defined]
            concat = endrec[zipfile._ECD_LOCATION] - size_cd - offset_cd  # type: ignore[attr-defined]
            if endrec[zipfile._ECD_SIGNATURE] == zipfile.stringEndArchive64:  # type: ignore[attr-defined]
                concat -= zipfile.sizeEndCentDir64 + zipfile.sizeEndCentDir64Locator  # type: ignore[attr-defined]
            if size_cd > MAX_CENTRAL_DIRECTORY_BYTES:
                return MAX_MEMBERS + 1 if size_cd // 46 > MAX_MEMBERS else None
            fp.seek(offset_cd + concat)
            cd = fp.read(size_cd)
    except (OSError, AttributeError, IndexError, TypeError, ValueError, struct.error):
        return None
    count, pos = 0, 0
    while pos + 46 <= len(cd) and cd[pos:pos + 4] == b"PK\x01\x02":
        n, m, k = struct.unpack_from("<HHH", cd, pos + 28)
        pos += 46 + n + m + k
        count += 1
    return count


class WheelSource(EngineSource):
    """A .whl or .zip read in place (never extracted).

    zipfile lists the members; the bytes of one are read here: its deflate stream is
    inflated with a bound (no more than the member limit, whatever the archive says),
    and the result must have the size and CRC its header gives (zip bombs lie about
    sizes).  Members compressed otherwise than stored or deflated (what wheels use) are
    skipped: zipfile inflates a bzip2 or lzma chunk whole, so 1 KB can become gigabytes
    at the first read."""

    kind = "wheel"

    def __init__(self, path: str, name: str = "engine", spec: str | None = None) -> None:
        super().__init__(name, spec if spec is not None else path, os.path.basename(path))
        self.path = os.path.abspath(path)
        entries = _zip_directory_entries(path)
        if entries is not None and entries > MAX_MEMBERS:
            raise EngineError(f"engine {name!r}: {path} has {entries} members (limit {MAX_MEMBERS})")
        try:
            zf = zipfile.ZipFile(path)
        except (OSError, zipfile.BadZipFile, zipfile.LargeZipFile) as e:
            raise EngineError(f"engine {name!r}: cannot read {path} as a zip archive: {e}") from e
        except Exception as e:   # a hostile directory: zipfile raises what it meets (Unicode, version...)
            raise EngineError(f"engine {name!r}: cannot read {path} as a zip archive: {e!r}") from e
        try:
            infos = zf.infolist()
            if len(infos) > MAX_MEMBERS:
                raise EngineError(f"engine {name!r}: {path} has {len(infos)} members (limit {MAX_MEMBERS})")
            total = sum(i.file_size for i in infos)
            if total > MAX_TOTAL_BYTES:
                raise EngineError(
                    f"engine {name!r}: {path} unpacks to {_fmt_size(total)} (limit {_fmt_size(MAX_TOTAL_BYTES)})"
                )
            members: dict[str, zipfile.ZipInfo] = {}
            for info in infos:
                if not info.filename:   # a name zipfile cut at a NUL
                    self.skipped.append(("", "empty member name"))
                    continue
                if info.is_dir():
                    continue
                if len(info.filename.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
                    self.skipped.append((_shown_name(info.filename), f"member name over {MAX_NAME_BYTES} bytes"))
                    continue
                norm, reason = _member_name(info.filename)
                if norm is None:
                    if reason:
                        self.skipped.append((info.filename, reason))
                    continue
                mode = info.external_attr >> 16
                if mode and stat.S_ISLNK(mode):
                    self.skipped.append((info.filename, "symlink member"))
                    continue
                if mode and stat.S_IFMT(mode) and not stat.S_ISREG(mode):
                    self.skipped.append((info.filename, "not a regular file"))
                    continue
                if info.file_size > MAX_MEMBER_BYTES:
                    self.skipped.append((info.filename, f"over the {_fmt_size(MAX_MEMBER_BYTES)} limit "
                                                        f"({_fmt_size(info.file_size)})"))
                    continue
                if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                    self.skipped.append((info.filename, f"compression method {info.compress_type} (only "
                                                        f"stored and deflated members are read)"))
                    continue
                if info.flag_bits & 0x1:
                    self.skipped.append((info.filename, "encrypted member"))
                    continue
                members[norm] = info  # duplicates: the last one wins, as when installed
        except EngineError:
            zf.close()
            raise
        except Exception as e:
            zf.close()
            raise EngineError(f"engine {name!r}: cannot read {path} as a zip archive: {e!r}") from e
        zf.close()   # the bytes are read by _inflate, from the file itself
        self._members = members

    def warnings(self) -> list[str]:
        return _archive_warnings(self.skipped)

    def close(self) -> None:
        pass

    def _list(self) -> Iterable[str]:
        return self._members.keys()

    def _read(self, p: str) -> bytes | None:
        info = self._members.get(p)
        if info is None:
            return None
        what = f"engine {self.name!r} ({self.label}): {p}"
        try:
            data = self._inflate(info, min(info.file_size, MAX_MEMBER_BYTES))
        except (OSError, zlib.error, struct.error) as e:
            raise EngineError(f"{what}: cannot read: {e}") from e
        except Exception as e:   # whatever a hostile member makes the reader meet
            raise EngineError(f"{what}: cannot read: {e!r}") from e
        if len(data) > info.file_size:
            raise EngineError(f"{what} refused: its data inflates to more than the {info.file_size} bytes its "
                              f"header says (limit {_fmt_size(MAX_MEMBER_BYTES)})")
        if len(data) < info.file_size:
            raise EngineError(f"{what} refused: its data inflates to {len(data)} bytes where its header "
                              f"says {info.file_size}")
        if zlib.crc32(data) != info.CRC:
            raise EngineError(f"{what} refused: its CRC does not match its header")
        return data

    def _inflate(self, info: zipfile.ZipInfo, limit: int) -> bytes:
        """The member's bytes, at most `limit` + 1 of them (one more tells a lie)."""
        with open(self.path, "rb") as fh:
            fh.seek(info.header_offset)
            head = fh.read(30)
            if len(head) != 30 or head[:4] != b"PK\x03\x04":
                raise OSError("bad local file header")
            n, m = struct.unpack("<HH", head[26:30])
            fh.seek(n + m, os.SEEK_CUR)
            left = info.compress_size
            if info.compress_type == zipfile.ZIP_STORED:
                return fh.read(min(left, limit + 1))
            inflater = zlib.decompressobj(-15)
            parts: list[bytes] = []
            size = 0
            while left > 0 and size <= limit and not inflater.eof:
                chunk = fh.read(min(left, 64 * 1024))
                if not chunk:
                    break
                left -= len(chunk)
                while chunk and size <= limit and not inflater.eof:
                    out = inflater.decompress(chunk, limit + 1 - size)
                    parts.append(out)
                    size += len(out)
                    chunk = inflater.unconsumed_tail
            return b"".join(parts)


# ---------------------------------------------------------------------------
# sdist / tar


class _Budget(io.RawIOBase):
    """A read-only stream that fails once more than ``limit`` bytes were read:
    bounds the decompressed size of a tarball whatever its headers claim."""

    def __init__(self, raw, limit: int, what: str) -> None:
        self._raw = raw
        self._left = limit
        self._what = what

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        data = self._raw.read(len(b))
        self._left -= len(data)
        if self._left < 0:
            raise EngineError(f"{self._what} unpacks to more than {_fmt_size(MAX_TOTAL_BYTES)}")
        b[: len(data)] = data
        return len(data)

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            super().close()


def _open_decompressed(path: str):
    with open(path, "rb") as fh:
        magic = fh.read(6)
    if magic[:2] == b"\x1f\x8b":
        return gzip.open(path, "rb")
    if magic[:3] == b"BZh":
        return bz2.open(path, "rb")
    if magic == b"\xfd7zXZ\x00":
        return lzma.open(path, "rb")
    return open(path, "rb")


class _BoundedTarInfo(tarfile.TarInfo):
    """tarfile's member headers, with the extension headers bounded.

    tarfile reads the data of a GNU long name (or long link) header and of a pax
    header whole, and decodes it, before the member it describes is seen: a 1.5 GiB
    name, 1.5 MB compressed, took all memory.  Past MAX_NAME_BYTES (a long name) or
    MAX_PAX_HEADER_BYTES (a pax header) the data is skipped as it streams by (never
    kept) and the member it describes is refused (`refused` says why).  A GNU sparse
    member (never in an sdist) is refused too, after at most MAX_SPARSE_BLOCKS
    extension blocks, whose entries are not kept."""

    refused: str | None = None

    def _skip_extension(self, tf, why: str):
        # the header's data starts right after it; tarfile's stream reads it by chunks
        end = self.offset + tarfile.BLOCKSIZE + self._block(self.size)
        if end > MAX_TOTAL_BYTES + 64 * 1024 * 1024:   # a stream seeks block by block: 2**64 spins
            raise tarfile.ReadError(f"a header claims {self.size} bytes, more than an archive may unpack to")
        tf.fileobj.seek(end)
        try:
            nxt = self.fromtarfile(tf)
        except tarfile.HeaderError as e:
            raise tarfile.ReadError(str(e)) from None
        nxt.offset = self.offset
        nxt.refused = getattr(nxt, "refused", None) or why
        return nxt

    def _proc_gnulong(self, tf):
        if self.size > MAX_NAME_BYTES:
            what = "long name" if self.type == tarfile.GNUTYPE_LONGNAME else "long link name"
            return self._skip_extension(tf, f"GNU {what} of {self.size} bytes (limit {MAX_NAME_BYTES}): not read")
        return super()._proc_gnulong(tf)

    def _proc_pax(self, tf):
        if self.size > MAX_PAX_HEADER_BYTES:
            return self._skip_extension(tf, f"pax header of {self.size} bytes (limit {MAX_PAX_HEADER_BYTES}): "
                                            f"not read")
        return super()._proc_pax(tf)

    def _proc_sparse(self, tf):
        got = getattr(self, "_sparse_structs", None)
        if got is None:   # pragma: no cover - another tarfile: its own reader
            nxt = super()._proc_sparse(tf)
            nxt.refused = "sparse member"
            return nxt
        _, extended, origsize = got
        del self._sparse_structs
        blocks = 0
        while extended:
            buf = tf.fileobj.read(tarfile.BLOCKSIZE)
            blocks += 1
            if len(buf) < tarfile.BLOCKSIZE or blocks > MAX_SPARSE_BLOCKS:
                raise tarfile.ReadError(f"a sparse member with more than {MAX_SPARSE_BLOCKS} extension headers"
                                        if blocks > MAX_SPARSE_BLOCKS else "unexpected end of data")
            extended = bool(buf[504])
        self.sparse = []
        self.refused = "sparse member"
        self.offset_data = tf.fileobj.tell()
        if self.offset_data + self._block(self.size) > MAX_TOTAL_BYTES + 64 * 1024 * 1024:   # see _skip_extension
            raise tarfile.ReadError(f"a header claims {self.size} bytes, more than an archive may unpack to")
        tf.offset = self.offset_data + self._block(self.size)
        self.size = origsize
        return self


class SdistSource(EngineSource):
    """A .tar.gz/.tgz/.tar (also .tar.bz2/.tar.xz) read in memory with
    tarfile in one streaming pass; regular members only, never extracted.
    Extension headers are bounded (`_BoundedTarInfo`), and so are the names,
    the members' sizes, their count and their total."""

    kind = "sdist"

    def __init__(self, path: str, name: str = "engine", spec: str | None = None) -> None:
        super().__init__(name, spec if spec is not None else path, os.path.basename(path))
        self.path = os.path.abspath(path)
        self._data: dict[str, bytes | None] = {}  # None: listed, read on demand
        kept = 0
        try:
            for norm, member, tf in self._stream():
                if member.size <= SDIST_KEEP_BYTES - kept:
                    fh = tf.extractfile(member)
                    data = fh.read(MAX_MEMBER_BYTES + 1) if fh is not None else b""
                    kept += len(data)
                    self._data[norm] = data
                else:
                    self._data[norm] = None
        except EngineError:
            raise
        except RecursionError as e:   # a chain of extension headers
            raise EngineError(f"engine {name!r}: cannot read {path} as a tar archive: headers nested too "
                              f"deeply") from e
        except (OSError, tarfile.TarError, EOFError, zlib.error, lzma.LZMAError) as e:
            raise EngineError(f"engine {name!r}: cannot read {path} as a tar archive: {e}") from e
        except Exception as e:   # tarfile raises what a hostile header makes it meet (int(""), ...)
            raise EngineError(f"engine {name!r}: cannot read {path} as a tar archive: {e!r}") from e

    def warnings(self) -> list[str]:
        return _archive_warnings(self.skipped)

    def _stream(self, record: bool = True):
        """Yield (name, member, tarfile) for every safe regular member."""
        what = f"engine {self.name!r}: {self.path}"
        raw = _open_decompressed(self.path)
        budget = io.BufferedReader(_Budget(raw, MAX_TOTAL_BYTES + 64 * 1024 * 1024, what))
        count = 0
        total = 0
        with budget, tarfile.open(fileobj=budget, mode="r|", tarinfo=_BoundedTarInfo) as tf:
            while True:
                member = tf.next()
                tf.members.clear()   # tarfile keeps every member it read: nothing here needs them
                if member is None:
                    break
                # the next header lies past this member's data: tarfile's stream seeks
                # there block by block, so a size of 2**64 (base-256, any type) would
                # spin for ever after the end of the data
                if member.offset_data + max(member.size, 0) > MAX_TOTAL_BYTES + 64 * 1024 * 1024:
                    raise EngineError(f"{what}: member {_shown_name(member.name)!r} claims "
                                      f"{member.size} bytes, more than an archive may unpack to "
                                      f"({_fmt_size(MAX_TOTAL_BYTES)})")
                count += 1
                if count > MAX_MEMBERS:
                    raise EngineError(f"{what} has more than {MAX_MEMBERS} members")
                refused = getattr(member, "refused", None)
                if refused:
                    if record:
                        self.skipped.append((_shown_name(member.name), refused))
                    continue
                if len(member.name.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
                    if record:
                        self.skipped.append((_shown_name(member.name), f"member name over {MAX_NAME_BYTES} bytes"))
                    continue
                if member.isdir():
                    continue
                norm, reason = _member_name(member.name)
                if norm is None:
                    if reason and record:
                        self.skipped.append((member.name, reason))
                    continue
                if not member.isreg():
                    if record:
                        kind = "symlink member" if member.issym() else (
                            "hard link member" if member.islnk() else "not a regular file")
                        self.skipped.append((member.name, kind))
                    continue
                total += member.size
                if total > MAX_TOTAL_BYTES:
                    raise EngineError(f"{what} unpacks to more than {_fmt_size(MAX_TOTAL_BYTES)}")
                if member.size > MAX_MEMBER_BYTES:
                    if record:
                        self.skipped.append((member.name, f"over the {_fmt_size(MAX_MEMBER_BYTES)} limit "
                                                          f"({_fmt_size(member.size)})"))
                    continue
                yield norm, member, tf

    def _list(self) -> Iterable[str]:
        return self._data.keys()

    def _read(self, p: str) -> bytes | None:
        if p not in self._data:
            return None
        data = self._data[p]
        if data is not None:
            return data
        try:  # over the in-memory budget: stream the archive again
            found = None
            for norm, member, tf in self._stream(record=False):
                if norm == p:
                    fh = tf.extractfile(member)
                    found = fh.read(MAX_MEMBER_BYTES + 1) if fh is not None else b""
            return found
        except EngineError:
            raise
        except RecursionError as e:
            raise EngineError(f"engine {self.name!r} ({self.label}): cannot read {p}: headers nested too "
                              f"deeply") from e
        except (OSError, tarfile.TarError, EOFError, zlib.error, lzma.LZMAError) as e:
            raise EngineError(f"engine {self.name!r} ({self.label}): cannot read {p}: {e}") from e
        except Exception as e:
            raise EngineError(f"engine {self.name!r} ({self.label}): cannot read {p}: {e!r}") from e


# ---------------------------------------------------------------------------
# dispatch


_ZIP_SUFFIXES = (".whl", ".zip")
_TAR_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")


def _split_git_spec(spec: str) -> tuple[str, str] | None:
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
    split = _split_git_spec(spec)
    if split is not None:
        repo_path, rev = split
        return GitSource(repo_path, rev, name=name, spec=spec)
    raise EngineError(f"engine {name!r}: {spec!r} does not exist")


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


def detect_strip(patch_paths: list[str], engine: EngineSource) -> tuple[int, str]:
    """Find ``(N, prefix)`` such that ``map_path(p, N, prefix)`` exists in the
    engine for as many of ``patch_paths`` as possible, N in 0..4.  Ties go to
    the smallest N, then the shallowest prefix.  Raises EngineError naming the
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
        for n in range(MAX_STRIP + 1):
            rest = _stripped(comps, n)
            if rest is None:
                break
            for pre in set(engine._suffix_prefixes(rest)):
                score[(n, pre)] = score.get((n, pre), 0) + 1
    if not score:
        tried = [p for p in patch_paths if _patch_components(p) is not None]
        shown = ", ".join(tried[:5]) + (f" (and {len(tried) - 5} more)" if len(tried) > 5 else "")
        raise EngineError(
            f"engine {engine.name!r} ({engine.label}): none of the patch paths exist in it "
            f"at strip levels 0..{MAX_STRIP}: {shown}"
        )
    (n, pre), _count = min(score.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1].count("/"), kv[0][1]))
    return n, pre
