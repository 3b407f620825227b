"""Scheduling the per-file work: cache, pre-filter, worker processes.

`scan` runs `runner.analyse_file` on every file of a run and returns the
results in file order (the output never depends on the number of jobs).  For
each file, in the main process:

1. read it once (the bytes are passed on; nothing reads a file twice) and
   look its content digest up in the result cache (`patchaudit.cache`);
2. pre-filter it with the rule index (`patchaudit.rule_index`), which knows
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
"""

from __future__ import annotations

import os
import sys
from typing import Any

#: heavy bytes (files that need a libcst parse) before a process pool pays off
POOL_MIN_BYTES = 256 * 1024
#: tasks in flight per worker
WINDOW = 4
#: a cold scan of at least this many files forks its workers before reading anything
EAGER_MIN_FILES = 200
#: what the last scan did (for tests and --verbose style reports; no timings)
LAST_SCAN: dict[str, Any] = {}


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


# --------------------------------------------------------------------------
# worker side

_W: dict[str, Any] = {}


def _worker_init(settings, codes: list[str]) -> None:
    from patchaudit.rule_index import rule_index
    from patchaudit.runner import load_tokenizer, open_engines

    index = rule_index()
    _W["settings"] = settings
    _W["rules"] = [index[c].load() for c in codes]
    _W["engines"] = open_engines(settings) if settings.engines else None
    _W["tokenizer"] = load_tokenizer(settings) if settings.tokenizer else None


def _worker_run(i: int, src, data: bytes | None):
    from patchaudit.runner import analyse_file

    return i, analyse_file(src, _W["settings"], _W["rules"], _W["engines"], _W["tokenizer"], data=data)


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
        from patchaudit.config import Settings
        from patchaudit.runner import _needs_met

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
    return not any(e.message.startswith(("internal error", "cannot read")) or " crashed" in e.message
                   for e in result.errors)


def _read(path: str, settings) -> bytes | None:
    """The file's bytes, or None to let analyse_file read it and report why it cannot."""
    import stat

    try:
        st = os.stat(path)
        # a FIFO would block forever, a device never ends: analyse_file reports them
        if not stat.S_ISREG(st.st_mode) or st.st_size > settings.max_file_size:
            return None
        with open(path, "rb") as fh:
            data = fh.read(settings.max_file_size + 1)
        return data if len(data) <= settings.max_file_size else None
    except OSError:
        return None


def scan(files: list, settings, metas: list, engines: Any, tokenizer: Any, cache=None,
         jobs: int | None = None, on_done=None) -> list[tuple[Any, bool]]:
    """(FileResult, from the cache?) for each file, in the order of `files`.

    `on_done()`, if given, is called in this process once per finished file."""
    from patchaudit.runner import analyse_file

    jobs = jobs or settings.jobs or default_jobs()
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
    pool = None
    pool_broken = False   # a worker died: the rest runs here, no new pool
    futures: set = set()

    def finish(i: int, fr) -> None:
        results[i] = fr
        d = digests[i]
        if cache is not None and d is not None and _cacheable(fr):
            cache.put(files[i].path, files[i].kind, d, fr)
        if on_done is not None:
            on_done()

    def run_here(i: int, src, data) -> None:
        finish(i, analyse_file(src, settings, rule_classes_for(src.kind, data), engines, tokenizer, data=data))

    def collect(wait_for_one: bool) -> None:
        nonlocal pool
        from concurrent.futures import FIRST_COMPLETED, wait

        if not futures:
            return
        done, _ = wait(futures, timeout=None if wait_for_one else 0, return_when=FIRST_COMPLETED)
        for fut in done:
            futures.discard(fut)
            i, src, data = fut.task  # type: ignore[attr-defined]
            try:
                _, fr = fut.result()
            except Exception as exc:   # a worker died (or could not pickle): do it here
                fr = None
                _broken(exc)
            if fr is None:
                run_here(i, src, data)
            else:
                finish(i, fr)

    def _broken(exc: BaseException) -> None:
        nonlocal pool, pool_broken
        pool_broken = True
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
            pool = None

    def submit(i: int, src, data) -> None:
        if len(futures) >= jobs * WINDOW:
            collect(True)
        if pool is None:   # the pool broke: finish serially
            run_here(i, src, data)
            return
        try:
            fut = pool.submit(_worker_run, i, src, data)
        except Exception as exc:
            _broken(exc)
            run_here(i, src, data)
            return
        fut.task = (i, src, data)  # type: ignore[attr-defined]
        futures.add(fut)

    def start_pool(eager: bool = False) -> None:
        nonlocal pool
        from concurrent.futures import ProcessPoolExecutor

        if not eager:
            rule_classes()   # import the rule modules (and libcst) once, before forking
        LAST_SCAN["pool"] = True
        pool = ProcessPoolExecutor(max_workers=jobs, mp_context=_mp_context(), initializer=_worker_init,
                                   initargs=(settings, [m.code for m in metas if triage.runnable(m)]))
        if eager:
            # fork the workers now (a first task starts them all): they import libcst and
            # the rules on the other cores while this process reads and pre-filters
            pool.submit(int)
            LAST_SCAN["eager"] = True

    def stop_idle_pool() -> None:
        """An eagerly started pool that got no file: its workers may still be importing
        libcst; nothing waits for that."""
        procs = getattr(pool, "_processes", None) or {}
        for proc in list(procs.values()):
            try:
                proc.terminate()
            except Exception:   # pragma: no cover - already gone
                pass

    LAST_SCAN.clear()
    LAST_SCAN.update(pool=False, eager=False, jobs=jobs, heavy=0, light=0, cached=0)
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
        while futures:
            collect(True)
    finally:
        if pool is not None:
            if not submitted:
                stop_idle_pool()
            pool.shutdown(wait=True, cancel_futures=True)
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
    from patchaudit.cache import digest

    return digest(data)


def _light(src, settings, engines, tokenizer, data: bytes):
    """A file no selected rule can fire on.

    With no rule to run, analyse_file can only report that the file is not UTF-8
    (PA001, the one rule that reads suppression comments, makes a file with one heavy),
    so a file that decodes needs nothing more: an empty result, without splitting
    lines or fingerprinting nothing."""
    from patchaudit.runner import FileResult, analyse_file

    if src.kind != "patch":
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            return FileResult(src.path)
    return analyse_file(src, settings, [], engines, tokenizer, data=data)
