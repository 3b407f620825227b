"""PA103's flow specification: text encoded again into ids used as the model's ids.

The rule (rules/pa103_decode_retokenize.py) runs `RetokenizeSpec` over a module with the
dataflow layer (patchaudit/analysis/dataflow.py).  Two kinds of text are followed:
text decoded from ids (`tokenizer.decode(ids)`: `DECODED`) and the engine's own output
text (`output["text"]`, `choices[0].message.content` of what an engine call returned:
`OUTPUT_TEXT`, read from a trace-less `RESPONSE` marker).  Encoding either again gives
`RETOKENIZED` / `REENCODED` ids (or a tokenizer output whose `input_ids` are).  The sinks
differ: decoded text re-encoded is reported wherever it is kept, returned or sent; the
engine's text re-encoded only where it becomes the trained ids of a rollout (a rollout
field, a loss-mask size, an append helper).  Drift guards and mask sizes are read from
the syntax (patchaudit/analysis/retokenize_guards.py).  The hits carry messages, not
findings: the rule reports them.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from patchaudit.analysis.dataflow import (
    EMPTY,
    IDS,
    MISSING,
    OBJECT,
    TEXT,
    CallSite,
    FlowSpec,
    Hit,
    ReturnSite,
    StoreSite,
    Value,
    join,
    matches,
    path_matches,
    receiver_name,
    settle,
)
from patchaudit.analysis.flow_values import Origin
from patchaudit.analysis.retokenize_guards import (
    Candidate,
    Guard,
    candidates,
    guarded,
    mask_len_lines,
    resolve,
    traced_names,
)
from patchaudit.inputs import pyast
from patchaudit.inputs.astnames import dotted

DECODED = "decoded-text"  # text made from token ids
RETOKENIZED_OUTPUT = "retokenized-output"  # a tokenizer/processor's output for that text
RETOKENIZED = "retokenized-ids"  # ids encoded again from decoded text
RESPONSE = "engine-response"  # what an engine or an OpenAI-style API returned (follows indexing, iteration)
OUTPUT_TEXT = "engine-output-text"  # the engine's own output text (`output["text"]`, `.message.content`)
REENCODED_OUTPUT = "reencoded-output"  # a tokenizer/processor's output for the engine's text
REENCODED = "reencoded-ids"  # ids encoded from the engine's output text

TEXTS = (DECODED, OUTPUT_TEXT)
RETOKENIZED_LABELS = (RETOKENIZED, RETOKENIZED_OUTPUT, REENCODED, REENCODED_OUTPUT)

DEFAULTS: dict[str, list[str]] = {
    # methods that turn ids into text (a call with a string-literal first argument, like
    # `data.decode("utf-8")`, is a bytes decode and is skipped)
    "decode-methods": ["decode", "batch_decode", "convert_tokens_to_string"],
    # methods that turn text into ids (`encode`) or into a tokenizer output (the others)
    "encode-methods": ["encode", "encode_plus", "batch_encode_plus", "encode_batch", "batch_encode"],
    # tokenizers and processors: the objects whose decode/encode methods count (`self.tokenizer.decode`,
    # `get_tokenizer().encode`), and the callables that tokenize text when called (`tokenizer(text)`)
    "tokenizer-names": ["*tokenizer*", "*tok", "*processor*"],
    # processors among them: their apply_chat_template() renders text unless tokenize=True
    "processor-names": ["processor", "*_processor", "processor_*"],
    # fields of a tokenizer output that hold ids
    "ids-fields": ["input_ids", "ids"],
    # keys/keywords under which ids are sent or stored
    "ids-keys": ["input_ids", "prompt_token_ids", "token_ids", "tokens", "prompt_ids"],
    # calls that send what they are given (any argument carrying re-tokenized ids is a sink)
    "send-calls": ["generate", "async_generate", "post", "send", "submit", "put", "put_nowait"],
    # calls whose arguments are never a sink (reward models, metrics, logging)
    # (an encoder or embedder with its own tokenizer, e.g. a diffusion model's text encoder, is another model)
    "ignore-calls": ["*reward*", "*score*", "*metric*", "*log*", "print", "*wandb*", "*encoder*", "*embed*"],
    # calls (last name or dotted callee) that return an engine's or an OpenAI-style API's response
    "response-calls": [
        "generate",
        "async_generate",
        "agenerate",
        "generate_async",
        "post",
        "apost",
        "async_post",
        "*completions.create",
        "*responses.create",
        "completion",
        "acompletion",
    ],
    # fields of a response that hold its output text (`output["text"]`, `choices[0].message.content`,
    # `outputs[0].text`, SkyRL's `engine_output["responses"]`)
    "output-text-fields": ["text", "content", "generated_text", "output_text", "responses"],
    # fields of a response that hold parts of it (`choices`, `message`, vLLM's `outputs`)
    "response-parts": ["choices", "message", "outputs", "output", "delta"],
    # rollout/training fields holding the trained ids (attribute names, dotted tails or keys)
    "rollout-fields": [
        "tokens",
        "response_ids",
        "response_tokens",
        "response_token_ids",
        "responses",
        "completion_ids",
        "completion_token_ids",
        "output_ids",
        "output_token_ids",
        "action_ids",
        "action_token_ids",
    ],
    # loss masks and log-prob lists: ids whose `len()` sizes one of them (with a non-zero mask) are trained
    "mask-names": [
        "*loss_mask*",
        "*response_mask*",
        "*action_mask*",
        "*assistant_mask*",
        "*log_probs*",
        "rollout_logprobs",
        "response_logprobs",
    ],
    # framework helpers appending response tokens to a rollout sample (not with `trainable=False`)
    "append-calls": ["append_response_tokens", "add_response_tokens", "extend_response_tokens", "append_tokens"],
}

MESSAGE = (
    "token ids are decoded to text and the text is encoded again into ids that are {used}: decode -> encode "
    "does not round-trip (non-canonical ids such as [' tr', 'uly'] come back as [' truly']), so these ids "
    "drift from the ones the model produced; keep and reuse the original ids"
)
OUTPUT_MESSAGE = (
    "the engine's output text is encoded again into ids that are {used}: text -> encode does not give back "
    "the ids the engine sampled (non-canonical splits such as [' tr', 'uly'] come back as [' truly']; "
    "stripped or edited text differs too), so the trained ids drift from the sampled ones and from their "
    "log-probs; train on the ids the engine returned (`output_ids`, `output_token_logprobs`, `token_ids`)"
)

_ENCODING_ARGS = ("*encoding*", "*charset*", "errors", "codec")


class RetokenizeSpec(FlowSpec):
    """PA103's sources, transforms and sinks for the dataflow layer (see the module docstring)."""

    kinds = {
        DECODED: TEXT,
        RETOKENIZED_OUTPUT: OBJECT,
        RETOKENIZED: IDS,
        RESPONSE: IDS,
        OUTPUT_TEXT: TEXT,
        REENCODED_OUTPUT: OBJECT,
        REENCODED: IDS,
    }
    #: the repository layer's summaries seed parameters with these (patchaudit/analysis/repo_summaries.py)
    summary_labels = frozenset({DECODED, OUTPUT_TEXT, RESPONSE})

    def __init__(
        self,
        opts: dict[str, Any],
        module: ast.Module,
        verbs: list[str],
        text: str = "",
    ):
        self.o = opts
        self.text = text  # the module's source (its `ast` tree gives the mask sizes)
        self.verbs = verbs
        self.module = module
        self._mask_lens: dict[tuple[int, str | None], str] | None = None
        self._guards: list[Candidate] | None = None
        self._resolved: dict[Candidate, Guard] = {}
        self._responses: dict[int, str] = {}  # id(engine call) -> its snippet

    # ----- sources and transforms ---------------------------------------------------
    def _tokenizer_receiver(self, site: CallSite) -> bool:
        return matches(receiver_name(site.node), self.o["tokenizer-names"])

    def _decode_source(self, flow, site: CallSite) -> Value | None:
        if site.receiver is None or site.receiver.has(TEXTS) or not self._tokenizer_receiver(site):
            return None  # `msgpack.decode(...)`, `raw.decode()`: not a tokenizer
        pos = site.positional()
        arg = (
            pos[0]
            if pos
            else next(
                (site.keyword(k) for k in ("token_ids", "sequences", "ids", "tokens") if site.keyword(k) is not None),
                None,
            )
        )
        if arg is None:
            return None  # `raw.decode()`, `raw.decode(errors="ignore")`: bytes
        node = arg.node.value
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)) or isinstance(node, ast.JoinedStr):
            return None  # `raw.decode("utf-8")`
        if isinstance(node, (ast.Name, ast.Attribute)) and matches(
            node.id if isinstance(node, ast.Name) else node.attr, _ENCODING_ARGS
        ):
            return None
        if any(matches(a.keyword, _ENCODING_ARGS) for a in site.args):
            return None
        for _, origin, _ in arg.value.find(RESPONSE)[:1]:
            # ids an engine returned (`model.generate(...)`): their text is the engine's output
            # text, clean in a new prompt for it, a finding where it is trained again
            call = self._responses.get(origin[1], "an engine call") if isinstance(origin, tuple) else "?"
            note = f"the engine's output text: ids of the response of `{call}` decoded `{site.snippet()}`"
            return flow.source(OUTPUT_TEXT, site.node, note)
        return flow.source(DECODED, site.node, f"ids decoded to text `{site.snippet()}`")

    def _text_in(self, flow, site: CallSite) -> bool:
        return any(flow.deep(a.value).has(TEXTS) for a in site.args)

    def _response_call(self, site: CallSite) -> bool:
        pats = self.o["response-calls"]
        return matches(site.name, pats) or matches(site.callee, pats)

    def call(self, flow, site: CallSite):
        if site.name == "len":
            self._mask_sink(flow, site)
        if site.resolved:
            self._call_sinks(flow, site)
            return None
        out = None
        name = site.name
        if self._response_call(site):
            # a marker: a module that never reads the response's text stays untainted (one pass)
            self._responses[id(site.node)] = site.snippet(40)
            out = flow.marker(RESPONSE, ("response", id(site.node)))
        elif name == "json" and site.receiver is not None and site.receiver.has(RESPONSE):
            out = _only(site.receiver, RESPONSE)
        elif name in self.o["decode-methods"]:
            out = self._decode_source(flow, site)
        elif name == "apply_chat_template":
            out = self._chat_template(flow, site)
        elif name in self.o["encode-methods"] and site.receiver is not None and self._tokenizer_receiver(site):
            if not site.receiver.has(TEXTS) and self._text_in(flow, site):  # not `text.encode("utf-8")`
                out = self._encoded(flow, site, name == "encode")
        elif matches(name, self.o["tokenizer-names"]) and not matches(name, self.verbs) and self._text_in(flow, site):
            out = self._encoded(flow, site, False)
        self._call_sinks(flow, site)
        return out

    def _chat_template(self, flow, site: CallSite) -> Value | None:
        """`apply_chat_template(messages, ...)`: encoded ids when it tokenizes, else the text rendered."""
        if not self._text_in(flow, site):
            return None
        tokenize = site.literal("tokenize")
        processor = matches(receiver_name(site.node), self.o["processor-names"])
        if tokenize is True or (tokenize is MISSING and not processor):
            return self._encoded(flow, site, site.literal("return_dict") is not True)
        if tokenize is False or tokenize is MISSING:
            text = join_deep(flow, site)
            note = f"rendered with the chat template `{site.snippet()}`"
            return join(
                flow.derive(text, [DECODED], DECODED, site.node, note),
                flow.derive(text, [OUTPUT_TEXT], OUTPUT_TEXT, site.node, note),
            )
        return None

    def _encoded(self, flow, site: CallSite, ids: bool) -> Value:
        text = join_deep(flow, site)
        note = f"encoded again `{site.snippet()}`"
        decoded = _same_vocabulary(text, site.callee if site.receiver is None else receiver_name(site.node))
        a = flow.derive(decoded, [DECODED], RETOKENIZED if ids else RETOKENIZED_OUTPUT, site.node, note)
        b = flow.derive(text, [OUTPUT_TEXT], REENCODED if ids else REENCODED_OUTPUT, site.node, note)
        return join(a, b)

    def field(self, flow, base, key, node):
        out = None
        if key in self.o["ids-fields"]:
            if base.has(RETOKENIZED_OUTPUT):
                out = flow.derive(base, [RETOKENIZED_OUTPUT], RETOKENIZED, node, f"its `{key}`")
            if base.has(REENCODED_OUTPUT):
                out = join(out or EMPTY, flow.derive(base, [REENCODED_OUTPUT], REENCODED, node, f"its `{key}`"))
        if base.has(RESPONSE):
            if key in self.o["output-text-fields"]:
                for _, origin, _ in base.find(RESPONSE)[:1]:
                    call = self._responses.get(origin[1], "an engine call") if isinstance(origin, tuple) else "?"
                    note = f"the engine's output text: `{key}` of the response of `{call}`"
                    out = join(out or EMPTY, flow.source(OUTPUT_TEXT, node, note))
            elif key in self.o["response-parts"]:
                out = join(out or EMPTY, _only(base, RESPONSE))
        return out

    # ----- sinks -------------------------------------------------------------------------
    def _hit(self, flow, node, value: Value, used: str, note: str, decoded: bool = True, output: bool = True) -> None:
        deep = flow.deep(value)
        pairs = []
        if decoded:
            pairs.append(((RETOKENIZED, RETOKENIZED_OUTPUT), MESSAGE))
        if output:
            pairs.append(((REENCODED, REENCODED_OUTPUT), OUTPUT_MESSAGE))
        for labels, message in pairs:
            for _, origin, steps in deep.find(labels)[:1]:
                steps = settle(steps)
                if self._guarded(flow, steps, node):
                    continue
                flow.report(node, message.format(used=used), steps, origin, note)

    def _guarded(self, flow, steps, node) -> bool:
        """The flow passes a drift guard (patchaudit/analysis/retokenize_guards.py)."""
        if self._guards is None:
            self._guards = candidates(self.module)
        names = traced_names(steps) if self._guards else set()
        mine = [c for c in self._guards if c.name in names]
        if not mine:
            return False
        for c in mine:
            if c not in self._resolved:
                self._resolved[c] = resolve(c)
        return guarded([self._resolved[c] for c in mine], steps, flow.line(node))

    def _rollout_field(self, path: str | None, attr: str | None) -> bool:
        pats = self.o["rollout-fields"]
        return path_matches(path, pats) or (path is None and matches(attr, pats))

    def store(self, flow, site: StoreSite):
        if site.path is not None and "." not in site.path and "[" not in site.path:
            return  # a local variable grows: not stored anywhere yet
        if site.kind == "item" and site.local_object:
            return  # a dict being built here: a sink when it is stored, returned or sent
        shown = site.path or site.attr or "a container"
        used, note = f"stored in `{shown}`", f"re-tokenized ids stored in `{shown}`"
        self._hit(flow, site.node, site.value, used, note, output=self._rollout_field(site.path, site.attr))

    def ret(self, flow, site: ReturnSite):
        name = site.function.rsplit(".", 1)[-1]
        self._hit(flow, site.node, site.value, f"returned by `{name}()`", "re-tokenized ids returned", output=False)

    def _mask_sink(self, flow, site: CallSite) -> None:
        """`len(ids)` sizing a loss mask or a log-prob list: `ids` are the trained ids."""
        if not site.args or not flow.deep(site.args[0].value).has(RETOKENIZED_LABELS):
            return
        if self._mask_lens is None:
            tree = pyast.parse(self.text) if self.text else None
            self._mask_lens = mask_len_lines(tree, self.o["mask-names"]) if tree is not None else {}
        line, arg = flow.line(site.node), dotted(site.args[0].node.value)
        mask = self._mask_lens.get((line, arg)) or self._mask_lens.get((line, None))
        if mask is None:
            return
        used = f"trained (their length sizes `{mask}`)"
        self._hit(flow, site.node, site.args[0].value, used, f"re-tokenized ids sized `{mask}`")

    def _call_sinks(self, flow, site: CallSite):
        if matches(site.name, self.o["ignore-calls"]) or matches(site.callee, self.o["ignore-calls"]):
            return
        if matches(site.name, self.o["append-calls"]):
            if not any(matches(a.keyword, ("*trainable*",)) and site.literal(a.keyword) is False for a in site.args):
                used = f"appended as rollout tokens by `{site.name}()`"
                for a in site.args:
                    self._hit(flow, a.node, a.value, used, f"appended by `{site.name}()`")
            return
        send = not site.resolved and matches(site.name, self.o["send-calls"])
        # ids-keys keywords are a request's: a send call, one named for it (`engine_generate`),
        # or a constructor (`GenerateReqInput(input_ids=...)`); not a computation (`get_rope_index`)
        request = send or (
            not site.resolved and (_sends(site.name, self.o["send-calls"]) or (site.name or "")[:1].isupper())
        )
        for a in site.args:
            if a.keyword in self.o["ids-keys"] and request:
                self._hit(flow, a.node, a.value, f"sent as `{a.keyword}=`", f"sent as `{a.keyword}=`", output=False)
            elif send:
                self._hit(flow, a.node, a.value, f"sent by `{site.name}()`", f"sent by `{site.name}()`", output=False)
            elif not site.resolved and a.keyword is not None and matches(a.keyword, self.o["rollout-fields"]):
                self._hit(
                    flow, a.node, a.value, f"passed as `{a.keyword}=`", f"passed as `{a.keyword}=`", decoded=False
                )

    def finish(self, flow):
        for obj in flow.objects():
            for key, fe in obj.fields.items():
                decoded = key in self.o["ids-keys"]
                output = matches(key, self.o["rollout-fields"])
                if decoded or output:
                    note = f"re-tokenized ids put under `{key}`"
                    self._hit(flow, fe.node, fe.value, f"put under `{key}`", note, decoded=decoded, output=output)


#: the words of a tokenizer's or processor's name that say what it is, or which role its
#: model plays (the actor's and the reference's tokenizers are most often one vocabulary),
#: not which model it is
_TOOL_WORDS = frozenset(
    {"self", "cls", "tokenizer", "tokenizers", "processor", "tok", "detokenizer", "detok"}
    | {"actor", "ref", "reference", "critic", "policy", "rollout", "train", "training", "trainer"}
    | {"inference", "infer", "engine", "sglang", "vllm", "hf", "fast", "slow", "base", "main"}
    | {"local", "remote", "student", "teacher", "old", "new", "my", "the"}
)


def vocabulary(name: str | None) -> str:
    """Whose vocabulary a tokenizer or processor name says it holds: its last name less the
    words that say what it is (`blip_processor` -> `blip`, `llm_tokenizer` -> `llm`,
    `self.tokenizer` and `processor.tokenizer` -> ``: not said)."""
    last = (name or "").rsplit(".", 1)[-1].lower()
    return "_".join(w for w in re.split(r"[^a-z0-9]+", last) if w and w not in _TOOL_WORDS)


def _same_vocabulary(text: Value, encoder: str | None) -> Value:
    """`text` less the decoded text of another model's vocabulary than `encoder`'s: both
    names say whose they are and say different models (a BLIP caption decoded by
    `blip_processor`, put in a prompt that `llm_tokenizer` encodes).  The ids made are
    another model's, not the decoded ids again: no round trip to drift from."""
    mine = vocabulary(encoder)
    if not mine:
        return text
    kept = {}
    for (label, origin), steps in text.flat().t.items():
        if label == DECODED and type(origin) is Origin and isinstance(origin.node, ast.Call):
            theirs = vocabulary(receiver_name(origin.node))
            if theirs and theirs != mine:
                continue
        kept[(label, origin)] = steps
    return Value(kept)


def _sends(name: str | None, calls: list[str]) -> bool:
    """A name with a send call as one of its `_`-separated words (`engine_generate`, `post_request`)."""
    return bool(name) and any(w in calls for w in (name or "").strip("_").split("_"))


def _only(value: Value, label: str) -> Value:
    """The taints of `value` with `label` (a marker stays a marker: no step, no fixed point)."""
    return Value({k: s for k, s in value.flat().t.items() if k[0] == label})


def join_deep(flow, site: CallSite) -> Value:
    out = EMPTY
    for a in site.args:
        out = join(out, flow.deep(a.value))
    return out


def one_per_flow(hits: list[Hit]) -> list[Hit]:
    """The engine-text hits of one source reported once: the sink with the longest trace (the
    flow's last one; a mask, a helper and the field it ends in are one flow)."""
    best: dict[Any, Any] = {}
    out = []
    for h in hits:
        if not h.message.startswith(OUTPUT_MESSAGE[:30]):
            out.append(h)
            continue
        cur = best.get(h.origin)
        if cur is None or (len(h.steps), h.line) > (len(cur.steps), cur.line):
            best[h.origin] = h
    kept = {id(h) for h in best.values()}
    return [h for h in hits if id(h) in kept or not h.message.startswith(OUTPUT_MESSAGE[:30])]
