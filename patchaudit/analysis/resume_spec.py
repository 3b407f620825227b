"""PA107's flow specification: a resumed partial sample whose request drops its partial response.

The rule (rules/pa107_resume_drops_partial_response.py) runs `ResumeSpec` over a module with
the dataflow layer (patchaudit/analysis/dataflow.py).  A rollout sample (a parameter or name
matching `sample-names`) holds its original prompt (`prompt-fields`: `sample.prompt`) and
what it already generated (`held-fields`: `sample.tokens`, `sample.response`).  The spec
follows the prompt, and its ids (`tokenizer.encode(sample.prompt)`, `tokenizer(...)["input_ids"]`,
`apply_chat_template(..., tokenize=True)`, a processor's `input_ids`), into the prompt of an
engine request (`prompt-keys`: `text`, `input_ids`, ... as a key of the payload or a keyword);
a value that also carries a held field (`sample.tokens`, `sample.prompt + sample.response`)
sends the held tokens and is clean.  `drops()` keeps the requests of functions that admit a
resumed sample (an aborted status compared, the partial response measured), append the new
output to the held one, and do not discard it first (patchaudit/analysis/turn_syntax.py):
facts, not findings; the rule reports.
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
    Value,
    add_step,
    join,
    matches,
    receiver_name,
    settle,
)
from patchaudit.analysis.retokenize_spec import DEFAULTS as RETOKENIZE_DEFAULTS
from patchaudit.analysis.turn_syntax import Layout, append_lines, discard_lines, resume_lines, under_test_of

SAMPLE = "resume-sample"  # a rollout sample (a marker)
PROMPT = "resume-prompt"  # its original prompt (text)
PROMPT_OUT = "resume-prompt-encoded"  # a tokenizer/processor output for it
PROMPT_IDS = "resume-prompt-ids"  # its ids
HELD = "resume-held"  # what it already holds: its tokens or its response (a marker)

_SHARED = ("response-calls", "tokenizer-names", "processor-names", "encode-methods", "ids-fields", "append-calls")

DEFAULTS: dict[str, list[str]] = {
    **{k: list(RETOKENIZE_DEFAULTS[k]) for k in _SHARED},
    # names of a rollout sample object (a parameter, a loop variable, `input.sample`)
    "sample-names": ["sample", "*_sample", "sample_*"],
    # its field holding the original prompt
    "prompt-fields": ["prompt"],
    # its fields holding what it already generated (the held tokens include the partial response)
    "held-fields": ["tokens", "response", "response_ids", "response_tokens"],
    # keys and keywords of a request that carry its prompt (text or ids)
    "prompt-keys": ["text", "prompt", "prompts", "input_ids", "prompt_token_ids", "prompt_ids", "token_ids"],
    # the status field and the values that mark a partially generated (aborted) sample
    "status-fields": ["status"],
    "status-values": ["ABORTED", "aborted", "PARTIAL", "partial"],
    # fields whose read measures the partial response (`sampling_params["max_new_tokens"] -= sample.response_length`)
    "partial-fields": ["response_length"],
    # calls on the sample that discard its partial response
    "reset-calls": ["reset", "reset_*", "*_reset", "clear_response*", "discard_*"],
}


@dataclass(frozen=True)
class Drop:
    """A request of a resumed sample that sends its original prompt only."""

    line: int  # where the prompt is put into the request
    key: str
    steps: tuple[Step, ...]  # from the prompt read to the send
    resume: int  # the line admitting a resumed sample
    append: int  # the line appending the new output to the held one


class ResumeSpec(FlowSpec):
    """PA107's sources and records for the dataflow layer (see the module docstring)."""

    kinds = {SAMPLE: OBJECT, PROMPT: TEXT, PROMPT_OUT: OBJECT, PROMPT_IDS: IDS, HELD: TEXT}

    def __init__(self, opts: dict[str, Any]):
        self.o = opts
        #: (line of the prompt's store into the request, key) -> (steps, send line)
        self.sent: dict[tuple[int, str], tuple[tuple[Step, ...], int]] = {}

    def _sample(self, name: str) -> Value | None:
        if matches(name.rsplit(".", 1)[-1], self.o["sample-names"]):
            return Value({(SAMPLE, ("sample", name)): ()})
        return None

    def param(self, flow, function, name, annotation, node):
        return self._sample(name)

    def unknown(self, flow, name, node):
        return self._sample(name)

    def field(self, flow, base, key, node):
        if base.has(PROMPT_OUT) and key in self.o["ids-fields"]:
            return join(
                flow.derive(base, [PROMPT_OUT], PROMPT_IDS, node, f"its `{key}`"),
                _only(base, HELD),
            )
        if not base.has(SAMPLE):
            return None
        if matches(key, self.o["prompt-fields"]):
            return flow.source(PROMPT, node, f"the sample's original prompt `{flow.snippet(node)}`")
        if matches(key, self.o["held-fields"]):
            return Value({(HELD, ("held", key)): ()})
        return None

    def call(self, flow, site: CallSite):
        if site.resolved:
            return None
        name = site.name
        if matches(site.name, self.o["response-calls"]) or matches(site.callee, self.o["response-calls"]):
            self._sends(flow, site)
            return None
        text = EMPTY
        for a in site.args:
            text = join(text, flow.deep(a.value))
        if not text.has(PROMPT):
            return None
        note = f"encoded `{site.snippet()}`"
        held = _only(text, HELD)
        if name == "apply_chat_template":
            tokenize = site.literal("tokenize")
            processor = matches(receiver_name(site.node), self.o["processor-names"])
            if tokenize is True or (tokenize is MISSING and not processor):
                label = PROMPT_OUT if site.literal("return_dict") is True else PROMPT_IDS
                return join(flow.derive(text, [PROMPT], label, site.node, note), held)
            rendered = f"rendered with the chat template `{site.snippet()}`"
            return join(flow.derive(text, [PROMPT], PROMPT, site.node, rendered), held)
        if name in self.o["encode-methods"] and matches(receiver_name(site.node), self.o["tokenizer-names"]):
            return join(
                flow.derive(text, [PROMPT], PROMPT_IDS if name == "encode" else PROMPT_OUT, site.node, note), held
            )
        if matches(name, self.o["tokenizer-names"]):
            return join(flow.derive(text, [PROMPT], PROMPT_OUT, site.node, note), held)
        return None

    def _sends(self, flow, site: CallSite) -> None:
        keys = self.o["prompt-keys"]
        for a in site.args:
            if a.keyword is not None:
                if a.keyword in keys:
                    self._sent(flow, site, a.keyword, flow.deep(a.value), flow.line(a.node))
                continue
            if a.star:
                continue
            for obj in flow.reachable(a.value):
                for key, fe in obj.fields.items():
                    if key in keys:
                        self._sent(flow, site, key, flow.deep(fe.value), fe.line)

    def _sent(self, flow, site: CallSite, key: str, value: Value, line: int) -> None:
        if value.has(HELD):
            return  # the held tokens (or the response) go with it: the resume continues
        found = value.find((PROMPT, PROMPT_IDS))
        if not found or (line, key) in self.sent:
            return
        steps = settle(add_step(found[0][2], site.line, f"sent to the engine by `{site.snippet(40)}`"))
        self.sent[(line, key)] = (steps, site.line)


def drops(spec: ResumeSpec, tree: ast.Module, lay: Layout) -> list[Drop]:
    """The requests that send a resumed sample's original prompt only: in a function that
    admits a resumed sample, appends the new output to the held one, and does not discard
    the partial response before the request (every function a step of the trace is in)."""
    o = spec.o
    out = []
    for (line, key), (steps, send_line) in sorted(spec.sent.items()):
        fns: list[ast.AST] = []
        for step_line, _ in steps:
            fn = lay.function_of(step_line)
            if fn is not None and all(fn is not f for f in fns):
                fns.append(fn)
        if not fns:
            continue
        resume = [
            x for fn in fns for x in resume_lines(fn, o["status-fields"], o["status-values"], o["partial-fields"])
        ]
        appends = [x for fn in fns for x in append_lines(fn, o["held-fields"], o["append-calls"]) if x > send_line]
        discards = [x for fn in fns for x in discard_lines(fn, o["held-fields"], o["reset-calls"]) if x < send_line]
        tested = [*o["held-fields"], *o["partial-fields"]]
        chosen = any(under_test_of(fn, line, tested) for fn in fns)
        if resume and appends and not discards and not chosen:
            out.append(Drop(line, key, steps, min(resume), min(appends)))
    return out


def _only(value: Value, label: str) -> Value:
    return Value({k: s for k, s in value.flat().t.items() if k[0] == label})
