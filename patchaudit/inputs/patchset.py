"""Patch sets: which patches of a run belong together, and in which order.

Sets and order: a folder holding a quilt `series` file is one set, of the
patches it lists (relative to that folder), in that order; the other patches
form one set per folder, in file name order (`0001-...`, `0002-...`).  The
rules that see a whole set (PA304) run on them in
patchaudit/pipeline/patch_set.py.
"""

from __future__ import annotations

import os
from pathlib import Path

from patchaudit.files.observe import note
from patchaudit.model.findings import FileError

#: a quilt `series` file larger than this is refused (one line per patch: a few KB)
MAX_SERIES_FILE = 1024 * 1024


def _series(folder: Path, cache: dict[Path, list[str] | None], errors: list | None = None) -> list[str] | None:
    """The patch names a folder's quilt `series` lists, or None without one.  It is read
    through the guarded reader: a FIFO, a device, a dangling link or a huge file named
    `series` is an error naming it (in `errors`), and the folder is no quilt folder."""
    if folder not in cache:
        from patchaudit.files.reader import ReadError, read_bytes

        names = None
        f = folder / "series"
        note(str(f))
        if os.path.lexists(f) and not f.is_dir():
            try:
                data = read_bytes(str(f), MAX_SERIES_FILE)
            except ReadError as exc:
                if errors is not None:
                    from patchaudit.inputs.discover import display, read_error_message

                    errors.append(
                        FileError(
                            display(f),
                            f"{read_error_message(exc)} (a quilt series file; "
                            f"its folder's patches are ordered by name)",
                        )
                    )
            else:
                names = []
                for line in data.decode("utf-8", "replace").splitlines():
                    line = line.split("#", 1)[0].strip()
                    if line:
                        names.append(line.split()[0])  # quilt allows "name -p1" options
        cache[folder] = names
    return cache[folder]


def order_patch_set(paths: list[str], errors: list | None = None) -> list[tuple[str, str, int]]:
    """(path, set name, position) for each patch path, sorted by set and position;
    `series` files that cannot be read are errors appended to `errors`."""
    cache: dict[Path, list[str] | None] = {}
    out = []
    for p in paths:
        absolute = Path(os.path.abspath(p))
        placed = None
        for folder in list(absolute.parents)[:3]:  # series may list patches in sub-folders
            names = _series(folder, cache, errors)
            if names is None:
                continue
            rel = absolute.relative_to(folder).as_posix()
            if rel in names:
                placed = (str(folder), names.index(rel))
            else:
                placed = (str(folder), -1)  # in a quilt folder but not in its series: not applied
            break
        if placed is None:
            out.append((p, str(absolute.parent), 0))
        elif placed[1] >= 0:
            out.append((p, placed[0], placed[1]))
    out.sort(key=lambda t: (t[1], t[2], os.path.basename(t[0]), t[0]))
    return out
