"""Finding the files to check under the paths given on the command line.

Directories are walked without following symlinks; `.git`, virtualenvs (any
folder holding a `pyvenv.cfg`), caches and what `.gitignore` files ignore
(pathspec's gitwildmatch, the same rules as git, read from the scanned folders
and their parents up to the repository root) are skipped.  A file named
explicitly is always checked, as ruff does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from patchaudit.findings import FileError

SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", "__pycache__", "node_modules", ".tox", ".nox", ".venv", "venv",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".patchaudit_cache", ".eggs", "site-packages",
    ".ipynb_checkpoints", "__pypackages__",
})

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
    if lower in ("dockerfile", "containerfile") or lower.startswith(("dockerfile.", "containerfile.")) \
            or lower.endswith((".dockerfile", ".containerfile")):
        return "dockerfile"
    if lower.endswith((".yaml", ".yml")):
        return "yaml"
    if lower == ".env" or lower.startswith(".env.") or lower.endswith(".env"):
        return "env"
    return None


@dataclass(frozen=True)
class SourceFile:
    path: str      # as it will be reported (relative to the cwd when possible)
    kind: str


def _display(p: Path) -> str:
    try:
        rel = os.path.relpath(p)
    except ValueError:
        return str(p)
    return str(p) if rel.startswith("..") else rel


def _spec_from_lines(lines: list[str]):
    """A gitignore-style matcher (pathspec); also validates patterns for the configuration."""
    import pathspec

    try:  # pathspec >= 0.12 names git's own flavour "gitignore"
        return pathspec.PathSpec.from_lines("gitignore", lines)
    except (KeyError, LookupError):
        return pathspec.PathSpec.from_lines("gitwildmatch", lines)


class _Ignores:
    """Hierarchical .gitignore matching with pathspec, on real (resolved) folder paths.

    A folder's chain is the (folder, spec) pairs that judge the paths in it,
    nearest first: its own .gitignore and its parents', up to the repository
    top, a folder holding `.git` or the filesystem root.
    """

    def __init__(self) -> None:
        self._specs: dict[str, object | None] = {}
        self._chains: dict[tuple[str, str], list[tuple[str, object]]] = {}

    def spec(self, folder: str, listed: bool = True):
        """The folder's .gitignore matcher, or None.  `listed` is False when the
        caller has listed the folder and seen no `.gitignore` in it."""
        try:
            return self._specs[folder]
        except KeyError:
            pass
        spec = None
        gi = os.path.join(folder, ".gitignore")
        try:
            if listed and os.path.isfile(gi):
                spec = _spec_from_lines(Path(gi).read_text(errors="replace").splitlines())
        except (OSError, ValueError):
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
            if not (folder == top or os.path.exists(os.path.join(folder, ".git")) or parent == folder):
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


def _repo_top(start: Path) -> Path:
    p = start
    while True:
        if (p / ".git").exists():
            return p
        if p.parent == p:
            return start
        p = p.parent


# How a walked folder's display path (see `_display`) relates to the cwd:
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
    files: list[SourceFile] = []
    errors: list[FileError] = []
    seen: set[str] = set()  # real paths
    exclude_spec = None
    if exclude:
        exclude_spec = _spec_from_lines(exclude)
    ignores = _Ignores()
    sep = os.sep

    for raw in paths:
        p = Path(raw)
        if not p.exists() and not p.is_symlink():
            errors.append(FileError(raw, "no such file or directory"))
            continue
        if p.is_file():
            kind = classify(raw) or (PYTHON if raw.endswith(".py") else None)
            if kind is None:
                # named explicitly but of no known kind: read as a patch if it looks like one
                kind = PATCH if _looks_like_patch(p) else None
            if kind is None:
                errors.append(FileError(raw, "not a file patchaudit reads (.patch/.diff, .py, shell, Dockerfile, YAML, .env)"))
                continue
            key = str(p.resolve())
            if key not in seen:
                seen.add(key)
                files.append(SourceFile(_display(p), kind))
            continue
        root = str(p.resolve())
        top = str(_repo_top(Path(root)))
        inside = root if root.endswith(sep) else root + sep  # a link must resolve below this
        shown = str(p)
        where, rel = _place(shown)
        # (path as given, real path, where, relative path, chain of the parent folder or None for the root)
        stack: list[tuple[str, str, int, str, list | None]] = [(shown, root, where, rel, None)]
        while stack:
            d, dres, where, drel, parent_chain = stack.pop()
            try:
                with os.scandir(d) as it:
                    entries = list(it)
            except OSError:
                continue  # as os.walk: an unreadable folder is skipped
            dirs = []
            others = []
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
                chain = ignores.chain(dres, top)
            else:
                spec = ignores.spec(dres, has_gitignore)
                chain = [(dres, spec)] if spec is not None else []
                if not (has_git and os.path.exists(os.path.join(dres, ".git"))):
                    chain = chain + parent_chain
            matchers = _matchers(dres, chain)
            # str(Path(d) / name) is d_pre + name: d is in Path's normal form, "." only for a root
            d_pre = "" if d == os.curdir else d if d.endswith(sep) else d + sep
            dres_pre = dres if dres.endswith(sep) else dres + sep
            if where == _UNDER:
                prefix = "" if drel == os.curdir else drel + sep
                # a relative path starting with ".." is shown as given (`_display`)
                as_given = prefix.startswith(os.pardir)

            subdirs = []
            dirs.sort(key=_name)
            for entry in dirs:
                name = entry.name
                if name in SKIP_DIRS or entry.is_symlink():
                    continue
                sub = d_pre + name
                if os.path.exists(os.path.join(sub, "pyvenv.cfg")):
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
                subdirs.append((sub, dres_pre + name, sub_where, sub_rel, chain))

            others.sort(key=_name)
            for entry in others:
                name = entry.name
                kind = classify(name)
                if kind is None:
                    continue
                if entry.is_symlink():
                    try:
                        key = os.path.realpath(d_pre + name, strict=True)
                    except (OSError, RuntimeError):
                        continue
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
                    shown = d_pre + name if as_given or (not prefix and name.startswith(os.pardir)) \
                        else prefix + name
                elif where == _ABOVE:
                    shown = _display(Path(d_pre + name))
                else:
                    shown = d_pre + name
                if exclude_spec is not None and exclude_spec.match_file(shown):
                    continue
                if key in seen:
                    continue
                seen.add(key)
                files.append(SourceFile(shown, kind))
            stack.extend(reversed(subdirs))
    return files, errors


def _name(entry: os.DirEntry) -> str:
    return entry.name


def _looks_like_patch(p: Path) -> bool:
    try:
        with open(p, "rb") as fh:
            head = fh.read(64 * 1024)
    except OSError:
        return False
    return b"\n@@ -" in head or head.startswith(b"diff ") or b"\n--- " in head and b"\n+++ " in head
