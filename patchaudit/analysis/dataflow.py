"""Intra-module dataflow over the standard library's `ast`: follow values from sources to sinks, with traces.

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
locals, then module globals, then the spec's `unknown` hook.  The layer reads
the standard library's `ast` (about 12x faster to parse than libcst) and does
its own scoping, which is enough for the flows it follows; positions are `ast`'s,
mapped to libcst's character columns (flow_nodes.Positions) only for the nodes a
finding or a source's identity asks about.

The interpreter is `Flow` (the state, `FlowState`, and this module's driver: the
fixed point) and one module of plain functions per part of the language, which call
each other directly or through the state's two dispatchers (`FlowState.eval` for
an expression, `FlowState.block` for a block); this module is the layer's public
face: the rules import every name from here.

- flow_nodes.py: `Positions` (libcst's character columns from `ast`'s byte
  offsets, computed only for what is reported), `ArgNode`/`Element` (a call's
  argument, a dict entry: nodes `ast` does not have);
- flow_values.py: the abstract values (taints, traces, environments), the
  name patterns (`matches`, `path_matches`) and the budgets;
- flow_structure.py: the module's functions, their summaries, access paths and
  other `ast` readers;
- flow_api.py: what a rule sees (`FlowSpec`, the call/store/return sites, the
  hits) and `FlowState`, the state the hooks get, with the heap;
- flow_statements.py: statements and control flow;
- flow_stores.py: assignments, stores, mutations and returns;
- flow_expressions.py: expressions and calls;
- flow_summaries.py: structure, callee resolution, per-context summaries;
- flow_builtins.py: the library models for calls the module does not define.
"""

from __future__ import annotations

import ast

from patchaudit.analysis.flow_api import (
    Arg,
    CallSite,
    FieldEntry,
    FlowSpec,
    FlowState,
    HeapObject,
    Hit,
    ReturnSite,
    StoreSite,
)
from patchaudit.analysis.flow_expressions import EVAL
from patchaudit.analysis.flow_nodes import ArgNode, Element, Positions
from patchaudit.analysis.flow_statements import execute
from patchaudit.analysis.flow_structure import (
    EMPTY_SUMMARY,
    MISSING,
    UNKNOWN,
    Frame,
    Function,
    Summary,
    exclusive,
    literal_value,
    path_of,
    receiver_name,
    subscript_key,
)
from patchaudit.analysis.flow_summaries import collect, export, seeds, summary
from patchaudit.analysis.flow_values import (
    ALL_KINDS,
    EMPTY,
    IDS,
    MAX_CALL_DEPTH,
    MAX_DEFERRED,
    MAX_PASSES,
    MAX_STEPS,
    OBJECT,
    SEQ_KINDS,
    SNIPPET,
    STR_KINDS,
    TEXT,
    At,
    Env,
    Step,
    Value,
    add_step,
    env_key,
    first_each,
    join,
    join_all,
    join_env,
    matches,
    path_matches,
    settle,
    tuple_value,
)
from patchaudit.analysis.repo_summaries import (
    ModuleSummary,
    ModuleView,
    RepoView,
    file_steps,
    repo_view,
    run_repo,
)

__all__ = [
    "ALL_KINDS",
    "EMPTY",
    "EMPTY_SUMMARY",
    "IDS",
    "MAX_CALL_DEPTH",
    "MAX_DEFERRED",
    "MAX_PASSES",
    "MAX_STEPS",
    "MISSING",
    "OBJECT",
    "SEQ_KINDS",
    "SNIPPET",
    "STR_KINDS",
    "TEXT",
    "UNKNOWN",
    "Arg",
    "ArgNode",
    "Element",
    "Positions",
    "At",
    "CallSite",
    "Env",
    "FieldEntry",
    "Flow",
    "FlowSpec",
    "FlowState",
    "Function",
    "HeapObject",
    "Hit",
    "ModuleSummary",
    "ModuleView",
    "ReturnSite",
    "Step",
    "StoreSite",
    "Summary",
    "Value",
    "add_step",
    "settle",
    "analyse",
    "file_steps",
    "repo_view",
    "run_repo",
    "RepoView",
    "summarise",
    "env_key",
    "first_each",
    "exclusive",
    "join",
    "join_all",
    "join_env",
    "literal_value",
    "matches",
    "path_matches",
    "path_of",
    "receiver_name",
    "subscript_key",
    "tuple_value",
]


# --------------------------------------------------------------------------
# the interpreter


class Flow(FlowState):
    """Runs one `FlowSpec` over one module; `positions` (flow_nodes.Positions) gives the
    character columns libcst would report."""

    def __init__(
        self,
        module: ast.Module,
        spec: FlowSpec,
        positions: Positions,
        repo: ModuleView | None = None,
        summary_mode: bool = False,
    ):
        super().__init__(module, spec, positions, repo, summary_mode)
        self.evaluators = EVAL
        self.execute = execute

    # ----- driver ----------------------------------------------------------------
    def run(self) -> list[Hit]:
        collect(self, self.module.body, None, None, "")
        for _ in range(MAX_PASSES):
            self.passes += 1
            self._changed = False
            self._pass_memo = {}
            fr = Frame(None, 0)
            env: Env = {}
            self.block(self.module.body, env, fr)
            if env_key(env) != env_key(self.globals):
                self._changed = True
            self.globals = env
            for fn in self.functions:
                if self.summary_mode and fn.parent is None and (self.seed is None or fn.qualname in self.seed):
                    self._tainted = True
                    summary(self, fn, (fn.qualname, "seeded"), seeds(self, fn), {}, 1)
                else:
                    summary(self, fn, (fn.qualname, (), ()), {}, {}, 1)
            budget = MAX_DEFERRED
            while self._deferred and budget > 0:
                key, (fn, args, subs) = next(iter(self._deferred.items()))
                del self._deferred[key]
                budget -= 1
                if key not in self._pass_memo:
                    summary(self, fn, key, args, subs, 1)
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
        kept.sort(key=lambda h: self.start(h.node))
        return kept


def analyse(module: ast.Module, spec: FlowSpec, positions: Positions, repo: ModuleView | None = None) -> list[Hit]:
    """Run `spec` over `module`; the hits, one per (sink, source), subsumed ones dropped.
    With `repo` (the rest of the repository, patchaudit/analysis/repo_summaries.py),
    calls of other modules' functions and reads of carrier fields use their summaries."""
    return Flow(module, spec, positions, repo).run()


def summarise(
    module: ast.Module,
    spec: FlowSpec,
    positions: Positions,
    path: str,
    repo: ModuleView | None = None,
    seed: set[str] | None = None,
) -> tuple[ModuleSummary, list[Hit]]:
    """Run `spec` over `module` in summary mode: what it exports to the other modules, and
    its hits (the flows from its own sources and from what `repo` shows: the findings of
    the module when `repo` is final).  `seed`: the functions whose parameters are followed
    (None: all)."""
    flow = Flow(module, spec, positions, repo, summary_mode=True)
    flow.seed = seed
    hits = flow.run()
    return export(flow, path), hits
