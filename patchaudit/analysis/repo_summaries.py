"""Whole-repository dataflow: what one module's analysis exports to the others.

Pure (no I/O).  The interpreter of patchaudit/analysis/dataflow.py analyses one
module; run in *summary mode* it also records, for every function and method of
the module, a `FunctionSummary`:

- `returns`: the taints its return value carries whatever its arguments (a
  source inside it: `processor(...)["input_ids"]` returned by a dataset helper);
- `param_returns`: which parameters reach its return value, and with which
  label (a helper `def to_ids(x): return list(x)`), with the steps inside it;
- `param_sinks`: which parameters reach one of the spec's sinks inside it
  (`def build_payload(ids, images): return post({"input_ids": ids, "image_data":
  images})`): the finding the spec would make, with the steps inside it;
- `param_stores`: the taints it stores into its parameters' fields whatever its
  arguments (`def fill(state): state.prompt_ids = processor(...)["input_ids"]`, an
  agent loop's `_handle_pending_state(agent_data)`): the caller's argument gets
  them (`agent_data.prompt_ids`), as a call of the module's own function gives them.
  Only taints from sources inside it (not a parameter's taint stored into another
  parameter's field) and only fields of parameters other than `self`/`cls`.

Parameters are followed by seeding each (but `self`/`cls`) with a *symbolic*
taint of every label in `FlowSpec.summary_labels`, whose origin names the
function and the parameter (`symbolic`); a report or a return of such a taint is
a summary, never a finding.  Calls between the module's own functions are
analysed in context as before, so a parameter reaching a sink through a local
helper is part of the summary too.

And the module's *carriers*: the taints stored into a field named in
`FlowSpec.carriers` (`sample.tokens = ...`, flow-insensitively), which a read of
that field in any module of the repository sees (`ModuleView.carrier`).

`RepoView` joins the `ModuleSummary` of every indexed module with the index
(patchaudit/analysis/repo_index.py), and `ModuleView` is what the interpreter
of one module asks: the summary of a function an imported name, a module
attribute or an inherited method (`self.helper()` defined on a base class in
another module) resolves to, and the carriers.  The pipeline computes the
summaries to a fixed point over the repository (patchaudit/pipeline/repo_index.py).

Steps recorded in another module keep their file: their line is a `FileLine`.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from patchaudit.analysis.flow_values import PARAM, FileLine, Origin, Step, Value, is_symbolic, join, settle
from patchaudit.analysis.gate import Words
from patchaudit.analysis.repo_index import RepoIndex, Symbol

if TYPE_CHECKING:  # pragma: no cover
    from patchaudit.model.findings import Report  # carried here, built by the rules

Taint = tuple[str, Any, tuple[Step, ...]]  # (label, origin, steps)


def symbolic(qualname: str, param: str, label: str) -> tuple:
    return (PARAM, qualname, param, label)


@dataclass(frozen=True)
class Signature:
    """A function's parameters, as `flow_summaries.Summaries._bind` reads them."""

    positional: tuple[str, ...]
    kwonly: tuple[str, ...]
    star: str | None
    starstar: str | None
    kind: str  # function | method | static | class


@dataclass
class FunctionSummary:
    name: str
    path: str
    signature: Signature
    returns: tuple[Taint, ...] = ()
    #: parameter -> (label it takes, label it returns, steps inside the function)
    param_returns: dict[str, tuple[tuple[str, str, tuple[Step, ...]], ...]] = field(default_factory=dict)
    #: parameter -> (label, message, steps inside the function, severity)
    param_sinks: dict[str, tuple[tuple[str, str, tuple[Step, ...], Any], ...]] = field(default_factory=dict)
    #: parameter -> (the field under it, `.prompt_ids`; the taints stored there), sorted
    param_stores: dict[str, tuple[tuple[str, tuple[Taint, ...]], ...]] = field(default_factory=dict)

    def empty(self) -> bool:
        return not self.returns and not self.param_returns and not self.param_sinks and not self.param_stores

    def stores_key(self) -> list:
        """What a caller sees of `param_stores` (labels and origins; not the trace texts)."""
        return [
            (p, rest, sorted((l, repr(o)) for l, o, _ in taints))
            for p, fields in sorted(self.param_stores.items())
            for rest, taints in fields
        ]


@dataclass
class ModuleSummary:
    path: str
    functions: dict[str, FunctionSummary] = field(default_factory=dict)
    carriers: dict[str, tuple[Taint, ...]] = field(default_factory=dict)

    def key(self) -> bytes:
        """A digest of what other modules can see of this one (labels, origins, kept
        parameters; not the trace texts)."""
        h = hashlib.blake2b(digest_size=16)
        for q in sorted(self.functions):
            f = self.functions[q]
            h.update(
                repr((q, [(l, o) for l, o, _ in f.returns], sorted(f.param_returns), sorted(f.param_sinks))).encode()
            )
            if f.param_stores:
                h.update(repr(f.stores_key()).encode())
            h.update(pickle.dumps((f.param_returns, f.param_sinks), protocol=4))
        for c in sorted(self.carriers):
            h.update(repr((c, sorted((l, repr(o)) for l, o, _ in self.carriers[c]))).encode())
        return h.digest()


#: what a summary keeps of one value, so that what modules pass each other stays bounded
#: whatever the imports (a ring of N modules each adding a source would otherwise carry N
#: sources with N-step traces into every summary: N^2 work, issue 40): the first sources
#: of each label (in a fixed order) and the first and last steps of each trace.  A
#: finding needs one source and reads its trace's ends; real traces are a few steps long.
MAX_ORIGINS_PER_LABEL = 16
MAX_SUMMARY_STEPS = 64


def in_file(steps: tuple[Step, ...], path: str) -> tuple[Step, ...]:
    """The steps with every line of this module made a `FileLine` of `path` (the middle of
    a trace past `MAX_SUMMARY_STEPS` left out)."""
    steps = settle(steps)
    if len(steps) > MAX_SUMMARY_STEPS:
        half = MAX_SUMMARY_STEPS // 2
        steps = steps[:half] + steps[-half:]
    return tuple((l if type(l) is FileLine else FileLine(l, path), n) for l, n in steps)


def taints_of(value: Value, path: str, concrete: bool = True) -> tuple[Taint, ...]:
    """The concrete (or only the symbolic) taints of `value`, their steps in `path`, a
    source of this module as `(path, line, column)`: a summary holds no libcst node (it is
    kept for the whole run, and cached), is the same whether it was computed here or
    read, and a source keeps its identity in other modules (two modules' sources on the
    same line and column are two sources)."""
    kept = []
    for (label, origin), steps in value.flat().t.items():
        if is_symbolic(origin) != concrete and steps:
            if type(origin) is Origin:
                origin = (path, *origin.pos)
            kept.append((label, repr(origin), origin, steps))
    kept.sort(key=lambda t: (t[0], t[1]))
    out = []
    per_label: dict[str, int] = {}
    for label, _, origin, steps in kept:  # the first sources of each label (MAX_ORIGINS_PER_LABEL)
        n = per_label[label] = per_label.get(label, 0) + 1
        if n <= MAX_ORIGINS_PER_LABEL:
            out.append((label, origin, in_file(steps, path)))
    return tuple(out)


def as_value(taints: tuple[Taint, ...]) -> Value:
    return Value({(l, o): s for l, o, s in taints})


#: carriers past which a dependency key reads them all as one digest (RepoView.dependency_key)
MAX_LINKED_SCAN = 2_000


def _carrier_entries(summary: ModuleSummary) -> list[tuple[str, bytes]]:
    """(field, bytes) of each carrier field `summary`'s module stores a taint in."""
    path = summary.path
    return [
        (name, repr((name, path, sorted((l, repr(o)) for l, o, _ in taints))).encode())
        for name, taints in sorted(summary.carriers.items())
        if taints
    ]


class RepoView:
    """The summaries of a repository's modules with its index."""

    def __init__(self, index: RepoIndex, summaries: dict[str, ModuleSummary] | None = None, root: str = ""):
        self.index = index
        self.root = root
        self.summaries: dict[str, ModuleSummary] = summaries or {}
        self._carriers: dict[str, Value] | None = None
        #: module -> (digest of its text, the rule's reports on it): modules whose summary
        #: was computed under the final view need no second analysis (`precomputed`)
        self.reports: dict[str, tuple[bytes, list[Report]]] = {}
        self._needles: dict[str, list[str]] | None = None
        self._word_keys: list[tuple[bytes, bytes]] | None = None
        self._sources: list[str] | None = None
        self._sinks: list[str] | None = None
        self._source_words: Words | None = None
        self._sink_words: Words | None = None
        self._stored: list[tuple[str, str, bytes]] | None = None
        #: module -> its carrier entries (field, bytes); their count and the sum of their
        #: digests, kept up to date by `put` (dependency keys of a large repository)
        self._stored_by: dict[str, list[tuple[str, bytes]]] | None = None
        self._stored_count = 0
        self._stored_sum = 0

    def put(self, summary: ModuleSummary) -> None:
        if self._stored_by is not None:
            self._account(self._stored_by.pop(summary.path, []), -1)
            self._stored_by[summary.path] = _carrier_entries(summary)
            self._account(self._stored_by[summary.path], 1)
        self.summaries[summary.path] = summary
        self._carriers = None
        self._needles = None
        self._word_keys = None
        self._sources = None
        self._sinks = None
        self._source_words = None
        self._sink_words = None
        self._stored = None

    def _account(self, entries: list[tuple[str, bytes]], sign: int) -> None:
        self._stored_count += sign * len(entries)
        for _, data in entries:
            digest = int.from_bytes(hashlib.blake2b(data, digest_size=16).digest(), "little")
            self._stored_sum = (self._stored_sum + sign * digest) % (1 << 128)

    def _carriers_by_module(self) -> dict[str, list[tuple[str, bytes]]]:
        if self._stored_by is None:
            self._stored_by = {p: _carrier_entries(s) for p, s in self.summaries.items()}
            for entries in self._stored_by.values():
                self._account(entries, 1)
        return self._stored_by

    def carriers(self) -> dict[str, Value]:
        if self._carriers is None:
            out: dict[str, Value] = {}
            for s in self.summaries.values():
                for name, taints in s.carriers.items():
                    out[name] = join(out.get(name, Value()), as_value(taints))
            self._carriers = out
        return self._carriers

    def sources(self) -> list[str]:
        """The words through which a module without a source of its own can get a taint: the
        last name of every function whose return carries one whatever its arguments, or
        that stores one into a parameter's field, and every carrier field that holds one."""
        if self._sources is None:
            out: set[str] = set()
            for s in self.summaries.values():
                out.update(q.rsplit(".", 1)[-1] for q, f in s.functions.items() if f.returns or f.param_stores)
                out.update(c for c, t in s.carriers.items() if t)
            self._sources = sorted(out)
        return self._sources

    def sources_in(self, text: str) -> list[str]:
        """The words of `sources()` that occur in `text` (linear in the text: gate.Words)."""
        if self._source_words is None:
            self._source_words = Words(self.sources())
        return self._source_words.in_text(text)

    def sinks_in(self, text: str) -> list[str]:
        """The words of `sinks()` that occur in `text`."""
        if self._sink_words is None:
            self._sink_words = Words(self.sinks())
        return self._sink_words.in_text(text)

    def sinks(self) -> list[str]:
        """The last name of every function whose parameters reach a sink (once per view: the
        rule asks for every file, and a repository of N modules made that N x N)."""
        if self._sinks is None:
            self._sinks = sorted(
                {q.rsplit(".", 1)[-1] for s in self.summaries.values() for q, f in s.functions.items() if f.param_sinks}
            )
        return self._sinks

    def stored(self) -> list[tuple[str, str, bytes]]:
        """(carrier field, module, what it stores there as bytes) of every carrier with a
        taint, once per view (each module's dependency key reads them all)."""
        if self._stored is None:
            self._stored = sorted(
                (name, other, data) for other, entries in self._carriers_by_module().items() for name, data in entries
            )
        return self._stored

    def needles(self) -> dict[str, list[str]]:
        """The words a module must hold to see anything of the others (the last name of
        every function with a summary, every carrier field with a taint) -> the modules
        that export under that word."""
        if self._needles is None:
            out: dict[str, set[str]] = {}
            for path, s in self.summaries.items():
                for q in s.functions:
                    out.setdefault(q.rsplit(".", 1)[-1], set()).add(path)
                for c in s.carriers:
                    out.setdefault(c, set()).add(path)
            self._needles = {k: sorted(v) for k, v in sorted(out.items())}
        return self._needles

    def text_key(self, data: bytes | str) -> bytes:
        """What a module with this content can see of the others, as a digest (for the
        per-file result cache): the summaries of the modules exporting a word it holds."""
        if self._word_keys is None:  # each word's bytes and its modules' summary keys, once
            self._word_keys = [
                (w.encode("utf-8", "surrogateescape"), b"".join(self.summaries[p].key() for p in paths))
                for w, paths in self.needles().items()
            ]
        h = hashlib.blake2b(digest_size=16)
        raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
        for word, keys in self._word_keys:
            if word in raw:
                h.update(word)
                h.update(keys)
        return h.digest()

    def function(self, sym: Symbol | None) -> FunctionSummary | None:
        if sym is None:
            return None
        s = self.summaries.get(sym[0])
        return s.functions.get(sym[1]) if s is not None else None

    def precomputed(self, path: str, text: str) -> list[Report] | None:
        """The rule's reports on module `path` with this text, if the pre-pass made them."""
        got = self.reports.get(norm_path(path))
        if got is None or got[0] != text_digest(text):
            return None
        return got[1]

    def view(self, path: str) -> "ModuleView | None":
        key = norm_path(path)
        return ModuleView(self, key) if key in self.index.facts else None

    def dependency_key(self, path: str, words: set[str] | None = None) -> bytes:
        """A digest of everything module `path` can see of the others: the summaries of
        the modules it imports (and of its classes' bases' modules) and the carriers it
        may read (those named in `words`, when given)."""
        h = hashlib.blake2b(digest_size=16)
        for dep in sorted(self.dependencies(path)):
            s = self.summaries.get(dep)
            h.update(dep.encode("utf-8", "surrogateescape"))
            h.update(s.key() if s is not None else b"-")
        self._carriers_by_module()
        if self._stored_count > MAX_LINKED_SCAN:
            # every module linked to every other would make N keys cost N x N: past this many
            # carriers the key is that of all of them (a superset: never a stale summary)
            h.update(b"\0every carrier\0" + self._stored_sum.to_bytes(16, "little"))
            return h.digest()
        for name, other, stored in self.stored():
            if other != path and (words is None or name in words) and self.index.linked(path, other):
                h.update(stored)
        return h.digest()

    def dependencies(self, path: str) -> set[str]:
        facts = self.index.facts.get(path)
        out: set[str] = set()
        if facts is None:
            return out
        for mod, name, level in facts.imports.values():
            m = self.index.module(mod, path, level) if (mod or level) else None
            if m is not None:
                out.add(m)
            if name is not None:
                sub = self.index.module(f"{mod}.{name}" if mod else name, path, level)
                if sub is not None:
                    out.add(sub)
        for cls in facts.classes:
            out.update(p for p, _ in self.index.mro((path, cls)))
        out.discard(path)
        return out


class ModuleView:
    """What the interpreter of module `path` asks of the repository."""

    def __init__(self, repo: RepoView, path: str):
        self.repo = repo
        self.path = path

    def function(self, dotted: str) -> FunctionSummary | None:
        """The function (or a class's `__init__`... not followed) `dotted` names here."""
        sym = self.repo.index.resolve(self.path, dotted)
        if sym is None or sym[0] == self.path:
            return None  # this module's own functions are analysed in context
        return self.repo.function(sym)

    def method(self, cls: str, name: str) -> FunctionSummary | None:
        """`self.name()` in a method of class `cls` of this module, defined on a base
        class of another module."""
        sym = self.repo.index.method((self.path, cls), name)
        if sym is None or sym[0] == self.path:
            return None
        return self.repo.function(sym)

    def carrier(self, name: str) -> Value:
        """The taints the modules linked to this one (RepoIndex.linked) store in field `name`."""
        out = Value()
        for path in self.repo.needles().get(name, ()):
            s = self.repo.summaries[path]
            taints = s.carriers.get(name)
            if taints and path != self.path and self.repo.index.linked(self.path, path):
                out = join(out, as_value(taints))
        return out


def norm_path(path: str) -> str:
    """The key of a module in the index: its absolute, normalised path."""
    return os.path.normpath(os.path.abspath(path))


def run_repo(settings: Any, code: str) -> RepoView | None:
    """The run's `RepoView` for rule `code` (`Settings.repo`, set by the pre-pass; any object
    without it, a rule test's settings, has none)."""
    repos = getattr(settings, "repo", None)
    repo = repos.get(code) if isinstance(repos, dict) else None
    return repo if isinstance(repo, RepoView) else None


def repo_view(context: Any, unit: Any, code: str) -> ModuleView | None:
    """The repository as a rule's unit sees it, for a whole Python file; else None (a
    patch's hunks and exact-mode files are judged alone)."""
    repo = run_repo(getattr(context, "settings", None), code)
    if repo is None or getattr(unit, "mode", None) != "file":
        return None
    view = repo.view(unit.path)
    if view is None and repo.summaries:  # not indexed (nothing to export): index it now
        from patchaudit.analysis.repo_index import module_facts
        from patchaudit.inputs import pyast

        tree = pyast.parse(unit.text)
        if tree is not None:
            key = norm_path(unit.path)
            rel = os.path.relpath(key, repo.root) if repo.root else os.path.basename(key)
            repo.index.add(key, rel, module_facts(tree))
            view = repo.view(unit.path)
    return view


def file_steps(steps: tuple[Step, ...]) -> tuple[tuple, ...]:
    """A trace as a rule reports it: a step of another module as (line, note, path)."""
    return tuple((int(l), n, l.path) if type(l) is FileLine else (l, n) for l, n in settle(steps))


def text_digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=16).digest()
