"""The worker processes of a scan (`Pool`), of which this process knows which file each is on.

Not `concurrent.futures`: the scheduler (patchaudit/pipeline/parallel.py, which
also holds the worker side) must know the current file of every worker to
enforce the budgets of SECURITY.md, promise 7: a worker that dies has its
current file reported and is replaced, the files it had not started go to the
others; a file over the time budget has its worker killed.  Tasks are written
to the workers' pipes without blocking (a worker busy in libcst's native parser
does not read, and this process must stay free to enforce the time budget), at
most `WINDOW` per worker.
"""

from __future__ import annotations

import os
import struct
import sys
import time
from collections import deque

#: tasks in flight per worker
WINDOW = 4
#: workers that die on a file, none having finished one, before the pool is given up
MAX_DEATHS_WITHOUT_PROGRESS = 6


def mp_context():
    import multiprocessing

    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def _frame(obj) -> bytes:
    """`obj` as multiprocessing's Connection.send writes it (so the worker's recv reads it)."""
    from multiprocessing.reduction import ForkingPickler

    payload = ForkingPickler.dumps(obj)
    n = len(payload)
    header = struct.pack("!i", n) if n <= 0x7FFFFFFF else struct.pack("!i", -1) + struct.pack("!Q", n)
    return header + bytes(payload)


def _signal_name(code: int | None) -> str:
    if code is None:
        return "an unknown cause"
    if code < 0:
        import signal

        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


class Worker:
    def __init__(self, process, task_w, result_r) -> None:
        self.process = process
        self.task_w = task_w  # this process's end of the task pipe
        self.result_r = result_r  # and of the result pipe
        self.out: deque = deque()  # framed tasks not yet written (memoryviews)
        self.inflight: deque = deque()  # tasks given to it, in order: [0] is the current one
        self.started: float | None = None  # when its current task started
        self.ready = False  # its initializer finished
        self.retiring = False  # it exits after its last message (a MemoryError)


class Pool:
    """`jobs` worker processes, each of which this process knows the current file of.

    Each runs `target(task_r, result_w, settings, codes, parent_pid, inherited)` (the
    worker side, patchaudit/pipeline/parallel.py); a file that takes longer than
    `time_budget` seconds has its worker killed; `memory` is the address space a worker
    may add (named in the error of a file that ran over it)."""

    def __init__(self, jobs: int, settings, codes: list[str], *, target, time_budget: float, memory: int) -> None:
        self.ctx = mp_context()
        self.target = target
        self.time_budget = time_budget
        self.memory = memory
        self.fork = self.ctx.get_start_method() == "fork"
        self.jobs = jobs
        self.settings = settings
        self.codes = codes
        self.workers: list[Worker] = []
        self.queue: deque = deque()  # tasks no worker has yet
        #: the tasks (by id) that go only to a worker with nothing in flight (`submit`)
        self.alone: set[int] = set()
        self.broken = False  # workers cannot start: the caller takes over
        self.finished = 0
        self.deaths = 0
        self.restarts = 0
        # a task pipe written without blocking (POSIX); elsewhere a send may wait for the worker
        self.nonblocking = os.name == "posix" and hasattr(os, "set_blocking")
        for _ in range(jobs):
            self._spawn()

    # -- workers ----------------------------------------------------------
    def _spawn(self) -> None:
        task_r, task_w = self.ctx.Pipe(duplex=False)
        result_r, result_w = self.ctx.Pipe(duplex=False)
        # a forked worker holds copies of every pipe end this process has: it closes the
        # ones of the other workers, so each task pipe ends when this process dies
        inherited = [c for w in self.workers for c in (w.task_w, w.result_r)] + [task_w, result_r] if self.fork else []
        proc = self.ctx.Process(
            target=self.target,
            name="patchaudit-worker",
            daemon=True,
            args=(task_r, result_w, self.settings, self.codes, os.getpid(), inherited),
        )
        proc.start()
        task_r.close()
        result_w.close()
        if self.nonblocking:
            os.set_blocking(task_w.fileno(), False)
        self.workers.append(Worker(proc, task_w, result_r))

    def _remove(self, w: Worker, kill: bool = False) -> None:
        if w in self.workers:
            self.workers.remove(w)
        if kill and w.process.is_alive():
            try:
                w.process.kill()
            except Exception:  # pragma: no cover - already gone
                pass
        w.process.join(timeout=5)
        for conn in (w.task_w, w.result_r):
            try:
                conn.close()
            except OSError:
                pass

    def _lost(self, w: Worker, message: str | None, out: list) -> None:
        """Worker `w` is gone: its current file is reported with `message` (None: the worker
        never started, which breaks the pool), its other files go back to the queue, and a
        new worker takes its place."""
        self._remove(w, kill=True)
        tasks = list(w.inflight)
        w.inflight.clear()
        if message is None or not w.ready:
            self.broken = True
        elif tasks and not w.retiring:  # a retiring worker had not started the others
            out.append((tasks.pop(0), "error", message))
            self.deaths += 1
            if not self.finished and self.deaths >= MAX_DEATHS_WITHOUT_PROGRESS:
                self.broken = True  # every worker dies, none finishes: not the files' fault
        self.queue.extendleft(reversed(tasks))
        if not self.broken:
            self.restarts += 1
            self._spawn()
            self._dispatch()

    def _died(self, w: Worker, out: list) -> None:
        w.process.join(timeout=5)
        how = _signal_name(w.process.exitcode)
        self._lost(
            w,
            f"analysis ran out of memory or crashed: the worker process analysing this file "
            f"ended with {how}; not analysed",
            out,
        )

    # -- tasks ------------------------------------------------------------
    def busy(self) -> int:
        return len(self.queue) + sum(len(w.inflight) for w in self.workers)

    def submit(self, task, alone: bool = False) -> None:
        """Queue `task`; with `alone`, a long task (a patch in exact mode: seconds, where a
        file is milliseconds) that waits for an idle worker instead of queueing behind
        another long one while a worker is free."""
        if alone:
            self.alone.add(id(task))
        self.queue.append(task)
        self._dispatch()

    def _dispatch(self) -> None:
        while self.queue:
            if id(self.queue[0]) in self.alone:
                w = next((w for w in self.workers if not w.inflight), None)
            else:
                w = min(self.workers, key=lambda w: len(w.inflight), default=None)
            if w is None or len(w.inflight) >= WINDOW:
                return
            task = self.queue.popleft()
            self.alone.discard(id(task))
            w.inflight.append(task)
            if len(w.inflight) == 1 and w.ready:
                w.started = time.monotonic()
            self._write(w, task)

    def _write(self, w: Worker, task) -> None:
        if not self.nonblocking:
            try:
                w.task_w.send(task)
            except (OSError, ValueError):
                pass  # the worker is gone: its sentinel says so
            return
        w.out.append(memoryview(_frame(task)))
        self._flush(w)

    def _flush(self, w: Worker) -> None:
        while w.out:
            try:
                n = os.write(w.task_w.fileno(), w.out[0])
            except BlockingIOError:
                return
            except (OSError, ValueError):  # the worker is gone: its sentinel says so
                w.out.clear()
                return
            if n >= len(w.out[0]):
                w.out.popleft()
            else:
                w.out[0] = w.out[0][n:]

    def _message(self, w: Worker, msg: tuple, out: list) -> None:
        kind = msg[0]
        if kind == "ready":
            w.ready = True
            if w.inflight:
                w.started = time.monotonic()
            return
        if kind == "init-failed":
            return  # the worker exits: _lost breaks the pool
        task = w.inflight.popleft()
        w.started = time.monotonic() if w.inflight else None
        if kind == "done":
            self.finished += 1
            out.append((task, "done", msg[2]))
        elif kind == "memory":
            w.retiring = True
            out.append(
                (
                    task,
                    "error",
                    f"analysis ran out of memory (over the worker's budget of "
                    f"{self.memory // 2**20} MiB); not analysed",
                )
            )
        else:
            out.append((task, "here", None))
        self._dispatch()

    def poll(self, timeout: float | None) -> list:
        """Wait up to `timeout` seconds (None: until something happens) and return the
        finished tasks: (task, "done", FileResult) | (task, "error", message) |
        (task, "here", None) (to run in this process)."""
        out: list = []
        now = time.monotonic()
        for w in list(self.workers):  # the time budget
            if w.inflight and w.started is not None and now - w.started > self.time_budget:
                self._lost(
                    w,
                    f"analysis took longer than {self.time_budget:g} s (the per-file time budget): "
                    f"its worker process was stopped; not analysed",
                    out,
                )
        if out or self.broken or not self.workers:
            return out
        deadlines = [w.started + self.time_budget for w in self.workers if w.inflight and w.started is not None]
        if deadlines:
            until = max(0.0, min(deadlines) - now) + 0.01
            timeout = until if timeout is None else min(timeout, until)
        readable, writable = self._select(timeout)
        for w in list(self.workers):
            if w in writable:
                self._flush(w)
            if w not in readable:
                continue
            try:
                while w.result_r.poll():
                    self._message(w, w.result_r.recv(), out)
            except (EOFError, OSError):
                self._died(w, out)
                continue
            if not w.process.is_alive():
                self._died(w, out)
        return out

    def _select(self, timeout: float | None) -> tuple[set, set]:
        if self.nonblocking:
            import selectors

            with selectors.DefaultSelector() as sel:
                for w in self.workers:
                    events = selectors.EVENT_READ
                    sel.register(w.result_r.fileno(), events, (w, "r"))
                    sel.register(w.process.sentinel, selectors.EVENT_READ, (w, "r"))
                    if w.out:
                        sel.register(w.task_w.fileno(), selectors.EVENT_WRITE, (w, "w"))
                ready = sel.select(timeout)
            readable = {key.data[0] for key, _ in ready if key.data[1] == "r"}
            writable = {key.data[0] for key, _ in ready if key.data[1] == "w"}
            return readable, writable
        from multiprocessing.connection import wait

        objs = {}
        for w in self.workers:
            objs[w.result_r] = w
            objs[w.process.sentinel] = w
        return {objs[o] for o in wait(list(objs), timeout)}, set()

    # -- the end ----------------------------------------------------------
    def abandon(self) -> list:
        """Stop every worker now; the tasks not finished, for the caller to run."""
        left = [t for w in self.workers for t in w.inflight] + list(self.queue)
        self.queue.clear()
        for w in list(self.workers):
            w.inflight.clear()
            self._remove(w, kill=True)
        return left

    def close(self) -> None:
        """The work is done: each worker's task pipe ends, and it exits."""
        for w in self.workers:
            try:
                w.task_w.close()
            except OSError:
                pass
        deadline = time.monotonic() + 5
        for w in list(self.workers):
            w.process.join(timeout=max(0.0, deadline - time.monotonic()))
            self._remove(w, kill=True)
