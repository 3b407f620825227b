"""The fixed counterpart of geo3k_vlm_multi_turn.py: no PA102.

The rollout keeps pre-expansion ids (the tokenizer's ids of the prompt, one
image placeholder per image) in `sample.tokens` and sends those to SGLang,
which expands the placeholders itself; the processor's expanded output is kept
only as training inputs.  Its ids are used to count the image tokens.
"""

from typing import Any

from slime.rollout.sglang_rollout import GenerateState
from slime.utils.http_utils import post
from slime.utils.processing_utils import encode_image_for_rollout_engine
from slime.utils.types import Sample


def _prepare_initial_inputs(sample: Sample, processor, tokenizer):
    # rollout ids: what the engine expects (one <|image_pad|> per image)
    prompt_ids = tokenizer.encode(sample.prompt, add_special_tokens=False)
    train_inputs = None
    if processor:
        processor_output = processor(text=sample.prompt, **(sample.multimodal_inputs or {}))
        train_inputs = dict(processor_output)          # expanded: training only
        sample.num_image_tokens = len(processor_output["input_ids"][0]) - len(prompt_ids)
    image_data = []
    if sample.multimodal_inputs and sample.multimodal_inputs.get("images"):
        image_data = [encode_image_for_rollout_engine(img) for img in sample.multimodal_inputs["images"]]
    return prompt_ids, image_data, train_inputs


def _prepare_start_state(sample: Sample, state: GenerateState, args: Any, sampling_params: dict):
    prompt_ids, image_data, init_mm_train = _prepare_initial_inputs(sample, state.processor, state.tokenizer)
    multimodal_train_inputs_buffer: list[dict | None] = []
    if init_mm_train:
        multimodal_train_inputs_buffer.append(init_mm_train)
    if not sample.tokens:
        sample.tokens = list(prompt_ids)
    response_tokens: list[int] = sample.tokens[len(prompt_ids):] if len(sample.tokens) >= len(prompt_ids) else []
    return image_data, response_tokens, multimodal_train_inputs_buffer


async def _run_inference_step(url: str, tokens: list[int], sampling_params: dict, image_data, tokenizer):
    payload = {
        "input_ids": tokens,
        "sampling_params": sampling_params,
        "return_logprob": True,
    }
    if image_data:
        payload["image_data"] = image_data
    output = await post(url, payload)
    new_tokens = [item[1] for item in output["meta_info"]["output_token_logprobs"]]
    return output["text"], new_tokens


async def generate(args: Any, sample: Sample, sampling_params: dict, env) -> Sample:
    state = GenerateState(args)
    url = f"http://{args.sglang_router_ip}:{args.sglang_router_port}/generate"
    image_data, response_tokens, mm_buffer = _prepare_start_state(sample, state, args, sampling_params)
    for _turn in range(args.max_turns):
        text, new_tokens = await _run_inference_step(url, sample.tokens, sampling_params, image_data,
                                                     state.tokenizer)
        sample.tokens = sample.tokens + new_tokens
        response_tokens += new_tokens
        observation, done = env.step(text)
        if done:
            break
        obs_ids = state.tokenizer.encode(observation, add_special_tokens=False)
        sample.tokens = sample.tokens + obs_ids
        response_tokens += obs_ids
    sample.response_length = len(response_tokens)
    sample.multimodal_train_inputs = mm_buffer
    return sample
