"""Work handed to forked worker processes that inherit what it needs (the whole-repository
pre-pass, pipeline/repo_index.py): no pickling of the inputs, only of the results.

The scan's own pool (pipeline/pool.py) streams files to long-lived workers and enforces
the time budget; this is for a batch whose inputs are already in memory (the modules of
one level of the pre-pass, with the summaries so far).  Its workers are hardened as the
scan's are (`parallel.harden_worker`: they die with this process, refuse what the parse
budget refuses, and have their address space limited).
"""

from __future__ import annotations

import os
from typing import Any, Callable

__all__ = ["inherited", "run_forked"]

#: what the workers of the current `run_forked` inherit: set just before the fork
_INHERITED: dict[str, Any] = {}


def inherited(name: str) -> Any:
    """In a worker of `run_forked`: one of the values it was given."""
    return _INHERITED[name]


def run_forked(fn: Callable[[Any], Any], tasks: list, settings, jobs: int, **inherit: Any) -> list:
    """`fn(task)` for every task, in at most `jobs` forked workers that inherit `inherit`
    (and `settings`), read back with `inherited`: a list in the order of `tasks`, None
    where a worker failed (it died, ran out of memory) or where this platform cannot
    fork.  The caller does those itself."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from patchaudit.pipeline.parallel import harden_worker

    out: list = [None] * len(tasks)
    if not tasks or "fork" not in multiprocessing.get_all_start_methods():
        return out
    _INHERITED.update(inherit, settings=settings)
    try:
        with ProcessPoolExecutor(
            max_workers=max(1, min(jobs, len(tasks))),
            mp_context=multiprocessing.get_context("fork"),
            initializer=harden_worker,
            initargs=(settings, os.getpid()),
        ) as pool:
            futures = [pool.submit(fn, t) for t in tasks]
            for i, f in enumerate(futures):
                try:
                    out[i] = f.result()
                except Exception:  # the worker died: the caller does it
                    out[i] = None
    except Exception:  # the pool could not start
        pass
    finally:
        _INHERITED.clear()
    return out
