"""The dataflow layer's abstract values: taints, their traces, environments.

Part of the interpreter of patchaudit/analysis/dataflow.py (its docstring says
what the layer follows).  A value is a set of taints, each a label chosen by a
rule, an origin and the ordered steps the value took from its source; the
label's *kind* (IDS, TEXT or OBJECT) decides which operations it survives.
Also the name patterns the rules match with (`matches`, `path_matches`) and the
interpreter's budgets.
"""

from __future__ import annotations

import fnmatch
import re
from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol, cast

if TYPE_CHECKING:  # annotations only: the values are unpickled from the cache without libcst
    import libcst as cst

IDS, TEXT, OBJECT = "ids", "text", "object"
ALL_KINDS = frozenset({IDS, TEXT, OBJECT})
SEQ_KINDS = frozenset({IDS, TEXT})
STR_KINDS = frozenset({TEXT})

#: a trace step: (line in the unit, note); a step in another module of the repository has a
#: `FileLine` (an int that knows its file) for its line
Step = tuple[int, str]


class FileLine(int):
    """A line of another module of the repository (whole-repository summaries,
    patchaudit/analysis/repo_summaries.py): an int, so every consumer of a step's line
    still works, that also names its file."""

    path: str

    def __new__(cls, line: int, path: str) -> "FileLine":
        obj = super().__new__(cls, line)
        obj.path = path
        return obj

    def __reduce__(self):
        return (FileLine, (int(self), self.path))

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"{self.path}:{int(self)}"


def step_path(line: int) -> str | None:
    """The file of a step's line: None for a line of the module being analysed."""
    return line.path if type(line) is FileLine else None


MAX_STEPS = 64
#: a trace holding this many steps whose lines are not computed yet is settled (`settle`)
MAX_RAW_STEPS = 4 * MAX_STEPS
MAX_PASSES = 8
MAX_CALL_DEPTH = 24
#: contexts found too deep in the call stack, analysed from the top at the end of a pass
MAX_DEFERRED = 2000
SNIPPET = 60


def matches(name: str | None, patterns: Iterable[str]) -> bool:
    """fnmatch-style, case-sensitive: does `name` match one of `patterns`?

    (`fnmatch.fnmatchcase` on each pattern, as one compiled alternation per list of
    patterns: the rules ask this for every name they meet, against lists of dozens.)"""
    if not name:
        return False
    key = tuple(patterns)
    rx = _ALTERNATIONS.get(key)
    if rx is None:
        if len(_ALTERNATIONS) > 256:
            _ALTERNATIONS.clear()
        rx = _ALTERNATIONS[key] = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in key)) if key else None
    return rx is not None and rx.match(name) is not None


_ALTERNATIONS: dict[tuple, "re.Pattern[str] | None"] = {}


def path_matches(path: str | None, patterns: Iterable[str]) -> bool:
    """A dotted path against patterns naming its tail: "tokens" matches `sample.tokens`,
    "sample.tokens" matches `self.sample.tokens`, `x["tokens"]` matches "tokens"."""
    if not path:
        return False
    norm = path.replace('["', ".").replace('"]', "")
    for p in patterns:
        if fnmatch.fnmatchcase(norm, p) or fnmatch.fnmatchcase(norm, "*." + p):
            return True
    return False


# --------------------------------------------------------------------------
# abstract values


class Value:
    """A set of taints, optionally with precise elements (a tuple/list literal)
    and references to heap objects (dicts built in the module).  Immutable."""

    __slots__ = ("t", "elems", "refs")

    def __init__(
        self,
        t: dict[tuple[str, Any], tuple[Step, ...]] | None = None,
        elems: tuple["Value", ...] | None = None,
        refs: frozenset[int] = frozenset(),
    ):
        self.t = t if t is not None else {}
        self.elems = elems
        self.refs = refs

    def __bool__(self) -> bool:
        return bool(self.t) or bool(self.refs) or (self.elems is not None and any(self.elems))

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        parts = [f"{l}@{o}" for l, o in self.t]
        if self.elems is not None:
            parts.append("(" + ", ".join(repr(e) for e in self.elems) + ")")
        if self.refs:
            parts.append(f"refs={sorted(self.refs)}")
        return "Value(" + " ".join(parts) + ")"

    def flat(self) -> "Value":
        """The value with its elements merged in (what a whole container carries)."""
        if self.elems is None:
            return self
        t = dict(self.t)
        refs = set(self.refs)
        for e in self.elems:
            f = e.flat()
            for k, s in f.t.items():
                t.setdefault(k, s)
            refs |= f.refs
        return Value(t, None, frozenset(refs))

    def key(self) -> tuple:
        """Identity for fixed points and memo keys: labels and origins, not traces."""
        return (frozenset(self.t), tuple(e.key() for e in self.elems) if self.elems is not None else None, self.refs)

    def labels(self) -> set[str]:
        return {l for l, _ in self.flat().t}

    def has(self, labels: Iterable[str] | str) -> bool:
        want = {labels} if isinstance(labels, str) else set(labels)
        return any(l in want for l, _ in self.flat().t)

    def find(self, labels: Iterable[str] | str) -> list[tuple[str, Any, tuple[Step, ...]]]:
        """(label, origin, steps) of the taints with one of `labels`, shortest trace first.
        One taint's steps are given as they are (`settle` them to read them): a sink that
        turns out not to report costs no position."""
        want = {labels} if isinstance(labels, str) else set(labels)
        out = [(l, o, s) for (l, o), s in self.flat().t.items() if l in want]
        if len(out) < 2:
            return out
        out = [(l, o, settle(s)) for l, o, s in out]
        out.sort(key=lambda x: (len(x[2]), x[2][:1], str(x[1])))
        return out

    def with_step(self, line: "int | At", note: str) -> "Value":
        if not self:
            return self
        # a parameter's symbolic taint keeps its one step (summary mode: its trace inside the
        # function is the parameter and the sink; positions are costly)
        t = {k: s if is_symbolic(k[1]) else add_step(s, line, note) for k, s in self.t.items()}
        elems = tuple(e.with_step(line, note) for e in self.elems) if self.elems is not None else None
        return Value(t, elems, self.refs)

    def keep(self, kinds: frozenset[str], kind_of: Callable[[str], str], refs: bool = False) -> "Value":
        """The taints whose label kind is in `kinds` (flattened); heap refs only if asked."""
        if not self:
            return self
        f = self.flat()
        t = {k: s for k, s in f.t.items() if kind_of(k[0]) in kinds}
        return Value(t, None, f.refs if refs else frozenset())

    def no_refs(self) -> "Value":
        if not self.refs:
            return self
        f = self.flat()
        return Value(f.t)


EMPTY = Value()

#: the first element of a symbolic origin (patchaudit/analysis/repo_summaries.py):
#: (PARAM, function qualname, parameter, label)
PARAM = "\0param"


def is_symbolic(origin: Any) -> bool:
    """A parameter's symbolic taint (summary mode), not a flow from a source."""
    return isinstance(origin, tuple) and len(origin) == 4 and origin[0] == PARAM


def first_each(found: list[tuple[str, Any, tuple[Step, ...]]]) -> list[tuple[str, Any, tuple[Step, ...]]]:
    """Of `Value.find`'s taints, the first from a source and the first from a parameter (a
    sink reports both: the finding, and the summary that a parameter reaches it)."""
    out = []
    for want in (False, True):
        got = next((t for t in found if is_symbolic(t[1]) == want), None)
        if got is not None:
            out.append(got)
    return out


def add_step(steps: tuple[Step, ...], line: "int | At", note: str) -> tuple[Step, ...]:
    """Append a step; a step on the same line as the last one is merged into it.
    A marker (no steps) stays without steps.

    A step whose line is not known yet (an `At` never asked) is kept as it is, with the
    steps after it: the lines are computed, and the steps merged, only when the trace is
    read (`settle`, called by `Value.find` and wherever a trace leaves the interpreter).
    Most taints never reach a sink, and their lines would be computed for nothing.
    (Such a step is typed `Step` like the others: its readers are given settled traces.)"""
    if not steps:
        return steps
    if type(steps[-1][0]) is At or (isinstance(line, At) and line._line is None):
        if len(steps) < MAX_RAW_STEPS:
            raw = line if isinstance(line, At) else At.known(line)
            return steps + (cast(Step, (raw, note)),)
        steps = settle(steps)
    return _merge(steps, line_of(line), note)


def _merge(steps: tuple[Step, ...], line: int, note: str) -> tuple[Step, ...]:
    if steps[-1][0] == line and step_path(steps[-1][0]) == step_path(line):
        last = steps[-1][1]
        if note in last:
            return steps
        return steps[:-1] + ((line, f"{last}; {note}"),)
    if len(steps) >= MAX_STEPS:  # a very long flow: keep its beginning and its latest step
        return steps[:-1] + ((line, note),)
    return steps + ((line, note),)


def settle(steps: tuple[Step, ...]) -> tuple[Step, ...]:
    """The trace with every line computed and the steps merged as `add_step` merges them
    (the same left fold, done late): what every reader of a trace is given."""
    if not steps or type(steps[-1][0]) is not At:
        return steps
    i = next(i for i, (l, _) in enumerate(steps) if type(l) is At)
    out = steps[:i]
    for l, n in steps[i:]:
        line = l.line if type(l) is At else l
        out = _merge(out, line, n) if out else ((line, n),)
    return out


def join(a: Value, b: Value) -> Value:
    if not a:
        return b
    if not b or a is b:
        return a
    refs = a.refs | b.refs
    if a.elems is not None and b.elems is not None and len(a.elems) == len(b.elems):
        t = dict(a.t)
        for k, s in b.t.items():
            t.setdefault(k, s)
        return Value(t, tuple(join(x, y) for x, y in zip(a.elems, b.elems)), refs)
    fa, fb = a.flat(), b.flat()
    t = dict(fa.t)
    for k, s in fb.t.items():
        t.setdefault(k, s)
    return Value(t, None, fa.refs | fb.refs)


def join_all(values: Iterable[Value]) -> Value:
    out = EMPTY
    for v in values:
        out = join(out, v)
    return out


def tuple_value(elems: list[Value]) -> Value:
    if not any(elems):
        return EMPTY
    return Value({}, tuple(elems))


Env = dict[str, Value]


def join_env(a: Env, b: Env) -> Env:
    out = dict(a)
    for k, v in b.items():
        cur = out.get(k)
        out[k] = v if cur is None else join(cur, v)
    return out


def env_key(env: Env) -> frozenset:
    return frozenset((k, v.key()) for k, v in env.items() if v)


class Positions(Protocol):
    """What `At` and `Origin` ask of the interpreter: a node's line, its (line, column)."""

    def line(self, node: cst.CSTNode) -> int: ...

    def start(self, node: cst.CSTNode) -> tuple[int, int]: ...


class At:
    """A node's line, computed on first use: positions are costly metadata (see
    patchaudit/analysis/lazy_metadata.py) and most values the interpreter moves carry no taint.
    A trace keeps its steps' `At` until it is read (`add_step`, `settle`); an `At` never
    leaves the module's analysis (it holds the libcst node), hence no pickling."""

    __slots__ = ("_flow", "_node", "_line")

    def __init__(self, flow: "Positions | None", node: "cst.CSTNode | None"):
        self._flow = flow
        self._node = node
        self._line: int | None = None

    @classmethod
    def known(cls, line: int) -> "At":
        """A line already known, kept in a trace after steps whose lines are not."""
        at = cls(None, None)
        at._line = line
        return at

    @property
    def line(self) -> int:
        if self._line is None:
            assert self._flow is not None and self._node is not None
            self._line = self._flow.line(self._node)
        return self._line

    def __reduce__(self):
        raise TypeError("a trace step's line was never computed: settle() the trace before it leaves the analysis")


class Origin:
    """A source's identity: the (line, column) of its node, computed only when asked for.

    Equal to another `Origin` of the same node (the identity the interpreter uses while it
    runs); pickled and printed as the `(line, column)` tuple it stands for, which is
    what leaves the module's analysis (summaries, the cache)."""

    __slots__ = ("_flow", "_node", "_pos")

    def __init__(self, flow: "Positions", node: "cst.CSTNode"):
        self._flow = flow
        self._node = node
        self._pos: tuple[int, int] | None = None

    @property
    def pos(self) -> tuple[int, int]:
        if self._pos is None:
            self._pos = self._flow.start(self._node)
        return self._pos

    @property
    def node(self) -> "cst.CSTNode":
        """The source's node (while this module is analysed; never pickled)."""
        return self._node

    def __hash__(self) -> int:
        return id(self._node)

    def __eq__(self, other: object) -> bool:
        return type(other) is Origin and other._node is self._node

    def __repr__(self) -> str:
        return repr(self.pos)

    def __reduce__(self):
        return (tuple, (self.pos,))


def line_of(at: "int | At") -> int:
    return at if isinstance(at, int) else at.line
