"""PA102's VALID/INVALID examples (its tests, run through the real pipeline) and the
example trees they use: kept beside the rule so that the rule file stays readable."""

from __future__ import annotations

from patchaudit.lint.rule import Example

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


def request(sample):
    return {"input_ids": sample.tokens, "image_data": sample.images}
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


AGENT_BASE = """\
class AgentLoopBase:
    def __init__(self, processor):
        self.processor = processor

    def build_prompt_ids(self, messages, images):
        out = self.processor(text=messages, images=images, return_tensors="pt")
        return out["input_ids"][0].tolist()
"""

PAYLOADS = """\
def build_payload(input_ids, images=None):
    payload = {"input_ids": list(input_ids), "sampling_params": {}}
    if images:
        payload["image_data"] = images
    return payload
"""

PROMPTS = """\
def prompt_ids_of(state, sample):
    if state.processor and sample.images:
        return state.processor(text=sample.prompt, images=sample.images)["input_ids"][0]
    return state.tokenizer.encode(sample.prompt)
"""

SAMPLE_TYPE = """\
class Sample:
    tokens: list
    images: list
"""

CARRIER_ROLLOUT = """\
from mytypes import Sample


def start(sample: Sample, processor):
    out = processor(text=sample.prompt, images=sample.images)
    sample.tokens = out["input_ids"][0].tolist()
    sample.pixels = out["pixel_values"]
"""

AGENT_STATE_BASE = """\
class AgentState:
    def __init__(self, messages, images):
        self.messages = messages
        self.images = images
        self.prompt_ids = []
        self.train_ids = []


class StateLoopBase:
    def pending(self, state):
        out = self.processor(text=state.messages, images=state.images, return_tensors="pt")
        state.prompt_ids = out["input_ids"][0].tolist()

    def pending_for_training(self, state):
        out = self.processor(text=state.messages, images=state.images, return_tensors="pt")
        state.train_ids = out["input_ids"][0].tolist()
        state.prompt_ids = self.tokenizer.apply_chat_template(state.messages, tokenize=True)
"""

FILL_STATE = """\
def fill_prompt(state, processor):
    state.prompt_ids = processor(text=state.prompt, images=state.images)["input_ids"][0].tolist()
"""

#: a subclass that fills a state by an inherited method (`pending`) and sends its ids
PARTIAL_LOOP = """\
from state_base import AgentState, StateLoopBase


class PartialLoop(StateLoopBase):
    async def run(self, messages, images):
        state = AgentState(messages, images)
        self.{pending}(state)
        return await self.server_manager.generate_for_partial(
            request_id="r", prompt_ids=state.prompt_ids, image_data=state.images
        )
"""

DATASET = """\
def encode_prompt(processor, row):
    return processor(text=row["text"], images=row["images"])["input_ids"][0].tolist()
"""


VALID = [
    Example(
        """\
        def text_to_image(processor, prompt, target_images, url):
            messages = [{"role": "user", "content": [{"type": "text", "text": prompt}]}]
            inputs = processor.apply_chat_template(messages, tokenize=True, return_dict=True)
            payload = {"input_ids": inputs["input_ids"][0].tolist(), "image_data": target_images}
            return post(url, payload)
        """,
        title="a chat written in the code with text only: the processor expands no placeholder",
    ),
    Example(
        """\
        def generate_image(processor, prompt, images, url):
            content = [{"type": "image", "image": img} for img in images or []]
            content.append({"type": "text", "text": prompt})
            inputs = processor.apply_chat_template(
                [{"role": "user", "content": content}], tokenize=True, return_dict=True
            )
            grid = inputs["image_grid_thw"]
            payload = {
                "input_ids": inputs["input_ids"][0].tolist(),
                "image_data": [{"image_grid_thw": grid.tolist()}],
            }
            return post(url, payload)
        """,
        title="media written as grid metadata only (GLM-Image's target grids): no image to expand",
    ),
    Example(
        PARTIAL_LOOP.format(pending="pending_for_training"),
        files={"state_base.py": AGENT_STATE_BASE},
        title="repository: an inherited method keeps the processor ids for training, the engine gets the tokenizer's",
    ),
    Example(CLEAN_SEED_SHAPE, title="seed shape with pre-expansion rollout ids for the engine"),
    Example(
        """\
        from mytypes import Sample


        async def generate(url, sample: Sample):
            return await post(url, {"text": sample.prompt, "image_data": sample.images})


        def train_batch(sample: Sample):
            return {"input_ids": sample.tokens, "pixel_values": sample.pixels}
        """,
        files={"mytypes.py": SAMPLE_TYPE, "rollout.py": CARRIER_ROLLOUT},
        title="repository: expanded ids in sample.tokens stay training-only, the engine gets text",
    ),
    Example(
        """\
        async def generate(url, sample):
            payload = {"input_ids": sample.tokens, "image_data": sample.images}
            return await post(url, payload)
        """,
        files={"other_script.py": CARRIER_ROLLOUT},
        title="repository: the same field name in an unrelated script (no common module)",
    ),
    Example(
        """\
        def generate(url, sample, processor, tokenizer):
            prompt_ids = processor(text=sample.prompt, images=sample.images)["input_ids"][0]
            payload = {"sampling_params": {}}
            if sample.images:
                payload["image_data"] = sample.images
                payload["text"] = sample.prompt
            else:
                payload["input_ids"] = prompt_ids
            sample.tokens = prompt_ids
            return post(url, payload)
        """,
        title="ids and images in exclusive branches of one request",
    ),
    Example(
        """\
        SEND_IDS = False


        def generate(url, sample, processor):
            ids = processor(text=sample.prompt, images=sample.images)["input_ids"][0]
            payload = {"text": sample.prompt, "image_data": sample.images}
            if SEND_IDS:
                payload["input_ids"] = ids
            return post(url, payload)
        """,
        title="a branch behind a module constant that is false",
    ),
    Example(
        """\
        def prompt(processor, row):
            ids = processor(text=row["text"], images=row["images"])["input_ids"][0].tolist()
            ids = qwen2_5_vl_dedup_image_tokens(ids, processor)
            return {"prompt_token_ids": ids, "multi_modal_data": {"image": row["images"]}}
        """,
        title="repeated pad tokens collapsed before the request",
    ),
    Example(
        """\
        def request(processor, row):
            out = processor(text=row["text"], images=row["images"])
            mm = {"format": "processor_output", "pixel_values": out["pixel_values"]}
            return {"input_ids": out["input_ids"][0].tolist(), "image_data": [mm]}
        """,
        title="SGLang's preprocessed path (format=processor_output) expects expanded ids",
    ),
    Example(
        """\
        def start(sample, processor):
            sample.tokens = processor(text=sample.prompt, images=sample.images)["input_ids"][0].tolist()
            return sample
        """,
        title="a store into sample.tokens that no request reads",
    ),
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
        """\
        def ask(processor, prompt, image, url):
            messages = [{"role": "user", "content": [{"type": "text", "text": prompt}]}]
            messages[0]["content"].append({"type": "image", "image": image})
            inputs = processor.apply_chat_template(messages, tokenize=True, return_dict=True)
            return post(url, {"input_ids": inputs["input_ids"][0].tolist(), "image_data": [image]})
        """,
        line=5,
        title="a chat written as text, then given an image before the processor renders it",
    ),
    Example(
        """\
        def ask(processor, prompt, images, url):
            messages = [{"role": "user", "content": [{"type": "text", "text": prompt}]}]
            inputs = processor.apply_chat_template(messages, images=images, tokenize=True, return_dict=True)
            return post(url, {"input_ids": inputs["input_ids"][0].tolist(), "image_data": images})
        """,
        line=4,
        title="a chat written as text with the images passed beside it",
    ),
    Example(
        """\
        def ask(processor, messages, image, grid, url):
            inputs = processor.apply_chat_template(messages, tokenize=True, return_dict=True)
            media = [{"image_grid_thw": grid, "image": image}]
            return post(url, {"input_ids": inputs["input_ids"][0].tolist(), "image_data": media})
        """,
        line=4,
        title="a media dict with grid metadata and the image itself",
    ),
    Example(
        """\
        from fill import fill_prompt


        async def run(engine, state, processor):
            fill_prompt(state, processor)
            return await engine.async_generate(input_ids=state.prompt_ids, image_data=state.images)
        """,
        files={"fill.py": FILL_STATE},
        line=6,
        contains="the SGLang engine",
        title="repository: a function of another module stores the processor ids in its argument's field",
    ),
    Example(
        PARTIAL_LOOP.format(pending="pending"),
        files={"state_base.py": AGENT_STATE_BASE},
        line=9,
        contains="the engine behind `self.server_manager.generate_for_partial()`",
        title="repository: an inherited method of another module stores the processor ids in a state field",
    ),
    Example(
        """\
        from agent_base import AgentLoopBase


        class VisionLoop(AgentLoopBase):
            async def run(self, engine, messages, images):
                prompt_ids = self.build_prompt_ids(messages, images)
                return await engine.async_generate(input_ids=prompt_ids, image_data=images)
        """,
        files={"agent_base.py": AGENT_BASE},
        line=7,
        contains="the SGLang engine",
        title="repository: the processor in a base class of another module, the request in a subclass",
    ),
    Example(
        """\
        from agent_base import AgentLoopBase


        class ServerLoop(AgentLoopBase):
            async def run(self, messages, images):
                ids = self.build_prompt_ids(messages, images)
                return await self.server_manager.generate(request_id="r", prompt_ids=ids, image_data=images)
        """,
        files={"agent_base.py": AGENT_BASE},
        line=7,
        contains="the engine behind `self.server_manager.generate()`",
        title="repository: a framework's generate(prompt_ids=..., image_data=...)",
    ),
    Example(
        """\
        from .payloads import build_payload as make
        from .prompts import prompt_ids_of


        async def generate(url, state, sample):
            ids = prompt_ids_of(state, sample)
            return await post(url, make(input_ids=ids, images=sample.images))
        """,
        files={"__init__.py": "", "payloads.py": PAYLOADS, "prompts.py": PROMPTS},
        line=7,
        contains="`input_ids` together with `image_data`",
        title="repository: relative imports, the ids from one module, the request built in another",
    ),
    Example(
        """\
        from mytypes import Sample


        async def reward(url, sample: Sample):
            payload = {"input_ids": sample.tokens, "return_logprob": True}
            if sample.images:
                payload["image_data"] = sample.images
            return await post(url, payload)
        """,
        files={"mytypes.py": SAMPLE_TYPE, "rollout.py": CARRIER_ROLLOUT},
        line=5,
        contains="`input_ids` together with `image_data`",
        title="repository: expanded ids stored in sample.tokens by one module, posted by another",
    ),
    Example(
        """\
        from vllm.inputs import TokensPrompt
        from dataset import encode_prompt


        def make_prompt(processor, row):
            ids = encode_prompt(processor, row)
            return TokensPrompt(prompt_token_ids=ids, multi_modal_data={"image": row["images"]})
        """,
        files={"dataset.py": DATASET},
        line=7,
        contains="the vLLM engine",
        title="repository: vLLM TokensPrompt with ids from a dataset module",
    ),
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


        def request(sample):
            return {"input_ids": sample.tokens, "image_data": sample.images}
        """,
        line=6,
        contains="`input_ids` together with `image_data`",
        title="inline store, read back by another function for a request",
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
            return post({"input_ids": sample.tokens, "image_data": sample.images})
        """,
        line=8,
        title="AutoProcessor.from_pretrained at module level",
    ),
    Example(
        """\
        from transformers import ProcessorMixin

        def start(sample, p: ProcessorMixin):
            out = p(text=sample.prompt, images=sample.images)
            prompt_ids = out.get("input_ids")[0]
            sample.tokens = prompt_ids + sample.response_ids
            payload = {"input_ids": sample.tokens}
            payload["image_data"] = sample.images
        """,
        line=7,
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
            sample.prompt_ids = ids

        def send(engine, sample):
            return engine.async_generate(input_ids=sample.prompt_ids, image_data=sample.images)
        """,
        options={"token-fields": ["prompt_ids"]},
        line=6,
        title="configured token field",
    ),
    Example(
        """\
        def start(sample, vlm):
            ids = vlm(text=sample.prompt, images=sample.images)["input_ids"][0]
            sample.tokens = ids
            return {"input_ids": sample.tokens, "image_data": sample.images}
        """,
        options={"processor-names": ["vlm"]},
        line=4,
        title="configured processor name",
    ),
    Example(
        """\
        def make(processor, prompt, images):
            *_, ids = [None, processor(text=prompt, images=images)["input_ids"][0]]
            return Sample(tokens=ids, images=images)

        def send(s):
            return TokensPrompt(prompt_token_ids=s.tokens, multi_modal_data={"image": s.images})
        """,
        line=6,
        contains="the vLLM engine",
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
             return {"input_ids": sample.tokens, "image_data": sample.images}
        """,
        kind="patch",
        line=7,
        title="patch adding the store: the request on a context line reads it",
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
             return {"input_ids": sample.tokens, "image_data": sample.images}
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
        contains="`input_ids` together with `image_data`",
        title="exact mode: the source is in the engine file, outside the hunk",
    ),
]
