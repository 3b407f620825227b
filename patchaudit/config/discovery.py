"""Where a run's configuration is: the project root of the paths checked and the nearest
configuration file at or above it (`find_pyproject`), and reading a TOML file through the
guarded reader (`read_toml`).  `patchaudit/config/settings.py` validates what is read."""

from __future__ import annotations

import os
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[no-redef]


class ConfigError(Exception):
    pass


#: a pyproject.toml larger than this is not read
MAX_CONFIG_FILE = 4 * 1024 * 1024


def read_toml(path: Path) -> dict:
    """A TOML file, read through the guarded reader; ConfigError naming it otherwise."""
    from patchaudit.files.reader import ReadError, read_text

    try:
        text = read_text(str(path), MAX_CONFIG_FILE)
    except ReadError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.reason}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: cannot read: nested too deeply for the TOML parser") from None
    except ValueError as exc:  # a number of more than 4300 digits (Python's int-string limit)
        raise ConfigError(f"{path}: cannot read: {exc}") from None


#: what marks the folder of a project (the current directory's decides the run's root)
ROOT_MARKERS = (".patchaudit.toml", "patchaudit.toml", "pyproject.toml", "setup.py", "setup.cfg", ".git")


def _common_parent(paths: list[str], cwd: str | None = None) -> str:
    """The deepest folder holding every path, as written (no symlink resolved), and above
    the first symlink met below the current directory (a link the checkout commits
    leads out of it)."""
    cwd = cwd or os.getcwd()
    folders = []
    for p in paths or ["."]:
        full = os.path.abspath(p)
        folders.append(full if os.path.isdir(full) and not os.path.islink(full) else os.path.dirname(full))
    try:
        common = os.path.commonpath(folders)
    except ValueError:  # paths on several drives
        return cwd
    if common != cwd and not common.startswith(cwd.rstrip(os.sep) + os.sep):
        return common
    cur = cwd
    for part in os.path.relpath(common, cwd).split(os.sep):
        if part in ("", os.curdir) or os.path.islink(os.path.join(cur, part)):
            break
        cur = os.path.join(cur, part)
    return cur


def project_root(paths: list[str], cwd: str | None = None) -> str:
    """The folder a run of `paths` (none: the current directory) belongs to, where the search
    for its configuration starts: the current directory's project (the nearest folder at or
    above it with a `ROOT_MARKERS` entry) when every path lies in it, so a pyproject.toml
    nested in the tree (a vendored package's, a sub-project's) is never the run's, whatever
    files are named (pre-commit names the changed ones); otherwise the common parent of the
    paths.  Nothing is read but names (no TOML)."""
    start = _common_parent(paths, cwd)
    cur = cwd or os.getcwd()
    while not any(os.path.lexists(os.path.join(cur, m)) for m in ROOT_MARKERS):
        up = os.path.dirname(cur)
        if up == cur:
            return start
        cur = up
    if start == cur or start.startswith(cur.rstrip(os.sep) + os.sep):
        return cur
    return start


#: the configuration files of one folder, the first found wins (ruff: .ruff.toml, ruff.toml,
#: pyproject.toml); our own files hold the keys at the top level
CONFIG_NAMES = (".patchaudit.toml", "patchaudit.toml", "pyproject.toml")


def own_config(path: Path | str) -> bool:
    """Whether `path` holds the keys at its top level (any file but a pyproject.toml)."""
    return Path(path).name != "pyproject.toml"


def _config_in(folder: Path) -> Path | None:
    for name in CONFIG_NAMES:
        cand = folder / name
        # a FIFO, a device or a dangling link of that name is an error, not skipped
        if not os.path.lexists(cand) or cand.is_dir():
            continue
        if own_config(cand):
            return cand
        data = read_toml(cand)
        tool = data.get("tool", {})
        if isinstance(tool, dict) and "patchaudit" in tool:
            return cand
    return None


def find_pyproject(paths: list[str], cwd: str | None = None) -> Path | None:
    """The run's configuration: the nearest configuration file (module docstring) at or above
    `project_root(paths)` (so at or above every path), or None."""
    cur = Path(project_root(paths, cwd))
    while True:
        found = _config_in(cur)
        if found is not None:
            return found
        if cur.parent == cur:
            return None
        cur = cur.parent
