"""Finding the files to check under the paths given on the command line.

Directories are walked without following symlinks; `.git`, virtualenvs (any
folder holding a `pyvenv.cfg`), caches and what `.gitignore` files ignore
(pathspec's gitwildmatch, the same rules as git, read from the scanned folders
and their parents up to the repository root) are skipped.  A file named
explicitly is always checked, as ruff does.

What cannot be read is an error that names it, never a silent skip: a FIFO, a
device or a socket named on the command line, a dangling symlink or a symlink
loop named there, a dangling symlink met in the walk (a loop met in the walk is
skipped, SECURITY.md promise 4), and a `.gitignore` that is not a regular file
or is larger than `MAX_IGNORE_FILE`.  Nothing is opened except through
`patchaudit.files.reader`.

Patterns are matched by pathspec with Google's RE2 engine (`google-re2`, a
dependency), which runs in linear time: with Python's `re`, a pattern such as
`*a*a*a...b` backtracks exponentially on a long file name and the scan never
ends.  Where re2 cannot be imported, pathspec's Python backend is used, and a
pattern with more wildcards than `_safe_for_backtracking` allows is refused
with an error naming its file and line (the rest of the file applies).
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from patchaudit.files.observe import note
from patchaudit.files.reader import ReadError, check_regular, open_regular, read_bytes
from patchaudit.inputs.pattern_safety import safe_for_backtracking
from patchaudit.model.findings import FileError

#: a .gitignore larger than this is refused (git itself refuses 100 MB ones; real ones are a few KB)
MAX_IGNORE_FILE = 1024 * 1024
#: the pathspec backend: None picks "re2" when google-re2 can be imported, else "simple" (Python's re)
_BACKEND: str | None = None
_HAVE_RE2: bool | None = None

SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        "node_modules",
        ".tox",
        ".nox",
        ".venv",
        "venv",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".patchaudit_cache",
        ".eggs",
        "site-packages",
        ".ipynb_checkpoints",
        "__pypackages__",
    }
)

PATCH, PYTHON = "patch", "python"
TEXT_KINDS = ("shell", "dockerfile", "yaml", "env")


def classify(path: str) -> str | None:
    """The kind of file `path` is, by its name, or None if patchaudit does not read it."""
    name = os.path.basename(path)
    lower = name.lower()
    if lower.endswith((".patch", ".diff")):
        return PATCH
    if lower.endswith((".py", ".pyi")):
        return PYTHON
    if lower.endswith((".sh", ".bash", ".zsh", ".ksh")):
        return "shell"
    if (
        lower in ("dockerfile", "containerfile")
        or lower.startswith(("dockerfile.", "containerfile."))
        or lower.endswith((".dockerfile", ".containerfile"))
    ):
        return "dockerfile"
    if lower.endswith((".yaml", ".yml")):
        return "yaml"
    if lower == ".env" or lower.startswith(".env.") or lower.endswith(".env"):
        return "env"
    return None


@dataclass(frozen=True)
class SourceFile:
    path: str  # as it will be reported (relative to the cwd when possible)
    kind: str


def display(p: Path) -> str:
    """`p` as it is reported: relative to the cwd, unless that starts with ".."."""
    try:
        rel = os.path.relpath(p)
    except ValueError:
        return str(p)
    return str(p) if rel.startswith("..") else rel


def read_error_message(exc: ReadError) -> str:
    """The message of a file that is not read, as every error of a run words it
    ("not a regular file (a FIFO (named pipe)): not read", "dangling symlink ...")."""
    reason = exc.reason
    tail = ", not a regular file: not read"
    if reason.endswith(tail):
        return f"not a regular file ({reason[: -len(tail)]}): not read"
    return reason


def refusal(path: str) -> str:
    """Why `path` cannot be read (a dangling symlink, a loop, not a regular file, ...)."""
    try:
        check_regular(path)
    except ReadError as exc:
        return read_error_message(exc)
    return "cannot read"


def _re2_available() -> bool:
    global _HAVE_RE2
    if _HAVE_RE2 is None:
        try:
            import re2  # noqa: F401
        except ImportError:
            _HAVE_RE2 = False
        else:
            _HAVE_RE2 = True
    return _HAVE_RE2


def spec_from_lines(
    lines: list[str],
    *,
    backend: str | None = None,
    source: str | None = None,
    problems: list | None = None,
    first_line: int = 1,
    line_numbers: list | None = None,
):
    """A gitignore-style matcher (pathspec); also validates patterns for the configuration.

    With the Python backend (no re2), a pattern that could backtrack exponentially is
    dropped: a FileError naming `source` and the line is appended to `problems`, or,
    without `problems`, ValueError is raised.  `line_numbers`, if given, are the lines of
    `lines` in their file (else `first_line` onwards)."""
    import pathspec

    chosen = backend or _BACKEND or ("re2" if _re2_available() else "simple")
    if chosen == "re2":
        try:
            return pathspec.PathSpec.from_lines("gitignore", lines, backend="re2")
        except ValueError:  # a pattern pathspec itself refuses: the caller decides
            raise
        except Exception:  # a regex RE2 cannot take (`[[:alpha:]]`) that Python's re can
            if backend == "re2":
                raise
            chosen = "simple"  # the Python backend, after the wildcard check below
    if chosen == "simple":
        kept = []
        for k, pattern in enumerate(lines):
            why = safe_for_backtracking(pattern)
            if why is None:
                kept.append(pattern)
                continue
            if problems is None:
                raise ValueError(why)
            line = line_numbers[k] if line_numbers is not None else first_line + k
            problems.append(FileError(source or "exclude", why, line))
            kept.append("")  # keeps pathspec's pattern indices in step
        lines = kept
    import re

    try:
        return pathspec.PathSpec.from_lines("gitignore", lines, backend=chosen)
    except re.error:
        pass
    # a pattern neither engine compiles (`[a-*]`: a bad range): that line is dropped and
    # named, the others keep matching (git itself treats such a line as matching nothing)
    kept = []
    for k, pattern in enumerate(lines):
        try:
            pathspec.PathSpec.from_lines("gitignore", [pattern], backend=chosen)
        except re.error as exc:
            why = f"pattern {pattern[:80]!r} is not valid ({exc}); pattern ignored"
            if problems is None:
                raise ValueError(why) from None
            line = line_numbers[k] if line_numbers is not None else first_line + k
            problems.append(FileError(source or "exclude", why, line))
            pattern = ""
        kept.append(pattern)
    return pathspec.PathSpec.from_lines("gitignore", kept, backend=chosen)


class _Ignores:
    """Hierarchical .gitignore matching with pathspec, on real (resolved) folder paths.

    A folder's chain is the (folder, spec) pairs that judge the paths in it,
    nearest first: its own .gitignore and its parents', up to the repository
    top, a folder holding `.git` or the filesystem root.
    """

    def __init__(self, errors: list[FileError] | None = None) -> None:
        self._specs: dict[str, object | None] = {}
        self._chains: dict[tuple[str, str], list[tuple[str, object]]] = {}
        self.errors = errors if errors is not None else []

    def spec(self, folder: str, listed: bool = True):
        """The folder's .gitignore matcher, or None.  `listed` is False when the
        caller has listed the folder and seen no `.gitignore` in it."""
        try:
            return self._specs[folder]
        except KeyError:
            pass
        spec = None
        gi = os.path.join(folder, ".gitignore")
        if listed:
            note(gi)  # present or not, a replayed run depends on it (files/observe.py)
        # a .gitignore folder is no .gitignore; anything else that is not a regular file
        # (a FIFO, a device, a dangling link) or is too large is an error naming it
        if listed and os.path.lexists(gi) and not os.path.isdir(gi):
            shown = display(Path(gi))
            try:
                data = read_bytes(gi, MAX_IGNORE_FILE)
            except ReadError as exc:
                self.errors.append(
                    FileError(
                        shown,
                        read_error_message(exc)
                        + ("" if "limit" not in exc.reason else " (a .gitignore; its patterns are not applied)"),
                    )
                )
            else:
                try:
                    spec = spec_from_lines(
                        data.decode("utf-8", "replace").splitlines(), source=shown, problems=self.errors
                    )
                except ValueError:
                    spec = None
        self._specs[folder] = spec
        return spec

    def chain(self, folder: str, top: str) -> list[tuple[str, object]]:
        """The chain of a folder the walk has not listed (a scanned root, its parents)."""
        key = (folder, top)
        chain = self._chains.get(key)
        if chain is None:
            spec = self.spec(folder)
            chain = [(folder, spec)] if spec is not None else []
            parent = os.path.dirname(folder)
            if not (folder == top or _probe(os.path.join(folder, ".git")) or parent == folder):
                chain = chain + self.chain(parent, top)
            self._chains[key] = chain
        return chain


def _matchers(folder: str, chain: list[tuple[str, object]]) -> list[tuple[str, object]]:
    """(prefix, spec) pairs: `prefix + name` is the path of `folder`/name relative to
    each .gitignore's folder, in '/' form, as `spec.match_file` wants it."""
    out = []
    for base, spec in chain:
        if base == folder:
            prefix = ""
        else:
            cut = len(base) if base.endswith(os.sep) else len(base) + 1
            prefix = folder[cut:] + os.sep
            if os.sep != "/":
                prefix = prefix.replace(os.sep, "/")
        out.append((prefix, spec))
    return out


def _probe(path: str) -> bool:
    """Whether `path` exists (a replayed run depends on the answer: files/observe.py)."""
    note(path)
    return os.path.exists(path)


def _repo_top(start: Path) -> Path:
    p = start
    while True:
        if _probe(str(p / ".git")):
            return p
        if p.parent == p:
            return start
        p = p.parent


# How a walked folder's display path (see `display`) relates to the cwd:
_UNDER, _ABOVE, _ASIDE = 0, 1, 2  # the cwd or below it / a parent of the cwd / elsewhere


def _place(path: str) -> tuple[int, str]:
    """(where `path` is, its path relative to the cwd) as `os.path.relpath` sees it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return _ASIDE, ""
    if rel != os.pardir and not rel.startswith(os.pardir + os.sep):
        return _UNDER, rel
    if all(part == os.pardir for part in rel.split(os.sep)):
        return _ABOVE, rel
    return _ASIDE, rel


def discover(paths: list[str], exclude: list[str] | None = None) -> tuple[list[SourceFile], list[FileError]]:
    """The files to check, in a stable order, and the paths that could not be read.

    Folders are walked depth-first, names sorted, a folder's files before its
    subfolders (os.walk top-down with sorted names).  The walk works on strings:
    each folder carries its path as given (for display), its real path (for
    .gitignore matching and duplicates), where it lies from the cwd and its
    .gitignore matchers, so that a file costs no stat and no path parsing.
    """
    walk = _Walk(exclude)
    for raw in paths:
        folder = walk.named(raw)
        if folder is not None:
            walk.tree(folder)
    return walk.files, walk.errors


@dataclass
class _Folder:
    """One listed folder of the walk, as its children need it."""

    d_pre: str  # its path as given, with a separator ("" for ".")
    dres_pre: str  # its real path, with a separator
    where: int  # _UNDER, _ABOVE or _ASIDE
    prefix: str  # _UNDER: its path relative to the cwd, with a separator ("" for the cwd)
    as_given: bool  # _UNDER: that relative path starts with "..": shown as given (`display`)
    matchers: list  # (prefix, spec) of its .gitignore chain (see `_matchers`)
    chain: list  # its .gitignore chain, for its subfolders


class _Walk:
    """One `discover` run: the files found, the errors, the real paths seen."""

    def __init__(self, exclude: list[str] | None) -> None:
        self.files: list[SourceFile] = []
        self.errors: list[FileError] = []
        self.seen: set[str] = set()  # real paths
        self.exclude_spec = None
        if exclude:
            self.exclude_spec = spec_from_lines(exclude, source="[tool.patchaudit] exclude", problems=self.errors)
        self.ignores = _Ignores(self.errors)

    def named(self, raw: str) -> Path | None:
        """A path named on the command line: a file is taken (or refused) here; a folder
        is returned, to walk."""
        p = Path(raw)
        note(raw)
        try:
            st = os.stat(p)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR) and not os.path.islink(p):
                self.errors.append(FileError(raw, "no such file or directory"))
            else:  # a dangling symlink, a symlink loop, no permission: named, not a traceback
                self.errors.append(FileError(raw, refusal(str(p))))
            return None
        if not stat.S_ISDIR(st.st_mode) and not stat.S_ISREG(st.st_mode):
            # a FIFO would block the run forever, a device never ends: never opened
            self.errors.append(FileError(raw, refusal(str(p))))
            return None
        if stat.S_ISDIR(st.st_mode):
            return p
        kind = classify(raw) or (PYTHON if raw.endswith(".py") else None)
        if kind is None:
            # named explicitly but of no known kind: read as a patch if it looks like one
            kind = PATCH if _looks_like_patch(p) else None
        if kind is None:
            self.errors.append(
                FileError(raw, "not a file patchaudit reads (.patch/.diff, .py, shell, Dockerfile, YAML, .env)")
            )
            return None
        key = str(p.resolve())
        if key not in self.seen:
            self.seen.add(key)
            self.files.append(SourceFile(display(p), kind))
        return None

    def tree(self, p: Path) -> None:
        """Walk the folder `p` named on the command line."""
        sep = os.sep
        root = str(p.resolve())
        top = str(_repo_top(Path(root)))
        inside = root if root.endswith(sep) else root + sep  # a link must resolve below this
        shown = str(p)
        where, rel = _place(shown)
        # (path as given, real path, where, relative path, chain of the parent folder or None for the root)
        stack: list[tuple[str, str, int, str, list | None]] = [(shown, root, where, rel, None)]
        while stack:
            d, dres, where, drel, parent_chain = stack.pop()
            note(d)  # its entries: a file added, removed or renamed changes its stat
            try:
                with os.scandir(d) as it:
                    entries = list(it)
            except OSError:
                continue  # as os.walk: an unreadable folder is skipped
            folder, dirs, others = self._list(d, dres, where, drel, parent_chain, top, entries)
            subdirs = self._subdirs(folder, dirs)
            self._take_files(folder, others, inside)
            stack.extend(reversed(subdirs))

    def _list(
        self, d: str, dres: str, where: int, drel: str, parent_chain: list | None, top: str, entries: list[os.DirEntry]
    ) -> tuple[_Folder, list[os.DirEntry], list[os.DirEntry]]:
        """The folder's entries split into folders and the rest, and what its children need."""
        sep = os.sep
        dirs: list[os.DirEntry] = []
        others: list[os.DirEntry] = []
        has_gitignore = has_git = False
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            (dirs if is_dir else others).append(entry)
            name = entry.name
            if name[0] == ".":
                # confirmed by a stat below, as a case-insensitive filesystem would have it
                low = name.lower()
                if low == ".gitignore":
                    has_gitignore = True
                elif low == ".git":
                    has_git = True
        # the .gitignore chain of this folder, as matchers for its children
        if parent_chain is None:
            chain = self.ignores.chain(dres, top)
        else:
            spec = self.ignores.spec(dres, has_gitignore)
            chain = [(dres, spec)] if spec is not None else []
            if not (has_git and _probe(os.path.join(dres, ".git"))):
                chain = chain + parent_chain
        matchers = _matchers(dres, chain)
        # str(Path(d) / name) is d_pre + name: d is in Path's normal form, "." only for a root
        d_pre = "" if d == os.curdir else d if d.endswith(sep) else d + sep
        dres_pre = dres if dres.endswith(sep) else dres + sep
        prefix, as_given = "", False
        if where == _UNDER:
            prefix = "" if drel == os.curdir else drel + sep
            # a relative path starting with ".." is shown as given (`display`)
            as_given = prefix.startswith(os.pardir)
        return _Folder(d_pre, dres_pre, where, prefix, as_given, matchers, chain), dirs, others

    def _subdirs(self, folder: _Folder, dirs: list[os.DirEntry]) -> list[tuple[str, str, int, str, list]]:
        """The subfolders to walk (skipped, virtualenvs, ignored and excluded ones left out)."""
        d_pre, where, prefix, matchers = folder.d_pre, folder.where, folder.prefix, folder.matchers
        exclude_spec = self.exclude_spec
        subdirs = []
        dirs.sort(key=_name)
        for entry in dirs:
            name = entry.name
            if name in SKIP_DIRS or entry.is_symlink():
                continue
            sub = d_pre + name
            if _probe(os.path.join(sub, "pyvenv.cfg")):
                continue
            ignored = False
            for pre, spec in matchers:
                if spec.match_file(pre + name + "/"):  # type: ignore[attr-defined]
                    ignored = True
                    break
            if ignored:
                continue
            if where == _UNDER:
                sub_where, sub_rel = _UNDER, prefix + name
            elif where == _ABOVE:
                sub_where, sub_rel = _place(sub)
            else:
                sub_where, sub_rel = _ASIDE, ""
            if exclude_spec is not None:
                shown = sub if sub_where == _ASIDE or sub_rel.startswith(os.pardir) else sub_rel
                if exclude_spec.match_file(shown + "/"):
                    continue
            subdirs.append((sub, folder.dres_pre + name, sub_where, sub_rel, folder.chain))
        return subdirs

    def _take_files(self, folder: _Folder, others: list[os.DirEntry], inside: str) -> None:
        """The folder's files of a kind patchaudit reads, not ignored nor excluded."""
        d_pre, dres_pre, where, prefix, as_given = (
            folder.d_pre,
            folder.dres_pre,
            folder.where,
            folder.prefix,
            folder.as_given,
        )
        matchers, exclude_spec, seen, files = folder.matchers, self.exclude_spec, self.seen, self.files
        others.sort(key=_name)
        for entry in others:
            name = entry.name
            kind = classify(name)
            if kind is None:
                continue
            broken = False
            if entry.is_symlink():
                note(d_pre + name)  # where it leads can change with its folder unchanged
                try:
                    key = os.path.realpath(d_pre + name, strict=True)
                except OSError as exc:
                    if exc.errno == errno.ELOOP:
                        continue  # a loop met in the walk is skipped (SECURITY.md promise 4)
                    broken = True  # dangling: reported below, unless ignored
                except RuntimeError:
                    continue
                else:
                    if not key.startswith(inside):
                        continue  # never follow a link out of the scanned tree
            else:
                # a file that is no symlink, in a resolved folder, is its own real path
                key = dres_pre + name
            ignored = False
            for pre, spec in matchers:
                if spec.match_file(pre + name):  # type: ignore[attr-defined]
                    ignored = True
                    break
            if ignored:
                continue
            if where == _UNDER:
                shown = d_pre + name if as_given or (not prefix and name.startswith(os.pardir)) else prefix + name
            elif where == _ABOVE:
                shown = display(Path(d_pre + name))
            else:
                shown = d_pre + name
            if exclude_spec is not None and exclude_spec.match_file(shown):
                continue
            if broken:
                self.errors.append(FileError(shown, refusal(d_pre + name)))
                continue
            if key in seen:
                continue
            seen.add(key)
            files.append(SourceFile(shown, kind))


def _name(entry: os.DirEntry) -> str:
    return entry.name


def _looks_like_patch(p: Path) -> bool:
    try:
        with open_regular(str(p)) as fh:
            head = fh.read(64 * 1024)
    except OSError:  # ReadError too
        return False
    return b"\n@@ -" in head or head.startswith(b"diff ") or b"\n--- " in head and b"\n+++ " in head
