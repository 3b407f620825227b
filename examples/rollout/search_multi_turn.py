"""A search-agent rollout that resends the whole conversation as text every turn.

PA106: each turn posts `{"text": prompt + response}`, where `response` holds the
engine's earlier output text and the search results, while the ids it trains on
are assembled from the engine's sampled ids (`output_token_logprobs`) and the
separately tokenized search results.  The engine tokenizes the whole text anew
each turn, so at turn boundaries its context ids differ from the trained ids and
the log-probs no longer line up.  `clean/search_multi_turn_ok.py` sends the ids.
"""

from rollout_utils import post, search


async def generate(args, sample, url, tokenizer):
    prompt_ids = tokenizer(sample.prompt, add_special_tokens=False)["input_ids"]
    response, response_ids, loss_mask = "", [], []
    for _turn in range(args.max_turns):
        payload = {"text": sample.prompt + response, "sampling_params": {"max_new_tokens": 512}, "return_logprob": True}
        output = await post(url, payload)
        turn_ids = [item[1] for item in output["meta_info"]["output_token_logprobs"]]
        response += output["text"]
        response_ids += turn_ids
        loss_mask += [1] * len(turn_ids)
        if "<search>" not in output["text"]:
            break
        result = f"\n<information>{await search(output['text'])}</information>\n"
        result_ids = tokenizer(result, add_special_tokens=False)["input_ids"]
        response += result
        response_ids += result_ids
        loss_mask += [0] * len(result_ids)
    sample.tokens = prompt_ids + response_ids
    sample.loss_mask = loss_mask
    sample.response = response
    return sample
