"""Scheduling the per-file work: cache, pre-filter, worker processes.

`scan` runs `runner.analyse_file` on every file of a run and returns the
results in file order (the output never depends on the number of jobs).  For
each file, in the main process:

1. read it once (the bytes are passed on; nothing reads a file twice) and
   look its content digest up in the result cache (`patchaudit.pipeline.cache`);
2. pre-filter it with the rule index (`patchaudit.config.registry`), which knows
   every selected rule's kinds, needs and required strings without importing
   a rule module: a `.py` or text file that no selected rule can fire on is
   *light*: `analyse_file` runs on it in the main process with no rules (it
   still reads suppression comments and reports undecodable files), and
   neither libcst nor any rule module is imported for it;
3. every other file (patches, files with a required string) is *heavy*: it
   runs with all the selected rules, in the main process or, when there is
   enough heavy work to pay for starting them, in a pool of worker processes.

The pool starts only once the heavy bytes seen pass `POOL_MIN_BYTES` (at the
~0.7 MB/s libcst parses per core, below that the pool's start-up and
messaging cost more than they save), except on a cold scan of a large tree,
where forked workers start before the first file is read and import libcst
while this process reads (`_eager_pool`).  With workers, a rule's own filter
(`can_match`: the dataflow rules parse with `ast`) runs in the worker, not
here.  At most `WINDOW` tasks per worker are in
flight, so memory stays bounded however large the tree: a worker parses one
file at a time and keeps nothing, and the main process keeps only results.
Workers are forked where the platform allows it (they inherit the imported
rule modules), and open their own engine sources and tokenizer from the
settings (an open archive is not shared across processes).

Budgets (SECURITY.md, promise 7).  The pool is this module's own (`_Pool`), not
`concurrent.futures`, because it must know which file each worker is on:

- there are never more workers than usable CPUs, unless `--jobs` on the
  command line asks for more (`Settings.jobs_forced`), and never more than
  `MAX_JOBS_PER_CPU` per CPU even then;
- each worker limits its own address space (`RLIMIT_AS`, `worker_memory`): a
  blow-up the parse budget (`max-parse-size`) did not foresee costs that worker
  only.  A worker that dies (a `MemoryError`, libcst's allocator aborting, a
  signal) has its current file reported as an error ("analysis ran out of
  memory..."), is replaced, and the files it had not started go to the others;
- a file that runs longer than `FILE_TIME_BUDGET` has its worker killed by
  this process, is reported, and the run goes on likewise;
- a worker dies with its parent: `PR_SET_PDEATHSIG` on Linux, else a thread
  that watches `os.getppid()`, and the end of its task pipe;
- a worker that cannot even start (its initializer fails) leaves the pool
  broken: the files not yet done run in this process, where the parse budget
  is what protects (as with `--jobs 1`).

Tasks are written to the workers' pipes without blocking (a worker busy in
libcst's native parser does not read, and this process must stay free to
enforce the time budget), at most `WINDOW` per worker.
"""

from __future__ import annotations

import os
import struct
import sys
import time
from collections import deque
from typing import Any

#: heavy bytes (files that need a libcst parse) before a process pool pays off
POOL_MIN_BYTES = 256 * 1024
#: tasks in flight per worker
WINDOW = 4
#: a cold scan of at least this many files forks its workers before reading anything
EAGER_MIN_FILES = 200
#: what the last scan did (for tests and --verbose style reports; no timings)
LAST_SCAN: dict[str, Any] = {}
#: `--jobs` on the command line may ask for more workers than CPUs, up to this many per CPU
MAX_JOBS_PER_CPU = 4
#: seconds one file may take in a worker before the worker is killed and the file reported
#: (libcst parses ~0.7 MB/s: a file at the default max-parse-size takes a minute or two on a
#: loaded machine)
FILE_TIME_BUDGET = 600.0
#: address space a worker may add to what it has when it starts (RLIMIT_AS), at least ...
WORKER_MEMORY = 4 * 1024 ** 3
#: ... and per byte of the largest text it may parse (max-parse-size): libcst with every
#: rule's metadata peaked at ~800 bytes a byte
WORKER_MEMORY_PER_PARSE_BYTE = 1500
#: workers that die on a file, none having finished one, before the pool is given up
MAX_DEATHS_WITHOUT_PROGRESS = 6
#: how often a worker without PR_SET_PDEATHSIG looks for its parent
PARENT_POLL = 0.5


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def effective_jobs(jobs: int | None, settings, forced: bool = False) -> int:
    """How many workers a scan may use: what was asked (else one per CPU), never more than
    the CPUs unless the command line forced it, and never more than MAX_JOBS_PER_CPU per
    CPU (a `jobs = 40` must not fork 40 parsers of a gigabyte each onto 2 cores)."""
    cpus = default_jobs()
    asked = jobs or settings.jobs or cpus
    forced = forced or bool(getattr(settings, "jobs_forced", False))
    return max(1, min(int(asked), MAX_JOBS_PER_CPU * cpus if forced else cpus))


def worker_memory(settings) -> int:
    """The address space a worker may add to its start-up size (see WORKER_MEMORY)."""
    from patchaudit.inputs.pyast import parse_limit

    return max(WORKER_MEMORY, WORKER_MEMORY_PER_PARSE_BYTE * parse_limit(settings))


# --------------------------------------------------------------------------
# worker side

_W: dict[str, Any] = {}


def _worker_init(settings, codes: list[str]) -> None:
    from patchaudit.config.registry import rule_index
    from patchaudit.pipeline.runner import load_tokenizer, open_engines

    index = rule_index()
    _W["settings"] = settings
    _W["rules"] = [index[c].load() for c in codes]
    _W["engines"] = open_engines(settings) if settings.engines else None
    _W["tokenizer"] = load_tokenizer(settings) if settings.tokenizer else None


def _worker_run(i: int, src, data: bytes | None):
    from patchaudit.pipeline.runner import analyse_file

    return i, analyse_file(src, _W["settings"], _W["rules"], _W["engines"], _W["tokenizer"], data=data)


def _set_parent_death_signal() -> None:
    """Linux: the kernel sends this process SIGKILL when its parent dies (prctl)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)     # PR_SET_PDEATHSIG
    except Exception:   # pragma: no cover - no libc: the watcher thread does it
        pass


def _watch_parent(parent_pid: int) -> None:
    """Everywhere: a thread that ends the process when its parent is gone (the process is
    re-parented, so getppid() changes), even while the main thread parses."""
    import threading

    def watch() -> None:
        while True:
            time.sleep(PARENT_POLL)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, name="patchaudit-parent-watch", daemon=True).start()


def _address_space() -> int | None:
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _limit_memory(settings) -> None:
    """RLIMIT_AS at the worker's present size plus `worker_memory`: an allocation past it
    fails (MemoryError, or libcst's allocator aborting the worker) instead of taking the
    machine's memory."""
    try:
        import resource
    except ImportError:   # pragma: no cover - not POSIX
        return
    base = _address_space()
    if base is None or not hasattr(resource, "RLIMIT_AS"):
        return
    want = base + worker_memory(settings)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY and soft <= want:
        return
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (want, hard))
    except (ValueError, OSError):   # pragma: no cover
        pass


def _worker_main(task_r, result_w, settings, codes: list[str], parent_pid: int, inherited: list) -> None:
    """A worker process: tasks `(i, src, data)` in, `("done", i, FileResult)` out, one at a
    time, until the task pipe ends (this process's parent closed it, or died)."""
    for conn in inherited:   # the other workers' pipe ends (fork copies them): their EOF is theirs
        try:
            conn.close()
        except OSError:
            pass
    _set_parent_death_signal()
    if os.getppid() != parent_pid:   # the parent died before the line above
        os._exit(1)
    _watch_parent(parent_pid)
    from patchaudit.inputs.pyast import set_parse_limit

    set_parse_limit(settings)
    _limit_memory(settings)
    try:
        _worker_init(settings, codes)
        result_w.send(("ready",))
    except BaseException as exc:   # the pool is broken: the parent does the work itself
        try:
            result_w.send(("init-failed", repr(exc)[:500]))
        except Exception:
            pass
        os._exit(1)
    while True:
        try:
            task = task_r.recv()
        except (EOFError, OSError):
            break
        if task is None:
            break
        i, src, data = task
        del task
        try:
            msg: tuple = ("done", i, _worker_run(i, src, data)[1])
        except MemoryError:
            msg = ("memory", i)
        except BaseException:   # not the file's fault (a bug, a hook): the parent runs it
            msg = ("here", i)
        del src, data
        try:
            result_w.send(msg)
        except MemoryError:
            msg = ("memory", i)
            result_w.send(msg)
        except Exception:   # the result does not pickle: the parent runs the file itself
            result_w.send(("here", i))
        if msg[0] == "memory":   # start afresh: the parent replaces this worker
            break
    os._exit(0)


def _mp_context():
    import multiprocessing

    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


# --------------------------------------------------------------------------
# main process


class Triage:
    """Decides, from the rule index alone, which files need the rules.

    A rule with its own `can_match` (PA102/PA103 follow their options, PA206/
    PA207 the run's engine packages) keeps its class `requires` a sound
    over-approximation of it under the default settings (the contract stated
    in `Rule.can_match`, checked by tests/test_speed_invariants.py): with
    default settings for it, a file that fails `requires` is dropped without
    importing the rule, and one that passes is put to the rule's own filter;
    with other settings, only the rule's own filter decides."""

    def __init__(self, metas: list, settings, engines: Any, tokenizer: Any, defer: bool = False):
        from patchaudit.config.settings import Settings
        from patchaudit.pipeline.runner import _needs_met

        self.settings = settings
        # exact mode may hand engines to any unit: count "engine" rules as able to run
        engine_marker = engines if engines is not None else (True if settings.engines else None)
        runnable = [m for m in metas if _needs_met(m, engine=engine_marker, tokenizer=tokenizer)]
        self.runnable_codes = {m.code for m in runnable}
        default_run = (list(settings.engine_packages) == list(Settings().engine_packages)
                       and not settings.engines)
        self.static_ok = {m.code: m.byte_filter and (not m.custom_filter or (
            default_run and not settings.options_for(m.code))) for m in runnable}
        self.by_kind = {
            "python": [m for m in runnable if "python" in m.kinds],
            "text": [m for m in runnable if "text" in m.kinds],
        }
        # rules judged from the other rules' results (PA001): they need the full rule
        # list wherever a suppression comment could be judged
        self.meta_rules = any(not m.kinds for m in metas)
        # with worker processes, a rule's own filter (PA102/PA103 parse the file with `ast`)
        # runs in the worker that would run the rule, not in this process, which would
        # otherwise do it for every file one after the other
        self.defer = defer

    def runnable(self, meta) -> bool:
        """Whether the rule can run at all in this run (its needs can be met).  A rule
        that cannot (PA206 without an engine, PA105 without a tokenizer) is never
        imported: analyse_file would skip it on every unit anyway."""
        return meta.code in self.runnable_codes

    def candidates(self, kind: str, data: bytes) -> list:
        """The runnable rules of a file's kind whose byte filter the file passes (a rule
        whose own filter follows non-default settings is always a candidate)."""
        unit_kind = "python" if kind == "python" else "text"
        return [m for m in self.by_kind[unit_kind] if not self.static_ok[m.code] or m.can_match_bytes(data)]

    def heavy(self, kind: str, data: bytes) -> bool:
        if kind == "patch":
            return True   # fragment and exact units are built from the patch: always run the rules
        unit_kind = "python" if kind == "python" else "text"
        text: str | None = None
        for m in self.by_kind[unit_kind]:
            if self.static_ok[m.code]:
                if not m.can_match_bytes(data):
                    continue   # cannot fire: decided without importing the rule
                if not m.custom_filter or self.defer:
                    return True
                # `requires` (a sound over-approximation) let it through: the rule's own,
                # finer filter decides (PA103 wants a *call* of a decode method), so a
                # file it rejects is not shipped to a worker for nothing
            if self.defer:
                return True
            if text is None:
                try:
                    text = data.decode("utf-8-sig")
                except UnicodeDecodeError:
                    return True   # analyse_file reports it; no rule will run
            # exactly what runner.run_python_rules / run_unit_rules ask
            if unit_kind == "python":
                if m.load().can_match(text, self.settings):
                    return True
            elif m.load().can_match(_joined_lines(text)):
                return True
        if self.meta_rules and b"patchaudit" in data.lower():
            return True
        return False


def _joined_lines(text: str) -> str:
    """A text file's lines as runner.analyse_file splits them, joined by "\\n" (the
    text a TextUnit's rules pre-filter on)."""
    from patchaudit.inputs import source_lines

    return "\n".join(source_lines(text))


def _cacheable(result) -> bool:
    # a worker's death or time budget depends on the machine and the moment, not on the file
    return not any(e.message.startswith(("internal error", "cannot read", "analysis "))
                   or " crashed" in e.message for e in result.errors)


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


class _Worker:
    def __init__(self, process, task_w, result_r) -> None:
        self.process = process
        self.task_w = task_w                     # this process's end of the task pipe
        self.result_r = result_r                 # and of the result pipe
        self.out: deque = deque()                # framed tasks not yet written (memoryviews)
        self.inflight: deque = deque()           # tasks given to it, in order: [0] is the current one
        self.started: float | None = None        # when its current task started
        self.ready = False                       # its initializer finished
        self.retiring = False                    # it exits after its last message (a MemoryError)


class _Pool:
    """`jobs` worker processes, each of which this process knows the current file of."""

    def __init__(self, jobs: int, settings, codes: list[str]) -> None:
        self.ctx = _mp_context()
        self.fork = self.ctx.get_start_method() == "fork"
        self.jobs = jobs
        self.settings = settings
        self.codes = codes
        self.workers: list[_Worker] = []
        self.queue: deque = deque()              # tasks no worker has yet
        self.broken = False                      # workers cannot start: the caller takes over
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
        inherited = ([c for w in self.workers for c in (w.task_w, w.result_r)] + [task_w, result_r]
                     if self.fork else [])
        proc = self.ctx.Process(target=_worker_main, name="patchaudit-worker", daemon=True,
                                args=(task_r, result_w, self.settings, self.codes, os.getpid(), inherited))
        proc.start()
        task_r.close()
        result_w.close()
        if self.nonblocking:
            os.set_blocking(task_w.fileno(), False)
        self.workers.append(_Worker(proc, task_w, result_r))

    def _remove(self, w: _Worker, kill: bool = False) -> None:
        if w in self.workers:
            self.workers.remove(w)
        if kill and w.process.is_alive():
            try:
                w.process.kill()
            except Exception:   # pragma: no cover - already gone
                pass
        w.process.join(timeout=5)
        for conn in (w.task_w, w.result_r):
            try:
                conn.close()
            except OSError:
                pass

    def _lost(self, w: _Worker, message: str | None, out: list) -> None:
        """Worker `w` is gone: its current file is reported with `message` (None: the worker
        never started, which breaks the pool), its other files go back to the queue, and a
        new worker takes its place."""
        self._remove(w, kill=True)
        tasks = list(w.inflight)
        w.inflight.clear()
        if message is None or not w.ready:
            self.broken = True
        elif tasks and not w.retiring:   # a retiring worker had not started the others
            out.append((tasks.pop(0), "error", message))
            self.deaths += 1
            if not self.finished and self.deaths >= MAX_DEATHS_WITHOUT_PROGRESS:
                self.broken = True    # every worker dies, none finishes: not the files' fault
        self.queue.extendleft(reversed(tasks))
        if not self.broken:
            self.restarts += 1
            self._spawn()
            self._dispatch()

    def _died(self, w: _Worker, out: list) -> None:
        w.process.join(timeout=5)
        how = _signal_name(w.process.exitcode)
        self._lost(w, f"analysis ran out of memory or crashed: the worker process analysing this file "
                      f"ended with {how}; not analysed", out)

    # -- tasks ------------------------------------------------------------
    def busy(self) -> int:
        return len(self.queue) + sum(len(w.inflight) for w in self.workers)

    def submit(self, task) -> None:
        self.queue.append(task)
        self._dispatch()

    def _dispatch(self) -> None:
        while self.queue:
            w = min(self.workers, key=lambda w: len(w.inflight), default=None)
            if w is None or len(w.inflight) >= WINDOW:
                return
            task = self.queue.popleft()
            w.inflight.append(task)
            if len(w.inflight) == 1 and w.ready:
                w.started = time.monotonic()
            self._write(w, task)

    def _write(self, w: _Worker, task) -> None:
        if not self.nonblocking:
            try:
                w.task_w.send(task)
            except (OSError, ValueError):
                pass   # the worker is gone: its sentinel says so
            return
        w.out.append(memoryview(_frame(task)))
        self._flush(w)

    def _flush(self, w: _Worker) -> None:
        while w.out:
            try:
                n = os.write(w.task_w.fileno(), w.out[0])
            except BlockingIOError:
                return
            except (OSError, ValueError):   # the worker is gone: its sentinel says so
                w.out.clear()
                return
            if n >= len(w.out[0]):
                w.out.popleft()
            else:
                w.out[0] = w.out[0][n:]

    def _message(self, w: _Worker, msg: tuple, out: list) -> None:
        kind = msg[0]
        if kind == "ready":
            w.ready = True
            if w.inflight:
                w.started = time.monotonic()
            return
        if kind == "init-failed":
            return   # the worker exits: _lost breaks the pool
        task = w.inflight.popleft()
        w.started = time.monotonic() if w.inflight else None
        if kind == "done":
            self.finished += 1
            out.append((task, "done", msg[2]))
        elif kind == "memory":
            w.retiring = True
            out.append((task, "error", f"analysis ran out of memory (over the worker's budget of "
                                       f"{worker_memory(self.settings) // 2 ** 20} MiB); not analysed"))
        else:
            out.append((task, "here", None))
        self._dispatch()

    def poll(self, timeout: float | None) -> list:
        """Wait up to `timeout` seconds (None: until something happens) and return the
        finished tasks: (task, "done", FileResult) | (task, "error", message) |
        (task, "here", None) (to run in this process)."""
        out: list = []
        now = time.monotonic()
        for w in list(self.workers):   # the time budget
            if w.inflight and w.started is not None and now - w.started > FILE_TIME_BUDGET:
                self._lost(w, f"analysis took longer than {FILE_TIME_BUDGET:g} s (the per-file time budget): "
                              f"its worker process was stopped; not analysed", out)
        if out or self.broken or not self.workers:
            return out
        deadlines = [w.started + FILE_TIME_BUDGET for w in self.workers if w.inflight and w.started is not None]
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


def _read(path: str, settings) -> bytes | None:
    """The file's bytes, or None to let analyse_file read it and report why it cannot.

    Through the one guarded reader (a FIFO would block forever, a device never ends:
    never opened; bounded by max-file-size even if the file grows)."""
    from patchaudit.files.reader import read_bytes

    try:
        return read_bytes(path, settings.max_file_size)
    except OSError:   # ReadError: analyse_file reports it
        return None


def scan(files: list, settings, metas: list, engines: Any, tokenizer: Any, cache=None,
         jobs: int | None = None, on_done=None) -> list[tuple[Any, bool]]:
    """(FileResult, from the cache?) for each file, in the order of `files`.

    `on_done()`, if given, is called in this process once per finished file."""
    from patchaudit.pipeline.runner import analyse_file

    jobs = effective_jobs(jobs, settings, forced=jobs is not None)
    from patchaudit.inputs.pyast import set_parse_limit

    set_parse_limit(settings)   # the pre-filter's ast gate refuses what libcst would
    triage = Triage(metas, settings, engines, tokenizer, defer=jobs > 1)
    results: list[Any] = [None] * len(files)
    digests: list[bytes | None] = [None] * len(files)
    cached = [False] * len(files)
    classes: list | None = None

    def rule_classes() -> list:
        nonlocal classes
        if classes is None:
            classes = [m.load() for m in metas if triage.runnable(m)]
        return classes

    def rule_classes_for(kind: str, data: bytes | None) -> list:
        """The rules that can fire on this file, each imported when first needed: a
        pre-commit run over a few .py files imports neither the patch rules nor a rule
        whose strings the files lack.  Dropping the others changes nothing (analyse_file
        would skip them on their `requires` or kind).  Patches and unreadable files run
        every rule, and so does a run with a rule judged from the others (PA001)."""
        if classes is not None or kind == "patch" or data is None or triage.meta_rules:
            return rule_classes()
        return [m.load() for m in triage.candidates(kind, data)]

    pending: list[tuple[int, Any, bytes | None]] = []   # heavy files not yet handed out
    pending_bytes = 0
    pool: _Pool | None = None
    pool_broken = False   # workers could not start: the rest runs here, no new pool

    def finish(i: int, fr) -> None:
        results[i] = fr
        d = digests[i]
        if cache is not None and d is not None and _cacheable(fr):
            cache.put(files[i].path, files[i].kind, d, fr)
        if on_done is not None:
            on_done()

    def run_here(i: int, src, data) -> None:
        finish(i, analyse_file(src, settings, rule_classes_for(src.kind, data), engines, tokenizer, data=data))

    def failed(i: int, src, message: str) -> None:
        from patchaudit.model.findings import FileError
        from patchaudit.pipeline.runner import FileResult

        LAST_SCAN["lost"] += 1
        finish(i, FileResult(src.path, errors=[FileError(src.path, message)]))

    def handle(outcomes: list) -> None:
        nonlocal pool, pool_broken
        for (i, src, data), kind, payload in outcomes:
            if kind == "done":
                finish(i, payload)
            elif kind == "error":      # the file killed its worker, or ran over the time budget
                failed(i, src, payload)
            else:                      # not the file's fault (its result did not pickle...)
                run_here(i, src, data)
        if pool is not None and pool.broken:   # workers cannot start: do the rest here
            left = pool.abandon()
            LAST_SCAN["restarts"] += pool.restarts
            pool, pool_broken = None, True
            for task in left:
                run_here(*task)

    def collect(wait_for_one: bool) -> None:
        """Take the finished tasks; with `wait_for_one`, wait until one finishes."""
        while pool is not None and pool.busy():
            got = pool.poll(None if wait_for_one else 0)
            handle(got)
            if got or not wait_for_one:
                return

    def submit(i: int, src, data) -> None:
        while pool is not None and pool.busy() >= jobs * WINDOW:
            collect(True)
        if pool is None:   # the pool broke: finish serially
            run_here(i, src, data)
            return
        pool.submit((i, src, data))

    def start_pool(eager: bool = False) -> None:
        nonlocal pool
        if not eager:
            rule_classes()   # import the rule modules (and libcst) once, before forking
        LAST_SCAN["pool"] = True
        # eagerly: the workers import libcst and the rules on the other cores while this
        # process reads and pre-filters
        pool = _Pool(jobs, settings, [m.code for m in metas if triage.runnable(m)])
        if eager:
            LAST_SCAN["eager"] = True

    LAST_SCAN.clear()
    LAST_SCAN.update(pool=False, eager=False, jobs=jobs, heavy=0, light=0, cached=0, lost=0, restarts=0)
    if _eager_pool(files, jobs, cache, triage, metas):
        start_pool(eager=True)
    submitted = False
    try:
        for i, src in enumerate(files):
            data = _read(src.path, settings)
            if data is not None:
                d = digests[i] = _digest(data) if cache is not None else None
                if cache is not None:
                    hit = cache.get(src.path, src.kind, d)
                    if hit is not None:
                        results[i], cached[i] = hit, True
                        LAST_SCAN["cached"] += 1
                        if on_done is not None:
                            on_done()
                        continue
                if not triage.heavy(src.kind, data):
                    LAST_SCAN["light"] += 1
                    finish(i, _light(src, settings, engines, tokenizer, data))
                    continue
            LAST_SCAN["heavy"] += 1
            # heavy (or unreadable: analyse_file reports why)
            if pool is not None:
                submitted = True
                submit(i, src, data)
                collect(False)
                continue
            if jobs == 1 or pool_broken:
                run_here(i, src, data)   # no pool will start: now, while the pre-filter's facts are fresh
                continue
            pending.append((i, src, data))
            pending_bytes += len(data) if data is not None else 0
            if pending_bytes >= POOL_MIN_BYTES and len(pending) >= 2:
                submitted = True
                start_pool()
                for task in pending:
                    submit(*task)
                pending.clear()
        for task in pending:   # too little heavy work for a pool
            run_here(*task)
        pending.clear()
        while pool is not None and pool.busy():
            collect(True)
    finally:
        if pool is not None:
            LAST_SCAN["restarts"] += pool.restarts
            if not submitted or pool.busy():
                pool.abandon()   # an eager pool that got no file, or an exception: stopped now
            else:
                pool.close()
    return [(results[i], cached[i]) for i in range(len(files))]


def _eager_pool(files: list, jobs: int, cache, triage: Triage, metas: list) -> bool:
    """Whether to fork the workers before reading: a cold scan of a large tree with
    forked workers (they cost ~10 ms to start; importing libcst costs 0.1 s, which they
    then do while this process reads) and rules that parse.  A warm cache, a pre-commit
    run's few files or a platform that spawns workers (a new interpreter each) wait for
    heavy work as before."""
    if jobs < 2 or len(files) < EAGER_MIN_FILES or _mp_context().get_start_method() != "fork":
        return False
    if cache is not None and not cache.cold():
        return False
    return any(triage.runnable(m) and ("python" in m.kinds or "patch" in m.kinds) for m in metas)


def _digest(data: bytes) -> bytes:
    from patchaudit.pipeline.cache import digest

    return digest(data)


def _light(src, settings, engines, tokenizer, data: bytes):
    """A file no selected rule can fire on.

    With no rule to run, analyse_file can only report that the file is not UTF-8
    (PA001, the one rule that reads suppression comments, makes a file with one heavy),
    so a file that decodes needs nothing more: an empty result, without splitting
    lines or fingerprinting nothing."""
    from patchaudit.pipeline.runner import FileResult, analyse_file

    if src.kind != "patch":
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            return FileResult(src.path)
    return analyse_file(src, settings, [], engines, tokenizer, data=data)
