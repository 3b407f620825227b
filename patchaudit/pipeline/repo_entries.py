"""The whole-repository pre-pass's modules as it reads them: entries, byte filter, gates.

Step 2 of patchaudit/pipeline/repo_index.py: a module's `Entry` comes from the
cache when its stat is unchanged (`entry`), else its bytes are read and put to the
rule's byte filter (`export_bytes`: its `export_requires` groups); the modules that
pass get their `ast` gate (`gated`: the rule's `exports`, `has_source` and `seed`, and
the module's index facts), all at once in `gate_all`, in forked workers when there is
enough to read.  Every entry is remembered in the pre-pass's cache (`remember`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from typing import Any

from patchaudit.analysis.repo_index import ModuleFacts, module_facts
from patchaudit.analysis.repo_summaries import ModuleSummary
from patchaudit.files.observe import note, racy, signature


@dataclasses.dataclass
class Entry:
    """One module of the repository as the pre-pass keeps it (and caches it)."""

    digest: bytes  # of the content
    exports: bool  # the rule's `exports` accepted it
    facts: ModuleFacts | None = None
    #: the functions worth following parameter by parameter (they name a sink's words)
    seed: set[str] | None = None
    #: it holds a source of its own (else only request builders: summarised when needed)
    source: bool = True
    #: a request builder's summary is needed: a file that names a source module calls it
    needed: bool = False
    summary: ModuleSummary | None = None
    dep: bytes | None = None  # the dependency digest the summary was computed under
    #: the rule's reports on the module under that view (None: it could not be analysed)
    reports: list | None = None
    text_digest: bytes | None = None
    text: str | None = None  # this run only (not cached)
    parsed: Any = None  # this run only: (libcst module, positions), kept between rounds
    #: this run only: its summary ran over the time budget in a worker (an empty summary,
    #: never cached, not tried again)
    over_budget: bool = False


def stat_key(path: str) -> tuple[bytes, bool] | None:
    """The file's signature (files/observe.py: inode, size, modification and change time),
    unchanged, its cached entry holds; and whether it changed in the last tick of the
    clock (racy: a change within the same tick could keep the signature).  None if it
    cannot be stat'ed."""
    note(path)  # an observed run depends on it, read or not
    sig = signature(path)
    if sig is None or sig[0] == "error":
        return None
    return repr(sig).encode(), racy(sig, time.time_ns())


def entry(rule, path: str, key: str, settings, cache, fresh: dict[str, bytes]) -> "Entry | Gate | None":
    """The module's entry: from the cache when its stat is unchanged, else read (and, when
    its bytes pass the rule's byte filter, a `Gate` to run: `gate_all`)."""
    got = stat_key(path)
    if got is None:
        return None
    stat, recent = got
    if cache is not None:
        hit = cache.get(key, "repo-stat", stat)
        if hit is not None:
            got_entry = cache.get(key, "repo", hit)
            if got_entry is not None:
                return got_entry
            if cache.get(key, "repo-none", hit):
                return Entry(hit, False)
    # a racy stat is not kept: the next run reads the file again
    return _read_entry(rule, path, key, settings, cache, None if recent else stat, fresh)


def _read_entry(
    rule, path: str, key: str, settings, cache, stat: bytes | None, fresh: dict[str, bytes]
) -> "Entry | Gate | None":
    from patchaudit.files.reader import ReadError, read_bytes

    try:
        data = read_bytes(path, settings.max_file_size)
    except (ReadError, OSError):
        return None  # the per-file pass reports it
    digest = hashlib.blake2b(data, digest_size=16).digest()
    fresh[key] = data
    if cache is not None and stat is not None:
        cache.put(key, "repo-stat", stat, digest)
    if export_bytes(rule, data, settings):
        return Gate(key, data, digest)
    e = Entry(digest, False)
    remember(key, e, cache)
    return e


@dataclasses.dataclass
class Gate:
    """A module whose bytes passed the rule's byte filter: its `ast` gate is still to run."""

    key: str
    data: bytes
    digest: bytes


def gated(rule, g: Gate, settings) -> Entry:
    """The module's entry after the rule's `exports` gate (an `ast` parse): its index facts,
    the functions to follow and whether it holds a source."""
    try:
        text = g.data.decode("utf-8")
    except UnicodeDecodeError:
        return Entry(g.digest, False)
    if not rule.exports(text, settings):
        return Entry(g.digest, False)
    from patchaudit.analysis.gate import parse

    tree = parse(text)
    if tree is None:
        return Entry(g.digest, False)
    e = Entry(g.digest, True, module_facts(tree), rule.seed(text, settings), text=text)
    e.source = rule.has_source(text, settings)
    return e


#: the gates run in forked workers when the modules to gate hold at least this many bytes
#: (`ast` reads ~7 MB/s; a fork and the entries' way back cost ~30 ms)
GATE_MIN_BYTES = 400_000


def gate_all(rule, gates: list[Gate], settings, cache, jobs: int) -> dict[str, Entry]:
    """`gated` for every module of `gates` (by key): in `jobs` forked workers when there
    is enough to read, else here (the same entries)."""
    out: dict[str, Entry] = {}
    facts: dict[str, Any] = {}  # the gate's facts of a module gated in a worker (gate.pinned)
    if jobs > 1 and len(gates) > 1 and sum(len(g.data) for g in gates) >= GATE_MIN_BYTES:
        from patchaudit.pipeline.forked import run_forked

        rule.summarise  # noqa: B018 - import the rule (and libcst) before forking
        chunks = [list(range(i, len(gates), jobs)) for i in range(jobs)]
        for got in run_forked(_gate_in_worker, chunks, settings, jobs, rule=rule, gates=gates):
            if got is not None:
                for key, (e, f) in got.items():
                    out[key], facts[key] = e, f
    from patchaudit.analysis import gate

    for g in gates:
        e, f = out.get(g.key), facts.get(g.key, False)
        if e is None:
            e = out[g.key] = gated(rule, g, settings)
        elif e.exports or f is not False:
            text = g.data.decode("utf-8")  # not sent back: this process has the bytes
            if e.exports:
                e.text = text
            if f is not False:
                gate.adopt(text, f)  # for the scan (its workers fork after this)
        remember(g.key, e, cache)
    return out


def _gate_in_worker(indexes: list[int]) -> dict[str, tuple[Entry, Any]]:
    from patchaudit.analysis.gate import pinned
    from patchaudit.pipeline.forked import inherited

    rule, gates, settings = inherited("rule"), inherited("gates"), inherited("settings")
    out = {}
    for i in indexes:
        e = gated(rule, gates[i], settings)
        try:
            f = pinned(gates[i].data.decode("utf-8"))
        except UnicodeDecodeError:
            f = False
        out[gates[i].key] = (dataclasses.replace(e, text=None), f)
    return out


def remember(key: str, e: Entry, cache) -> None:
    if cache is None:
        return
    if e.exports:
        cache.put(key, "repo", e.digest, dataclasses.replace(e, text=None, parsed=None))
    else:
        cache.put(key, "repo-none", e.digest, True)


_GROUPS: dict[tuple, Any] = {}


def export_bytes(rule, data: bytes, settings) -> bool:
    """The rule's byte filter (`export_requires`: groups of strings that must all be there)."""
    from patchaudit.config.byte_filter import ByteGroups

    options = settings.options_for(rule.code)
    key = (rule.code, repr(sorted(options.items())))
    groups = _GROUPS.get(key)
    if groups is None:
        groups = _GROUPS[key] = ByteGroups(
            [[s.encode("utf-8", "surrogateescape") for s in g] for g in rule.export_requires(options)]
        )
    return not groups.groups or groups.match(data)
