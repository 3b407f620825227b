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
    """Hierarchical .gitignore matching with pathspec."""

    def __init__(self) -> None:
        self._specs: dict[Path, object | None] = {}
        # folder -> the (folder, spec) pairs that judge paths in it, nearest first
        self._chains: dict[tuple[Path, Path], list[tuple[Path, object]]] = {}

    def _spec(self, folder: Path):
        if folder not in self._specs:
            spec = None
            gi = folder / ".gitignore"
            try:
                if gi.is_file():
                    import pathspec

                    spec = _spec_from_lines(gi.read_text(errors="replace").splitlines())
            except (OSError, ValueError):
                spec = None
            self._specs[folder] = spec
        return self._specs[folder]

    def _chain(self, folder: Path, top: Path) -> list[tuple[Path, object]]:
        key = (folder, top)
        chain = self._chains.get(key)
        if chain is None:
            spec = self._spec(folder)
            chain = [(folder, spec)] if spec is not None else []
            if not (folder == top or (folder / ".git").exists() or folder.parent == folder):
                chain = chain + self._chain(folder.parent, top)
            self._chains[key] = chain
        return chain

    def ignored(self, path: Path, is_dir: bool, top: Path) -> bool:
        for folder, spec in self._chain(path.parent, top):
            rel = path.relative_to(folder).as_posix() + ("/" if is_dir else "")
            if spec.match_file(rel):  # type: ignore[attr-defined]
                return True
        return False


def _repo_top(start: Path) -> Path:
    p = start
    while True:
        if (p / ".git").exists():
            return p
        if p.parent == p:
            return start
        p = p.parent


def discover(paths: list[str], exclude: list[str] | None = None) -> tuple[list[SourceFile], list[FileError]]:
    """The files to check, in a stable order, and the paths that could not be read."""
    files: list[SourceFile] = []
    errors: list[FileError] = []
    seen: set[Path] = set()
    exclude_spec = None
    if exclude:
        exclude_spec = _spec_from_lines(exclude)
    ignores = _Ignores()

    def add(p: Path, kind: str, key: Path | None = None) -> None:
        key = key or p.resolve()
        if key in seen:
            return
        seen.add(key)
        files.append(SourceFile(_display(p), kind))

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
            add(p, kind)
            continue
        root = p.resolve()
        top = _repo_top(root)
        for dirpath, dirnames, filenames in os.walk(p, followlinks=False):
            d = Path(dirpath)
            dres = d.resolve()
            keep = []
            for name in sorted(dirnames):
                sub = d / name
                if name in SKIP_DIRS or (sub / "pyvenv.cfg").exists() or sub.is_symlink():
                    continue
                if ignores.ignored(dres / name, True, top):
                    continue
                if exclude_spec is not None and exclude_spec.match_file(_display(sub) + "/"):
                    continue
                keep.append(name)
            dirnames[:] = keep
            for name in sorted(filenames):
                kind = classify(name)
                if kind is None:
                    continue
                f = d / name
                if f.is_symlink():
                    try:
                        real = f.resolve(strict=True)
                    except (OSError, RuntimeError):
                        continue
                    if root not in real.parents:
                        continue  # never follow a link out of the scanned tree
                if ignores.ignored(dres / name, False, top):
                    continue
                if exclude_spec is not None and exclude_spec.match_file(_display(f)):
                    continue
                # a file that is no symlink, in a resolved folder, is its own real path
                add(f, kind, None if f.is_symlink() else dres / name)
    return files, errors


def _looks_like_patch(p: Path) -> bool:
    try:
        with open(p, "rb") as fh:
            head = fh.read(64 * 1024)
    except OSError:
        return False
    return b"\n@@ -" in head or head.startswith(b"diff ") or b"\n--- " in head and b"\n+++ " in head
