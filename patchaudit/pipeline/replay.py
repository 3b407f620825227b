"""A re-run over a tree nothing changed in: the last result, replayed from the stats of what it read.

The per-file cache (pipeline/cache.py) still reads and hashes every file of a warm
run, and the whole-repository pre-pass still walks its modules.  A run that reads
the same files, lists the same folders and probes the same paths as an earlier
run with the same settings has the same result, and knowing that costs one `stat`
per path.  So `patchaudit check` (without `--fix`) records, beside the cache:

- every path the run depended on (files/observe.py: each file the guarded reader
  opened, each folder discovery listed, each path probed: `.gitignore`, `.git`,
  `pyvenv.cfg`, quilt `series`, project-root markers, a recipe's COPY sources),
  each with its signature (device, inode, mode, size, modification and change
  time, or "missing");
- the run's result (findings, errors, warnings, counts).

The next run with the same run key (`cache.run_key`: patchaudit's code, the rule
codes, every setting), the same paths and the same current folder stats those
paths; when every signature is unchanged it returns the recorded result without
discovering, reading or parsing anything.  Any difference, a missing record or an
unreadable one runs the check as usual (and records it again).

What is not recorded, so that a replay is never wrong:
- a run with an engine (`--engine`, exact mode) or a tokenizer: their files are
  read in worker processes and archives, outside the observation;
- a run that read a git repository or ran git, or globbed over folders (a COPY
  source like `patches/*/x.patch`): the stats of its paths do not tell what it saw;
- a run with an error that depends on the machine or the moment (a worker's death,
  a time budget, an error of the operating system: `parallel.cacheable`);
- a run during which a path it depended on changed, or had changed in the
  `RACY_NS` before it started: a file written in the same tick of the clock as the
  run read it could keep its signature with other bytes (git's "racy clean"
  entries; `observe.RACY_NS`).  The change time is set by the kernel on every write, rename and
  `chmod` and cannot be set back by a program, so a file changed since the record
  cannot carry the recorded signature.

The record lives in its own store of the cache folder (sealed, merged, pruned like
the others), one entry per (paths, current folder).
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any

from patchaudit.files.observe import Observed, holds, signed

__all__ = ["Replay"]

_KIND = "replay"
#: the record's format (a record of another format is no record)
_FORMAT = b"replay-1"


class Replay:
    """The replay of one run: `result()` before it, `record(...)` after it."""

    def __init__(self, cache_root: Any, run_key: str, paths: list[str]) -> None:
        from patchaudit.pipeline.cache import ResultCache

        store = hashlib.blake2b(f"{run_key}-replay".encode(), digest_size=16).hexdigest()
        self.cache = ResultCache(cache_root, store)
        self.name = f"<run {paths!r} in {os.getcwd()!r}>"
        self.started = time.time_ns()

    def result(self) -> Any:
        """The recorded RunResult if nothing it depended on changed, else None."""
        if self.cache.cold():
            return None
        got = self.cache.get(self.name, _KIND, _FORMAT)
        if not (isinstance(got, tuple) and len(got) == 2):
            return None
        sigs, result = got
        if not holds(sigs):
            return None
        result.parsed = 0
        result.cached = result.files
        result.replayed = True
        return result

    def record(self, observed: Observed, result: Any) -> bool:
        """Keep `result` with the signatures of what the run depended on; False when the
        run cannot be replayed (see the module docs: nothing is written then)."""
        from patchaudit.pipeline.parallel import cacheable

        if observed.unstable is not None or not cacheable(result):
            return False
        sigs = signed(observed.paths, self.started)
        if sigs is None:
            return False  # a path changed while the run read it, or just before
        self.cache.put(self.name, _KIND, _FORMAT, (sigs, result))
        self.cache.save()
        return True


def discovered(paths: list[str], exclude: list[str], cache_root: Any) -> tuple[list, list]:
    """`inputs.discover.discover(paths, exclude)`, remembered in the cache with the
    signatures of what it listed and probed: a run whose folders, `.gitignore` files
    and probes are unchanged (one file edited) lists nothing.  The paths are noted for
    the enclosing run either way.  Without a cache: a plain `discover`."""
    from patchaudit.files.observe import note, observing
    from patchaudit.inputs.discover import discover

    if cache_root is None:
        return discover(paths, exclude)
    from patchaudit import __version__
    from patchaudit.pipeline.cache import ResultCache, code_stamp

    store = hashlib.blake2b(repr((__version__, code_stamp(), exclude)).encode(), digest_size=16).hexdigest()
    memo = ResultCache(cache_root, store)
    name = f"<discover {paths!r} in {os.getcwd()!r}>"
    got = None if memo.cold() else memo.get(name, "listing", _FORMAT)
    if isinstance(got, tuple) and len(got) == 3 and holds(got[0]):
        for path, _ in got[0]:
            note(path)
        return list(got[1]), list(got[2])
    started = time.time_ns()
    with observing() as seen:
        files, errors = discover(paths, exclude)
    sigs = signed(seen.paths, started)
    if seen.unstable is None and sigs is not None:
        memo.put(name, "listing", _FORMAT, (sigs, tuple(files), tuple(errors)))
        memo.save()
    return files, errors
