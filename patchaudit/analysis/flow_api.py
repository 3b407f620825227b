"""What a rule sees of the dataflow layer: the sites its hooks get, `FlowSpec`, `FlowState`.

Part of the interpreter of patchaudit/analysis/dataflow.py.  A rule subclasses
`FlowSpec` and overrides its hooks; the hooks get the running interpreter (a
`FlowState`: `patchaudit.analysis.dataflow.Flow` is one) to create taints
(`flow.source`, `flow.marker`, `flow.derive`), to read the heap (`flow.deep`,
`flow.objects`) and to report (`flow.report`), and one site per event: a call
(`CallSite`), a store (`StoreSite`), a return (`ReturnSite`).

`FlowState` also holds the interpreter's state and the heap (dicts built in the
module), and dispatches expressions (`eval`) and statements (`block`) to the
parts of the interpreter, plain functions of one module each that take the state:
flow_expressions.py (its `EVAL` table), flow_statements.py (`execute`),
flow_stores.py, flow_summaries.py and flow_builtins.py; `Flow` (dataflow.py)
gives the state its expression and statement interpreters and runs the module.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, cast

from patchaudit.analysis.flow_nodes import ArgNode, NodeCache, Positions
from patchaudit.analysis.flow_structure import MISSING, Frame, Function, Summary, block_body, literal_value
from patchaudit.analysis.flow_values import (
    EMPTY,
    IDS,
    SNIPPET,
    At,
    Env,
    Origin,
    Step,
    Value,
    add_step,
    join,
    join_all,
    line_of,
    settle,
)
from patchaudit.analysis.repo_summaries import ModuleView, is_symbolic

# --------------------------------------------------------------------------
# what rules see


@dataclass
class Arg:
    keyword: str | None
    star: str  # "", "*" or "**"
    value: Value
    node: ArgNode


@dataclass
class CallSite:
    node: ast.Call
    at: Any  # the call's line (lazy: use `.line`)
    callee: str | None  # dotted callee: "AutoProcessor.from_pretrained", "self.processor"
    name: str | None  # last name of the callee: "from_pretrained", "processor"
    func: Value  # the callee's own value (e.g. a processor object)
    receiver: Value | None  # the object a method is called on
    receiver_path: str | None  # its dotted path, when it has one
    args: list[Arg]
    resolved: bool  # a function of this module (its body was analysed)
    flow: "FlowState"
    #: the function the call is made in (None at module level)
    scope: Any = None  # ast.FunctionDef or AsyncFunctionDef

    @property
    def line(self) -> int:
        return line_of(self.at)

    def keyword(self, name: str | None) -> Arg | None:
        for a in self.args:
            if a.keyword == name:
                return a
        return None

    def positional(self) -> list[Arg]:
        return [a for a in self.args if a.keyword is None and a.star == ""]

    def has_star(self) -> bool:
        return any(a.star for a in self.args)

    def literal(self, name: str | None) -> Any:
        """The constant value of keyword `name` (True/False/None/int/str), or `MISSING`."""
        a = self.keyword(name)
        if a is None:
            return MISSING
        return literal_value(a.node.value)

    def all_values(self) -> Value:
        return join_all(a.value for a in self.args)

    def snippet(self, width: int = SNIPPET) -> str:
        return self.flow.snippet(self.node, width)


@dataclass
class StoreSite:
    node: Any  # the target (`sample.tokens`, `d["k"]`) or the mutating call
    at: Any
    path: str | None  # `sample.tokens`, `batch["input_ids"]`
    attr: str | None  # last attribute or string key
    kind: str  # "attr", "item" or "mutate" (append/extend/+=)
    value: Value  # what is stored or added (trace ends with the store)
    local_object: bool  # the container is a dict built in this module

    @property
    def line(self) -> int:
        return line_of(self.at)


@dataclass
class ReturnSite:
    node: Any
    at: Any
    function: str
    value: Value

    @property
    def line(self) -> int:
        return line_of(self.at)


@dataclass
class FieldEntry:
    value: Value
    node: Any
    at: Any
    none: bool  # every value stored under this key is the literal None
    #: the branch paths (FlowState.branch) under which the key was set
    branches: frozenset = frozenset()

    @property
    def line(self) -> int:
        return line_of(self.at)


@dataclass
class HeapObject:
    """A dict built in the module (literal, `dict(...)`, comprehension) and its keys."""

    id: int
    node: Any
    fields: dict[str, FieldEntry] = field(default_factory=dict)


@dataclass
class Hit:
    node: Any
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
    seq_wrappers: frozenset[str] = frozenset(
        {
            "list",
            "tuple",
            "tensor",
            "as_tensor",
            "LongTensor",
            "IntTensor",
            "Tensor",
            "array",
            "asarray",
            "cat",
            "concat",
            "concatenate",
            "chain",
            "sorted",
            "reversed",
            "enumerate",
            "zip",
            "stack",
            "hstack",
        }
    )
    #: callees whose result carries every argument label (objects too)
    all_wrappers: frozenset[str] = frozenset({"copy", "deepcopy", "dict", "cast"})
    #: callees whose result carries only text
    str_wrappers: frozenset[str] = frozenset({"str", "repr"})
    #: methods returning their receiver's value, any kind
    all_methods: frozenset[str] = frozenset({"to", "cpu", "cuda", "copy", "clone", "detach", "contiguous"})
    #: methods returning the receiver's ids/text
    seq_methods: frozenset[str] = frozenset(
        {
            "tolist",
            "long",
            "int",
            "numpy",
            "squeeze",
            "unsqueeze",
            "flatten",
            "view",
            "reshape",
            "ravel",
            "astype",
            "expand",
            "repeat",
            "flip",
        }
    )
    #: string methods returning (parts of) the receiver's text
    str_methods: frozenset[str] = frozenset(
        {
            "strip",
            "lstrip",
            "rstrip",
            "replace",
            "lower",
            "upper",
            "split",
            "rsplit",
            "splitlines",
            "title",
            "capitalize",
            "casefold",
            "removeprefix",
            "removesuffix",
            "partition",
            "rpartition",
            "center",
            "ljust",
            "rjust",
            "zfill",
            "expandtabs",
            "translate",
            "format",
            "join",
            "format_map",
        }
    )
    #: module functions whose result carries their arguments' text (`re.sub(p, r, text)`)
    str_functions: frozenset[str] = frozenset(
        {"sub", "split", "findall", "dedent", "indent", "normalize", "unescape", "escape", "fill", "wrap"}
    )
    #: methods that add their arguments to the receiver
    mutators: frozenset[str] = frozenset({"append", "extend", "insert", "add", "appendleft", "extendleft"})
    #: fields (attribute names or patterns) whose stores every module of the repository sees:
    #: `sample.tokens = ids` here, `post({"input_ids": s.tokens})` elsewhere
    #: (patchaudit/analysis/repo_summaries.py); flow-insensitive
    carriers: tuple[str, ...] = ()
    #: the labels the spec's sinks report: in summary mode every parameter is seeded with a
    #: symbolic taint of each, so the module's summaries say which parameters reach a sink
    summary_labels: frozenset[str] = frozenset()

    def kind(self, label: str) -> str:
        return self.kinds.get(label, IDS)

    def param(self, flow: "FlowState", function: str, name: str, annotation: Any | None, node: Any) -> Value | None:
        """A parameter's own value (e.g. a processor by name or annotation)."""
        return None

    def unknown(self, flow: "FlowState", name: str, node: Any) -> Value | None:
        """The value of a name or attribute the analysis knows nothing about."""
        return None

    def call(self, flow: "FlowState", site: CallSite) -> Value | None:
        """Sources, transforms and call sinks: the extra value of a call's result."""
        return None

    def clean(self, flow: "FlowState", site: CallSite) -> bool:
        """A sanitizer: the call's result carries none of its arguments' taints (a
        collapse of repeated pad tokens, a check that fails loudly on drift)."""
        return False

    def field(self, flow: "FlowState", base: Value, key: str, node: Any) -> Value | None:
        """`base.key`, `base["key"]`, `base.get("key")`: label transforms."""
        return None

    def store(self, flow: "FlowState", site: StoreSite) -> None:
        """An attribute/item store or a mutation (append/extend/+=)."""

    def ret(self, flow: "FlowState", site: ReturnSite) -> None:
        """A `return` (or `yield`) inside a function."""

    def finish(self, flow: "FlowState") -> None:
        """After the fixed point: sinks over the heap (`flow.objects()`)."""


# --------------------------------------------------------------------------
# the interpreter's state


class FlowState:
    """The state of one run of a `FlowSpec` over one module, what the spec's hooks may
    call on it, and the heap.  `positions` (flow_nodes.Positions) gives a node's
    libcst columns."""

    def __init__(
        self,
        module: ast.Module,
        spec: FlowSpec,
        positions: Positions,
        repo: "ModuleView | None" = None,
        summary_mode: bool = False,
    ):
        self.module = module
        #: the rest of the repository, as this module sees it (None: this module alone)
        self.repo = repo
        #: seed parameters with symbolic taints and record summaries (repo_summaries.py)
        self.summary_mode = summary_mode
        #: summary mode: the functions whose parameters are seeded (None: every function)
        self.seed: set[str] | None = None
        #: function qualname -> parameter -> (label, message, steps, severity) of a sink it reaches
        self.param_sinks: dict[str, dict[str, list[tuple[str, str, tuple[Step, ...], Any]]]] = {}
        #: carrier field -> the taints stored into it in this module
        self.carrier_stores: dict[str, Value] = {}
        #: the arms of the `if` statements around the statement being analysed, in the
        #: function being analysed: ((id of the If node, arm), ...)
        self.branch: tuple[tuple[int, int], ...] = ()
        self._consts: dict[int, Any] = {}
        self.spec = spec
        self.positions = positions
        self.nodes = NodeCache(positions)
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
        #: the interpreters of the language's parts, given by `Flow` (patchaudit/analysis/dataflow.py):
        #: an evaluator per expression type, and the statement interpreter
        self.evaluators: dict[type, Evaluator] = {}
        self.execute: Executor = _no_statements

    # ----- helpers for specs ----------------------------------------------------
    def line(self, node: Any) -> int:
        return node.lineno

    def start(self, node: Any) -> tuple[int, int]:
        return self.positions.start(node)

    def _at(self, node: Any) -> At:
        return At(self, node)

    def snippet(self, node: Any, width: int = SNIPPET) -> str:
        code = " ".join(self.positions.segment(node).split())
        return code if len(code) <= width else code[: width - 3] + "..."

    def kind(self, label: str) -> str:
        return self.spec.kind(label)

    def source(self, label: str, node: Any, note: str, origin: Any = None) -> Value:
        """A fresh taint at `node`."""
        self._tainted = True
        if origin is None:
            origin = Origin(self, node)
        return Value({(label, origin): (cast(Step, (At(self, node), note)),)})

    def marker(self, label: str, origin: Any, follow: bool = False) -> Value:
        """A taint without a trace, for identity labels (a processor object) that are never
        reported themselves: it costs no position lookup and does not make the module "tainted"
        (a module with markers only is analysed once, not to a fixed point).  `follow=True`:
        the module is analysed to its fixed point as for a traced taint (a spec that follows
        labels first and traces only the modules where they meet: PA106)."""
        if follow:
            self._tainted = True
        return Value({(label, origin): ()})

    def derive(self, value: Value, from_labels: Iterable[str], to_label: str, node: Any, note: str) -> Value:
        """Taints of `from_labels` in `value` turned into `to_label` (same origin, one more step)."""
        want = set(from_labels)
        line = self._at(node)
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

    def reachable(self, value: Value) -> list[HeapObject]:
        """The dicts `value` references, and those their fields reference, recursively."""
        out: list[HeapObject] = []
        todo = sorted(value.flat().refs)
        seen: set[int] = set()
        while todo and len(out) < 64:
            ref = todo.pop()
            if ref in seen:
                continue
            seen.add(ref)
            obj = self._heap[ref]
            out.append(obj)
            for fe in obj.fields.values():
                todo.extend(fe.value.flat().refs)
        return out

    def report(
        self, node: Any, message: str, steps: tuple[Step, ...], origin: Any, note: str, severity: Any = None
    ) -> None:
        line = self.line(node)
        if is_symbolic(origin):  # a parameter reaches a sink: a summary, not a finding
            if self.summary_mode:
                sinks = self.param_sinks.setdefault(origin[1], {}).setdefault(origin[2], [])
                entry = (origin[3], message, settle(add_step(tuple(steps), line, note)), severity)
                if all(e[1] != message or e[2][-1][0] != line for e in sinks) and len(sinks) < 4:
                    sinks.append(entry)
            return
        key = (*self.start(node), origin)
        if key in self._hits:
            return
        self._hits[key] = Hit(node, line, message, settle(add_step(tuple(steps), line, note)), origin, severity)

    def carrier_store(self, name: str, value: Value) -> None:
        """`value` is stored into carrier field `name` (any object's): other modules, and
        this one's other functions, read it there (FlowSpec.carriers)."""
        concrete = Value({k: s for k, s in value.flat().t.items() if not is_symbolic(k[1]) and s})
        if not concrete:
            return
        cur = self.carrier_stores.get(name, EMPTY)
        new = join(cur, concrete)
        if new.key() != cur.key():
            self.carrier_stores[name] = new
            self._changed = True

    def carrier_load(self, name: str) -> Value:
        """What a read of carrier field `name` sees: the stores of this module and of the
        repository's other modules."""
        v = self.carrier_stores.get(name, EMPTY)
        if self.repo is not None:
            v = join(v, self.repo.carrier(name))
        return v

    # ----- the heap: dicts built in the module ------------------------------------------
    def _field(self, base: Value, key: str, node: Any) -> Value:
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

    def _alloc_obj(self, node: Any) -> int:
        ref = self._alloc.get(id(node))
        if ref is None:
            ref = len(self._heap) + 1
            self._alloc[id(node)] = ref
            self._heap[ref] = HeapObject(ref, node)
        return ref

    def _set_field(
        self, ref: int, key: str, v: Value, node: Any, line: "int | At", none: bool, branch: tuple | None = None
    ) -> None:
        if branch is None:
            branch = self.branch
        obj = self._heap[ref]
        fe = obj.fields.get(key)
        if fe is None:
            obj.fields[key] = FieldEntry(v, node, line, none, frozenset({branch}))
            if v:
                self._changed = True
            return
        new = join(fe.value, v)
        if new.key() != fe.value.key():
            self._changed = True
        fe.value = new
        fe.none = fe.none and none
        if branch not in fe.branches:
            fe.branches = fe.branches | {branch}

    def _copy_fields(self, ref: int, v: Value, node: Any) -> None:
        for src in sorted(v.flat().refs):
            if src == ref:
                continue
            for k, fe in list(self._heap[src].fields.items()):
                for b in fe.branches or {()}:
                    self._set_field(ref, k, fe.value, fe.node, fe.at, fe.none, b)

    # ----- the language: expressions and statements, by node type ------------------------
    def eval(self, node: ast.expr | None, env: Env, fr: Frame) -> Value:
        """The value of expression `node` (by its evaluator, `evaluators`); an expression
        without one is analysed for the effects of its parts and gives a clean value."""
        if node is None:
            return EMPTY
        meth = self.evaluators.get(type(node))
        if meth is not None:
            return meth(self, node, env, fr)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.eval(child, env, fr)
        return EMPTY

    def block(self, body: Any, env: Env, fr: Frame) -> Env:
        """Run the statements of `body` (a list of them, or a Module) on `env`, in place."""
        for stmt in block_body(body):
            self.execute(self, stmt, env, fr)
        return env


#: an expression's evaluator (patchaudit/analysis/flow_expressions.py)
Evaluator = Callable[[FlowState, Any, Env, Frame], Value]
#: a statement's interpreter (patchaudit/analysis/flow_statements.py)
Executor = Callable[[FlowState, Any, Env, Frame], None]


def _no_statements(flow: FlowState, stmt: Any, env: Env, fr: Frame) -> None:
    """The statement interpreter of a state that has none (`Flow` gives flow_statements.execute)."""
