"""`check --watch`: what tells that a re-check is due, by polling `stat` (as ruff's
watch mode re-runs on a change; no file-system notification library is needed for
the handful of files a check reads).

`snapshot` is the `(mtime_ns, size, inode)` of every file discovery finds under the
paths (a new or removed file changes it too) and of the configuration file; two
snapshots that differ mean the check must run again.
"""

from __future__ import annotations

import os

from patchaudit.config.settings import Settings
from patchaudit.inputs.discover import discover


def _stat(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


def snapshot(paths: list[str], settings: Settings) -> dict[str, tuple[int, int, int] | None]:
    files, _ = discover(paths, settings.exclude)
    out = {f.path: _stat(f.path) for f in files}
    if settings.config_path:
        out[settings.config_path] = _stat(settings.config_path)
    return out
