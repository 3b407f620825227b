"""What a run read of the file system, so that a later run can tell nothing changed.

While a run is `observing()`, every path whose content or presence its result
depends on is noted here: each file the guarded reader opens (`reader`), each
folder discovery lists, each path a run probes for (a `.gitignore`, a `.git`, a
`pyvenv.cfg`, a quilt `series`, a project-root marker, a recipe's COPY source).
Something that cannot be told from a path's `stat` (running git, a glob over
folders) makes the observation `unstable`: such a run is not replayed
(pipeline/replay.py).

Only this process's notes count: a forked worker's are lost with it, so what a
worker reads must come back to be noted here.  The scan reads every file's bytes in
the main process, and each file's analysis observes its own reads and returns them
with its result (`FileResult.reads`, noted by the scan); the pre-pass stats every
module here.

`signature(path)` is what identifies a path's state without reading it: device,
inode, type and mode, size, modification and change time (`st_ctime` is set by
the kernel on every write, rename and `chmod`, and cannot be set back by a
program), or None for a path that does not exist.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["RACY_NS", "Observed", "holds", "note", "observing", "racy", "noted", "signature", "signed", "unstable"]

#: a path changed less than this long before a moment is not trusted to show a later
#: change in its signature: timestamps come from a coarse clock (~1-10 ms), a network
#: file system's from another machine's (git's "racy clean" entries)
RACY_NS = 2_000_000_000


class Observed:
    """The paths one run depended on, and why it cannot be replayed (None: it can)."""

    def __init__(self) -> None:
        self.paths: set[str] = set()
        self.unstable: str | None = None


#: the observations under way, outermost first (a listing memo observes inside a run)
_ACTIVE: list[Observed] = []


def note(path: str) -> None:
    """The current runs' results depend on `path` (its content, or whether it exists)."""
    for o in _ACTIVE:
        o.paths.add(path)


def unstable(reason: str) -> None:
    """The current runs depend on something a path's stat does not tell (the first reason kept)."""
    for o in _ACTIVE:
        if o.unstable is None:
            o.unstable = reason


@contextmanager
def observing() -> Iterator[Observed]:
    """Note the paths read until the block ends, here and in every enclosing observation."""
    seen = Observed()
    _ACTIVE.append(seen)
    try:
        yield seen
    finally:
        _ACTIVE.remove(seen)


def racy(sig: tuple | None, since_ns: int) -> bool:
    """Whether the path of signature `sig` changed at `since_ns - RACY_NS` or later: a
    write in the same tick of the clock as a read could keep its signature with other bytes."""
    return sig is not None and sig[0] != "error" and max(sig[4], sig[5]) >= since_ns - RACY_NS


def signature(path: str) -> tuple | None:
    """The path's state as `stat` (following symlinks) tells it; None if it does not exist;
    ("error", errno) if it cannot be stat'ed for another reason."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None
    except OSError as exc:
        return ("error", exc.errno)
    return (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def signed(paths, since_ns: int) -> tuple | None:
    """((path, signature), ...) of `paths` in order; None when one of them is racy
    (changed at `since_ns - RACY_NS` or later): what depends on it cannot be kept."""
    out = []
    for path in sorted(paths):
        sig = signature(path)
        if racy(sig, since_ns):
            return None
        out.append((path, sig))
    return tuple(out)


def holds(sigs) -> bool:
    """Whether every (path, signature) of `sigs` is still the path's signature."""
    return all(signature(path) == sig for path, sig in sigs)


def noted(sigs: tuple | None) -> tuple | None:
    """`sigs` ((path, signature), ...) read elsewhere (a worker's analysis), noted for the
    current runs; None (a read that changed while it was read) makes them unstable."""
    if sigs is None:
        unstable("a file an analysis read changed while it was read")
        return None
    for path, _ in sigs:
        note(path)
    return sigs
