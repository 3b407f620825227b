from __future__ import annotations

import functools
import re
from typing import Any

import libcst as cst
from libcst.metadata import PositionProvider

from patchaudit.analysis.dataflow import (
    EMPTY,
    IDS,
    MISSING,
    OBJECT,
    TEXT,
    CallSite,
    FlowSpec,
    ReturnSite,
    StoreSite,
    Value,
    analyse,
    join,
    matches,
    receiver_name,
)
from patchaudit.analysis.gate import facts, string_lists
from patchaudit.inputs.cst import string_literal
from patchaudit.lint.rule import PYTHON, Example, Rule
from patchaudit.model.findings import Severity

from .pa102_expanded_ids_as_rollout_tokens import VERB_NAMES, check_options

DECODED = "decoded-text"  # text made from token ids
RETOKENIZED_OUTPUT = "retokenized-output"  # a tokenizer/processor's output for that text
RETOKENIZED = "retokenized-ids"  # ids encoded again from decoded text

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
}

MESSAGE = (
    "token ids are decoded to text and the text is encoded again into ids that are {used}: decode -> encode "
    "does not round-trip (non-canonical ids such as [' tr', 'uly'] come back as [' truly']), so these ids "
    "drift from the ones the model produced; keep and reuse the original ids"
)

_ENCODING_ARGS = ("*encoding*", "*charset*", "errors", "codec")


class _Spec(FlowSpec):
    kinds = {DECODED: TEXT, RETOKENIZED_OUTPUT: OBJECT, RETOKENIZED: IDS}

    def __init__(self, opts: dict[str, Any]):
        self.o = opts

    # ----- sources and transforms ---------------------------------------------------
    def _tokenizer_receiver(self, site: CallSite) -> bool:
        return matches(receiver_name(site.node), self.o["tokenizer-names"])

    def _decode_source(self, flow, site: CallSite) -> Value | None:
        if site.receiver is None or site.receiver.has(DECODED) or not self._tokenizer_receiver(site):
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
        if string_literal(node) is not None or isinstance(node, cst.FormattedString):
            return None  # `raw.decode("utf-8")`
        if isinstance(node, (cst.Name, cst.Attribute)) and matches(
            node.value if isinstance(node, cst.Name) else node.attr.value, _ENCODING_ARGS
        ):
            return None
        if any(matches(a.keyword, _ENCODING_ARGS) for a in site.args):
            return None
        return flow.source(DECODED, site.node, f"ids decoded to text `{site.snippet()}`")

    def _text_in(self, flow, site: CallSite) -> bool:
        return any(flow.deep(a.value).has(DECODED) for a in site.args)

    def call(self, flow, site: CallSite):
        if site.resolved:
            self._call_sinks(flow, site)
            return None
        out = None
        name = site.name
        if name in self.o["decode-methods"]:
            out = self._decode_source(flow, site)
        elif name == "apply_chat_template":
            if self._text_in(flow, site):
                tokenize = site.literal("tokenize")
                processor = matches(receiver_name(site.node), self.o["processor-names"])
                if tokenize is True or (tokenize is MISSING and not processor):
                    label = RETOKENIZED_OUTPUT if site.literal("return_dict") is True else RETOKENIZED
                    out = self._encoded(flow, site, label)
        elif name in self.o["encode-methods"] and site.receiver is not None and self._tokenizer_receiver(site):
            if not site.receiver.has(DECODED) and self._text_in(flow, site):  # not `text.encode("utf-8")`
                out = self._encoded(flow, site, RETOKENIZED if name == "encode" else RETOKENIZED_OUTPUT)
        elif matches(name, self.o["tokenizer-names"]) and not matches(name, VERB_NAMES) and self._text_in(flow, site):
            out = self._encoded(flow, site, RETOKENIZED_OUTPUT)
        self._call_sinks(flow, site)
        return out

    def _encoded(self, flow, site: CallSite, label: str) -> Value:
        text = join_deep(flow, site)
        return flow.derive(text, [DECODED], label, site.node, f"encoded again `{site.snippet()}`")

    def field(self, flow, base, key, node):
        if key in self.o["ids-fields"] and base.has(RETOKENIZED_OUTPUT):
            return flow.derive(base, [RETOKENIZED_OUTPUT], RETOKENIZED, node, f"its `{key}`")
        return None

    # ----- sinks -------------------------------------------------------------------------
    def _hit(self, flow, node, value: Value, used: str, note: str) -> None:
        for _, origin, steps in flow.deep(value).find((RETOKENIZED, RETOKENIZED_OUTPUT))[:1]:
            flow.report(node, MESSAGE.format(used=used), steps, origin, note)

    def store(self, flow, site: StoreSite):
        if site.path is not None and "." not in site.path and "[" not in site.path:
            return  # a local variable grows: not stored anywhere yet
        if site.kind == "item" and site.local_object:
            return  # a dict being built here: a sink when it is stored, returned or sent
        shown = site.path or site.attr or "a container"
        self._hit(flow, site.node, site.value, f"stored in `{shown}`", f"re-tokenized ids stored in `{shown}`")

    def ret(self, flow, site: ReturnSite):
        name = site.function.rsplit(".", 1)[-1]
        self._hit(flow, site.node, site.value, f"returned by `{name}()`", "re-tokenized ids returned")

    def _call_sinks(self, flow, site: CallSite):
        if matches(site.name, self.o["ignore-calls"]) or matches(site.callee, self.o["ignore-calls"]):
            return
        send = not site.resolved and matches(site.name, self.o["send-calls"])
        for a in site.args:
            if a.keyword in self.o["ids-keys"] and not site.resolved:
                self._hit(flow, a.node, a.value, f"sent as `{a.keyword}=`", f"sent as `{a.keyword}=`")
            elif send:
                self._hit(flow, a.node, a.value, f"sent by `{site.name}()`", f"sent by `{site.name}()`")

    def finish(self, flow):
        for obj in flow.objects():
            for key, fe in obj.fields.items():
                if key in self.o["ids-keys"]:
                    self._hit(flow, fe.node, fe.value, f"put under `{key}`", f"re-tokenized ids put under `{key}`")


def join_deep(flow, site: CallSite) -> Value:
    out = EMPTY
    for a in site.args:
        out = join(out, flow.deep(a.value))
    return out


EXACT_ENGINE = {
    "python/sglang/__init__.py": "",
    "python/sglang/srt/__init__.py": "",
    "python/sglang/srt/turns.py": """\
def history_text(tokenizer, ids):
    return tokenizer.decode(ids, skip_special_tokens=False)


def next_turn(sample, tokenizer, user_text):
    prompt = history_text(tokenizer, sample.tokens) + user_text
    sample.tokens = sample.tokens + tokenizer.encode(user_text)
    return prompt
""",
}

EXACT_PATCH = """\
--- a/python/sglang/srt/turns.py
+++ b/python/sglang/srt/turns.py
@@ -5,4 +5,4 @@
 def next_turn(sample, tokenizer, user_text):
     prompt = history_text(tokenizer, sample.tokens) + user_text
-    sample.tokens = sample.tokens + tokenizer.encode(user_text)
+    sample.tokens = tokenizer.encode(prompt)
     return prompt
"""


@functools.lru_cache(maxsize=32)
def _call_re(names: tuple[str, ...]) -> "re.Pattern[str]":
    """`name(` for any of `names`, allowing what Python allows between a callee and its `(`."""
    alts = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"(?<![\w])(?:{alts})(?:\s|\\\n|#[^\n]*)*\(")


class DecodeRetokenize(Rule):
    """
    Flags token ids decoded to text and encoded again into ids that are then used as ids.

    ## What it does
    Follows, inside a module, text produced by `.decode(ids)`,
    `.batch_decode(ids)` or `convert_tokens_to_string(...)` through
    assignments, f-strings, `+`, `.format()`/`.join()`/string methods, message
    dicts and lists, returns and calls of functions of the same module, to a
    place where it is encoded again (`tokenizer.encode(text)`, calling a
    tokenizer or processor with it, `apply_chat_template(..., tokenize=True)`),
    and reports where the re-encoded ids are used as ids: stored in an
    attribute or a container that outlives the function, returned, sent
    (`input_ids=`, a request dict's `input_ids`, `post(...)`/`generate(...)`).
    Decoding for logs, metrics, reward functions or string comparisons, and
    counting re-encoded tokens (`len(tokenizer.encode(text))`), is clean.
    A bytes decode (`raw.decode("utf-8")`) is not a source.

    Options (`[tool.patchaudit.rules.PA103]`): `decode-methods`,
    `encode-methods`, `tokenizer-names`, `processor-names`, `ids-fields`,
    `ids-keys`, `send-calls`, `ignore-calls`.

    ## Why is this bad?
    `encode(decode(ids))` is not the identity.  A model may generate a valid
    but non-canonical split (`[" tr", "uly"]`); decoded it is `" truly"`, and
    re-encoded it is the single canonical token `[" truly"]`.  In RL the
    trainer must see exactly the ids the engine produced: re-tokenized ids
    shift every later position (log-probs, masks, router replay) without an
    error.

    ## Example
    ```python
    def next_turn(sample, tokenizer, user_text):
        history = tokenizer.decode(sample.tokens)
        prompt = history + f"<|im_start|>user\\n{user_text}<|im_end|>\\n"
        sample.tokens = tokenizer.encode(prompt, add_special_tokens=False)
    ```

    ## Use instead
    Append the ids of the new text to the ids you already have:
    ```python
    def next_turn(sample, tokenizer, user_text):
        turn = f"<|im_start|>user\\n{user_text}<|im_end|>\\n"
        sample.tokens = sample.tokens + tokenizer.encode(turn, add_special_tokens=False)
    ```

    ## Incident
    SGLang decoded token-id VLM prompts and re-tokenized them with the HF
    processor (`legacy_load_mm_data`), drifting `[479, 3770]` into `[9149]`;
    sgl-project/sglang#26555 added `SGLANG_MM_AVOID_RETOKENIZE` to keep the
    caller's ids (seed reports 000, 001, 002).
    """

    code = "PA103"
    name = "decode-retokenize"
    severity = Severity.ERROR
    kinds = frozenset({PYTHON})
    requires = (("decode",), ("convert_tokens_to_string",))
    options = {k: list(v) for k, v in DEFAULTS.items()}
    METADATA_DEPENDENCIES = (PositionProvider,)

    VALID = [
        Example(
            """\
            def log_response(sample, tokenizer, logger):
                text = tokenizer.decode(sample.tokens[sample.prompt_length:])
                logger.info(f"response: {text!r}")
                print("response:", text.strip())
                return sample
            """,
            title="decode for logging",
        ),
        Example(
            """\
            def metrics(sample, tokenizer):
                text = tokenizer.decode(sample.response_ids, skip_special_tokens=True)
                return {"response_chars": len(text), "response_tokens": len(tokenizer.encode(text)),
                        "words": len(text.split())}
            """,
            title="decode for metrics, re-encoding only counted",
        ),
        Example(
            """\
            def reward(sample, tokenizer, label):
                pred = tokenizer.decode(sample.response_ids, skip_special_tokens=True).strip()
                if tokenizer.encode(pred) == tokenizer.encode(label):
                    return 1.0
                return float(pred == label)
            """,
            title="reward by comparison",
        ),
        Example(
            """\
            async def reward(sample, tokenizer, rm_tokenizer, reward_model):
                text = tokenizer.decode(sample.tokens)
                rm_inputs = rm_tokenizer(text, return_tensors="pt")
                sample.reward = await reward_model_score(reward_model, input_ids=rm_inputs["input_ids"])
                return sample.reward
            """,
            title="reward model with its own tokenizer",
        ),
        Example(
            """\
            def load(raw: bytes, tokenizer, sample):
                text = raw.decode("utf-8")
                sample.tokens = tokenizer.encode(text)
                return sample
            """,
            title="bytes decode is not a source",
        ),
        Example(
            """\
            def finish(sample, tokenizer):
                sample.response = tokenizer.decode(sample.response_ids)
                return sample
            """,
            title="decoded text stored as text",
        ),
        Example(
            """\
            import hashlib

            def cache_key(ids, tokenizer):
                text = tokenizer.decode(ids)
                return hashlib.sha256(text.encode("utf-8")).hexdigest()
            """,
            title="str.encode of the text is bytes, not ids",
        ),
        Example(
            """\
            def next_turn(sample, tokenizer, user_text):
                turn = f"<|im_start|>user\\n{user_text}<|im_end|>\\n"
                sample.tokens = sample.tokens + tokenizer.encode(turn, add_special_tokens=False)
                return tokenizer.decode(sample.tokens)
            """,
            title="fresh text encoded, ids appended",
        ),
        Example(
            """\
            def check_round_trip(ids, tokenizer, logger):
                again = tokenizer.encode(tokenizer.decode(ids), add_special_tokens=False)
                if again != ids:
                    logger.warning("non-canonical ids: %d vs %d", len(again), len(ids))
            """,
            title="re-encoding only compared",
        ),
        Example(
            """\
            def render(ids, tokenizer):
                return tokenizer.decode(ids)

            def show(sample, tokenizer, processor):
                text = render(sample.tokens, tokenizer)
                prompt = processor.apply_chat_template([{"role": "user", "content": text}])
                return prompt
            """,
            title="processor chat template renders text (tokenize defaults to False)",
        ),
    ]
    INVALID = [
        Example(
            """\
            def next_turn(sample, tokenizer, user_text):
                history = tokenizer.decode(sample.tokens)
                prompt = history + f"<|im_start|>user\\n{user_text}<|im_end|>\\n"
                sample.tokens = tokenizer.encode(prompt, add_special_tokens=False)
            """,
            line=4,
            contains="stored in `sample.tokens`",
            title="decode then encode in one function",
        ),
        Example(
            """\
            def render(ids, tokenizer):
                return tokenizer.decode(ids, skip_special_tokens=False)

            def build_prompt(sample, tokenizer, suffix):
                text = render(sample.tokens, tokenizer) + suffix
                ids = tokenizer(text, add_special_tokens=False)["input_ids"]
                return ids
            """,
            line=7,
            contains="returned by `build_prompt()`",
            title="across two functions, returned",
        ),
        Example(
            """\
            async def regenerate(engine, tokenizer, ids):
                return await engine.async_generate(input_ids=tokenizer.encode(tokenizer.decode(ids)))
            """,
            line=2,
            contains="sent as `input_ids=`",
            title="sent as a keyword",
        ),
        Example(
            """\
            class Loader:
                def load(self, prompt, images):
                    if isinstance(prompt, list):
                        prompt = self._tokenizer.decode(prompt)
                    ret = self._processor(text=[prompt], images=images, return_tensors="pt")
                    input_ids = ret["input_ids"].flatten()
                    return input_ids, ret
            """,
            line=7,
            title="the engine's legacy loader shape: decode, processor, input_ids",
        ),
        Example(
            """\
            import re

            class MiMoProcessor:
                def get_mm_data(self, prompt, images):
                    if not isinstance(prompt, str):
                        prompt = self._tokenizer.decode(prompt)
                    mp = self.mimo_processor
                    text_parts = re.split(self.mm_tokens.get_combined_regex(), prompt)
                    input_ids = []
                    for part in text_parts:
                        if part == "<image>":
                            input_ids += [mp.image_token_id] * 64
                        elif part:
                            input_ids += mp.tokenizer.encode(part)
                    return MultimodalProcessorOutput(
                        mm_items=images,
                        input_ids=input_ids,
                    )
            """,
            line=15,
            contains="returned by `get_mm_data()`",
            title="SGLang 0.5.15 MiMo-V2 shape: decode, re.split on placeholders, encode each part",
        ),
        Example(
            """\
            def add_turn(sample, tokenizer, messages):
                messages.append({"role": "assistant", "content": tokenizer.decode(sample.response_ids)})
                sample.tokens = tokenizer.apply_chat_template(messages, tokenize=True)
            """,
            line=3,
            title="apply_chat_template over decoded messages",
        ),
        Example(
            """\
            def requests(tokenizer, batch_ids, url):
                texts = tokenizer.batch_decode(batch_ids)
                prompts = ["{} Answer:".format(t) for t in texts]
                out = []
                for p in prompts:
                    out.append({"input_ids": tokenizer.encode(p), "sampling_params": {}})
                post(url, json=out)
            """,
            line=7,
            title="batch_decode, format(), comprehension, request dicts",
        ),
        Example(
            """\
            def rebuild(tokens, tokenizer):
                text = tokenizer.convert_tokens_to_string(tokens)
                enc = tokenizer.encode_plus(text)
                return {"tokens": enc.input_ids}
            """,
            line=4,
            title="convert_tokens_to_string + encode_plus, returned dict",
        ),
        Example(
            """\
            def next_turn(sample, detok, user_text):
                text = detok.decode_ids(sample.tokens) + user_text
                sample.tokens = detok.text_to_ids(text)
            """,
            options={"decode-methods": ["decode_ids"], "encode-methods": ["text_to_ids"]},
            line=3,
            title="configured decode/encode methods",
        ),
        Example(
            """\
            --- a/rollout.py
            +++ b/rollout.py
            @@ -1,3 +1,3 @@
             def next_turn(sample, tokenizer, user_text):
                 history = tokenizer.decode(sample.tokens)
            -    sample.tokens = sample.tokens + tokenizer.encode(user_text)
            +    sample.tokens = tokenizer.encode(history + user_text)
            """,
            kind="patch",
            line=7,
            title="patch adding the re-encode",
        ),
        Example(
            EXACT_PATCH,
            kind="patch",
            engine=EXACT_ENGINE,
            line=7,
            title="exact mode: the decode is in a helper outside the hunk",
        ),
    ]

    @classmethod
    def can_match(cls, text: str, settings: Any = None) -> bool:
        """The pre-filter follows the configured source names (the class `requires` are the defaults').

        A source is a *call* of a decode method, so the name must be followed by `(` (after
        blanks, comments or line continuations): the word alone ("prefill and decode", a
        `forward_decode` attribute) cannot fire.  On SGLang 0.5.15 this lets 158 files through
        instead of 719."""
        options = settings.options_for(cls.code) if settings is not None else None
        groups = cls.requires_for(options)
        if not groups:
            return True
        if not any(all(s in text for s in g) for g in groups):
            return False
        if _call_re(tuple(g[0] for g in groups)).search(text) is None:
            return False
        return cls.can_fire(text, {**DEFAULTS, **(options or {})})

    @staticmethod
    def can_fire(text: str, o: dict[str, Any]) -> bool:
        """Whether the module has both ingredients of a finding (read with `ast`, see
        patchaudit/analysis/gate.py): a source, a decode-method call on a receiver named like a
        tokenizer (`_decode_source`), and an encode (`call`: `apply_chat_template`, an
        encode method on such a receiver, or a call of something named like a tokenizer
        that is not a verb).  Without both, no value ever carries a re-tokenized label.
        On SGLang 0.5.15 this leaves 20 of the 163 files the text filter lets through."""
        if not string_lists(o, ("decode-methods", "encode-methods", "tokenizer-names")):
            return True
        f = facts(text)
        if f is None:
            return True
        tok, decode, encode = o["tokenizer-names"], o["decode-methods"], o["encode-methods"]
        calls = f.calls
        if not any(c.name in decode and c.receiver is not None and matches(c.receiver, tok) for c in calls):
            return False
        return any(
            c.name == "apply_chat_template"
            or (c.name in encode and c.receiver is not None and matches(c.receiver, tok))
            or (matches(c.name, tok) and not matches(c.name, VERB_NAMES))
            for c in calls
        )

    @classmethod
    def requires_for(cls, options: dict[str, Any] | None):
        methods = (options or {}).get("decode-methods", DEFAULTS["decode-methods"])
        if not isinstance(methods, list) or not all(isinstance(m, str) and m for m in methods):
            return ()
        return tuple((m,) for m in methods)

    def leave_Module(self, original_node: cst.Module) -> None:
        check_options(self.context.options, DEFAULTS)
        hits = analyse(original_node, _Spec(self.opts), lambda n: self.get_metadata(PositionProvider, n))
        for h in hits:
            self.report(h.node, h.message, trace=h.steps, severity=h.severity)
