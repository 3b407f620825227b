from __future__ import annotations

import re
from typing import Any

import libcst as cst
from libcst.metadata import PositionProvider

from patchaudit.analysis.dataflow import (
    IDS,
    OBJECT,
    CallSite,
    FlowSpec,
    StoreSite,
    Value,
    analyse,
    matches,
    path_matches,
    receiver_name,
)
from patchaudit.analysis.gate import facts, literal_runs, some_word_may_match, string_lists
from patchaudit.lint.rule import PYTHON, Example, Rule
from patchaudit.model.findings import Severity

PROCESSOR = "processor"  # a multimodal processor object
PROCESSOR_OUTPUT = "processor-output"  # what calling it returns (BatchFeature)
EXPANDED = "expanded-ids"  # its input_ids: each image already expanded into its pad tokens

#: names of functions rather than of objects: a verb first, or a conversion
VERB_NAMES = [
    "get_*",
    "_get_*",
    "load_*",
    "_load_*",
    "build_*",
    "_build_*",
    "create_*",
    "_create_*",
    "make_*",
    "_make_*",
    "init_*",
    "_init_*",
    "set_*",
    "_set_*",
    "register_*",
    "_register_*",
    "is_*",
    "_is_*",
    "has_*",
    "_has_*",
    "*_from_*",
    "*_to_*",
    "wrap_*",
    "patch_*",
    "_patch_*",
    "run_*",
    "_run_*",
]
#: processors that are not multimodal input processors
OTHER_PROCESSORS = [
    "*logits_processor",
    "*logit_processor",
    "*output_processor",
    "*post_processor",
    "*reasoning_processor",
    "*sampling_processor",
    "*stream_processor",
    "*batch_processor",
    "*data_processor",
    "*request_processor",
    "*response_processor",
    "*image_processor",
    "*audio_processor",
    "*video_processor",
    "*feature_processor",
]

DEFAULTS: dict[str, list[str]] = {
    # a callee/receiver/parameter with one of these names is a multimodal processor ...
    "processor-names": ["processor", "*_processor"],
    # ... unless it also matches one of these: functions named for what they do
    # (`get_processor(...)` makes one, `get_tokenizer_from_processor(...)` takes one) and processors
    # of something else (`logits_processor`, `image_processor`: no input_ids)
    "not-processor-names": VERB_NAMES + OTHER_PROCESSORS,
    # ... and so is a parameter annotated with one of these
    "processor-annotations": ["AutoProcessor", "ProcessorMixin", "*Processor", "*.AutoProcessor", "*.ProcessorMixin"],
    # ... and whatever these calls return
    "processor-factories": [
        "AutoProcessor.from_pretrained",
        "*Processor.from_pretrained",
        "*.AutoProcessor.from_pretrained",
        "get_processor",
        "*.get_processor",
        "get_mm_processor",
        "*.get_mm_processor",
        "load_processor",
        "*.load_processor",
    ],
    # keyword arguments that pass media to a processor (a call with none of them, no positional
    # argument and no */** is text-only: its ids are not expanded)
    "media-arguments": ["images", "image", "videos", "video", "audio", "audios", "image_inputs", "video_inputs"],
    # the field of a processor's output that holds the ids
    "ids-fields": ["input_ids"],
    # rollout token fields: attribute names or dotted tails (`sample.tokens`)
    "token-fields": ["tokens"],
    # an engine request's ids key/keyword, and the keys that carry media beside them
    "request-ids-keys": ["input_ids"],
    "request-media-keys": ["image_data", "video_data", "audio_data"],
}

#: the layer's notes for stores and appends (patchaudit.analysis.dataflow)
_STORE_NOTE = re.compile(r"(?:stored in|appended to) `([^`]+)`")

REQUEST_MESSAGE = (
    "ids from a multimodal processor (each image already expanded into its pad tokens) are sent to the "
    "engine as `{key}` together with `{media}`: the engine expects one placeholder per image and expands it "
    "itself, so it re-expands or falls back to decode and re-tokenize (token drift); send the pre-expansion "
    "rollout ids and keep the processor output for training"
)
STORE_MESSAGE = (
    "ids from a multimodal processor (each image already expanded into its pad tokens) are stored in rollout "
    "token field `{field}`: rollout tokens are sent back to the engine, which expects one placeholder per "
    "image; store the pre-expansion ids and keep the processor output for training"
)


def literal_part(pattern: str) -> str:
    """The longest run of literal characters of an fnmatch pattern ("" when it has none)."""
    return max(literal_runs(pattern), key=len, default="")


class _Spec(FlowSpec):
    kinds = {PROCESSOR: OBJECT, PROCESSOR_OUTPUT: OBJECT, EXPANDED: IDS}

    def __init__(self, opts: dict[str, Any]):
        self.o = opts

    def _named_processor(self, name: str | None) -> bool:
        return matches(name, self.o["processor-names"]) and not matches(name, self.o["not-processor-names"])

    def _is_processor(self, name: str | None, value: Value | None) -> bool:
        return self._named_processor(name) or (value is not None and value.has(PROCESSOR))

    # ----- sources -------------------------------------------------------------
    def param(self, flow, function, name, annotation, node):
        if self._named_processor(name):
            return flow.marker(PROCESSOR, ("param", name))
        if annotation is not None:
            ann = flow.snippet(annotation, 200).strip("\"'")
            for part in ann.replace("|", " ").replace("[", " ").replace("]", " ").replace(",", " ").split():
                if matches(part, self.o["processor-annotations"]):
                    return flow.marker(PROCESSOR, ("param", name))
        return None

    def unknown(self, flow, name, node):
        if self._named_processor(name):
            return flow.marker(PROCESSOR, ("name", name))
        return None

    def _text_only(self, site: CallSite) -> bool:
        if site.has_star() or site.positional():
            return False
        for a in site.args:
            if matches(a.keyword, self.o["media-arguments"]) and site.literal(a.keyword) is not None:
                return False
        return True

    def call(self, flow, site: CallSite):
        out = None
        if site.resolved:
            return None
        if matches(site.callee, self.o["processor-factories"]):
            return flow.marker(PROCESSOR, ("factory", id(site.node)))
        if site.receiver is None or site.name != "apply_chat_template":
            if self._is_processor(site.name, site.func) and not self._text_only(site):
                out = flow.source(PROCESSOR_OUTPUT, site.node, f"multimodal processor output `{site.snippet()}`")
        elif site.literal("tokenize") is True and (self._is_processor(receiver_name(site.node), site.receiver)):
            if site.literal("return_dict") is True:
                out = flow.source(PROCESSOR_OUTPUT, site.node, f"multimodal processor output `{site.snippet()}`")
            else:
                out = flow.source(
                    EXPANDED, site.node, f"processor-expanded ids (images expanded) from `{site.snippet()}`"
                )
        self._call_sinks(flow, site)
        return out

    def field(self, flow, base, key, node):
        if key in self.o["ids-fields"] and base.has(PROCESSOR_OUTPUT):
            return flow.derive(
                base, [PROCESSOR_OUTPUT], EXPANDED, node, f"its `{key}` (image placeholders already expanded)"
            )
        return None

    # ----- sinks -----------------------------------------------------------------
    def store(self, flow, site: StoreSite):
        if not path_matches(site.path, self.o["token-fields"]) and not (
            site.path is None and matches(site.attr, self.o["token-fields"])
        ):
            return
        shown = site.path or site.attr
        for _, origin, steps in site.value.find(EXPANDED)[:1]:
            if self._stored_before(steps[:-1]):
                continue  # `sample.tokens = sample.tokens + new`: the first store is the finding

            flow.report(site.node, STORE_MESSAGE.format(field=shown), steps, origin, f"rollout token field `{shown}`")

    def _stored_before(self, steps) -> bool:
        for _, note in steps:
            for m in _STORE_NOTE.finditer(note):
                if path_matches(m.group(1), self.o["token-fields"]):
                    return True
        return False

    def _call_sinks(self, flow, site: CallSite):
        media = [
            a for a in site.args if a.keyword in self.o["request-media-keys"] and site.literal(a.keyword) is not None
        ]
        for a in site.args:
            if a.keyword is None:
                continue
            hits = a.value.find(EXPANDED)[:1]
            if not hits:
                continue
            _, origin, steps = hits[0]
            if media and a.keyword in self.o["request-ids-keys"]:
                m = media[0]
                flow.report(
                    a.node,
                    REQUEST_MESSAGE.format(key=a.keyword, media=m.keyword),
                    steps,
                    origin,
                    f"sent as `{a.keyword}` with `{m.keyword}` (line {flow.line(m.node)})",
                )
            elif matches(a.keyword, self.o["token-fields"]):
                flow.report(
                    a.node,
                    STORE_MESSAGE.format(field=f"{site.name}({a.keyword}=...)"),
                    steps,
                    origin,
                    f"rollout token field `{a.keyword}`",
                )

    def finish(self, flow):
        for obj in flow.objects():
            media = [(k, fe) for k, fe in obj.fields.items() if k in self.o["request-media-keys"] and not fe.none]
            for key, fe in obj.fields.items():
                hits = fe.value.find(EXPANDED)[:1]
                if not hits:
                    continue
                _, origin, steps = hits[0]
                if media and key in self.o["request-ids-keys"]:
                    mk, mfe = media[0]
                    flow.report(
                        fe.node,
                        REQUEST_MESSAGE.format(key=key, media=mk),
                        steps,
                        origin,
                        f"sent to the engine as `{key}` in a request that also carries `{mk}` (line {mfe.line})",
                    )
                elif matches(key, self.o["token-fields"]):
                    flow.report(fe.node, STORE_MESSAGE.format(field=key), steps, origin, f"rollout token field `{key}`")


def check_options(opts: dict[str, Any], defaults: dict[str, Any]) -> None:
    """Raise ValueError naming the key when a configured option has the wrong shape."""
    for key, value in opts.items():
        if key not in defaults:
            raise ValueError(f"unknown option {key!r} (known: {', '.join(sorted(defaults))})")
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"option {key!r}: expected a list of strings, got {value!r}")


SEED_SHAPE = """\
from typing import Any


def _prepare_initial_inputs(sample, processor, tokenizer):
    if processor:
        processor_output = processor(text=sample.prompt, **(sample.multimodal_inputs or {}))
        prompt_ids = processor_output["input_ids"][0]
        sample.multimodal_train_inputs = {
            k: v for k, v in processor_output.items() if k not in ["input_ids", "attention_mask"]
        } or None
    else:
        prompt_ids = tokenizer.encode(sample.prompt, add_special_tokens=False)
    image_data = []
    if sample.multimodal_inputs and sample.multimodal_inputs.get("images"):
        image_data = [encode_image_for_rollout_engine(img) for img in sample.multimodal_inputs["images"]]
    return prompt_ids, image_data, sample.multimodal_train_inputs


def _prepare_start_state(sample, state, args: Any, sampling_params: dict):
    prompt_ids, image_data, init_mm_train = _prepare_initial_inputs(sample, state.processor, state.tokenizer)
    current_image_data = image_data
    if not sample.tokens:
        sample.tokens = list(prompt_ids)
    response_tokens = sample.tokens[len(prompt_ids):] if len(sample.tokens) >= len(prompt_ids) else []
    return current_image_data, response_tokens


async def _run_inference_step(url: str, tokens: list[int], sampling_params: dict, image_data, tokenizer):
    payload = {
        "input_ids": tokens,
        "sampling_params": sampling_params,
        "return_logprob": True,
    }
    if image_data:
        payload["image_data"] = image_data
    return await post(url, payload)


async def generate(args, sample, state, sampling_params):
    url = f"http://{args.sglang_router_ip}:{args.sglang_router_port}/generate"
    image_data, response_tokens = _prepare_start_state(sample, state, args, sampling_params)
    output = await _run_inference_step(url, sample.tokens, sampling_params, image_data, state.tokenizer)
    return output
"""

CLEAN_SEED_SHAPE = """\
def _prepare_initial_inputs(sample, processor, tokenizer):
    # rollout ids: one <|image_pad|> placeholder per image, exactly what the engine expects
    rollout_ids = tokenizer.encode(sample.prompt, add_special_tokens=False)
    if processor:
        processor_output = processor(text=sample.prompt, **(sample.multimodal_inputs or {}))
        sample.multimodal_train_inputs = dict(processor_output)      # expanded: training only
        sample.train_input_ids = processor_output["input_ids"][0]
    image_data = [encode_image_for_rollout_engine(img) for img in sample.multimodal_inputs["images"]]
    return rollout_ids, image_data


def _prepare_start_state(sample, state):
    prompt_ids, image_data = _prepare_initial_inputs(sample, state.processor, state.tokenizer)
    if not sample.tokens:
        sample.tokens = list(prompt_ids)
    return image_data


async def _run_inference_step(url, tokens, sampling_params, image_data):
    payload = {"input_ids": tokens, "sampling_params": sampling_params, "return_logprob": True}
    if image_data:
        payload["image_data"] = image_data
    return await post(url, payload)


async def generate(url, sample, state, sampling_params):
    image_data = _prepare_start_state(sample, state)
    return await _run_inference_step(url, sample.tokens, sampling_params, image_data)
"""


EXACT_ENGINE_FILE = """\
def prepare(sample, processor):
    out = processor(text=sample.prompt, images=sample.images)
    return out["input_ids"][0], sample.images


def unrelated():
    return 1


def start(sample, processor, tokenizer):
    ids, images = prepare(sample, processor)
    sample.tokens = list(tokenizer.encode(sample.prompt))
    return sample
"""

EXACT_ENGINE = {
    "python/sglang/__init__.py": "",
    "python/sglang/srt/__init__.py": "",
    "python/sglang/srt/rollout.py": EXACT_ENGINE_FILE,
}

EXACT_PATCH = """\
--- a/python/sglang/srt/rollout.py
+++ b/python/sglang/srt/rollout.py
@@ -10,4 +10,4 @@
 def start(sample, processor, tokenizer):
     ids, images = prepare(sample, processor)
-    sample.tokens = list(tokenizer.encode(sample.prompt))
+    sample.tokens = list(ids)
     return sample
"""

#: the same engine file where the flow is already there before any patch
EXACT_ENGINE_FLOWING = dict(EXACT_ENGINE)
EXACT_ENGINE_FLOWING["python/sglang/srt/rollout.py"] = EXACT_ENGINE_FILE.replace(
    "list(tokenizer.encode(sample.prompt))", "list(ids)"
)

EXACT_PATCH_UNRELATED = """\
--- a/python/sglang/srt/rollout.py
+++ b/python/sglang/srt/rollout.py
@@ -6,3 +6,3 @@
 
 def unrelated():
-    return 1
+    return 2
"""


class ExpandedIdsAsRolloutTokens(Rule):
    """
    Flags multimodal-processor ids that reach rollout tokens or an engine request with images.

    ## What it does
    Follows, inside a module, the `input_ids` produced by a multimodal processor
    (`processor(...)["input_ids"]`, `processor(...).input_ids`,
    `processor.apply_chat_template(..., tokenize=True)`; the callee is a
    processor by name, parameter name, annotation or `AutoProcessor.from_pretrained`)
    through assignments, tuple unpacking, `list()`/slicing/`+`, attribute stores,
    returns and calls of functions of the same module, and reports where they
    end up in a rollout token field (`sample.tokens`) or as the `input_ids` of an
    engine request that also carries image data (a dict literal, a dict built by
    item assignment, or `input_ids=`/`image_data=` keywords).  The finding is at
    the sink and carries the whole trace from the processor call.  A text-only
    tokenizer's ids, or a processor called with text only, are not a source.

    Options (`[tool.patchaudit.rules.PA102]`, lists of names or fnmatch
    patterns): `processor-names`, `processor-annotations`,
    `not-processor-names`, `processor-factories`, `media-arguments`, `ids-fields`, `token-fields`,
    `request-ids-keys`, `request-media-keys`.

    ## Why is this bad?
    A multimodal processor expands every image placeholder into as many pad
    tokens as the image has features.  Sent back to SGLang as `input_ids` next
    to the image itself, those ids no longer have one placeholder per image:
    the engine's token-id path cannot line the images up with the ids and falls
    back to decoding and re-tokenizing the prompt, so the ids the engine runs on
    drift from the ids the trainer sees (and router replay goes out of step).

    ## Example
    ```python
    def _prepare_initial_inputs(sample, processor):
        processor_output = processor(text=sample.prompt, images=sample.images)
        prompt_ids = processor_output["input_ids"][0]
        return prompt_ids, sample.images

    def _prepare_start_state(sample, state):
        prompt_ids, image_data = _prepare_initial_inputs(sample, state.processor)
        sample.tokens = list(prompt_ids)
        return image_data

    async def _run_inference_step(url, tokens, image_data):
        payload = {"input_ids": tokens, "image_data": image_data}
        return await post(url, payload)
    ```

    ## Use instead
    Keep the pre-expansion rollout ids (the tokenizer's ids of the prompt, one
    placeholder per image) in `sample.tokens` and send those; keep the
    processor's expanded output only as training inputs:
    ```python
    rollout_ids = tokenizer.encode(sample.prompt, add_special_tokens=False)
    sample.multimodal_train_inputs = dict(processor(text=sample.prompt, images=sample.images))
    sample.tokens = list(rollout_ids)
    ```

    ## Incident
    slime's `examples/geo3k_vlm_multi_turn/rollout.py` wrote processor output
    into `sample.tokens` (`_prepare_initial_inputs` -> `_prepare_start_state`)
    and sent that sequence as `input_ids` with `image_data`
    (`_run_inference_step`); seed report 002.
    """

    code = "PA102"
    name = "expanded-ids-as-rollout-tokens"
    severity = Severity.ERROR
    kinds = frozenset({PYTHON})
    # a source needs the ids field (or apply_chat_template) *and* a processor, which is always
    # recognised by a name, annotation or factory holding "processor"/"Processor" by default
    # (requires_for derives the same from configured names; a test keeps the two equal)
    requires = (
        ("input_ids", "Processor"),
        ("input_ids", "processor"),
        ("apply_chat_template", "Processor"),
        ("apply_chat_template", "processor"),
    )
    options = {k: list(v) for k, v in DEFAULTS.items()}
    METADATA_DEPENDENCIES = (PositionProvider,)

    VALID = [
        Example(CLEAN_SEED_SHAPE, title="seed shape with pre-expansion rollout ids for the engine"),
        Example(
            """\
            def prompt_stats(sample, processor):
                out = processor(text=sample.prompt, images=sample.images)
                sample.prompt_length = len(out["input_ids"][0])
                n_image_tokens = int((out["input_ids"][0] == IMAGE_PAD).sum())
                return {"input_ids": len(out["input_ids"][0]), "image_data": sample.images, "n": n_image_tokens}
            """,
            title="processor ids only counted",
        ),
        Example(
            """\
            def prepare(sample, tokenizer, images):
                prompt_ids = tokenizer(sample.prompt)["input_ids"]
                sample.tokens = list(prompt_ids)
                payload = {"input_ids": sample.tokens, "image_data": images}
                return payload
            """,
            title="text-only tokenizer path",
        ),
        Example(
            """\
            class Sample:
                tokens: list

            def parse(record, processor_config):
                sample = Sample()
                sample.tokens = [int(t) for t in record["tokens"]]
                pixel = processor_config["image_processor"](record["image"])["pixel_values"]
                request = {"input_ids": sample.tokens, "image_data": [pixel]}
                return request
            """,
            title="same names, unrelated code",
        ),
        Example(
            """\
            def build(sample, processor, tokenizer):
                expanded = processor(text=sample.prompt, images=sample.images)["input_ids"][0]
                rollout = tokenizer.encode(sample.prompt)
                return expanded, rollout

            def start(sample, processor, tokenizer):
                train_ids, rollout_ids = build(sample, processor, tokenizer)
                sample.train_input_ids = train_ids
                sample.tokens = list(rollout_ids)
            """,
            title="element-precise unpacking",
        ),
        Example(
            """\
            def start(sample, processor):
                ids = processor(text=sample.prompt)["input_ids"][0]
                sample.tokens = list(ids)
            """,
            title="processor called with text only: nothing expanded",
        ),
        Example(
            """\
            def log_ids(sample, processor, logger):
                ids = processor(text=sample.prompt, images=sample.images)["input_ids"][0]
                logger.info(f"expanded prompt: {ids}")
                record = {"tokens": str(ids), "image_data": sample.images}
                return record
            """,
            title="f-string and str() end the id flow",
        ),
        Example(
            """\
            def send_text_only(url, processor, sample):
                ids = processor(text=sample.prompt, images=sample.images).input_ids[0].tolist()
                return post(url, {"input_ids": ids, "sampling_params": {}})
            """,
            title="request without image data",
        ),
        Example(
            """\
            def start(sample, processor, tokenizer):
                ids = processor(text=sample.prompt, images=sample.images)["input_ids"]
                n = len(ids)
                ids = tokenizer.encode(sample.prompt)
                sample.tokens = ids
                return n
            """,
            title="variable reassigned before the store",
        ),
        Example(
            """\
            def request(sample, processor, tokenizer):
                out = processor(text=sample.prompt, images=sample.images)
                ids = tokenizer.encode(sample.prompt)
                return {"input_ids": ids, "image_data": out["pixel_values"]}
            """,
            title="only the pixel values of the processor output are sent",
        ),
        Example(
            """\
            def to_list(x):
                return list(x)

            def start(sample, processor, tokenizer):
                n = len(to_list(processor(text=sample.prompt, images=sample.images)["input_ids"][0]))
                sample.tokens = to_list(tokenizer.encode(sample.prompt))
                return n
            """,
            title="one helper, two call contexts",
        ),
        Example(
            """\
            async def step(engine, sample, processor, images):
                ids = processor(text=sample.prompt, images=images)["input_ids"][0]
                return await engine.async_generate(input_ids=sample.tokens, image_data=images, meta=len(ids))
            """,
            title="keyword request with other ids",
        ),
        Example(
            """\
            def start(sample, processor):
                text = processor.apply_chat_template(sample.messages, tokenize=False)
                sample.tokens = processor.tokenizer.encode(text)
            """,
            title="chat template rendered as text, then tokenized",
        ),
        Example(
            """\
            --- a/rollout.py
            +++ b/rollout.py
            @@ -1,5 +1,5 @@
             def start(sample, processor, tokenizer):
                 processor_output = processor(text=sample.prompt, images=sample.images)
            -    sample.tokens = list(processor_output["input_ids"][0])
            +    sample.tokens = list(tokenizer.encode(sample.prompt))
                 sample.multimodal_train_inputs = dict(processor_output)
                 return sample
            """,
            kind="patch",
            title="patch replacing expanded ids by rollout ids",
        ),
        Example(
            """\
            --- a/rollout.py
            +++ b/rollout.py
            @@ -1,4 +1,5 @@
             def start(sample, processor):
                 processor_output = processor(text=sample.prompt, images=sample.images)
                 sample.tokens = list(processor_output["input_ids"][0])
            +    logger.debug("prepared %s", sample.index)
                 return sample
            """,
            kind="patch",
            title="patch whose added line is not on the flow",
        ),
        Example(
            EXACT_PATCH_UNRELATED,
            kind="patch",
            engine=EXACT_ENGINE_FLOWING,
            title="exact mode: the flow predates the patch, which changes a line off the flow",
        ),
    ]
    INVALID = [
        Example(
            SEED_SHAPE,
            line=30,
            contains="`input_ids` together with `image_data`",
            title="seed shape: processor ids -> tuple return -> list() -> sample.tokens -> payload",
        ),
        Example(
            """\
            def start(sample, processor):
                sample.tokens = processor(text=sample.prompt, images=sample.images)["input_ids"][0].tolist()
            """,
            line=2,
            contains="rollout token field `sample.tokens`",
            title="inline store",
        ),
        Example(
            """\
            async def step(engine, processor, prompt, images):
                out = processor(text=[prompt], images=images, return_tensors="pt")
                return await engine.async_generate(input_ids=out.input_ids[0].tolist(), image_data=images)
            """,
            line=3,
            contains="`input_ids` together with `image_data`",
            title="keyword request, .input_ids",
        ),
        Example(
            """\
            def request(processor, messages, images):
                ids = processor.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
                payload = {"sampling_params": {"max_new_tokens": 64}}
                payload["input_ids"] = ids
                payload["image_data"] = images
                return payload
            """,
            line=4,
            title="apply_chat_template(tokenize=True), dict built by item assignment",
        ),
        Example(
            """\
            from transformers import AutoProcessor

            proc = AutoProcessor.from_pretrained("Qwen/Qwen2.5-VL-7B-Instruct")

            def start(sample):
                batch = proc(text=sample.prompt, images=sample.images)
                sample.tokens = batch["input_ids"][0].tolist()
            """,
            line=7,
            title="AutoProcessor.from_pretrained at module level",
        ),
        Example(
            """\
            from transformers import ProcessorMixin

            def start(sample, p: ProcessorMixin):
                out = p(text=sample.prompt, images=sample.images)
                prompt_ids = out.get("input_ids")[0]
                sample.tokens = prompt_ids + sample.response_ids
            """,
            line=6,
            title="annotated parameter, .get(), + concatenation",
        ),
        Example(
            """\
            class Rollout:
                def __init__(self, model_path):
                    self.proc = AutoProcessor.from_pretrained(model_path)
                    self.tokens = []

                def encode(self, prompt, images):
                    return self.proc(text=prompt, images=images)["input_ids"][0]

                def start(self, prompt, images):
                    self.tokens.extend(self.encode(prompt, images))

                def request(self, images):
                    return {"input_ids": self.tokens, "image_data": images}
            """,
            line=13,
            title="self fields across methods, .extend",
        ),
        Example(
            """\
            def start(sample, processor):
                ids = processor(text=sample.prompt, images=sample.images)["input_ids"][0]
                sample.prompt_token_ids = ids
            """,
            options={"token-fields": ["prompt_token_ids"]},
            line=3,
            title="configured token field",
        ),
        Example(
            """\
            def start(sample, vlm):
                ids = vlm(text=sample.prompt, images=sample.images)["input_ids"][0]
                sample.tokens = ids
            """,
            options={"processor-names": ["vlm"]},
            line=3,
            title="configured processor name",
        ),
        Example(
            """\
            def make(processor, prompt, images):
                *_, ids = [None, processor(text=prompt, images=images)["input_ids"][0]]
                return Sample(tokens=ids, images=images)
            """,
            line=3,
            title="starred unpacking, constructor keyword",
        ),
        Example(
            """\
            --- a/rollout.py
            +++ b/rollout.py
            @@ -1,4 +1,4 @@
             def start(sample, processor, tokenizer):
                 processor_output = processor(text=sample.prompt, images=sample.images)
            -    sample.tokens = list(tokenizer.encode(sample.prompt))
            +    sample.tokens = list(processor_output["input_ids"][0])
                 return sample
            """,
            kind="patch",
            line=7,
            title="patch adding the store",
        ),
        Example(
            """\
            --- a/rollout.py
            +++ b/rollout.py
            @@ -1,4 +1,4 @@
             def start(sample, processor, tokenizer):
            -    prompt_ids = tokenizer.encode(sample.prompt)
            +    prompt_ids = processor(text=sample.prompt, images=sample.images)["input_ids"][0]
                 sample.tokens = list(prompt_ids)
                 return sample
            """,
            kind="patch",
            line=6,
            title="patch adding the source: the sink is on a context line, the finding on the added line",
        ),
        Example(
            EXACT_PATCH,
            kind="patch",
            engine=EXACT_ENGINE,
            line=7,
            contains="`sample.tokens`",
            title="exact mode: the source is in the engine file, outside the hunk",
        ),
    ]

    @classmethod
    def can_match(cls, text: str, settings: Any = None) -> bool:
        """The pre-filter follows the configured source names (the class `requires` are the defaults')."""
        options = settings.options_for(cls.code) if settings is not None else None
        groups = cls.requires_for(options)
        if groups and not any(all(s in text for s in g) for g in groups):
            return False
        return cls.can_fire(text, {**DEFAULTS, **(options or {})})

    @staticmethod
    def can_fire(text: str, o: dict[str, Any]) -> bool:
        """Whether the module has both ingredients of a finding (read with `ast`, see
        patchaudit/analysis/gate.py).  A processor: a name, attribute or parameter named like one
        (`param`, `unknown`, a call's or receiver's name), a parameter annotated like one,
        or a call of a processor factory; every expanded-ids value starts from one.  And a
        sink: a path component, keyword or key that could match `token-fields`, or a media
        key beside an ids key (`store`, `_call_sinks`, `finish`).
        On SGLang 0.5.15 this leaves 51 of the 254 files the text filter lets through."""
        keys = (
            "processor-names",
            "not-processor-names",
            "processor-annotations",
            "processor-factories",
            "token-fields",
            "request-ids-keys",
            "request-media-keys",
        )
        if not string_lists(o, keys):
            return True
        f = facts(text)
        if f is None:
            return True
        names = f.names
        source = (
            any(matches(n, o["processor-names"]) and not matches(n, o["not-processor-names"]) for n in names)
            or any(matches(c.dotted, o["processor-factories"]) for c in f.calls)
            or any(matches(p, o["processor-annotations"]) for p in f.annotation_parts())
        )
        if not source:
            return False
        words = f.words()
        return some_word_may_match(words, o["token-fields"]) or (
            any(k in words for k in o["request-media-keys"]) and any(k in words for k in o["request-ids-keys"])
        )

    @classmethod
    def requires_for(cls, options: dict[str, Any] | None):
        """The pre-filter for these options: an ids field (or apply_chat_template) and the
        literal part of some processor name, annotation or factory pattern."""
        o = {**DEFAULTS, **(options or {})}
        fields = o["ids-fields"]
        if not isinstance(fields, list) or not all(isinstance(f, str) and f for f in fields):
            return ()
        firsts = tuple(fields) + ("apply_chat_template",)
        frags: set[str] = set()
        for key in ("processor-names", "processor-annotations", "processor-factories"):
            patterns = o[key]
            if not isinstance(patterns, list):
                return ()
            for pattern in patterns:
                frag = literal_part(pattern) if isinstance(pattern, str) else ""
                if not frag:
                    return tuple((f,) for f in firsts)  # a pattern without a literal: cannot narrow
                frags.add(frag)
        # a text holding a longer fragment holds every fragment inside it: keep the shortest
        minimal = sorted(f for f in frags if not any(g != f and g in f for g in frags))
        return tuple((f, g) for f in firsts for g in minimal)

    def leave_Module(self, original_node: cst.Module) -> None:
        check_options(self.context.options, DEFAULTS)
        hits = analyse(original_node, _Spec(self.opts), lambda n: self.get_metadata(PositionProvider, n))
        for h in hits:
            self.report(h.node, h.message, trace=h.steps, severity=h.severity)
