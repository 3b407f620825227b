"""Scheduling the per-file work: cache, pre-filter, worker processes.

`scan` runs `analyse.analyse_file` on every file of a run and returns the
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
messaging cost more than they save), except on a cold scan of a large tree
where forked workers start with the first heavy file and import libcst
while this process reads on (`_eager_pool`).  When nobody gave the number of jobs,
it is fitted to the CPUs no other task wants when the run starts
(`adapted_jobs`: /proc/loadavg's runnable tasks, the fewest of three readings; the
runner decides once, before the whole-repository pre-pass forks its workers).  With workers, a rule's own filter
(`can_match`: the dataflow rules parse with `ast`) runs in the worker, not
here.  At most `WINDOW` tasks per worker are in
flight, so memory stays bounded however large the tree: a worker parses one
file at a time and keeps nothing, and the main process keeps only results.
Workers are forked where the platform allows it (they inherit the imported
rule modules), and open their own engine sources and tokenizer from the
settings (an open archive is not shared across processes).

Budgets (SECURITY.md, promise 7).  The pool is the project's own (`pool.Pool`), not
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
import sys
import time
from typing import Any

from patchaudit.files.observe import holds, noted
from patchaudit.pipeline.pool import WINDOW, Pool, mp_context
from patchaudit.pipeline.triage import Triage, take_order, weight

#: heavy bytes (files that need a libcst parse) before a process pool pays off
POOL_MIN_BYTES = 256 * 1024
#: a cold scan of at least this many files forks its workers at its first heavy file (the
#: overlap of libcst's import with reading saved 0.3 s of areal's 403 files with the default
#: rules)
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
WORKER_MEMORY = 4 * 1024**3
#: ... and per byte of the largest text it may parse (max-parse-size): libcst with every
#: rule's metadata peaked at ~800 bytes a byte
WORKER_MEMORY_PER_PARSE_BYTE = 1500
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
    forced = forced or bool(settings.jobs_forced)
    return max(1, min(int(asked), MAX_JOBS_PER_CPU * cpus if forced else cpus))


def _runnable_tasks() -> int | None:
    """The tasks running or ready to run on the machine now (/proc/loadavg's fourth field,
    this process included), or None where the platform does not say."""
    try:
        with open("/proc/loadavg", "rb") as fh:
            field = fh.read().split()[3]
        return int(field.split(b"/")[0])
    except (OSError, IndexError, ValueError):
        return None


#: readings of /proc/loadavg `idle_cpus` takes, `IDLE_GAP` seconds apart: a task that
#: keeps a CPU busy is runnable in each, a momentary one (a thread waking up, a process
#: exiting) seldom twice (on an idle machine of two cores, ~0.5% of single readings
#: counted one task too many)
IDLE_READINGS = 3
IDLE_GAP = 0.001


def idle_cpus() -> float | None:
    """How many of this process's CPUs no other task wants now: the CPUs less the other
    runnable tasks (the fewest of `IDLE_READINGS` readings, ~2 ms); None where the platform
    does not say (then all are counted)."""
    readings = []
    for k in range(IDLE_READINGS):
        if k:
            time.sleep(IDLE_GAP)
        got = _runnable_tasks()
        if got is None:
            return None
        readings.append(got)
    return float(max(0, default_jobs() - max(0, min(readings) - 1)))


def adapted_jobs(jobs: int) -> int:
    """The workers to start when nobody fixed their number: no more than the CPUs idle
    now (another process busy on one of two cores: one job, in this process; a worker
    would only take turns with it and pay the messaging)."""
    idle = idle_cpus()
    if idle is None:
        return jobs
    return max(1, min(jobs, int(idle + 0.5)))


def scan_jobs(settings, jobs: int | None = None) -> int:
    """The workers a scan uses (`jobs` given by the caller, else the settings', else fitted
    to the idle CPUs); the whole-repository pre-pass uses as many."""
    adaptive = jobs is None and not settings.jobs and not settings.jobs_forced
    n = effective_jobs(jobs, settings, forced=jobs is not None)
    if adaptive and n > 1:
        n = adapted_jobs(n)  # nobody fixed the number: no more than the CPUs idle now
    return n


def harden_worker(settings, parent_pid: int) -> None:
    """What every worker process does first: die with its parent, refuse what the parse
    budget refuses, and limit its address space (the whole-repository pre-pass's workers,
    pipeline/repo_index.py, do it as the scan's do)."""
    _set_parent_death_signal()
    if os.getppid() != parent_pid:  # the parent died before the line above
        os._exit(1)
    _watch_parent(parent_pid)
    from patchaudit.files.tempdirs import worker_signals
    from patchaudit.inputs.pyast import set_parse_limit

    worker_signals()  # SIGTERM ends a worker as before; its parent removes the run's folders
    set_parse_limit(settings)
    _limit_memory(settings)


def worker_memory(settings) -> int:
    """The address space a worker may add to its start-up size (see WORKER_MEMORY)."""
    from patchaudit.inputs.pyast import parse_limit

    return max(WORKER_MEMORY, WORKER_MEMORY_PER_PARSE_BYTE * parse_limit(settings))


# --------------------------------------------------------------------------
# worker side

_W: dict[str, Any] = {}


def _worker_init(settings, codes: list[str]) -> None:
    from patchaudit.config.registry import rule_index
    from patchaudit.pipeline.context import load_tokenizer, open_engines

    index = rule_index()
    _W["settings"] = settings
    _W["rules"] = [index[c].load() for c in codes]
    _W["engines"] = open_engines(settings) if settings.engines else None
    _W["tokenizer"] = load_tokenizer(settings) if settings.tokenizer else None


def _worker_run(i: int, src, data: bytes | None):
    from patchaudit.pipeline.analyse import analyse_file

    return i, analyse_file(src, _W["settings"], _W["rules"], _W["engines"], _W["tokenizer"], data=data)


def _set_parent_death_signal() -> None:
    """Linux: the kernel sends this process SIGKILL when its parent dies (prctl)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:  # pragma: no cover - no libc: the watcher thread does it
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
    except ImportError:  # pragma: no cover - not POSIX
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
    except (ValueError, OSError):  # pragma: no cover
        pass


def _worker_main(task_r, result_w, settings, codes: list[str], parent_pid: int, inherited: list) -> None:
    """A worker process: tasks `(i, src, data)` in, `("done", i, FileResult)` out, one at a
    time, until the task pipe ends (this process's parent closed it, or died)."""
    for conn in inherited:  # the other workers' pipe ends (fork copies them): their EOF is theirs
        try:
            conn.close()
        except OSError:
            pass
    harden_worker(settings, parent_pid)
    try:
        _worker_init(settings, codes)
        result_w.send(("ready",))
    except BaseException as exc:  # the pool is broken: the parent does the work itself
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
        except BaseException:  # not the file's fault (a bug, a hook): the parent runs it
            msg = ("here", i)
        del src, data
        try:
            result_w.send(msg)
        except MemoryError:
            msg = ("memory", i)
            result_w.send(msg)
        except Exception:  # the result does not pickle: the parent runs the file itself
            result_w.send(("here", i))
        if msg[0] == "memory":  # start afresh: the parent replaces this worker
            break
    os._exit(0)


# --------------------------------------------------------------------------
# main process


def cacheable(result) -> bool:
    """Whether a result (of a file, or of a run: pipeline/replay.py) may be kept: a worker's
    death, a time budget or an error of the operating system depends on the machine and
    the moment, not on the files; nor a file's result whose analysis read a file that
    changed meanwhile (`FileResult.reads` None)."""
    if getattr(result, "reads", ()) is None:
        return False
    return not any(
        e.message.startswith(("internal error", "cannot read", "analysis "))
        or " crashed" in e.message
        or "(the per-file time budget)" in e.message
        for e in result.errors
    )


def _read(path: str, settings) -> bytes | None:
    """The file's bytes, or None to let analyse_file read it and report why it cannot.

    Through the one guarded reader (a FIFO would block forever, a device never ends:
    never opened; bounded by max-file-size even if the file grows)."""
    from patchaudit.files.reader import read_bytes

    try:
        return read_bytes(path, settings.max_file_size)
    except OSError:  # ReadError: analyse_file reports it
        return None


def scan(
    files: list, settings, metas: list, engines: Any, tokenizer: Any, cache=None, jobs: int | None = None, on_done=None
) -> list[tuple[Any, bool]]:
    """(FileResult, from the cache?) for each file, in the order of `files`.

    `on_done()`, if given, is called in this process once per finished file."""
    jobs = scan_jobs(settings, jobs)
    from patchaudit.inputs.pyast import set_parse_limit

    set_parse_limit(settings)  # the pre-filter's ast gate refuses what libcst would
    run = _Scan(files, settings, metas, engines, tokenizer, cache, jobs, on_done)
    LAST_SCAN.clear()
    LAST_SCAN.update(pool=False, eager=False, jobs=jobs, heavy=0, light=0, cached=0, lost=0, restarts=0)
    run.eager = _eager_pool(files, jobs, cache, run.triage, metas)
    try:
        for i in take_order(files, engines):
            run.take(i, files[i])
        for task in run.pending:  # too little heavy work for a pool
            run.run_here(*task)
        run.pending.clear()
        while run.pool is not None and run.pool.busy():
            run.collect(True)
    finally:
        if run.pool is not None:
            LAST_SCAN["restarts"] += run.pool.restarts
            if not run.submitted or run.pool.busy():
                run.pool.abandon()  # an eager pool that got no file, or an exception: stopped now
            else:
                run.pool.close()
    return [(run.results[i], run.cached[i]) for i in range(len(files))]


class _Scan:
    """One scan's state: the results so far, the heavy files not yet handed out, the pool."""

    def __init__(
        self, files: list, settings, metas: list, engines: Any, tokenizer: Any, cache, jobs: int, on_done
    ) -> None:
        self.files = files
        self.settings = settings
        self.metas = metas
        self.engines = engines
        self.tokenizer = tokenizer
        self.cache = cache
        self.jobs = jobs
        self.on_done = on_done
        self.triage = Triage(metas, settings, engines, tokenizer, defer=jobs > 1)
        self.results: list[Any] = [None] * len(files)
        self.digests: list[bytes | None] = [None] * len(files)
        self.cached = [False] * len(files)
        self.classes: list | None = None
        self.pending: list[tuple[int, Any, bytes | None]] = []  # heavy files not yet handed out
        self.pending_bytes = 0
        self.pool: Pool | None = None
        self.pool_broken = False  # workers could not start: the rest runs here, no new pool
        self.submitted = False
        #: fork the workers at the first heavy file, before there is enough heavy work to
        #: measure (`_eager_pool`)
        self.eager = False

    def rule_classes(self) -> list:
        if self.classes is None:
            self.classes = [m.load() for m in self.metas if self.triage.runnable(m)]
        return self.classes

    def rule_classes_for(self, kind: str, data: bytes | None) -> list:
        """The rules that can fire on this file, each imported when first needed: a
        pre-commit run over a few .py files imports neither the patch rules nor a rule
        whose strings the files lack.  Dropping the others changes nothing (analyse_file
        would skip them on their `requires` or kind).  Patches and unreadable files run
        every rule, and so does a run with a rule judged from the others (PA001)."""
        if self.classes is not None or kind == "patch" or data is None or self.triage.meta_rules:
            return self.rule_classes()
        return [m.load() for m in self.triage.candidates(kind, data)]

    def take(self, i: int, src) -> None:
        """File `i` of the scan: from the cache, light (done here), or heavy (here, pending
        until there is enough heavy work for a pool, or handed to the pool)."""
        data = _read(src.path, self.settings)
        if data is not None:
            d = None
            if self.cache is not None:  # the content and what it sees of the repository's summaries
                d = _digest(data) + _repo_key(self.settings, src, data)
            self.digests[i] = d
            if self.cache is not None:
                hit = self.cache.get(src.path, src.kind, d)
                if hit is not None and _reads_hold(hit):
                    self.results[i], self.cached[i] = hit, True
                    LAST_SCAN["cached"] += 1
                    if self.on_done is not None:
                        self.on_done()
                    return
            if not self.triage.heavy(src.kind, data):
                LAST_SCAN["light"] += 1
                self.finish(i, _light(src, self.settings, self.engines, self.tokenizer, data))
                return
        LAST_SCAN["heavy"] += 1
        # heavy (or unreadable: analyse_file reports why)
        if self.pool is not None:
            self.submitted = True
            self.submit(i, src, data)
            self.collect(False)
            return
        if self.jobs == 1 or self.pool_broken:
            self.run_here(i, src, data)  # no pool will start: now, while the pre-filter's facts are fresh
            return
        if self.eager and mp_context().get_start_method() == "fork":
            # a cold scan of a large tree: the workers start with its first heavy file (asked
            # here, not before reading: multiprocessing is ~6 ms of imports a scan with no
            # heavy file does without)
            self.start_pool(eager=True)
            self.submitted = True
            self.submit(i, src, data)
            return
        self.pending.append((i, src, data))
        self.pending_bytes += weight(src, data, self.engines)
        if self.pending_bytes >= POOL_MIN_BYTES and len(self.pending) >= 2:
            self.submitted = True
            self.start_pool()
            for task in self.pending:
                self.submit(*task)
            self.pending.clear()

    def finish(self, i: int, fr) -> None:
        noted(getattr(fr, "reads", ()))  # what its analysis read: a replay depends on it
        self.results[i] = fr
        d = self.digests[i]
        if self.cache is not None and d is not None and cacheable(fr):
            self.cache.put(self.files[i].path, self.files[i].kind, d, fr)
        if self.on_done is not None:
            self.on_done()

    def run_here(self, i: int, src, data) -> None:
        from patchaudit.pipeline.analyse import analyse_file

        self.finish(
            i,
            analyse_file(
                src, self.settings, self.rule_classes_for(src.kind, data), self.engines, self.tokenizer, data=data
            ),
        )

    def failed(self, i: int, src, message: str) -> None:
        from patchaudit.model.findings import FileError
        from patchaudit.pipeline.results import FileResult

        LAST_SCAN["lost"] += 1
        self.finish(i, FileResult(src.path, errors=[FileError(src.path, message)]))

    def handle(self, outcomes: list) -> None:
        for (i, src, data), kind, payload in outcomes:
            if kind == "done":
                self.finish(i, payload)
            elif kind == "error":  # the file killed its worker, or ran over the time budget
                self.failed(i, src, payload)
            else:  # not the file's fault (its result did not pickle...)
                self.run_here(i, src, data)
        if self.pool is not None and self.pool.broken:  # workers cannot start: do the rest here
            left = self.pool.abandon()
            LAST_SCAN["restarts"] += self.pool.restarts
            self.pool, self.pool_broken = None, True
            for task in left:
                self.run_here(*task)

    def collect(self, wait_for_one: bool) -> None:
        """Take the finished tasks; with `wait_for_one`, wait until one finishes."""
        while self.pool is not None and self.pool.busy():
            got = self.pool.poll(None if wait_for_one else 0)
            self.handle(got)
            if got or not wait_for_one:
                return

    def submit(self, i: int, src, data) -> None:
        while self.pool is not None and self.pool.busy() >= self.jobs * WINDOW:
            self.collect(True)
        if self.pool is None:  # the pool broke: finish serially
            self.run_here(i, src, data)
            return
        self.pool.submit((i, src, data), alone=src.kind == "patch" and self.engines is not None)

    def start_pool(self, eager: bool = False) -> None:
        if not eager:
            self.rule_classes()  # import the rule modules (and libcst) once, before forking
        LAST_SCAN["pool"] = True
        # eagerly: the workers import libcst and the rules on the other cores while this
        # process reads and pre-filters
        self.pool = Pool(
            self.jobs,
            self.settings,
            [m.code for m in self.metas if self.triage.runnable(m)],
            target=_worker_main,
            time_budget=FILE_TIME_BUDGET,
            memory=worker_memory(self.settings),
        )
        if eager:
            LAST_SCAN["eager"] = True


def _eager_pool(files: list, jobs: int, cache, triage: Triage, metas: list) -> bool:
    """Whether to fork the workers at the first heavy file, not once `POOL_MIN_BYTES` of
    heavy work is pending: a cold scan of a large tree with forked workers (they cost
    ~10 ms to start; importing libcst costs 0.1 s, which they then do while this process
    reads on) and rules that parse.  Not before the first file: a scan whose files no
    rule's strings are in (PA101 alone on verl) would pay for workers that get nothing.
    A warm cache, a pre-commit run's few files or a platform that spawns workers (a new
    interpreter each) wait for heavy work as before."""
    if jobs < 2 or len(files) < EAGER_MIN_FILES:
        return False  # (whether the platform forks is asked at the first heavy file: `take`)
    if cache is not None and not cache.cold():
        return False
    return any(triage.runnable(m) and ("python" in m.kinds or "patch" in m.kinds) for m in metas)


def _reads_hold(fr) -> bool:
    """Whether the other files a cached result's analysis read (`FileResult.reads`) are
    unchanged; noted for the run either way (files/observe.py `noted`)."""
    reads = noted(getattr(fr, "reads", ()))
    return reads is not None and holds(reads)


def _repo_key(settings, src, data: bytes) -> bytes:
    """What a Python file sees of the repository's summaries (pipeline/repo_index.py), as
    a digest for the per-file result cache (b"" when the run has no pre-pass): a file is
    re-analysed exactly when a summary it can see changed."""
    repos = settings.repo
    if src.kind != "python" or not repos:
        return b""
    return b"".join(repos[c].text_key(data) for c in sorted(repos))


def _digest(data: bytes) -> bytes:
    from patchaudit.pipeline.cache import digest

    return digest(data)


def _light(src, settings, engines, tokenizer, data: bytes):
    """A file no selected rule can fire on.

    With no rule to run, analyse_file can only report that the file is not UTF-8
    (PA001, the one rule that reads suppression comments, makes a file with one heavy),
    so a file that decodes needs nothing more: an empty result, without splitting
    lines or fingerprinting nothing."""
    from patchaudit.pipeline.analyse import analyse_file
    from patchaudit.pipeline.results import FileResult

    if src.kind != "patch":
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            return FileResult(src.path)
    return analyse_file(src, settings, [], engines, tokenizer, data=data)
