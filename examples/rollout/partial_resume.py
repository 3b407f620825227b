"""A rollout `generate` that resumes aborted (partial) samples from their prompt only.

PA107: partial rollout aborts long generations and hands the samples back with
their partial response in `sample.tokens`.  This `generate` accepts them, but a
sample with images is sent as `payload["text"] = sample.prompt`: the engine
starts the answer over, and the new tokens are appended after the partial
response.  `clean/partial_resume_ok.py` sends the held tokens.
"""

from rollout_utils import Sample, encode_image, post


async def generate(args, sample, url, tokenizer, sampling_params):
    assert sample.status in (Sample.Status.PENDING, Sample.Status.ABORTED), sample.status
    prompt_ids = sample.tokens or tokenizer.encode(sample.prompt, add_special_tokens=False)
    sampling_params["max_new_tokens"] -= sample.response_length
    payload = {"sampling_params": sampling_params, "return_logprob": True}
    if sample.images:
        payload["image_data"] = [encode_image(image) for image in sample.images]
        payload["text"] = sample.prompt
    else:
        payload["input_ids"] = prompt_ids
    output = await post(url, payload)
    new_tokens = [item[1] for item in output["meta_info"]["output_token_logprobs"]]
    new_log_probs = [item[0] for item in output["meta_info"]["output_token_logprobs"]]
    sample.append_response_tokens(args, tokens=new_tokens, log_probs=new_log_probs, trainable=True)
    return sample
