"""A text-only multi-turn rollout that rebuilds the prompt from text at every turn.

PA103: the stored token ids are decoded, the next user turn is appended as
text, and the whole text is encoded again into `sample.tokens`.  Decoding and
re-encoding is not the identity ("[' tr', 'uly']" comes back as "[' truly']"),
so the ids the trainer sees are not the ones the engine sampled.  The clean
version keeps the ids and encodes only the new text:
`sample.tokens = sample.tokens + tokenizer.encode(turn, add_special_tokens=False)`.

PA001 (opt-in): the noqa comment of MAX_TURNS suppresses nothing.
"""

MAX_TURNS = 8  # noqa: PA101  (a stale suppression: PA001, with --extend-select PA001)


def next_turn(sample, tokenizer, user_text):
    history = tokenizer.decode(sample.tokens)
    prompt = history + f"<|im_start|>user\n{user_text}<|im_end|>\n"
    sample.tokens = tokenizer.encode(prompt, add_special_tokens=False)
    return sample
