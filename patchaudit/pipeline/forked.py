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

__all__ = ["OVER_BUDGET", "inherited", "run_forked"]

#: the result of a task that ran longer than the `budget` given to `run_forked`: the
#: worker stopped it (the caller reports it; it does not do it again itself)
OVER_BUDGET = "over the time budget"

#: what the workers of the current `run_forked` inherit: set just before the fork
_INHERITED: dict[str, Any] = {}


def inherited(name: str) -> Any:
    """In a worker of `run_forked`: one of the values it was given."""
    return _INHERITED[name]


class _OverBudget(BaseException):
    """Raised in a worker by its timer (a BaseException: no `except Exception` of a rule
    keeps the task running)."""


def _timed(fn: Callable[[Any], Any], budget: float, task: Any) -> Any:
    """`fn(task)` in a worker, stopped after `budget` seconds (SIGALRM: it fires once the
    native parser, if that is where the time goes, returns to Python)."""
    import signal

    def fire(signum: int, frame: Any) -> None:
        raise _OverBudget()

    old = signal.signal(signal.SIGALRM, fire)
    try:
        try:
            signal.setitimer(signal.ITIMER_REAL, budget)
            return fn(task)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _OverBudget:
        return OVER_BUDGET
    finally:
        signal.signal(signal.SIGALRM, old)


def run_forked(
    fn: Callable[[Any], Any], tasks: list, settings, jobs: int, budget: float | None = None, **inherit: Any
) -> list:
    """`fn(task)` for every task, in at most `jobs` forked workers that inherit `inherit`
    (and `settings`), read back with `inherited`: a list in the order of `tasks`, None
    where a worker failed (it died, ran out of memory) or where this platform cannot
    fork (the caller does those itself), `OVER_BUDGET` where a task ran longer than
    `budget` seconds (the per-file time budget of SECURITY.md, promise 7)."""
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
            if budget is not None:
                futures = [pool.submit(_timed, fn, budget, t) for t in tasks]
            else:
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
