"""The clean counterpart of `rollout/partial_resume.py` (PA107).

A resumed sample (one that already has a response) is sent with its held
tokens, images or not: the engine continues the partial response.
"""

from rollout_utils import Sample, encode_image, post


async def generate(args, sample, url, tokenizer, sampling_params):
    assert sample.status in (Sample.Status.PENDING, Sample.Status.ABORTED), sample.status
    sampling_params["max_new_tokens"] -= sample.response_length
    payload = {"sampling_params": sampling_params, "return_logprob": True}
    if sample.images:
        payload["image_data"] = [encode_image(image) for image in sample.images]
    if sample.response_length > 0:
        payload["input_ids"] = sample.tokens
    else:
        payload["input_ids"] = tokenizer.encode(sample.prompt, add_special_tokens=False)
    output = await post(url, payload)
    new_tokens = [item[1] for item in output["meta_info"]["output_token_logprobs"]]
    new_log_probs = [item[0] for item in output["meta_info"]["output_token_logprobs"]]
    sample.append_response_tokens(args, tokens=new_tokens, log_probs=new_log_probs, trainable=True)
    return sample
