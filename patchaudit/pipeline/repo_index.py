"""The whole-repository pre-pass of the dataflow rules: index, summaries, fixed point, cache.

Before the per-file pass, for every selected rule that declares `repository`
(PA102), `prepare_repo`:

1. finds the repository: the scanned folders themselves; for files named alone
   (a pre-commit hook passes the changed files) the project root above them,
   the nearest folder holding a `pyproject.toml`, `setup.py` or `.git` (modules
   are named from that root in both cases);
2. lists its Python files (the run's own list when only folders are scanned,
   else `inputs.discover` on the root: `.gitignore` and excludes apply) and
   keeps those the rule can export from: its byte filter first (`export`
   needles, no decoding), then its own `exports(text)` (the `ast` gate of
   patchaudit/analysis/gate.py; the gates run together after the reads, in
   forked workers when they have enough to read: patchaudit/pipeline/repo_entries.py).
   Every other file exports nothing: it has no source and no sink the rule recognises;
3. indexes the kept modules (patchaudit/analysis/repo_index.py) and runs the
   rule's `summarise` on each (an `ast` parse and the interpreter in summary
   mode, patchaudit/analysis/repo_summaries.py), round after round, until no
   summary changes (at most `MAX_ROUNDS`): a module is analysed again only
   when the summaries it can see (of the modules it imports, the carriers)
   changed.  A round goes level by level (`_levels`: each module after the
   modules it imports), every module of a level under the view the level
   started with, so a level's modules can be summarised at once: in forked
   workers (as many as the scan would use, hardened as its workers are) when
   the level holds enough bytes, else here.  The result is the same either way;
4. sets the result on the settings (`settings.repo[code]`, a `RepoView`) for
   the rule's per-file analysis, and returns the run's rule metas with the
   rule's `requires` widened by the words through which a file without a source
   of its own can get a taint (`RepoView.sources`: the names of the functions
   whose return carries one, the carrier fields that hold one): a file that
   names none of them and has no source sees nothing tainted, so the pre-filter
   stays sound (tests/test_speed_invariants.py).

What the pre-pass parsed, the scan does not parse again: the gate's facts of the
texts it gated are kept for the run (analysis/gate.py), and the `ast` trees of
the texts parsed last are kept by patchaudit/inputs/pyast.py (tests/test_shared_parses.py).

The cache (`pipeline.cache.ResultCache`, its own run key): per module, keyed by
its size, modification time and inode (a warm run reads no unchanged file),
the content digest, the module's index facts and its summary with the
dependency digest it was computed under.  A warm run re-parses nothing; a run
after one file changed re-summarises that file and then only the modules whose
dependency digest changed.  The per-file result cache mixes each file's view
of the summaries into its key (`parallel._repo_key`), so a file is re-analysed exactly
when a summary it can see changed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from typing import Any, cast

from patchaudit.analysis.repo_index import ModuleFacts, RepoIndex, module_name
from patchaudit.analysis.repo_summaries import ModuleSummary, RepoView, norm_path
from patchaudit.files.observe import note
from patchaudit.pipeline.forked import OVER_BUDGET
from patchaudit.pipeline.repo_entries import Entry, Gate, entry, gate_all

#: rounds of the fixed point over the repository
MAX_ROUNDS = 4
#: files a repository may have for the pre-pass to run (beyond: each file is judged alone)
MAX_FILES = 20000
#: markers of a project root
ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


def project_root(path: str) -> str:
    """The nearest folder at or above `path`'s folder holding a root marker, else its folder."""
    start = os.path.dirname(os.path.abspath(path))
    cur = start
    while True:
        markers = [os.path.join(cur, m) for m in ROOT_MARKERS]
        for m in markers:
            note(m)  # where the root is names the modules (files/observe.py)
        if any(os.path.lexists(m) for m in markers):
            return cur
        up = os.path.dirname(cur)
        if up == cur:
            return start
        cur = up


def _roots(paths: list[str]) -> list[str]:
    out: list[str] = []
    for p in paths:
        # modules are named from the project root (an absolute import `pkg.mod` then names
        # `pkg/mod.py` however deep the scanned folder is)
        r = project_root(os.path.join(p, "_") if os.path.isdir(p) else p)
        if r not in out:
            out.append(r)
    return out


def _python_files(paths: list[str], files: list, settings, cache_root: Any = None) -> list[tuple[str, str]]:
    """(path as the run names it, root) of every Python file of the repositories (a
    listing remembered in the cache while its folders are unchanged: pipeline/replay.py)."""
    roots = _roots(paths)
    if all(os.path.isdir(p) for p in paths):
        listed = [f.path for f in files if f.kind == "python"]
    else:
        from patchaudit.pipeline.replay import discovered

        found, _ = discovered(roots, settings.exclude, cache_root if settings.cache else None)
        listed = [f.path for f in found if f.kind == "python"]
        listed += [f.path for f in files if f.kind == "python" and f.path not in listed]
    out = []
    for p in listed:
        a = os.path.abspath(p)
        root = next((r for r in roots if a.startswith(r.rstrip(os.sep) + os.sep)), os.path.dirname(a))
        out.append((p, root))
    return out


def prepare_repo(
    paths: list[str], files: list, settings, metas: list, cache_root: Any, jobs: int | None = None, errors=None
) -> list:
    """Run the pre-pass for every selected `repository` rule (see the module docstring);
    the metas to scan with.  `jobs`: the workers the gates and the levels may use (the
    run's, decided once: `parallel.scan_jobs`); `errors`, if given, gets the run's errors
    of the pre-pass (a module whose summary ran over the time budget)."""
    repo_metas = [m for m in metas if "python" in m.kinds and _is_repository(m)]
    if not repo_metas:
        return metas
    forget_kept()
    pyfiles = _python_files(paths, files, settings, cache_root)
    if not pyfiles or len(pyfiles) > MAX_FILES:
        return metas
    repos: dict[str, RepoView] = {}
    out = list(metas)
    for meta in repo_metas:
        if not _may_have_source(meta, pyfiles, settings):
            # no module of the repository holds a source: nothing to follow (an empty view,
            # so that the per-file cache keys are those of a view with nothing to see)
            repos[meta.code] = RepoView(RepoIndex(), {}, _common_root(pyfiles))
            continue
        rule = _LazyRule(meta)  # imported only for files the cache does not answer
        cache = _cache(settings, meta.code, cache_root)
        view = _build(rule, pyfiles, settings, cache, jobs, errors)
        repos[meta.code] = view
        words = _repo_words(rule, view, settings, cache)
        if cache is not None:
            cache.save()
        if words:
            out[out.index(meta)] = dataclasses.replace(meta, requires=meta.requires + words)
    settings.repo = repos
    return out


def forget_kept() -> None:
    """Drop the gate's facts and the parsed modules kept for the scan (before a run's
    pre-pass, and after its scan).  A module not imported yet kept nothing: a warm run,
    whose summaries all come from the cache, imports neither."""
    import sys

    for name, clear in (("patchaudit.analysis.gate", "clear_pins"),):
        module = sys.modules.get(name)
        if module is not None:
            getattr(module, clear)()


class _LazyRule:
    """A repository rule's class, imported (with libcst) on first use: a warm run whose
    summaries all come from the cache, and a tree with no source, import no rule."""

    def __init__(self, meta) -> None:
        self.code = meta.code
        self._meta = meta
        self._cls: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._cls is None:
            self._cls = self._meta.load()
        return getattr(self._cls, name)


def _may_have_source(meta, pyfiles: list[tuple[str, str]], settings) -> bool:
    """Whether some Python file passes the rule's own pre-filter (its sources' words, read
    statically from the rule file): without one the pre-pass has nothing to follow.  With
    options configured for the rule its words may differ: then always."""
    if settings.options_for(meta.code) or not meta.requires:
        return True
    from patchaudit.files.reader import ReadError, read_bytes

    for path, _ in pyfiles:
        try:
            if meta.can_match_bytes(read_bytes(path, settings.max_file_size)):
                return True
        except (ReadError, OSError):
            continue
    return False


def _repo_words(rule, view: RepoView, settings, cache) -> tuple:
    """`rule.repo_requires` for this view, remembered in the cache by what it depends on."""
    sources, sinks = view.sources(), view.sinks()
    if not sources:
        return ()
    options = settings.options_for(rule.code)
    digest = hashlib.blake2b(repr((sorted(options.items()), sources, sinks)).encode(), digest_size=16).digest()
    if cache is not None:
        hit = cache.get("<repository>", "repo-words", digest)
        if hit is not None:
            return hit
    words = tuple(rule.repo_requires(options, sources, sinks))
    if cache is not None:
        cache.put("<repository>", "repo-words", digest, words)
    return words


def _is_repository(meta) -> bool:
    """Read from the rule's source (config.registry): deciding imports no rule."""
    return meta.repository


def _cache(settings, code: str, cache_root: Any):
    if cache_root is None or not settings.cache or settings.engines:
        return None
    from patchaudit.pipeline.cache import ResultCache, run_key

    # a store name like the run keys' (hex), so that the cache's pruning counts it too
    key = hashlib.blake2b((run_key(settings, [code]) + "-repo").encode(), digest_size=16).hexdigest()
    return ResultCache(cache_root, key)


def _build(rule, pyfiles: list[tuple[str, str]], settings, cache, jobs: int | None = None, errors=None) -> RepoView:
    index = RepoIndex()
    entries: dict[str, Entry] = {}
    fresh: dict[str, bytes] = {}  # the files read in this run (new or changed)
    roots: dict[str, str] = {}
    found: list[tuple[str, str, Entry | Gate | None]] = []
    for path, root in pyfiles:
        key = norm_path(path)
        top = module_name(os.path.relpath(key, root)).split(".")[0]
        if top:
            index.first_party.add(top)
        found.append((key, root, entry(rule, path, key, settings, cache, fresh)))
    if jobs is None:
        from patchaudit.pipeline.parallel import scan_jobs

        jobs = scan_jobs(settings)  # the workers the gates and the levels may use
    gated = gate_all(rule, [g for _, _, g in found if isinstance(g, Gate)], settings, cache, jobs)
    for key, root, got in found:
        e = gated[key] if isinstance(got, Gate) else got
        if e is None or not e.exports or e.facts is None:
            continue
        entries[key] = e
        roots[key] = root
    _needed(entries, fresh, cache)
    entries = {k: e for k, e in entries.items() if e.source or e.needed}
    for key, e in entries.items():
        index.add(key, os.path.relpath(key, roots[key]), cast(ModuleFacts, e.facts))
    view = RepoView(index, {k: e.summary for k, e in entries.items() if e.summary is not None}, _common_root(pyfiles))
    levels = _levels(view, _dependencies_first(view, sorted(entries)))
    for _ in range(MAX_ROUNDS):
        changed = False
        for level in levels:
            todo = []
            for key in level:
                e = entries[key]
                dep = view.dependency_key(key)
                if (e.summary is None or e.dep != dep) and not e.over_budget:
                    todo.append((key, dep))
            if not todo:
                continue
            done = _summarise_level(rule, [k for k, _ in todo], entries, view, settings, jobs)
            for (key, dep), got in zip(todo, done):
                e = entries[key]
                if got == OVER_BUDGET:  # (a string: it comes back pickled)
                    changed = changed or bool(e.summary is not None and e.summary.key() != ModuleSummary(key).key())
                    _over_budget(key, e, view, errors)
                    continue
                new, reports, digest = got
                e.reports, e.text_digest = reports, digest
                old_key = e.summary.key() if e.summary is not None else None
                e.summary, e.dep = new, dep
                if new.key() != old_key:
                    changed = True
                view.put(new)
                if cache is not None:
                    cache.put(key, "repo", e.digest, dataclasses.replace(e, text=None, parsed=None))
        if not changed:
            break
    for key, e in entries.items():  # converged: the module's findings are made
        e.parsed = None
        if e.reports is not None and e.text_digest is not None and e.dep == view.dependency_key(key):
            view.reports[key] = (e.text_digest, e.reports)
    return view


def _over_budget(key: str, e: Entry, view: RepoView, errors: list | None) -> None:
    """A module whose summary ran over the per-file time budget in a worker: it exports
    nothing (its own findings are left to the scan, which has the same budget), the run
    says so, and neither the cache nor a later round keeps or retries it."""
    from patchaudit.model.findings import FileError
    from patchaudit.pipeline.parallel import FILE_TIME_BUDGET

    e.over_budget, e.summary, e.reports, e.parsed = True, ModuleSummary(key), None, None
    view.put(e.summary)
    if errors is not None:
        errors.append(
            FileError(
                key,
                f"the whole-repository summary took longer than {FILE_TIME_BUDGET:g} s (the per-file "
                f"time budget): its worker process stopped it; what this module exports is not "
                f"followed into the other modules",
            )
        )


def _needed(entries: dict[str, Entry], fresh: dict[str, bytes], cache) -> None:
    """Which request builders (modules with no source of their own) to summarise: those a
    file that names a source module (imports it, most likely) calls by name.  Decided on
    the files read in this run; a builder found needed once stays so (cached).  Each
    file's words are read once (a name is called by its whole word): comparing every
    builder with every file was quadratic in the modules."""
    stems = {_stem(k).encode() for k, e in entries.items() if e.source}
    users: dict[bytes, set[str]] = {}  # word -> the files that hold it (two are enough)
    for k, d in fresh.items():
        words = set(_WORD.findall(d))
        if not words.isdisjoint(stems):
            for word in words:
                holders = users.setdefault(word, set())
                if len(holders) < 2:
                    holders.add(k)
    for key, e in entries.items():
        if e.seed is None:  # every function followed: keep it
            e.needed = True
        if e.source or e.needed or not e.seed:
            continue
        names = {q.rsplit(".", 1)[-1].encode() for q in e.seed}
        if any(users.get(n, set()) - {key} for n in names):
            e.needed = True
            if cache is not None:
                cache.put(key, "repo", e.digest, dataclasses.replace(e, text=None, parsed=None))


_WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")


def _stem(path: str) -> str:
    base = os.path.basename(path)
    if base == "__init__.py":
        return os.path.basename(os.path.dirname(path))
    return os.path.splitext(base)[0]


def _dependencies_first(view: RepoView, keys: list[str]) -> list[str]:
    """The modules, each after the modules it imports (where imports do not form a cycle),
    so that one round mostly sees the final summaries of its dependencies."""
    done: list[str] = []
    seen: set[str] = set()
    known = set(keys)

    def visit(k: str, depth: int) -> None:
        if k in seen:
            return
        seen.add(k)
        if depth < 50:
            for d in sorted(view.dependencies(k) & known):
                visit(d, depth + 1)
        done.append(k)

    for k in keys:
        visit(k, 0)
    return done


def _levels(view: RepoView, order: list[str]) -> list[list[str]]:
    """The modules in levels: each after the levels of the modules it imports that come
    before it in `order` (an import cycle is cut where `order` cut it).  A round
    summarises one level after the other, every module of a level under the view the
    level started with: the modules of a level do not import each other, so they can be
    summarised in any order or at once, and the result does not depend on the jobs."""
    level: dict[str, int] = {}
    for k in order:
        below = [level[d] for d in view.dependencies(k) if d in level]
        level[k] = 1 + max(below) if below else 0
    out: list[list[str]] = [[] for _ in range(1 + max(level.values(), default=-1))]
    for k in order:
        out[level[k]].append(k)
    return out


#: a level is summarised in worker processes when its modules hold at least this many bytes
#: (a fork and the summaries' way back cost ~30 ms)
LEVEL_MIN_BYTES = 150_000


def _size(key: str, e: Entry) -> int:
    if e.text is not None:
        return len(e.text)
    try:
        return os.path.getsize(key)
    except OSError:
        return 0


def _worth_workers(keys: list[str], entries: dict[str, Entry]) -> bool:
    return len(keys) > 1 and sum(_size(k, entries[k]) for k in keys) >= LEVEL_MIN_BYTES


def _summarise_level(rule, keys: list[str], entries: dict[str, Entry], view: RepoView, settings, jobs: int) -> list:
    """(summary, reports, text digest) of each module of `keys` under `view`: in this
    process, or in forked workers (hardened as the scan's: pipeline/parallel.py) when the
    level is worth it: the largest modules first (a worker that takes the largest last
    leaves the others waiting at the level's end; size is what libcst's time follows).
    A module whose worker failed (it died, ran out of memory) is summarised here, as it
    would have been with one job."""
    out: list = [None] * len(keys)
    if jobs > 1 and _worth_workers(keys, entries):
        from patchaudit.pipeline.forked import run_forked
        from patchaudit.pipeline.parallel import FILE_TIME_BUDGET

        rule.summarise  # noqa: B018 - import the rule (and libcst) before forking
        order = sorted(range(len(keys)), key=lambda i: -_size(keys[i], entries[keys[i]]))
        got = run_forked(
            _summarise_in_worker,
            [keys[i] for i in order],
            settings,
            jobs,
            FILE_TIME_BUDGET,
            rule=rule,
            entries=entries,
            view=view,
        )
        for i, r in zip(order, got):
            out[i] = r
    for i, key in enumerate(keys):
        if out[i] is None:
            e = entries[key]
            summary, reports = _summarise(rule, key, e, view, settings)
            out[i] = (summary, reports, e.text_digest)
    return out


def _summarise_in_worker(key: str) -> tuple:
    from patchaudit.pipeline.forked import inherited

    e = inherited("entries")[key]
    summary, reports = _summarise(inherited("rule"), key, e, inherited("view"), inherited("settings"))
    return summary, reports, e.text_digest


def _common_root(pyfiles: list[tuple[str, str]]) -> str:
    roots = sorted({r for _, r in pyfiles})
    return roots[0] if len(roots) == 1 else ""


def _summarise(rule, key: str, e: Entry, view: RepoView, settings) -> tuple[ModuleSummary, list | None]:
    """The module's summary under `view` and the rule's reports on it; an empty summary and
    no reports when it cannot be parsed (the per-file pass reports why)."""
    text = e.text
    if text is None:
        from patchaudit.files.reader import ReadError, read_bytes

        try:
            text = read_bytes(key, settings.max_file_size).decode("utf-8")
        except (ReadError, OSError, UnicodeDecodeError):
            return ModuleSummary(key), None
        e.text = text
    from patchaudit.inputs import pyast
    from patchaudit.units.nesting import too_deep

    if pyast.over_limit(text, pyast.parse_limit(settings)) is not None or too_deep(text, settings.max_nesting):
        return ModuleSummary(key), None
    try:
        if e.parsed is None:
            from patchaudit.analysis.flow_nodes import Positions

            module = pyast.parse(text)
            if module is None:
                return ModuleSummary(key), None
            e.parsed = (module, Positions(text))
        module, positions = e.parsed
        got = rule.summarise(module, positions, key, view.view(key), settings, e.seed)
    except Exception:  # a syntax error, a recursion limit, a crash: the per-file pass reports it
        return ModuleSummary(key), None
    if not (isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], ModuleSummary)):
        return ModuleSummary(key), None
    from patchaudit.analysis.repo_summaries import text_digest

    e.text_digest = text_digest(text)
    return got[0], list(got[1])
