"""Private temporary folders (a git engine's private git directory), removed on every path.

A run makes its temporary folders inside one folder of its own (`run_scope`: made by
the command's process, named to its worker processes through `PATCHAUDIT_RUN_TMP`),
and removes that folder when the command ends, however it ends: normally, with an
error, on SIGINT, SIGTERM or SIGHUP (their handlers raise, so every `with` and
`finally` on the way runs; the previous handlers are restored after), or with the
console script's hard exit (patchaudit/cli.py calls `run_scope`'s cleanup first).
A worker the run kills (memory, time) cannot clean up: its folders are inside the
run's, which its parent removes.

Each folder also has an owner that removes it when closed (`ObjectRepo.close`, a
context manager); `on_cleanup` registers such a close to run first, so the
owner's helper processes (`git cat-file --batch`) end before their folder goes.
Outside a `run_scope` (the library used on its own), folders are made in the
system's temporary folder and removed by their owners.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import weakref
from contextlib import contextmanager
from typing import Callable, Iterator

ENV = "PATCHAUDIT_RUN_TMP"
#: (pid, folder) of the run folder this process made
_RUN: list[tuple[int, str]] = []
#: closers of the folders' owners (weak: an owner closed and collected is forgotten)
_CLOSERS: list[tuple[int, Callable[[], Callable[[], None] | None]]] = []
_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))


def _run_folder() -> str | None:
    if _RUN and _RUN[-1][0] == os.getpid():
        return _RUN[-1][1]
    inherited = os.environ.get(ENV)  # a worker: its parent's run folder
    return inherited if inherited and os.path.isdir(inherited) and not os.path.islink(inherited) else None


def private_dir(prefix: str = "patchaudit-") -> str:
    """A new folder only this user can read (mode 0700), inside the run's folder if any."""
    return tempfile.mkdtemp(prefix=prefix, dir=_run_folder())


def remove(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def on_cleanup(close: Callable[[], None]) -> None:
    """Run `close` (a bound method, held weakly) when the run's folders are removed."""
    ref: Callable[[], Callable[[], None] | None]
    try:
        ref = weakref.WeakMethod(close)  # type: ignore[arg-type]
    except TypeError:
        ref = lambda: close  # noqa: E731 - a plain function: held strongly
    _CLOSERS.append((os.getpid(), ref))


def cleanup() -> None:
    """Close the registered owners of this process and remove the run folder it made."""
    pid = os.getpid()
    while _CLOSERS:
        owner, ref = _CLOSERS.pop()
        close = ref() if owner == pid else None
        if close is not None:
            try:
                close()
            except Exception:  # pragma: no cover - removing the folder below still runs
                pass
    while _RUN and _RUN[-1][0] == pid:
        remove(_RUN.pop()[1])
    if not _RUN:
        os.environ.pop(ENV, None)


def _raise(signum: int, frame) -> None:
    raise SystemExit(128 + signum)


def worker_signals() -> None:
    """In a worker process forked inside a `run_scope`: SIGTERM and SIGHUP kill it again (the
    handler it inherited would raise SystemExit, which a worker's task loop catches); the
    run's folders are its parent's to remove."""
    for sig in _SIGNALS:
        if signal.getsignal(sig) is _raise:
            signal.signal(sig, signal.SIG_DFL)


@contextmanager
def run_scope() -> Iterator[None]:
    """A command's lifetime: its run folder made, SIGTERM/SIGHUP turned into SystemExit and
    SIGINT into KeyboardInterrupt (unless ignored), everything removed at the end."""
    folder = tempfile.mkdtemp(prefix="patchaudit-run-")
    _RUN.append((os.getpid(), folder))
    os.environ[ENV] = folder
    saved: dict[int, object] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in _SIGNALS:
            saved[sig] = signal.signal(sig, _raise)
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            saved[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        try:
            cleanup()
        finally:
            for sig, handler in saved.items():
                signal.signal(sig, handler)  # type: ignore[arg-type]
