"""Intra-module dataflow over libcst: follow values from sources to sinks, with traces.

The layer is an abstract interpreter over one parsed module.  Abstract values
carry *taints*: a label chosen by a rule (say "expanded-ids"), an origin (the
source site) and the ordered steps the value took from the source (`(line,
note)`).  The interpreter knows how Python moves values; a rule's `FlowSpec`
says where taints start (sources), how labels turn into other labels (a
processor's output -> its `input_ids`), and where a taint is a finding (sinks).
No rule-specific name is hard-wired here.

What the interpreter follows:

- assignments, annotated and augmented assignments, the walrus, `del`;
- tuple/list literals element by element, so unpacking is precise
  (`ids, images = f()` taints `ids` only); starred targets get the middle;
- subscripts and slices (`ids[0]`, `ids[:n]`), string-key subscripts and
  `.get("k")` of dicts built in the module (a small heap: dict literals,
  `dict(...)`, dict comprehensions; item assignment adds keys);
- wrappers (`list()`, `tuple()`, `torch.tensor()`, `np.array()`...),
  tensor/list methods (`.tolist()`, `.to()`, `.squeeze()`...), `+`/`*`
  concatenation, `.append`/`.extend`/`.insert`/`+=` into a list;
- attribute stores and loads on the same object (`sample.tokens`), across
  methods of a class through `self.x` (flow-insensitive per class);
- returns and calls of functions of the same module: each function is analysed
  per *context* (the abstract values of its arguments, ignoring traces), which
  gives its summary: the returned value and the stores it makes into its
  parameters' attributes (`sample.tokens = ...` inside a callee is seen by the
  caller).  Contexts are memoised; recursion and the heap are resolved by
  re-running the module until nothing changes (a fixed point, capped);
- label kinds decide what survives which operation: OBJECT labels (a processor,
  its output) move only by assignment, call and return; IDS labels also through
  sequence operations; TEXT labels also through f-strings, `str()`, `%`,
  `.format()`, `.join()` and string methods.  f-strings and `str()` end an id
  flow.  Anything the layer does not know (an unknown call, `len()`, a
  comparison) gives a clean value.

Control flow: branches are analysed separately and joined, loops are iterated
until their environment is stable (at most three times), exceptions join the
states of the `try` body.  Names are resolved by the LEGB rule approximately:
locals, then module globals, then the spec's `unknown` hook.  Only
PositionProvider metadata is used: the layer does its own scoping, which is
enough for the flows it follows and an order of magnitude cheaper than libcst's
ScopeProvider/QualifiedNameProvider.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import libcst as cst

IDS, TEXT, OBJECT = "ids", "text", "object"
ALL_KINDS = frozenset({IDS, TEXT, OBJECT})
SEQ_KINDS = frozenset({IDS, TEXT})
STR_KINDS = frozenset({TEXT})

#: a trace step: (line in the unit, note)
Step = tuple[int, str]

MAX_STEPS = 64
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
        rx = _ALTERNATIONS[key] = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in key)) \
            if key else None
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

    def __init__(self, t: dict[tuple[str, Any], tuple[Step, ...]] | None = None,
                 elems: tuple["Value", ...] | None = None, refs: frozenset[int] = frozenset()):
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
        return (frozenset(self.t), tuple(e.key() for e in self.elems) if self.elems is not None else None,
                self.refs)

    def labels(self) -> set[str]:
        return {l for l, _ in self.flat().t}

    def has(self, labels: Iterable[str] | str) -> bool:
        want = {labels} if isinstance(labels, str) else set(labels)
        return any(l in want for l, _ in self.flat().t)

    def find(self, labels: Iterable[str] | str) -> list[tuple[str, Any, tuple[Step, ...]]]:
        """(label, origin, steps) of the taints with one of `labels`, shortest trace first."""
        want = {labels} if isinstance(labels, str) else set(labels)
        out = [(l, o, s) for (l, o), s in self.flat().t.items() if l in want]
        out.sort(key=lambda x: (len(x[2]), x[2][:1], str(x[1])))
        return out

    def with_step(self, line: "int | At", note: str) -> "Value":
        if not self:
            return self
        t = {k: add_step(s, line, note) for k, s in self.t.items()}
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


def add_step(steps: tuple[Step, ...], line: "int | At", note: str) -> tuple[Step, ...]:
    """Append a step; a step on the same line as the last one is merged into it.
    A marker (no steps) stays without steps."""
    if not steps:
        return steps
    if not isinstance(line, int):
        line = line.line
    if steps and steps[-1][0] == line:
        last = steps[-1][1]
        if note in last:
            return steps
        return steps[:-1] + ((line, f"{last}; {note}"),)
    if len(steps) >= MAX_STEPS:  # a very long flow: keep its beginning and its latest step
        return steps[:-1] + ((line, note),)
    return steps + ((line, note),)


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


class At:
    """A node's line, computed on first use: positions are costly metadata (see
    patchaudit/analysis/lazy_metadata.py) and most values the interpreter moves carry no taint."""

    __slots__ = ("_flow", "_node", "_line")

    def __init__(self, flow: "Flow", node: cst.CSTNode):
        self._flow = flow
        self._node = node
        self._line: int | None = None

    @property
    def line(self) -> int:
        if self._line is None:
            self._line = self._flow.line(self._node)
        return self._line


def _line_of(at: "int | At") -> int:
    return at if isinstance(at, int) else at.line


# --------------------------------------------------------------------------
# what rules see


@dataclass
class Arg:
    keyword: str | None
    star: str            # "", "*" or "**"
    value: Value
    node: cst.Arg


@dataclass
class CallSite:
    node: cst.Call
    at: Any                     # the call's line (lazy: use `.line`)
    callee: str | None          # dotted callee: "AutoProcessor.from_pretrained", "self.processor"
    name: str | None            # last name of the callee: "from_pretrained", "processor"
    func: Value                 # the callee's own value (e.g. a processor object)
    receiver: Value | None      # the object a method is called on
    receiver_path: str | None   # its dotted path, when it has one
    args: list[Arg]
    resolved: bool              # a function of this module (its body was analysed)
    flow: "Flow"

    @property
    def line(self) -> int:
        return _line_of(self.at)

    def keyword(self, name: str) -> Arg | None:
        for a in self.args:
            if a.keyword == name:
                return a
        return None

    def positional(self) -> list[Arg]:
        return [a for a in self.args if a.keyword is None and a.star == ""]

    def has_star(self) -> bool:
        return any(a.star for a in self.args)

    def literal(self, name: str) -> Any:
        """The constant value of keyword `name` (True/False/None/int/str), or `MISSING`."""
        a = self.keyword(name)
        if a is None:
            return MISSING
        return literal_value(a.node.value)

    def all_values(self) -> Value:
        return join_all(a.value for a in self.args)

    def snippet(self, width: int = SNIPPET) -> str:
        return self.flow.snippet(self.node, width)


class _Missing:
    def __repr__(self) -> str:  # pragma: no cover
        return "MISSING"


MISSING = _Missing()
UNKNOWN = object()


def literal_value(node: cst.BaseExpression) -> Any:
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[node.value]
    if isinstance(node, cst.Integer):
        try:
            return int(node.value, 0)
        except ValueError:
            return UNKNOWN
    s = string_literal(node)
    return s if s is not None else UNKNOWN


def string_literal(node: cst.BaseExpression | None) -> str | None:
    if isinstance(node, cst.SimpleString):
        try:
            v = node.evaluated_value
        except Exception:  # pragma: no cover - malformed escapes
            return None
        return v if isinstance(v, str) else None
    if isinstance(node, cst.ConcatenatedString):
        l, r = string_literal(node.left), string_literal(node.right)
        return l + r if l is not None and r is not None else None
    return None


@dataclass
class StoreSite:
    node: cst.CSTNode           # the target (`sample.tokens`, `d["k"]`) or the mutating call
    at: Any
    path: str | None            # `sample.tokens`, `batch["input_ids"]`
    attr: str | None            # last attribute or string key
    kind: str                   # "attr", "item" or "mutate" (append/extend/+=)
    value: Value                # what is stored or added (trace ends with the store)
    local_object: bool          # the container is a dict built in this module

    @property
    def line(self) -> int:
        return _line_of(self.at)


@dataclass
class ReturnSite:
    node: cst.CSTNode
    at: Any
    function: str
    value: Value

    @property
    def line(self) -> int:
        return _line_of(self.at)


@dataclass
class FieldEntry:
    value: Value
    node: cst.CSTNode
    at: Any
    none: bool          # every value stored under this key is the literal None

    @property
    def line(self) -> int:
        return _line_of(self.at)


@dataclass
class HeapObject:
    """A dict built in the module (literal, `dict(...)`, comprehension) and its keys."""

    id: int
    node: cst.CSTNode
    fields: dict[str, FieldEntry] = field(default_factory=dict)


@dataclass
class Hit:
    node: cst.CSTNode
    line: int
    message: str
    steps: tuple[Step, ...]
    origin: Any
    severity: Any = None


class FlowSpec:
    """What a rule plugs into the layer.  Override the hooks; all are optional.

    `kinds` maps each label the rule uses to IDS, TEXT or OBJECT.  Hooks get the
    running `Flow` to create taints (`flow.source`, `flow.derive`) and findings
    (`flow.report`).
    """

    kinds: dict[str, str] = {}

    #: callees (last name) whose result carries their arguments' ids/text
    seq_wrappers: frozenset[str] = frozenset({
        "list", "tuple", "tensor", "as_tensor", "LongTensor", "IntTensor", "Tensor", "array", "asarray",
        "cat", "concat", "concatenate", "chain", "sorted", "reversed", "enumerate", "zip", "stack", "hstack",
    })
    #: callees whose result carries every argument label (objects too)
    all_wrappers: frozenset[str] = frozenset({"copy", "deepcopy", "dict", "cast"})
    #: callees whose result carries only text
    str_wrappers: frozenset[str] = frozenset({"str", "repr"})
    #: methods returning their receiver's value, any kind
    all_methods: frozenset[str] = frozenset({"to", "cpu", "cuda", "copy", "clone", "detach", "contiguous"})
    #: methods returning the receiver's ids/text
    seq_methods: frozenset[str] = frozenset({
        "tolist", "long", "int", "numpy", "squeeze", "unsqueeze", "flatten", "view", "reshape", "ravel",
        "astype", "expand", "repeat", "tolist", "flip",
    })
    #: string methods returning (parts of) the receiver's text
    str_methods: frozenset[str] = frozenset({
        "strip", "lstrip", "rstrip", "replace", "lower", "upper", "split", "rsplit", "splitlines", "title",
        "capitalize", "casefold", "removeprefix", "removesuffix", "partition", "rpartition", "center",
        "ljust", "rjust", "zfill", "expandtabs", "translate", "format", "join", "format_map",
    })
    #: module functions whose result carries their arguments' text (`re.sub(p, r, text)`)
    str_functions: frozenset[str] = frozenset({"sub", "split", "findall", "dedent", "indent", "normalize",
                                               "unescape", "escape", "fill", "wrap"})
    #: methods that add their arguments to the receiver
    mutators: frozenset[str] = frozenset({"append", "extend", "insert", "add", "appendleft", "extendleft"})

    def kind(self, label: str) -> str:
        return self.kinds.get(label, IDS)

    def param(self, flow: "Flow", function: str, name: str, annotation: cst.BaseExpression | None,
              node: cst.CSTNode) -> Value | None:
        """A parameter's own value (e.g. a processor by name or annotation)."""
        return None

    def unknown(self, flow: "Flow", name: str, node: cst.CSTNode) -> Value | None:
        """The value of a name or attribute the analysis knows nothing about."""
        return None

    def call(self, flow: "Flow", site: CallSite) -> Value | None:
        """Sources, transforms and call sinks: the extra value of a call's result."""
        return None

    def field(self, flow: "Flow", base: Value, key: str, node: cst.CSTNode) -> Value | None:
        """`base.key`, `base["key"]`, `base.get("key")`: label transforms."""
        return None

    def store(self, flow: "Flow", site: StoreSite) -> None:
        """An attribute/item store or a mutation (append/extend/+=)."""

    def ret(self, flow: "Flow", site: ReturnSite) -> None:
        """A `return` (or `yield`) inside a function."""

    def finish(self, flow: "Flow") -> None:
        """After the fixed point: sinks over the heap (`flow.objects()`)."""


# --------------------------------------------------------------------------
# module structure


@dataclass(eq=False)
class Function:
    qualname: str
    name: str
    node: cst.FunctionDef
    cls: str | None                      # enclosing class (methods)
    kind: str                            # function | method | static | class
    parent: "Function | None"
    positional: list[str] = field(default_factory=list)
    kwonly: list[str] = field(default_factory=list)
    star: str | None = None
    starstar: str | None = None
    annotations: dict[str, cst.BaseExpression | None] = field(default_factory=dict)
    param_nodes: dict[str, cst.CSTNode] = field(default_factory=dict)
    nested: dict[str, "Function"] = field(default_factory=dict)

    def params(self) -> list[str]:
        out = list(self.positional) + list(self.kwonly)
        if self.star:
            out.append(self.star)
        if self.starstar:
            out.append(self.starstar)
        return out


@dataclass
class Summary:
    ret: Value
    effects: dict[str, dict[str, Value]]

    def key(self) -> tuple:
        return (self.ret.key(), frozenset((p, r, v.key()) for p, e in self.effects.items()
                                          for r, v in e.items() if v))


EMPTY_SUMMARY = Summary(EMPTY, {})


class _Frame:
    __slots__ = ("fn", "cls", "ret", "effects", "params", "depth", "loops")

    def __init__(self, fn: Function | None, depth: int):
        self.fn = fn
        self.cls = fn.cls if fn else None
        self.ret = EMPTY
        self.effects: dict[str, dict[str, Value]] = {}
        self.params: set[str] = set(fn.params()) if fn else set()
        self.depth = depth
        self.loops = 0


def path_of(node: cst.CSTNode | None) -> str | None:
    """`a.b["k"].c` -> 'a.b["k"].c'; None for anything that is not a plain access path."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = path_of(node.value)
        return f"{base}.{node.attr.value}" if base else None
    if isinstance(node, cst.Subscript):
        key = subscript_key(node)
        if key is None:
            return None
        base = path_of(node.value)
        return f'{base}["{key}"]' if base else None
    return None


def dotted(node: cst.CSTNode | None) -> str | None:
    """A callee's dotted name: `self.processor.apply_chat_template`, `AutoProcessor.from_pretrained`."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        if base is None and isinstance(node.value, cst.Call):
            inner = dotted(node.value.func)
            base = f"{inner}()" if inner else None
        return f"{base}.{node.attr.value}" if base else None
    return None


def receiver_name(call: cst.Call) -> str | None:
    """The name of the object a method is called on: `self.tokenizer.decode(...)` -> "tokenizer",
    `get_tokenizer().encode(...)` -> "get_tokenizer"; None for a plain function call."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    obj = func.value
    if isinstance(obj, cst.Call):
        obj = obj.func
    if isinstance(obj, cst.Name):
        return obj.value
    if isinstance(obj, cst.Attribute):
        return obj.attr.value
    return None


def subscript_key(node: cst.Subscript) -> str | None:
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return None
    return string_literal(node.slice[0].slice.value)


def _root(path: str) -> str:
    for i, ch in enumerate(path):
        if ch in ".[":
            return path[:i]
    return path


# --------------------------------------------------------------------------
# the interpreter


class Flow:
    """Runs one `FlowSpec` over one module.  `position(node)` gives a libcst
    CodeRange (PositionProvider metadata)."""

    def __init__(self, module: cst.Module, spec: FlowSpec, position: Callable[[cst.CSTNode], Any]):
        self.module = module
        self.spec = spec
        self._position = position
        self.functions: list[Function] = []
        self.module_functions: dict[str, Function] = {}
        self.classes: dict[str, dict[str, Function]] = {}
        self.class_bases: dict[str, list[str]] = {}
        self.globals: Env = {}
        self.class_fields: dict[str, Env] = {}
        self._heap: dict[int, HeapObject] = {}
        self._alloc: dict[int, int] = {}
        self._summaries: dict[tuple, Summary] = {}
        self._pass_memo: dict[tuple, Summary] = {}
        self._in_progress: set[tuple] = set()
        self._changed = False
        self._tainted = False
        self._hits: dict[tuple, Hit] = {}
        self._unknown_cache: dict[str, Value] = {}
        self._param_cache: dict[tuple[str, str], Value] = {}
        self._mros: dict[str, list[str]] = {}
        self._deferred: dict[tuple, tuple[Function, dict[str, Value], dict[str, Value]]] = {}
        self.passes = 0

    # ----- helpers for specs ----------------------------------------------------
    def line(self, node: cst.CSTNode) -> int:
        return self._position(node).start.line

    def _at(self, node: cst.CSTNode) -> At:
        return At(self, node)

    def snippet(self, node: cst.CSTNode, width: int = SNIPPET) -> str:
        try:
            code = self.module.code_for_node(node)
        except Exception:  # pragma: no cover - defensive
            return "?"
        code = " ".join(code.split())
        return code if len(code) <= width else code[: width - 3] + "..."

    def kind(self, label: str) -> str:
        return self.spec.kind(label)

    def source(self, label: str, node: cst.CSTNode, note: str, origin: Any = None) -> Value:
        """A fresh taint at `node`."""
        self._tainted = True
        if origin is None:
            pos = self._position(node).start
            origin = (pos.line, pos.column)
        return Value({(label, origin): ((self.line(node), note),)})

    def marker(self, label: str, origin: Any) -> Value:
        """A taint without a trace, for identity labels (a processor object) that are never
        reported themselves: it costs no position lookup and does not make the module "tainted"
        (a module with markers only is analysed once, not to a fixed point)."""
        return Value({(label, origin): ()})

    def derive(self, value: Value, from_labels: Iterable[str], to_label: str, node: cst.CSTNode,
               note: str) -> Value:
        """Taints of `from_labels` in `value` turned into `to_label` (same origin, one more step)."""
        want = set(from_labels)
        line = self.line(node)
        t = {(to_label, o): add_step(s, line, note) for (l, o), s in value.flat().t.items() if l in want}
        if t:
            self._tainted = True
        return Value(t)

    def deep(self, value: Value) -> Value:
        """`value` with the fields of the dicts it references (recursively) merged in."""
        out = value.flat()
        seen: set[int] = set()
        todo = list(out.refs)
        while todo:
            ref = todo.pop()
            if ref in seen:
                continue
            seen.add(ref)
            for fe in self._heap[ref].fields.values():
                fv = fe.value.flat()
                out = join(out, Value(fv.t))
                todo.extend(fv.refs)
        return Value(out.t)

    def objects(self) -> Iterator[HeapObject]:
        return iter(sorted(self._heap.values(), key=lambda o: o.id))

    def report(self, node: cst.CSTNode, message: str, steps: tuple[Step, ...], origin: Any,
               note: str, severity: Any = None) -> None:
        line = self.line(node)
        key = (self.line(node), self._position(node).start.column, origin)
        if key in self._hits:
            return
        self._hits[key] = Hit(node, line, message, add_step(tuple(steps), line, note), origin, severity)

    # ----- driver ----------------------------------------------------------------
    def run(self) -> list[Hit]:
        self._collect(self.module.body, None, None, "")
        for _ in range(MAX_PASSES):
            self.passes += 1
            self._changed = False
            self._pass_memo = {}
            fr = _Frame(None, 0)
            env: Env = {}
            self._block(self.module.body, env, fr)
            if env_key(env) != env_key(self.globals):
                self._changed = True
            self.globals = env
            for fn in self.functions:
                self._summary(fn, (fn.qualname, (), ()), {}, {}, 1)
            budget = MAX_DEFERRED
            while self._deferred and budget > 0:
                key, (fn, args, subs) = next(iter(self._deferred.items()))
                del self._deferred[key]
                budget -= 1
                if key not in self._pass_memo:
                    self._summary(fn, key, args, subs, 1)
            self._deferred.clear()
            if not self._changed or not self._tainted:
                break
        self.spec.finish(self)
        return self._final_hits()

    def _final_hits(self) -> list[Hit]:
        hits = sorted(self._hits.values(), key=lambda h: (-len(h.steps), h.line))
        kept: list[Hit] = []
        for h in hits:
            if any(k.origin == h.origin and h.line in {l for l, _ in k.steps} for k in kept):
                continue  # the flow goes on to a later sink: report it there, with the longer trace
            kept.append(h)
        kept.sort(key=lambda h: (h.line, self._position(h.node).start.column))
        return kept

    # ----- structure ------------------------------------------------------------
    def _collect(self, stmts: Iterable[cst.CSTNode], parent: Function | None, cls: str | None,
                 prefix: str) -> None:
        for stmt in stmts:
            if isinstance(stmt, cst.FunctionDef):
                fn = self._function(stmt, parent, cls, prefix)
                self.functions.append(fn)
                if cls is not None:
                    self.classes.setdefault(cls, {})[fn.name] = fn
                elif parent is not None:
                    parent.nested[fn.name] = fn
                else:
                    self.module_functions[fn.name] = fn
                self._collect(_body(stmt.body), fn, None, fn.qualname + ".")
            elif isinstance(stmt, cst.ClassDef):
                name = stmt.name.value
                self.classes.setdefault(name, {})
                self.class_bases[name] = [b for b in (dotted(a.value) for a in stmt.bases) if b]
                self._collect(_body(stmt.body), parent, name, prefix + name + ".")
            else:
                for sub in _sub_blocks(stmt):
                    self._collect(sub, parent, cls, prefix)

    def _function(self, node: cst.FunctionDef, parent: Function | None, cls: str | None,
                  prefix: str) -> Function:
        decos = {dotted(d.decorator) for d in node.decorators}
        kind = "function"
        if cls is not None:
            kind = "static" if "staticmethod" in decos else "class" if "classmethod" in decos else "method"
        fn = Function(prefix + node.name.value, node.name.value, node, cls, kind, parent)
        ps = node.params
        for p in list(ps.posonly_params) + list(ps.params):
            fn.positional.append(p.name.value)
        for p in ps.kwonly_params:
            fn.kwonly.append(p.name.value)
        if isinstance(ps.star_arg, cst.Param):
            fn.star = ps.star_arg.name.value
        if isinstance(ps.star_kwarg, cst.Param):
            fn.starstar = ps.star_kwarg.name.value
        for p in list(ps.posonly_params) + list(ps.params) + list(ps.kwonly_params) + \
                [x for x in (ps.star_arg, ps.star_kwarg) if isinstance(x, cst.Param)]:
            fn.annotations[p.name.value] = p.annotation.annotation if p.annotation else None
            fn.param_nodes[p.name.value] = p
        return fn

    def _mro(self, cls: str) -> list[str]:
        """`cls` and its bases defined in this module, depth first (cached)."""
        got = self._mros.get(cls)
        if got is None:
            got = []
            todo = [cls]
            while todo:
                c = todo.pop(0)
                if c in got or c not in self.classes:
                    continue
                got.append(c)
                todo.extend(b.rsplit(".", 1)[-1] for b in self.class_bases.get(c, []))
            self._mros[cls] = got
        return got

    def _method(self, cls: str, name: str) -> Function | None:
        for c in self._mro(cls):
            fn = self.classes[c].get(name)
            if fn is not None:
                return fn
        return None

    def _class_field(self, cls: str, path: str) -> Value:
        v = EMPTY
        for c in self._mro(cls):
            fields = self.class_fields.get(c)
            if fields:
                v = join(v, fields.get(path, EMPTY))
        return v

    def _resolve(self, func: cst.BaseExpression, env: Env, fr: _Frame) -> tuple[Function, bool] | None:
        if isinstance(func, cst.Name):
            n = func.value
            if n in env:
                return None  # a local shadows the function
            f = fr.fn
            while f is not None:
                if n in f.nested:
                    return f.nested[n], False
                f = f.parent
            fn = self.module_functions.get(n)
            return (fn, False) if fn is not None else None
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            base, m = func.value.value, func.attr.value
            if base in ("self", "cls") and fr.cls is not None:
                fn = self._method(fr.cls, m)
                if fn is not None:
                    return fn, fn.kind != "static"
            if base in self.classes and base not in env:
                fn = self._method(base, m)
                if fn is not None:
                    return fn, fn.kind == "class"
        return None

    # ----- summaries ----------------------------------------------------------------
    def _param_seed(self, fn: Function, name: str) -> Value:
        key = (fn.qualname, name)
        if key not in self._param_cache:
            v = self.spec.param(self, fn.qualname, name, fn.annotations.get(name), fn.param_nodes[name])
            self._param_cache[key] = v or EMPTY
        return self._param_cache[key]

    def _summary(self, fn: Function, key: tuple, args: dict[str, Value], subs: dict[str, Value],
                 depth: int) -> Summary:
        memo = self._pass_memo.get(key)
        if memo is not None:
            return memo
        if key in self._in_progress:
            return self._summaries.get(key, EMPTY_SUMMARY)
        if depth > MAX_CALL_DEPTH:
            # too deep to analyse on this stack: analyse it from the top after this pass
            if key not in self._deferred:
                self._deferred[key] = (fn, args, subs)
            return self._summaries.get(key, EMPTY_SUMMARY)
        self._in_progress.add(key)
        try:
            fr = _Frame(fn, depth)
            env: Env = {}
            for p in fn.params():
                env[p] = join(args.get(p, EMPTY), self._param_seed(fn, p))
            env.update(subs)
            self._block(_body(fn.node.body), env, fr)
            summ = Summary(fr.ret, fr.effects)
        finally:
            self._in_progress.discard(key)
        old = self._summaries.get(key)
        if (old.key() if old is not None else EMPTY_SUMMARY.key()) != summ.key():
            self._changed = True
        self._summaries[key] = summ
        self._pass_memo[key] = summ
        return summ

    # ----- statements ------------------------------------------------------------------
    def _block(self, body: Any, env: Env, fr: _Frame) -> Env:
        for stmt in _body(body):
            self._stmt(stmt, env, fr)
        return env

    def _stmt(self, stmt: cst.CSTNode, env: Env, fr: _Frame) -> None:
        if isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            for small in stmt.body:
                self._small(small, env, fr)
        elif isinstance(stmt, cst.If):
            self._eval(stmt.test, env, fr)
            e1 = self._block(stmt.body, dict(env), fr)
            if stmt.orelse is None:
                e2 = env
            elif isinstance(stmt.orelse, cst.If):
                e2 = dict(env)
                self._stmt(stmt.orelse, e2, fr)
            else:
                e2 = self._block(stmt.orelse.body, dict(env), fr)
            _replace(env, join_env(e1, e2))
        elif isinstance(stmt, cst.For):
            it = self._eval(stmt.iter, env, fr)
            elem = self._iter_elem(it)
            line = self._at(stmt)

            def once(e: Env) -> Env:
                e = dict(e)
                self._assign(stmt.target, elem, e, fr, line, "iterated into")
                return self._block(stmt.body, e, fr)

            out = self._loop(env, once, fr)
            if stmt.orelse is not None:
                out = self._block(stmt.orelse.body, out, fr)
            _replace(env, out)
        elif isinstance(stmt, cst.While):
            def once_w(e: Env) -> Env:
                e = dict(e)
                self._eval(stmt.test, e, fr)
                return self._block(stmt.body, e, fr)

            self._eval(stmt.test, env, fr)
            out = self._loop(env, once_w, fr)
            if stmt.orelse is not None:
                out = self._block(stmt.orelse.body, out, fr)
            _replace(env, out)
        elif isinstance(stmt, (cst.Try, cst.TryStar)):
            e_body = self._block(stmt.body, dict(env), fr)
            acc = join_env(env, e_body)
            outs = [e_body]
            for h in stmt.handlers:
                eh = dict(acc)
                if h.type is not None:
                    self._eval(h.type, eh, fr)
                if h.name is not None and isinstance(h.name.name, cst.Name):
                    _set(eh, h.name.name.value, EMPTY)
                outs.append(self._block(h.body, eh, fr))
            if stmt.orelse is not None:
                outs[0] = self._block(stmt.orelse.body, outs[0], fr)
            res = outs[0]
            for o in outs[1:]:
                res = join_env(res, o)
            if stmt.finalbody is not None:
                res = self._block(stmt.finalbody.body, res, fr)
            _replace(env, res)
        elif isinstance(stmt, cst.With):
            line = self._at(stmt)
            for item in stmt.items:
                v = self._eval(item.item, env, fr)
                if item.asname is not None:
                    self._assign(item.asname.name, v, env, fr, line, "assigned to")
            self._block(stmt.body, env, fr)
        elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            env.pop(stmt.name.value, None)
        elif isinstance(stmt, cst.Match):
            self._eval(stmt.subject, env, fr)
            res = dict(env)
            for case in stmt.cases:
                res = join_env(res, self._block(case.body, dict(env), fr))
            _replace(env, res)
        else:  # unknown compound statement: analyse its blocks in order
            for sub in _sub_blocks(stmt):
                self._block(sub, env, fr)

    def _loop(self, env: Env, once: Callable[[Env], Env], fr: _Frame) -> Env:
        rounds = 3 if fr.loops < 2 else 1
        fr.loops += 1
        try:
            cur = env
            for _ in range(rounds):
                nxt = join_env(cur, once(cur))
                if env_key(nxt) == env_key(cur):
                    return nxt
                cur = nxt
            return cur
        finally:
            fr.loops -= 1

    def _small(self, s: cst.CSTNode, env: Env, fr: _Frame) -> None:
        if isinstance(s, cst.Assign):
            v = self._eval(s.value, env, fr)
            line = self._at(s)
            for t in s.targets:
                self._assign(t.target, v, env, fr, line, "assigned to", s.value)
        elif isinstance(s, cst.AnnAssign):
            if s.value is not None:
                v = self._eval(s.value, env, fr)
                self._assign(s.target, v, env, fr, self._at(s), "assigned to", s.value)
        elif isinstance(s, cst.AugAssign):
            self._augassign(s, env, fr)
        elif isinstance(s, cst.Expr):
            self._eval(s.value, env, fr)
        elif isinstance(s, cst.Return):
            v = self._eval(s.value, env, fr) if s.value is not None else EMPTY
            self._return(s, v, fr)
        elif isinstance(s, cst.Del):
            for p in _target_paths(s.target):
                _set(env, p, EMPTY)
        elif isinstance(s, (cst.Import, cst.ImportFrom)):
            names = s.names if not isinstance(s.names, cst.ImportStar) else []
            for alias in names:
                n = alias.asname.name if alias.asname else alias.name
                if isinstance(n, cst.Name):
                    env.pop(n.value, None)
                elif isinstance(n, cst.Attribute):
                    env.pop(_root(path_of(n) or ""), None)
        elif isinstance(s, (cst.Raise, cst.Assert)):
            for child in s.children:
                if isinstance(child, cst.BaseExpression):
                    self._eval(child, env, fr)

    def _return(self, node: cst.CSTNode, v: Value, fr: _Frame) -> None:
        if fr.fn is None:
            return
        line = self._at(node)
        v = v.with_step(line, f"returned by `{fr.fn.name}()`")
        fr.ret = join(fr.ret, v)
        if v:
            self.spec.ret(self, ReturnSite(node, line, fr.fn.qualname, v))

    def _augassign(self, s: cst.AugAssign, env: Env, fr: _Frame) -> None:
        cur = self._eval(s.target, env, fr)
        v = self._eval(s.value, env, fr)
        line = self._at(s)
        if isinstance(s.operator, (cst.AddAssign, cst.MultiplyAssign, cst.BitOrAssign)):
            added = v.keep(SEQ_KINDS, self.kind)
            if isinstance(s.operator, cst.BitOrAssign):
                added = join(added, v)
        elif isinstance(s.operator, cst.ModuloAssign):
            added = v.keep(STR_KINDS, self.kind)
        else:
            added = EMPTY
        self._mutate(s.target, s.target, join(cur, EMPTY), added, env, fr, line)

    def _mutate(self, target: cst.BaseExpression, node: cst.CSTNode, cur: Value, added: Value, env: Env,
                fr: _Frame, line: "int | At") -> None:
        """`target` grows by `added` (append/extend/insert/+=): a weak update and a store event."""
        path = path_of(target)
        if path is None:
            return
        added = added.with_step(line, f"appended to `{path}`")
        new = join(cur, added)
        _set(env, path, new)
        self._remember(path, added, fr)
        if added:
            self.spec.store(self, StoreSite(node, line, path, _last(path), "mutate", added,
                                            bool(cur.refs)))

    def _remember(self, path: str, v: Value, fr: _Frame) -> None:
        """Record a store for other methods (self.x) and for callers (stores into parameters)."""
        if not v:
            return
        root = _root(path)
        if root == "self" and fr.cls is not None and path != "self":
            fields = self.class_fields.setdefault(fr.cls, {})
            cur = fields.get(path, EMPTY)
            new = join(cur, v)
            if new.key() != cur.key():
                fields[path] = new
                self._changed = True
        if root in fr.params:
            eff = fr.effects.setdefault(root, {})
            rest = path[len(root):]
            eff[rest] = join(eff.get(rest, EMPTY), v)

    def _assign(self, target: cst.BaseExpression, v: Value, env: Env, fr: _Frame, line: "int | At",
                how: str, value_node: cst.CSTNode | None = None) -> None:
        if isinstance(target, cst.Name):
            name = target.value
            _set(env, name, v.with_step(line, f"{how} `{name}`"))
            fr.params.discard(name)
        elif isinstance(target, (cst.Tuple, cst.List)):
            elts = [e.value for e in target.elements]
            star = next((i for i, e in enumerate(target.elements) if isinstance(e, cst.StarredElement)), None)
            if v.elems is not None and star is None and len(v.elems) == len(elts):
                parts = list(v.elems)
            elif v.elems is not None and star is not None and len(v.elems) >= len(elts) - 1:
                after = len(elts) - star - 1
                middle = v.elems[star:len(v.elems) - after]
                parts = list(v.elems[:star]) + [Value({}, tuple(middle)).flat() if middle else EMPTY] + \
                    list(v.elems[len(v.elems) - after:])
            else:
                parts = [v.flat()] * len(elts)
            for i, (t, part) in enumerate(zip(elts, parts)):
                self._assign(t, part, env, fr, line, "unpacked into" if how == "assigned to" else how)
        elif isinstance(target, cst.StarredElement):
            self._assign(target.value, v, env, fr, line, how)
        elif isinstance(target, (cst.Attribute, cst.Subscript)):
            self._store(target, v, env, fr, line, _is_none(value_node))

    def _store(self, target: cst.Attribute | cst.Subscript, v: Value, env: Env, fr: _Frame, line: "int | At",
               none: bool = False) -> None:
        base = self._eval(target.value, env, fr)
        path = path_of(target)
        key = None
        if isinstance(target, cst.Subscript):
            key = subscript_key(target)
            if key is None:
                for el in target.slice:
                    self._eval_slice(el.slice, env, fr)
        shown = path or self.snippet(target)
        vs = v.with_step(line, f"stored in `{shown}`")
        if isinstance(target, cst.Subscript) and base.refs:
            for ref in base.refs:
                self._set_field(ref, key if key is not None else "?", vs, target, line, none)
        if path is not None:
            _set(env, path, vs)
            self._remember(path, vs, fr)
        elif isinstance(target, cst.Subscript):
            bpath = path_of(target.value)
            if bpath is not None and vs:  # `ids[i] = x`: the container now holds x too
                _set(env, bpath, join(base, vs.keep(ALL_KINDS, self.kind)))
                self._remember(bpath, vs, fr)
        if vs:
            kind = "attr" if isinstance(target, cst.Attribute) else "item"
            attr = target.attr.value if isinstance(target, cst.Attribute) else key
            self.spec.store(self, StoreSite(target, line, path, attr, kind, vs, bool(base.refs)))

    def _set_field(self, ref: int, key: str, v: Value, node: cst.CSTNode, line: "int | At", none: bool) -> None:
        obj = self._heap[ref]
        fe = obj.fields.get(key)
        if fe is None:
            obj.fields[key] = FieldEntry(v, node, line, none)
            if v:
                self._changed = True
            return
        new = join(fe.value, v)
        if new.key() != fe.value.key():
            self._changed = True
        fe.value = new
        fe.none = fe.none and none

    # ----- expressions ------------------------------------------------------------------
    def _eval(self, node: cst.BaseExpression | None, env: Env, fr: _Frame) -> Value:
        if node is None:
            return EMPTY
        meth = _EVAL.get(type(node))
        if meth is not None:
            return meth(self, node, env, fr)
        for child in node.children:  # unknown expression: analyse its parts for their effects
            if isinstance(child, cst.BaseExpression):
                self._eval(child, env, fr)
        return EMPTY

    def _e_name(self, node: cst.Name, env: Env, fr: _Frame) -> Value:
        n = node.value
        v = env.get(n)
        if v is not None:
            return v
        if fr.fn is not None:
            g = self.globals.get(n)
            if g is not None:
                return g
        if n in ("True", "False", "None"):
            return EMPTY
        return self._unknown(n, node)

    def _unknown(self, name: str, node: cst.CSTNode) -> Value:
        v = self._unknown_cache.get(name)
        if v is None:
            v = self.spec.unknown(self, name, node) or EMPTY
            self._unknown_cache[name] = v
        return v

    def _lookup_path(self, path: str | None, env: Env, fr: _Frame) -> Value | None:
        if path is None:
            return None
        v = env.get(path)
        if v is not None:
            return v
        if path.startswith("self.") and fr.cls is not None:
            v = self._class_field(fr.cls, path)
            if v:
                return v
        if fr.fn is not None and _root(path) not in env:
            return self.globals.get(path)
        return None

    def _e_attribute(self, node: cst.Attribute, env: Env, fr: _Frame) -> Value:
        v = self._lookup_path(path_of(node), env, fr)
        if v is not None:
            return v
        base = self._eval(node.value, env, fr)
        r = self._field(base, node.attr.value, node)
        if not r:
            r = self._unknown(node.attr.value, node)
        return r

    def _field(self, base: Value, key: str, node: cst.CSTNode) -> Value:
        r = EMPTY
        if base.refs:
            for ref in sorted(base.refs):
                obj = self._heap[ref]
                for k in (key, "?"):
                    fe = obj.fields.get(k)
                    if fe is not None:
                        r = join(r, fe.value)
        if base:
            extra = self.spec.field(self, base, key, node)
            if extra:
                r = join(r, extra)
        return r

    def _e_subscript(self, node: cst.Subscript, env: Env, fr: _Frame) -> Value:
        v = self._lookup_path(path_of(node), env, fr)
        if v is not None:
            return v
        base = self._eval(node.value, env, fr)
        key = subscript_key(node)
        if key is not None:
            return self._field(base, key, node)
        idx = None
        for el in node.slice:
            self._eval_slice(el.slice, env, fr)
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            lit = literal_value(node.slice[0].slice.value)
            if isinstance(lit, int) and not isinstance(lit, bool):
                idx = lit
            elif isinstance(node.slice[0].slice.value, cst.UnaryOperation) and \
                    isinstance(node.slice[0].slice.value.operator, cst.Minus):
                inner = literal_value(node.slice[0].slice.value.expression)
                if isinstance(inner, int):
                    idx = -inner
        if idx is not None and base.elems is not None and -len(base.elems) <= idx < len(base.elems):
            return base.elems[idx]
        if base.refs and not base.t and base.elems is None:
            return join_all(fe.value for ref in sorted(base.refs) for fe in self._heap[ref].fields.values())
        return base.flat()

    def _eval_slice(self, s: cst.BaseSlice, env: Env, fr: _Frame) -> None:
        if isinstance(s, cst.Index):
            self._eval(s.value, env, fr)
        elif isinstance(s, cst.Slice):
            for part in (s.lower, s.upper, s.step):
                self._eval(part, env, fr)

    def _e_binop(self, node: cst.BinaryOperation, env: Env, fr: _Frame) -> Value:
        l = self._eval(node.left, env, fr)
        r = self._eval(node.right, env, fr)
        op = node.operator
        if isinstance(op, (cst.Add, cst.Multiply)):
            return join(l.keep(SEQ_KINDS, self.kind), r.keep(SEQ_KINDS, self.kind))
        if isinstance(op, cst.Modulo):
            if string_literal(node.left) is not None or isinstance(node.left, cst.FormattedString) or \
                    any(self.kind(x) == TEXT for x in l.labels()):
                return join(l.keep(STR_KINDS, self.kind), r.keep(STR_KINDS, self.kind))
        return EMPTY

    def _e_boolop(self, node: cst.BooleanOperation, env: Env, fr: _Frame) -> Value:
        return join(self._eval(node.left, env, fr), self._eval(node.right, env, fr))

    def _e_ifexp(self, node: cst.IfExp, env: Env, fr: _Frame) -> Value:
        self._eval(node.test, env, fr)
        return join(self._eval(node.body, env, fr), self._eval(node.orelse, env, fr))

    def _e_clean(self, node: cst.BaseExpression, env: Env, fr: _Frame) -> Value:
        for child in node.children:
            if isinstance(child, cst.BaseExpression):
                self._eval(child, env, fr)
            elif isinstance(child, cst.ComparisonTarget):
                self._eval(child.comparator, env, fr)
        return EMPTY

    def _e_literal(self, node: cst.BaseExpression, env: Env, fr: _Frame) -> Value:
        return EMPTY

    def _e_seq(self, node: cst.Tuple | cst.List, env: Env, fr: _Frame) -> Value:
        elems = []
        starred = EMPTY
        has_star = False
        for e in node.elements:
            v = self._eval(e.value, env, fr)
            if isinstance(e, cst.StarredElement):
                has_star = True
                starred = join(starred, v.flat())
            else:
                elems.append(v)
        if has_star:
            return join(join_all(x.flat() for x in elems), starred)
        return tuple_value(elems)

    def _e_set(self, node: cst.Set, env: Env, fr: _Frame) -> Value:
        return join_all(self._eval(e.value, env, fr).flat() for e in node.elements)

    def _alloc_obj(self, node: cst.CSTNode) -> int:
        ref = self._alloc.get(id(node))
        if ref is None:
            ref = len(self._heap) + 1
            self._alloc[id(node)] = ref
            self._heap[ref] = HeapObject(ref, node)
        return ref

    def _e_dict(self, node: cst.Dict, env: Env, fr: _Frame) -> Value:
        ref = self._alloc_obj(node)
        for el in node.elements:
            if isinstance(el, cst.DictElement):
                key = string_literal(el.key)
                if key is None:
                    self._eval(el.key, env, fr)
                v = self._eval(el.value, env, fr)
                line = self._at(el)
                k = key if key is not None else "?"
                note = f"put under `{k}` in a dict" if key is not None else "put in a dict"
                self._set_field(ref, k, v.with_step(line, note), el, line, _is_none(el.value))
            else:  # **other
                v = self._eval(el.value, env, fr)
                self._copy_fields(ref, v, el)
        return Value({}, None, frozenset({ref}))

    def _copy_fields(self, ref: int, v: Value, node: cst.CSTNode) -> None:
        for src in sorted(v.flat().refs):
            if src == ref:
                continue
            for k, fe in list(self._heap[src].fields.items()):
                self._set_field(ref, k, fe.value, fe.node, fe.at, fe.none)

    def _comp_env(self, node: Any, env: Env, fr: _Frame) -> Env:
        e = dict(env)
        line = self._at(node)
        f = node.for_in
        while f is not None:
            it = self._eval(f.iter, e, fr)
            self._assign(f.target, self._iter_elem(it), e, fr, line, "iterated into")
            for cond in f.ifs:
                self._eval(cond.test, e, fr)
            f = f.inner_for_in
        return e

    def _e_comp(self, node: cst.ListComp | cst.SetComp | cst.GeneratorExp, env: Env, fr: _Frame) -> Value:
        e = self._comp_env(node, env, fr)
        return self._eval(node.elt, e, fr).flat()

    def _e_dictcomp(self, node: cst.DictComp, env: Env, fr: _Frame) -> Value:
        ref = self._alloc_obj(node)
        e = self._comp_env(node, env, fr)
        key = self._eval(node.key, e, fr)
        v = self._eval(node.value, e, fr)
        line = self._at(node)
        self._set_field(ref, "?", join(key, v).with_step(line, "put in a dict"), node, line, False)
        return Value({}, None, frozenset({ref}))

    def _e_fstring(self, node: cst.FormattedString, env: Env, fr: _Frame) -> Value:
        out = EMPTY
        for part in node.parts:
            if isinstance(part, cst.FormattedStringExpression):
                out = join(out, self._eval(part.expression, env, fr).keep(STR_KINDS, self.kind))
                if part.format_spec:
                    for sub in part.format_spec:
                        if isinstance(sub, cst.FormattedStringExpression):
                            self._eval(sub.expression, env, fr)
        return out

    def _e_concat_str(self, node: cst.ConcatenatedString, env: Env, fr: _Frame) -> Value:
        return join(self._eval(node.left, env, fr), self._eval(node.right, env, fr))

    def _e_await(self, node: cst.Await, env: Env, fr: _Frame) -> Value:
        return self._eval(node.expression, env, fr)

    def _e_yield(self, node: cst.Yield, env: Env, fr: _Frame) -> Value:
        if isinstance(node.value, cst.From):
            v = self._iter_elem(self._eval(node.value.item, env, fr))
        else:
            v = self._eval(node.value, env, fr)
        self._return(node, v, fr)
        return EMPTY

    def _e_named(self, node: cst.NamedExpr, env: Env, fr: _Frame) -> Value:
        v = self._eval(node.value, env, fr)
        self._assign(node.target, v, env, fr, self._at(node), "assigned to")
        return v

    def _e_starred(self, node: cst.StarredElement, env: Env, fr: _Frame) -> Value:
        return self._eval(node.value, env, fr).flat()

    def _iter_elem(self, it: Value) -> Value:
        """What iterating over `it` yields: its elements (ids stay ids, dicts stay dicts)."""
        return it.flat()

    # ----- calls ---------------------------------------------------------------------------
    def _e_call(self, node: cst.Call, env: Env, fr: _Frame) -> Value:
        func = node.func
        receiver = None
        receiver_path = None
        if isinstance(func, cst.Attribute):
            receiver = self._eval(func.value, env, fr)
            receiver_path = path_of(func.value)
            fv = self._lookup_path(path_of(func), env, fr)
            if fv is None:
                fv = self._field(receiver, func.attr.value, func) if receiver else EMPTY
                if not fv:
                    fv = self._unknown(func.attr.value, func)
            func_value = fv
            name: str | None = func.attr.value
        else:
            func_value = self._eval(func, env, fr)
            name = func.value if isinstance(func, cst.Name) else None
        args = [Arg(a.keyword.value if a.keyword else None, a.star, self._eval(a.value, env, fr), a)
                for a in node.args]
        line = self._at(node)
        resolved = self._resolve(func, env, fr)
        if resolved is not None:
            result = self._invoke(resolved[0], resolved[1], args, node, line, env, fr)
        else:
            result = self._builtin(node, name, receiver, receiver_path, args, line, env, fr)
        site = CallSite(node, line, dotted(func), name, func_value, receiver, receiver_path, args,
                        resolved is not None, self)
        extra = self.spec.call(self, site)
        if extra:
            result = join(result, extra)
        return result

    def _builtin(self, node: cst.Call, name: str | None, receiver: Value | None, receiver_path: str | None,
                 args: list[Arg], line: "int | At", env: Env, fr: _Frame) -> Value:
        spec = self.spec
        func = node.func
        is_method = isinstance(func, cst.Attribute)
        if name is None:
            return EMPTY
        if is_method and name in spec.mutators:
            vals = [a.value for a in args if a.keyword is None]
            if name == "insert":
                vals = vals[1:]
            added = join_all(v.flat() for v in vals)
            self._mutate(func.value, node, receiver or EMPTY, added, env, fr, line)
            return EMPTY
        if is_method and name in ("update", "setdefault") and receiver is not None and receiver.refs:
            for ref in receiver.refs:
                if name == "update":
                    for a in args:
                        if a.keyword is None:
                            self._copy_fields(ref, a.value, node)
                        else:
                            at = self._at(a.node)
                            self._set_field(ref, a.keyword, a.value.with_step(at, f"put under `{a.keyword}`"),
                                            a.node, at, _is_none(a.node.value))
                else:
                    pos = [a for a in args if a.keyword is None]
                    key = string_literal(pos[0].node.value) if pos else None
                    if len(pos) > 1 and key is not None:
                        self._set_field(ref, key, pos[1].value, pos[1].node, line, _is_none(pos[1].node.value))
            if name == "setdefault":
                pos = [a for a in args if a.keyword is None]
                key = string_literal(pos[0].node.value) if pos else None
                return self._field(receiver, key, node) if key is not None else EMPTY
            return EMPTY
        if is_method and receiver:
            if name in spec.all_methods:
                return receiver
            if name in spec.seq_methods:
                return receiver.keep(SEQ_KINDS, self.kind)
            if name in ("get", "pop"):
                pos = [a for a in args if a.keyword is None]
                key = string_literal(pos[0].node.value) if pos else None
                if key is not None:
                    return self._field(receiver, key, node)
                return receiver.flat() if receiver.t else EMPTY
            if name in ("values", "items") and receiver.refs:
                return join_all(fe.value for ref in sorted(receiver.refs)
                                for fe in self._heap[ref].fields.values()).flat()
            if name in spec.str_methods:
                out = receiver.keep(STR_KINDS, self.kind)
                if name in ("format", "join", "format_map"):
                    out = join(out, join_all(a.value.keep(STR_KINDS, self.kind) for a in args))
                return out
        if is_method and name in ("format", "join", "format_map"):
            return join_all(a.value.keep(STR_KINDS, self.kind) for a in args)
        if is_method:
            # module-qualified wrappers: torch.tensor(...), np.array(...), copy.deepcopy(...)
            if not (isinstance(func.value, (cst.Name, cst.Attribute)) and not receiver):
                return EMPTY
        if name in spec.str_wrappers or (is_method and name in spec.str_functions):
            return join_all(a.value.keep(STR_KINDS, self.kind) for a in args if a.keyword is None)
        if name in spec.seq_wrappers or name in spec.all_wrappers:
            kinds = ALL_KINDS if name in spec.all_wrappers else SEQ_KINDS
            pos = [a for a in args if a.keyword is None]
            out = join_all(a.value.keep(kinds, self.kind) for a in pos)
            if name == "dict":
                ref = self._alloc_obj(node)
                for a in args:
                    if a.keyword is not None:
                        at = self._at(a.node)
                        self._set_field(ref, a.keyword, a.value.with_step(at, f"put under `{a.keyword}`"),
                                        a.node, at, _is_none(a.node.value))
                    else:
                        self._copy_fields(ref, a.value, a.node)
                out = join(out, Value({}, None, frozenset({ref})))
            elif name in ("copy", "deepcopy"):
                out = join(out, Value({}, None, join_all(a.value.flat() for a in pos).refs))
            if out and name not in ("dict", "copy", "deepcopy", "cast"):
                out = out.with_step(line, f"through `{name}(...)`")
            return out
        if name[:1].isupper() and any(a.keyword is not None and a.value for a in args):
            # a class not defined here (`Output(input_ids=ids, ...)`): its keyword fields can be read back
            ref = self._alloc_obj(node)
            for a in args:
                if a.keyword is not None:
                    at = self._at(a.node)
                    v = a.value.with_step(at, f"passed as `{a.keyword}=` to `{name}(...)`")
                    self._set_field(ref, a.keyword, v, a.node, at, _is_none(a.node.value))
            return Value({}, None, frozenset({ref}))
        return EMPTY

    def _bind(self, fn: Function, bound: bool, args: list[Arg]) -> dict[str, tuple[Value, cst.Arg | None]]:
        positional = list(fn.positional)
        if bound and fn.kind in ("method", "class") and positional:
            positional = positional[1:]
        binding: dict[str, tuple[Value, cst.Arg | None]] = {}
        i = 0
        for a in args:
            if a.keyword is None and a.star == "":
                if i < len(positional):
                    binding[positional[i]] = (a.value, a.node)
                    i += 1
                elif fn.star:
                    prev = binding.get(fn.star, (EMPTY, None))[0]
                    binding[fn.star] = (join(prev, a.value.flat()), None)
            elif a.star == "*":
                f = a.value.flat()
                for p in positional[i:]:
                    binding.setdefault(p, (f, None))
                if fn.star:
                    binding[fn.star] = (join(binding.get(fn.star, (EMPTY, None))[0], f), None)
                i = len(positional)
            elif a.star == "**":
                for p in positional[i:] + fn.kwonly:
                    if p not in binding:
                        v = self._field(a.value, p, a.node) if a.value.refs else EMPTY
                        if v:
                            binding[p] = (v, None)
            elif a.keyword in positional or a.keyword in fn.kwonly:
                binding[a.keyword] = (a.value, a.node)
            elif fn.starstar:
                prev = binding.get(fn.starstar, (EMPTY, None))[0]
                binding[fn.starstar] = (join(prev, a.value.flat()), None)
        return binding

    def _invoke(self, fn: Function, bound: bool, args: list[Arg], node: cst.Call, line: "int | At", env: Env,
                fr: _Frame) -> Value:
        binding = self._bind(fn, bound, args)
        values: dict[str, Value] = {}
        subs: dict[str, Value] = {}
        paths: dict[str, str] = {}
        for p, (v, anode) in binding.items():
            if v:
                values[p] = v.with_step(line, f"passed as `{p}` to `{fn.name}()`")
            apath = path_of(anode.value) if anode is not None else None
            if apath is None:
                continue
            paths[p] = apath
            for k, sv in env.items():
                if sv and len(k) > len(apath) and k.startswith(apath) and k[len(apath)] in ".[":
                    subs[p + k[len(apath):]] = sv.with_step(line, f"passed in `{apath}` to `{fn.name}()`")
            if apath.startswith("self.") and fr.cls is not None:
                for k, sv in self.class_fields.get(fr.cls, {}).items():
                    if sv and len(k) > len(apath) and k.startswith(apath) and k[len(apath)] in ".[":
                        subs.setdefault(p + k[len(apath):], sv)
        key = (fn.qualname, tuple(sorted((k, v.key()) for k, v in values.items())),
               tuple(sorted((k, v.key()) for k, v in subs.items())))
        summ = self._summary(fn, key, values, subs, fr.depth + 1)
        for p, eff in summ.effects.items():
            apath = paths.get(p)
            if apath is None:
                continue
            for rest, v in eff.items():
                path = apath + rest
                v = v.with_step(line, f"`{path}` set by `{fn.name}()`")
                _set(env, path, join(env.get(path, EMPTY), v))
                self._remember(path, v, fr)
        return summ.ret


_EVAL: dict[type, Callable[[Flow, Any, Env, _Frame], Value]] = {
    cst.Name: Flow._e_name,
    cst.Attribute: Flow._e_attribute,
    cst.Subscript: Flow._e_subscript,
    cst.Call: Flow._e_call,
    cst.BinaryOperation: Flow._e_binop,
    cst.BooleanOperation: Flow._e_boolop,
    cst.IfExp: Flow._e_ifexp,
    cst.Comparison: Flow._e_clean,
    cst.UnaryOperation: Flow._e_clean,
    cst.Tuple: Flow._e_seq,
    cst.List: Flow._e_seq,
    cst.Set: Flow._e_set,
    cst.Dict: Flow._e_dict,
    cst.ListComp: Flow._e_comp,
    cst.SetComp: Flow._e_comp,
    cst.GeneratorExp: Flow._e_comp,
    cst.DictComp: Flow._e_dictcomp,
    cst.FormattedString: Flow._e_fstring,
    cst.ConcatenatedString: Flow._e_concat_str,
    cst.SimpleString: Flow._e_literal,
    cst.Integer: Flow._e_literal,
    cst.Float: Flow._e_literal,
    cst.Imaginary: Flow._e_literal,
    cst.Ellipsis: Flow._e_literal,
    cst.Lambda: Flow._e_literal,
    cst.Await: Flow._e_await,
    cst.Yield: Flow._e_yield,
    cst.NamedExpr: Flow._e_named,
    cst.StarredElement: Flow._e_starred,
}


# --------------------------------------------------------------------------
# small CST helpers


def _body(body: Any) -> list[cst.CSTNode]:
    """The statements of a block (IndentedBlock, SimpleStatementSuite, Module body, list)."""
    if isinstance(body, (list, tuple)):
        return list(body)
    if isinstance(body, cst.IndentedBlock):
        return list(body.body)
    if isinstance(body, cst.SimpleStatementSuite):
        return [body]
    return []


def _sub_blocks(stmt: cst.CSTNode) -> list[list[cst.CSTNode]]:
    """The statement lists nested in a compound statement (not function/class bodies)."""
    out: list[list[cst.CSTNode]] = []
    for attr in ("body", "orelse", "finalbody"):
        b = getattr(stmt, attr, None)
        if b is None or isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            continue
        if isinstance(b, cst.If):
            out.append([b])
        elif isinstance(b, (cst.Else, cst.Finally)):
            out.append(_body(b.body))
        else:
            out.append(_body(b))
    for h in getattr(stmt, "handlers", ()) or ():
        out.append(_body(h.body))
    for c in getattr(stmt, "cases", ()) or ():
        out.append(_body(c.body))
    return out


def _replace(env: Env, new: Env) -> None:
    if new is not env:
        env.clear()
        env.update(new)


def _set(env: Env, path: str, v: Value) -> None:
    """Strong update of `path`; what was known below it (`path.x`, `path["k"]`) is forgotten."""
    n = len(path)
    for k in [k for k in env if len(k) > n and k.startswith(path) and k[n] in ".["]:
        del env[k]
    env[path] = v


def _last(path: str) -> str:
    if path.endswith('"]'):
        return path[path.rfind('["') + 2:-2]
    return path.rsplit(".", 1)[-1]


def _target_paths(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, (cst.Tuple, cst.List)):
        return [p for e in target.elements for p in _target_paths(e.value)]
    p = path_of(target)
    return [p] if p else []


def _is_none(node: cst.CSTNode | None) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def analyse(module: cst.Module, spec: FlowSpec, position: Callable[[cst.CSTNode], Any]) -> list[Hit]:
    """Run `spec` over `module`; the hits, one per (sink, source), subsumed ones dropped."""
    return Flow(module, spec, position).run()
