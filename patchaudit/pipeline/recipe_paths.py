"""The repository files a recipe's patch path or glob names, inside the project root only.

A recipe's paths are the build's (a container's or the host's file system): `git apply
/*/*/*/*/*/*/*.patch` in a checkout's build script must not make `plan`/`check` walk the
whole host (88 s, 600k folder reads) and list other projects' files.  `existing(path,
glob, root)` answers only inside `root` (the folder the plan reads a recipe's files in:
pipeline/plan.py), and a glob is resolved one path component at a time, inside `root`
(a folder whose real path leaves it, a symlink out, is not entered), reading at most
`MAX_GLOB_FOLDERS` folders and keeping at most `MAX_GLOB_MATCHES` paths; past them the
glob's matches are cut and `cut` says so.  Matching is `fnmatch`'s (Python's translation
is linear), hidden names only for a component that starts with `.`, as the shell's.
"""

from __future__ import annotations

import fnmatch
import glob as globmod
import os

#: folders one glob of a recipe may read, and paths it may keep
MAX_GLOB_FOLDERS = 2_000
MAX_GLOB_MATCHES = 10_000


def inside(path: str, root: str) -> bool:
    """Whether the normalised absolute `path` is `root` or below it (no file system access)."""
    root = root.rstrip(os.sep) or os.sep
    return path == root or path.startswith(root if root == os.sep else root + os.sep)


def glob_inside(pattern: str, root: str, cut: list[str] | None = None) -> list[str]:
    """The paths below `root` that `pattern` (absolute, normalised) matches, bytewise sorted."""
    if not inside(pattern, root):
        return []
    real_root = os.path.realpath(root)
    rel = os.path.relpath(pattern, root)
    parts = [] if rel == os.curdir else rel.split(os.sep)
    current = [root]
    reads = 0
    for k, part in enumerate(parts):
        last = k == len(parts) - 1
        found: list[str] = []
        for folder in current:
            if not globmod.has_magic(part):
                candidates = [os.path.join(folder, part)]
            else:
                reads += 1
                if reads > MAX_GLOB_FOLDERS:
                    _cut(cut, pattern, f"reads more than {MAX_GLOB_FOLDERS:,} folders")
                    break
                candidates = _names(folder, part)
            for path in candidates:
                if last or (os.path.isdir(path) and inside(os.path.realpath(path), real_root)):
                    found.append(path)
            if len(found) > MAX_GLOB_MATCHES:
                _cut(cut, pattern, f"matches more than {MAX_GLOB_MATCHES:,} paths")
                found = found[:MAX_GLOB_MATCHES]
                break
        current = found
    return sorted((p for p in current if os.path.isfile(p) and inside(os.path.realpath(p), real_root)), key=os.fsencode)


def _names(folder: str, part: str) -> list[str]:
    hidden = part.startswith(".")
    try:
        with os.scandir(folder) as it:
            names = [e.name for e in it]
    except OSError:
        return []
    return [
        os.path.join(folder, n) for n in names if (hidden or not n.startswith(".")) and fnmatch.fnmatchcase(n, part)
    ]


def _cut(cut: list[str] | None, pattern: str, why: str) -> None:
    if cut is not None:
        cut.append(f"the glob {pattern!r} {why}: its matches are cut there")
