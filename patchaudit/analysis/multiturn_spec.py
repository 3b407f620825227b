"""PA106's flow specification: a multi-turn rollout that resends the conversation as text.

The rule (rules/pa106_conversation_resent_as_text.py) runs `ResendSpec` over a module with the
dataflow layer (patchaudit/analysis/dataflow.py).  It follows the engine's output text
(`output["text"]`, `choices[0].message.content`, read from what an engine call returned, as
PA103 does: patchaudit/analysis/retokenize_spec.py) into the *text* of a later request to the
same call (a `text`/`prompt`/`messages` key or keyword, a prompt rendered with
`apply_chat_template(..., tokenize=False)`): the conversation is sent again as text, and the
engine tokenizes it anew each turn.  Beside it, it records where ids are *accumulated* (`+=`,
`.extend()`, an append helper) from the engine's sampled ids (`output_token_logprobs`,
`output_ids`) or from separately tokenized pieces (`tokenizer(obs)["input_ids"]`), where such
ids are kept as the rollout's trained ids (`sample.tokens`, `response_ids=`), and where the
engine's own prompt ids are read back (`prompt_token_ids`: a trajectory that can compare).
`resends()` pairs them with the module's layout (patchaudit/analysis/turn_syntax.py): facts,
not findings; the rule reports.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from patchaudit.analysis.dataflow import (
    EMPTY,
    IDS,
    MISSING,
    OBJECT,
    TEXT,
    CallSite,
    FlowSpec,
    Step,
    StoreSite,
    Value,
    add_step,
    join,
    matches,
    path_matches,
    receiver_name,
    settle,
)
from patchaudit.analysis.retokenize_spec import DEFAULTS as RETOKENIZE_DEFAULTS
from patchaudit.analysis.turn_syntax import Flag, Layout, layout
from patchaudit.inputs import pyast

RESPONSE = "turn-response"  # what an engine call returned (a marker: origin ("response", id(call)))
OUTPUT_TEXT = "turn-output-text"  # its output text (origin ("text", id(call), line, column))
ENGINE_IDS = "turn-engine-ids"  # the ids it sampled
ENGINE_PROMPT = "turn-engine-prompt-ids"  # the prompt ids it ran on, read back
TOKENIZED = "turn-tokenized"  # a tokenizer's output for a piece of text
PIECE_IDS = "turn-piece-ids"  # ids of a separately tokenized piece of text

ASSEMBLED = (ENGINE_IDS, PIECE_IDS)

_SHARED = (
    "response-calls",
    "output-text-fields",
    "tokenizer-names",
    "processor-names",
    "encode-methods",
    "ids-fields",
    "rollout-fields",
    "append-calls",
)

DEFAULTS: dict[str, list[str]] = {
    **{k: list(RETOKENIZE_DEFAULTS[k]) for k in _SHARED},
    # parts of a response that hold other parts (SGLang's `meta_info` holds the sampled ids)
    "response-parts": [*RETOKENIZE_DEFAULTS["response-parts"], "meta_info"],
    # fields of a response holding the ids the engine sampled
    "engine-ids-fields": [
        "output_ids",
        "output_token_ids",
        "output_token_logprobs",
        "token_ids",
        "response_ids",
        "completion_ids",
        "completion_token_ids",
    ],
    # fields of a response holding the prompt ids the engine ran on (a trajectory that reads them can compare)
    "engine-prompt-fields": ["prompt_token_ids", "prompt_ids"],
    # keys and keywords of a request that carry its text
    "text-keys": ["text", "prompt", "prompts", "messages", "input"],
    # helpers given a tokenizer and text that return the text's ids (`get_token_delta(tokenizer, messages)`)
    "piece-calls": ["*token*", "*encode*"],
    # objects whose fields are configuration flags (`args.x`, `self.cfg.x`, `CONFIGS["x"]`)
    "config-names": ["args", "self", "cfg", "config", "*_cfg", "*_config", "*_args", "*CONFIG*", "*_CONFIGS"],
}


@dataclass(frozen=True)
class Resend:
    """The engine's output text sent again as the text of a request to the same call."""

    call_line: int  # the engine call
    report_line: int  # where the rule reports: the send inside the turn loop
    key: str  # the request's text key or keyword
    steps: tuple[Step, ...]  # from the output text read to the send
    accumulated: int  # a line of the loop accumulating the trained ids
    pieces: frozenset[str]  # what the loop accumulates: ENGINE_IDS, PIECE_IDS
    trained: int  # where assembled ids are kept as the rollout's ids
    trained_note: str
    flag: Flag | None  # the configuration flag that turns the resend on


class ResendSpec(FlowSpec):
    """PA106's sources and records for the dataflow layer (see the module docstring)."""

    kinds = {
        RESPONSE: IDS,
        OUTPUT_TEXT: TEXT,
        ENGINE_IDS: IDS,
        ENGINE_PROMPT: IDS,
        TOKENIZED: OBJECT,
        PIECE_IDS: IDS,
    }

    def __init__(self, opts: dict[str, Any], traced: bool = False):
        self.o = opts
        #: the first run follows labels only (markers: no trace, no position computed for a module
        #: that has no resend); a second, traced run gives the trace of a module that has one
        self.traced = traced
        self._calls: dict[int, str] = {}  # id(engine call) -> its snippet
        self.text_reads: dict[int, Any] = {}  # id(output-text read) -> the node
        #: (id(call), origin) -> (call node, key, steps)
        self.sent: dict[tuple[int, Any], tuple[Any, str, tuple[Step, ...]]] = {}
        self.accumulations: dict[int, tuple[Any, set[str]]] = {}  # what the ids grow by, where
        self.trained: dict[int, tuple[Any, str]] = {}  # where assembled ids are kept
        self.prompt_reads: dict[int, Any] = {}  # reads of the engine's prompt ids

    def line(self, node: Any) -> int:
        return node.lineno

    # ----- sources ----------------------------------------------------------------------
    def _engine_call(self, site: CallSite) -> bool:
        pats = self.o["response-calls"]
        return matches(site.name, pats) or matches(site.callee, pats)

    def _tokenizer(self, name: str | None) -> bool:
        return matches(name, self.o["tokenizer-names"])

    def call(self, flow, site: CallSite):
        if site.resolved:
            self._append_helper(flow, site)
            return None
        name = site.name
        out = None
        if self._engine_call(site):
            self._sends(flow, site)
            self._calls[id(site.node)] = site.snippet(40)
            out = flow.marker(RESPONSE, ("response", id(site.node)))
        elif name == "json" and site.receiver is not None and site.receiver.has(RESPONSE):
            out = _only(site.receiver, RESPONSE)
        elif name == "apply_chat_template":
            out = self._chat_template(flow, site)
        elif name in self.o["encode-methods"] and self._tokenizer(receiver_name(site.node)):
            out = flow.marker(PIECE_IDS, ("piece", id(site.node)))
        elif matches(name, self.o["tokenizer-names"]) and site.positional():
            out = flow.marker(TOKENIZED, ("piece", id(site.node)))
        elif matches(name, self.o["piece-calls"]) and any(self._tokenizer(_arg_name(a.node.value)) for a in site.args):
            if any(flow.deep(a.value) for a in site.args):
                out = flow.marker(PIECE_IDS, ("piece", id(site.node)))
        self._append_helper(flow, site)
        self._kept_as_keyword(flow, site)
        return out

    def _chat_template(self, flow, site: CallSite) -> Value | None:
        """`apply_chat_template(messages, tokenize=False)` renders the messages' text again;
        with `tokenize=True` (a tokenizer's default) it gives the ids of the whole rendering."""
        tokenize = site.literal("tokenize")
        processor = matches(receiver_name(site.node), self.o["processor-names"])
        if tokenize is False or (tokenize is MISSING and processor):
            text = EMPTY
            for a in site.args:
                text = join(text, flow.deep(a.value))
            if not self.traced:
                return _only(text, OUTPUT_TEXT)
            note = f"the conversation rendered again as text `{site.snippet()}`"
            return flow.derive(text, [OUTPUT_TEXT], OUTPUT_TEXT, site.node, note)
        return None

    def field(self, flow, base, key, node):
        out = None
        if base.has(TOKENIZED) and key in self.o["ids-fields"]:
            out = Value({(PIECE_IDS, o): () for (label, o) in base.flat().t if label == TOKENIZED})
        if not base.has(RESPONSE):
            return out
        for _, origin, _ in base.find(RESPONSE)[:1]:
            call = origin[1] if isinstance(origin, tuple) else None
            if key in self.o["output-text-fields"]:
                self.text_reads[id(node)] = node
                src = ("text", call, id(node))
                if self.traced:
                    shown = self._calls.get(call, "an engine call") if call is not None else "an engine call"
                    note = f"the engine's output text: `{key}` of the response of `{shown}`"
                    out = join(out or EMPTY, flow.source(OUTPUT_TEXT, node, note, src))
                else:
                    out = join(out or EMPTY, flow.marker(OUTPUT_TEXT, src, follow=True))
            elif key in self.o["engine-ids-fields"]:
                out = join(out or EMPTY, flow.marker(ENGINE_IDS, ("engine", id(node))))
            elif key in self.o["engine-prompt-fields"]:
                self.prompt_reads[id(node)] = node
                out = join(out or EMPTY, flow.marker(ENGINE_PROMPT, ("prompt", id(node))))
            elif key in self.o["response-parts"]:
                out = join(out or EMPTY, _only(base, RESPONSE))
        return out

    # ----- the resend ---------------------------------------------------------------------
    def _sends(self, flow, site: CallSite) -> None:
        """Text of this request that holds the output text of an earlier response of the same call."""
        me = id(site.node)
        keys = self.o["text-keys"]
        for a in site.args:
            if a.keyword is not None:
                if a.keyword in keys:
                    self._sent(flow, site, me, a.keyword, flow.deep(a.value))
                continue
            if a.star:
                continue
            self._sent(flow, site, me, "prompt", a.value.flat())
            for obj in flow.reachable(a.value):
                for key, fe in obj.fields.items():
                    if key in keys:
                        self._sent(flow, site, me, key, flow.deep(fe.value))

    def _sent(self, flow, site: CallSite, me: int, key: str, value: Value) -> None:
        for _, origin, steps in value.find(OUTPUT_TEXT):
            if not (isinstance(origin, tuple) and origin[1] == me) or (me, origin) in self.sent:
                continue
            if self.traced:
                steps = add_step(steps, site.line, f"sent again as the request's text by `{site.snippet(40)}`")
            self.sent[(me, origin)] = (site.node, key, settle(steps))

    # ----- the trained ids ---------------------------------------------------------------
    def store(self, flow, site: StoreSite):
        flat = site.value.flat()
        if not flat.has(ASSEMBLED):
            return
        if site.kind == "mutate":
            self._grows(site.node, _labels(flat))
        if site.path is not None and "." not in site.path and "[" not in site.path:
            return  # a local variable: not kept yet
        if site.kind == "item" and site.local_object:
            return
        if path_matches(site.path, self.o["rollout-fields"]) or (
            site.path is None and matches(site.attr, self.o["rollout-fields"])
        ):
            self._kept(site.node, f"kept as the rollout's ids in `{site.path or site.attr}`")

    def _grows(self, node: Any, labels: set[str]) -> None:
        cur = self.accumulations.setdefault(id(node), (node, set()))
        cur[1].update(labels)

    def _kept(self, node: Any, note: str) -> None:
        self.trained.setdefault(id(node), (node, note))

    def _append_helper(self, flow, site: CallSite) -> None:
        if not matches(site.name, self.o["append-calls"]):
            return
        added = [flow.deep(a.value) for a in site.args if flow.deep(a.value).has(ASSEMBLED)]
        if added:
            self._grows(site.node, set().union(*(_labels(v) for v in added)))
            self._kept(site.node, f"appended to the rollout by `{site.name}()`")

    def _kept_as_keyword(self, flow, site: CallSite) -> None:
        for a in site.args:
            if a.keyword is not None and matches(a.keyword, self.o["rollout-fields"]) and a.value.has(ASSEMBLED):
                self._kept(site.node, f"kept as the rollout's ids: `{a.keyword}=`")

    def finish(self, flow):
        for obj in flow.objects():
            for key, fe in obj.fields.items():
                if matches(key, self.o["rollout-fields"]) and fe.value.has(ASSEMBLED):
                    self._kept(fe.node, f"kept as the rollout's ids under `{key}`")


def resends(spec: ResendSpec, lay: Layout, config_names: list[str]) -> list[Resend]:
    """The resends of a module that break its trained ids: the output text read inside a
    loop (one turn) comes back as the text of the same call's next request, the loop
    accumulates the ids it trains on from the engine's ids or separately tokenized pieces,
    those ids are kept as the rollout's, and the loop never reads back the engine's own
    prompt ids.  One per engine call and loop.  Lines are computed here, for a module with
    a resend only."""
    if not spec.trained or not spec.sent:
        return []
    line = spec.line
    trained = {line(n): note for n, note in spec.trained.values()}
    grown: dict[int, set[str]] = {}
    for n, labels in spec.accumulations.values():
        grown.setdefault(line(n), set()).update(labels)
    reads = [line(n) for n in spec.prompt_reads.values()]
    out: dict[tuple[int, int], Resend] = {}
    for (_, origin), (node, key, steps) in spec.sent.items():
        read = spec.text_reads.get(origin[2])
        loop = lay.loop_of(line(read)) if read is not None else None
        if loop is None:
            continue
        acc = sorted(n for n in grown if loop.holds(n))
        if not acc or any(loop.holds(n) for n in reads):
            continue
        call_line = line(node)
        pieces = frozenset().union(*(grown[n] for n in acc))
        trained_line = min((t for t in trained if t >= acc[0]), default=max(trained))
        report = call_line
        if not loop.holds(call_line):  # sent by a helper: report the turn's call of it
            inside = [n for n, _ in steps if loop.holds(n)]
            report = inside[-1] if inside else call_line
        where = next((n for n, note in reversed(steps) if "put under `" in note), report)
        flag = lay.flag_of(where if loop.holds(where) else report, config_names)
        cur = out.get((call_line, loop.start))
        if cur is None or len(steps) < len(cur.steps):
            out[(call_line, loop.start)] = Resend(
                call_line, report, key, steps, acc[0], pieces, trained_line, trained[trained_line], flag
            )
    return sorted(out.values(), key=lambda r: r.report_line)


def _labels(value: Value) -> set[str]:
    return {label for label in value.labels() if label in ASSEMBLED}


def _arg_name(node: Any) -> str | None:
    """`tokenizer`, `state.tokenizer`, `self.tok` -> the last name."""
    while node is not None:
        if type(node).__name__ == "Name":
            return node.id
        if type(node).__name__ == "Attribute":
            return node.attr
        return None
    return None


def _only(value: Value, label: str) -> Value:
    return Value({k: s for k, s in value.flat().t.items() if k[0] == label})


def parse_layout(text: str) -> Layout | None:
    tree = pyast.parse(text)
    return layout(tree) if isinstance(tree, ast.Module) else None
