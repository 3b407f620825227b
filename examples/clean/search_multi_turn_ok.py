"""The clean counterpart of `rollout/search_multi_turn.py` (PA106): token in, token out.

The conversation is kept as ids: each request sends the previous ids, the
engine's output ids are appended as sampled, and only the new search result is
tokenized and appended.  The engine's context and the trained ids are the same.
"""

from rollout_utils import post, search


async def generate(args, sample, url, tokenizer):
    tokens = tokenizer(sample.prompt, add_special_tokens=False)["input_ids"]
    prompt_length, response, loss_mask = len(tokens), "", []
    for _turn in range(args.max_turns):
        payload = {"input_ids": tokens, "sampling_params": {"max_new_tokens": 512}, "return_logprob": True}
        output = await post(url, payload)
        turn_ids = [item[1] for item in output["meta_info"]["output_token_logprobs"]]
        response += output["text"]
        tokens += turn_ids
        loss_mask += [1] * len(turn_ids)
        if "<search>" not in output["text"]:
            break
        result = f"\n<information>{await search(output['text'])}</information>\n"
        result_ids = tokenizer(result, add_special_tokens=False)["input_ids"]
        response += result
        tokens += result_ids
        loss_mask += [0] * len(result_ids)
    sample.tokens = tokens
    sample.response_length = len(tokens) - prompt_length
    sample.loss_mask = loss_mask
    sample.response = response
    return sample
