from __future__ import annotations

import functools
import re
from typing import Any, Iterator

from patchaudit.analysis.dataflow import Positions, analyse, matches
from patchaudit.analysis.gate import (
    UNKNOWN,
    call_receivers,
    called_names,
    facts,
    literal_part,
    literal_runs,
    per_options,
    quick_text,
    string_lists,
)
from patchaudit.analysis.retokenize_guards import may_size_mask
from patchaudit.analysis.retokenize_spec import DEFAULTS, RetokenizeSpec, one_per_flow
from patchaudit.inputs import pyast
from patchaudit.lint.rule import PYTHON, Example, Rule
from patchaudit.model.findings import Severity

from .pa102_expanded_ids_as_rollout_tokens import VERB_NAMES, check_options

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


def _engine_text_words(text: str, o: dict[str, Any]) -> bool:
    """Whether the text holds the words an engine-text finding needs besides the call: an
    output-text field, and a sink of engine text (a rollout field as an attribute, a string
    key or a keyword; an append helper; a mask name beside a `len(`).  A superset of what
    `can_fire` asks, found without parsing."""
    if not any(w in text for w in o["output-text-fields"]):
        return False
    fields = o["rollout-fields"]
    if any(any(ch in p for ch in "*?[") for p in fields):
        return True
    if any(a in text for a in o["append-calls"]):
        return True
    if "len" in text and any(all(r in text for r in literal_runs(m)) for m in o["mask-names"]):
        return True
    return has_field(tuple(p.rsplit(".", 1)[-1] for p in fields), text)  # the regex last


@functools.lru_cache(maxsize=32)
def _field_re(names: tuple[str, ...]) -> "re.Pattern[str]":
    """`.name`, `"name"`, `'name'` or `(name=`/`, name=` (an attribute, a string key, a keyword;
    a local `name = ...` is no sink).  A keyword may follow a line break or a comment."""
    alts = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"(?:[.'\"](?:{alts})(?![\w])|[(,](?:\s|#[^\n]*(?![^\n])|\\\n)*(?:{alts})\s*=(?!=))")


def _minimal(words: list[str]) -> list[str]:
    """`words` without those containing another one (a text holding "async_generate" holds "generate")."""
    uniq = sorted(set(words))
    return [w for w in uniq if not any(v != w and v in w for v in uniq)]


@functools.lru_cache(maxsize=32)
def _names_re(names: tuple[str, ...]) -> "re.Pattern[str]":
    return re.compile("|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)))


_KEYWORD_BEFORE = re.compile(r"[(,](?:\s|#[^\n]*(?![^\n])|\\\n)*\Z")
_KEYWORD_AFTER = re.compile(r"\s*=(?!=)")
_BLANKS = re.compile(r"(?:\s|#[^\n]*(?![^\n])|\\\n)*")


def _each_match(rx: "re.Pattern[str]", text: str) -> Iterator["re.Match[str]"]:
    """Every match of `rx`, overlapping ones too (the next search starts one character
    after the last match's start).  `has_field` and `has_call` search for the names
    alone and check the characters around each hit after: a pattern that starts with
    the names lets `re` skip to their first letters, where one that starts with a
    character class or a look-behind makes it try every position (three to four times
    slower on SGLang)."""
    pos = 0
    while True:
        m = rx.search(text, pos)
        if m is None:
            return
        yield m
        pos = m.start() + 1


def has_field(names: tuple[str, ...], text: str) -> bool:
    """Whether `_field_re` finds one of `names` in `text` (by the names first: `_each_match`)."""
    for m in _each_match(_names_re(names), text):
        start, end = m.start(), m.end()
        if _field_re(names).match(text, start - 1 if start else 0) is not None and start:
            return True
        if _KEYWORD_AFTER.match(text, end) is not None:
            # from a line start: a comment in the window is then read as Python reads it
            lo = text.rfind("\n", 0, max(0, start - 400)) + 1
            before = text[lo:start]
            if _KEYWORD_BEFORE.search(before) is not None:
                return True
            in_comment = "#" in before[before.rfind("\n") + 1 :]
            if lo > 0 and not in_comment and _BLANKS.fullmatch(before) is not None:
                return True  # blanks and comments all the way back: it may start earlier
    return False


@functools.lru_cache(maxsize=32)
def _call_re(names: tuple[str, ...]) -> "re.Pattern[str]":
    """`name(` for any of `names`, allowing what Python allows between a callee and its `(`
    (a name inside a longer word is skipped by `has_call`)."""
    alts = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"(?:{alts})(?:\s|\\\n|#[^\n]*(?![^\n]))*\(")


_WORD_CHAR = re.compile(r"\w")


def has_call(names: tuple[str, ...], text: str) -> bool:
    """Whether `text` calls one of `names` (`_call_re` not preceded by a word character;
    the look-behind checked here, not in the pattern: `_each_match`)."""
    for m in _each_match(_call_re(names), text):
        start = m.start()
        if start == 0 or _WORD_CHAR.match(text, start - 1) is None:
            return True
    return False


class DecodeRetokenize(Rule):
    """
    Flags text encoded again into ids that are then used as the model's ids: ids decoded to
    text, or the engine's own output text.

    ## What it does
    Follows, inside a module, two kinds of text:

    - text made from ids: `.decode(ids)`, `.batch_decode(ids)`,
      `convert_tokens_to_string(...)` on a tokenizer or processor;
    - the engine's own output text: a text field (`output-text-fields`:
      `output["text"]`, `choices[0].message.content`, vLLM's `outputs[0].text`,
      `.get("text")`) of what an engine or an OpenAI-style API returned
      (`response-calls`: `post(...)`, `generate(...)`,
      `client.chat.completions.create(...)`, `acompletion(...)`...), also
      through indexing, iteration and `.json()`, and the ids it returned,
      decoded (`tokenizer.decode(model.generate(ids)[0])`);

    through assignments, f-strings, `+`, slices, `.strip()`/`.replace()` and
    other string methods, `re.sub()`, message dicts and lists, chat templates
    rendered to text (`apply_chat_template(..., tokenize=False)`), returns and
    calls of functions of the same module, to where it is encoded again
    (`tokenizer.encode(text)`, `tokenizer(text)["input_ids"]`,
    `apply_chat_template(..., tokenize=True)`).  It reports where the ids are
    used as the model's ids:

    - decoded text: stored in an attribute or a container that outlives the
      function, returned, or sent (a request's `input_ids=`, `post(...)`);
    - both: stored as rollout ids (`rollout-fields`: `sample.tokens`,
      `response_ids`, `batch["responses"]`, `Output(response_ids=...)`), sized a
      loss mask or a log-prob list (`loss_mask += [1] * len(ids)`: `mask-names`),
      or appended by a framework helper (`append-calls`:
      `sample.append_response_tokens(tokens=ids)`, not with `trainable=False`).

    Clean: decoding or reading the text for logs, metrics, rewards, tool parsing,
    string comparisons or a length check (`len(tokenizer.encode(text))`); the
    engine's text in a new prompt sent to the engine; one model's decoded text
    encoded by another model's tokenizer, both named for their model
    (`blip_processor.decode(...)` then `llm_tokenizer(...)`); a mask of zeros
    (observation tokens); a bytes decode (`raw.decode("utf-8")`); ids that only
    feed a computation (`get_rope_index(input_ids=ids)`); and re-encoding
    guarded by a check that fails loudly on drift: `assert again == ids`,
    `if again != ids: raise ...` (or `return`, or `again = ids`), the same on
    their length, or use only inside `if again == ids:`.

    One flow of the engine's text is reported once, at its last sink.

    Options (`[tool.patchaudit.rules.PA103]`): `decode-methods`,
    `encode-methods`, `tokenizer-names`, `processor-names`, `ids-fields`,
    `ids-keys`, `send-calls`, `ignore-calls`, `response-calls`,
    `output-text-fields`, `response-parts`, `rollout-fields`, `mask-names`,
    `append-calls`.

    ## Why is this bad?
    `encode(decode(ids))` is not the identity.  A model may generate a valid
    but non-canonical split (`[" tr", "uly"]`); decoded it is `" truly"`, and
    re-encoded it is the single canonical token `[" truly"]`.  In RL the
    trainer must see exactly the ids the engine produced: re-tokenized ids
    shift every later position (log-probs, masks, router replay) without an
    error.  The engine's output text is no better: the text of sampled ids
    re-encoded (often after `.strip()`, a regex or a chat template rendered
    again) gives other ids than the engine sampled, so the trained ids, their
    loss mask and the log-probs the engine returned no longer line up.

    ## Example
    ```python
    def next_turn(sample, tokenizer, user_text):
        history = tokenizer.decode(sample.tokens)
        prompt = history + f"<|im_start|>user\\n{user_text}<|im_end|>\\n"
        sample.tokens = tokenizer.encode(prompt, add_special_tokens=False)

    async def generate(args, sample, url, tokenizer):
        output = await post(url, {"input_ids": sample.tokens})
        ids = tokenizer(output["text"].strip())["input_ids"]
        sample.loss_mask += [1] * len(ids)
    ```

    ## Use instead
    Append the ids of the new text to the ids you already have, and train on the
    ids the engine returned:
    ```python
    def next_turn(sample, tokenizer, user_text):
        turn = f"<|im_start|>user\\n{user_text}<|im_end|>\\n"
        sample.tokens = sample.tokens + tokenizer.encode(turn, add_special_tokens=False)

    async def generate(args, sample, url, tokenizer):
        output = await post(url, {"input_ids": sample.tokens, "return_logprob": True})
        ids = [t for _, t, *_ in output["meta_info"]["output_token_logprobs"]]
        sample.loss_mask += [1] * len(ids)
    ```

    ## Incident
    SGLang decoded token-id VLM prompts and re-tokenized them with the HF
    processor (`legacy_load_mm_data`), drifting `[479, 3770]` into `[9149]`;
    sgl-project/sglang#26555 added `SGLANG_MM_AVOID_RETOKENIZE` to keep the
    caller's ids; THUDM/slime#2388 is a patch that bypassed it again.  RL rollouts re-encode the engine's text the same
    way: slime's search-r1 example tokenizes the post-processed `output["text"]`
    as the trained response when log-probs are off, ROLL's OpenAI proxy
    tokenizes `choices[0].message.content` into the batch's responses.
    """

    code = "PA103"
    roles = frozenset({"port-check"})
    name = "decode-retokenize"
    severity = Severity.ERROR
    kinds = frozenset({PYTHON})
    requires = (
        ("convert_tokens_to_string",),
        ("decode",),
        ("completion", "apply_chat_template"),
        ("completion", "processor"),
        ("completion", "tok"),
        ("create", "apply_chat_template"),
        ("create", "processor"),
        ("create", "tok"),
        ("generate", "apply_chat_template"),
        ("generate", "processor"),
        ("generate", "tok"),
        ("post", "apply_chat_template"),
        ("post", "processor"),
        ("post", "tok"),
    )
    options = {k: list(v) for k, v in DEFAULTS.items()}
    reads_tree = False

    VALID = [
        Example(
            """\
            def chat(model, tokenizer, prompt):
                for _ in range(3):
                    input_ids = tokenizer.encode(prompt, return_tensors="pt")
                    outputs = model.generate(input_ids, max_new_tokens=64)
                    text = tokenizer.decode(outputs[0][input_ids.shape[1] :], skip_special_tokens=True)
                    prompt += text + "\\nUser: go on\\nAssistant:"
                return prompt
            """,
            title="the ids an engine returned, decoded into the next prompt of an inference loop",
        ),
        Example(
            """\
            def cut(response_mask, running_ids, tokenizer, prompt):
                prompt_ids = tokenizer.encode(tokenizer.decode(prompt))
                response_mask = response_mask[: len(running_ids) - len(prompt_ids)]
                return response_mask
            """,
            title="a length subtracted from a mask's size: those ids are left out of the mask",
        ),
        Example(
            """\
            def label(blip_processor, blip_model, llm_tokenizer, llm_model, image):
                out = blip_model.generate(**blip_processor(image, return_tensors="pt"))
                caption = blip_processor.decode(out[0], skip_special_tokens=True)
                inputs = llm_tokenizer(f"Caption: {caption}\\nLabel:", return_tensors="pt")
                return llm_model.generate(**inputs)
            """,
            title="one model's text in another model's prompt (two vocabularies: no round trip)",
        ),
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
        Example(
            """\
            async def generate(args, sample, url, tokenizer):
                output = await post(url, {"input_ids": sample.tokens, "return_logprob": True})
                new_ids = [item[1] for item in output["meta_info"]["output_token_logprobs"]]
                sample.append_response_tokens(args, tokens=new_ids, trainable=True)
                sample.response += output["text"]
                reward = score_answer(output["text"].strip())
                too_long = len(tokenizer.encode(output["text"])) > args.max_len
                return sample, reward, too_long
            """,
            title="engine ids kept; its text stored as text, scored, length-checked",
        ),
        Example(
            """\
            async def step(args, sample, env, url, tokenizer):
                output = await post(url, {"input_ids": sample.tokens})
                sample.append_response_tokens(args, tokens=output["output_ids"], trainable=True)
                observation = env.step(output["text"])
                obs_ids = tokenizer(observation, add_special_tokens=False)["input_ids"]
                sample.loss_mask += [0] * len(obs_ids)
                sample.append_response_tokens(args, tokens=obs_ids, trainable=False)
            """,
            title="the engine's text only parsed by the environment; observation ids masked out",
        ),
        Example(
            """\
            async def review(url, tokenizer, answer_output):
                answer = answer_output["text"]
                output = await post(url, {"text": f"Review this answer: {answer}"})
                prompt_ids = tokenizer(f"Review this answer: {answer}")["input_ids"]
                await post(url, {"input_ids": prompt_ids})
                return output["text"]
            """,
            title="another agent's answer in a new prompt sent to the engine",
        ),
        Example(
            """\
            async def turn(sample, url, tokenizer):
                output = await post(url, {"input_ids": sample.tokens})
                again = tokenizer.encode(output["text"], add_special_tokens=False)
                assert again == output["output_ids"], "re-tokenization drifted"
                sample.tokens = sample.tokens + again
            """,
            title="re-encoding guarded by an assertion against the engine's ids",
        ),
        Example(
            """\
            async def turn(sample, url, tokenizer):
                output = await post(url, {"input_ids": sample.tokens})
                ids = tokenizer.encode(output["text"].strip(), add_special_tokens=False)
                if ids != output["output_ids"]:
                    raise RuntimeError("re-tokenized response differs from the sampled ids")
                sample.response_ids = ids
            """,
            title="re-encoding guarded by a check that raises",
        ),
        Example(
            """\
            def make_text_with_token_count(tokenizer, token_id, count):
                token_ids = [token_id] * count
                text = tokenizer.decode(token_ids, skip_special_tokens=False)
                roundtrip_ids = tokenizer.encode(text, add_special_tokens=False)
                if len(roundtrip_ids) != count:
                    raise RuntimeError("changed length after decode/encode")
                return text, roundtrip_ids
            """,
            title="regression (miles bench helper): a round trip checked by a check that raises",
        ),
        Example(
            """\
            def mm_positions(prompt, tokenizer, get_rope_index):
                text = tokenizer.decode(prompt)
                ids = tokenizer.encode(text)
                positions, delta = get_rope_index(input_ids=ids, image_grid_thw=None)
                return positions, delta
            """,
            title="regression (SGLang MiMo-V2 `get_rope_index(input_ids=...)`): ids only feed a computation",
        ),
    ]
    INVALID = [
        Example(
            """\
            def rollout(model, tokenizer, sample):
                outputs = model.generate(sample.prompt_ids, max_new_tokens=64)
                text = tokenizer.decode(outputs[0], skip_special_tokens=True).strip()
                sample.response_ids = tokenizer.encode(text)
            """,
            line=4,
            contains="the engine's output text is encoded again",
            title="the ids an engine returned, decoded and encoded again as the trained response",
        ),
        Example(
            """\
            def grow(tokenizer, prompt, n):
                prompt_ids = tokenizer.encode(tokenizer.decode(prompt))
                loss_mask = [1] * (len(prompt_ids) - n)
                return loss_mask
            """,
            line=3,
            title="a mask sized by re-tokenized ids less a count",
        ),
        Example(
            """\
            def next_turn(sample, tokenizer, policy_tokenizer, user_text):
                history = tokenizer.decode(sample.tokens)
                sample.tokens = policy_tokenizer.encode(history + user_text)
            """,
            line=3,
            title="decoded and encoded again by two names of which one says no model",
        ),
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
        Example(
            """\
            import re

            def postprocess(resp):
                return re.sub(r"</answer>.*", "</answer>", resp, flags=re.S)

            async def generate(args, sample, url, tokenizer):
                loss_mask, response_ids = [], []
                output = await post(url, {"text": sample.prompt, "sampling_params": {}})
                text = postprocess(output["text"])
                ids = tokenizer(text, add_special_tokens=False)["input_ids"]
                response_ids += ids
                loss_mask += [1] * len(ids)
                sample.loss_mask = loss_mask
                return sample
            """,
            line=12,
            contains="their length sizes `loss_mask`",
            title="slime search-r1 shape: `output['text']` post-processed, encoded, sized by the loss mask",
        ),
        Example(
            """\
            def generate(self, messages, lm_input):
                completion = self.client.chat.completions.create(model="m", messages=messages, logprobs=True)
                response_text = completion.choices[0].message.content
                responses = self.tokenizer([response_text], return_tensors="pt")
                lm_input.batch["responses"] = responses["input_ids"]
                return lm_input
            """,
            line=5,
            contains="engine's output text",
            title="ROLL OpenAI-proxy shape: `choices[0].message.content` encoded into the batch's responses",
        ),
        Example(
            """\
            def rollout(llm, prompts, params, tokenizer, sample):
                outputs = llm.generate(prompts, params)
                action_text = outputs[0].outputs[0].text.strip()
                sample.response_ids = tokenizer.encode(action_text, add_special_tokens=False)
            """,
            line=4,
            contains="stored in `sample.response_ids`",
            title="vLLM shape: `outputs[0].text`, stripped, encoded into the response ids",
        ),
        Example(
            """\
            def token_delta(tokenizer, messages):
                prev = tokenizer.apply_chat_template(messages[:-1], tokenize=False)
                curr = tokenizer.apply_chat_template(messages, tokenize=False)
                new_ids = tokenizer.encode(curr[len(prev):], add_special_tokens=False)
                return new_ids, [1] * len(new_ids)

            async def turn(res, url, tokenizer, messages):
                output = await post(url, {"text": tokenizer.apply_chat_template(messages, tokenize=False)})
                messages.append({"role": "assistant", "content": output["text"]})
                ids, mask = token_delta(tokenizer, messages)
                res.tokens = res.tokens + ids
            """,
            line=11,
            contains="stored in `res.tokens`",
            title="tau-bench shape: the text in messages, the chat template rendered again, the delta encoded",
        ),
        Example(
            """\
            async def generate(self, prompts):
                raw_outputs = await self.client.generate(prompts=prompts)
                response_ids, loss_masks = [], []
                for output in raw_outputs:
                    token_ids = output.get("token_ids", [])
                    if not token_ids:
                        token_ids = self.tokenizer.encode(output.get("text", ""), add_special_tokens=False)
                    response_ids.append(token_ids)
                    loss_masks.append([1] * len(token_ids))
                return GeneratorOutput(response_ids=response_ids, loss_masks=loss_masks)
            """,
            line=10,
            contains="passed as `response_ids=`",
            title="fallback when the engine gave no ids: its text encoded into the response ids",
        ),
        Example(
            """\
            async def act(args, sample, url, tokenizer):
                output = await post(url, {"input_ids": sample.tokens})
                turn = f"{output['text']}<|im_end|>\\n"
                sample.append_response_tokens(args, tokens=tokenizer.encode(turn), trainable=True)
            """,
            line=4,
            contains="append_response_tokens",
            title="an f-string around the text, appended by the framework's helper",
        ),
    ]

    @classmethod
    def can_match(cls, text: str, settings: Any = None) -> bool:
        """The pre-filter follows the configured source names (the class `requires` are the defaults').

        A source is a *call* of a decode method or of an engine (`generate`, `post`,
        `chat.completions.create`...), so the name must be followed by `(` (after blanks,
        comments or line continuations): the word alone ("prefill and decode", a
        `forward_decode` attribute) cannot fire.  An engine call is only a source next to a
        tokenizer (a word with "tok" or "processor" in it, or `apply_chat_template`)."""
        options = settings.options_for(cls.code) if settings is not None else None
        groups = cls.requires_for(options)
        if not groups:
            return True
        if not any(all(s in text for s in g) for g in groups):
            return False
        o = {**DEFAULTS, **(options or {})}
        if not has_call(tuple(o["decode-methods"]), text):
            if not _engine_text_words(text, o) or not has_call(cls.call_names(o), text):
                return False
        return cls.can_fire(text, o)

    @staticmethod
    def can_fire(text: str, o: dict[str, Any]) -> bool:
        """Whether the module has both ingredients of a finding (read with `ast`, see
        patchaudit/analysis/gate.py): a source and an encode (`call`: `apply_chat_template`,
        an encode method on a receiver named like a tokenizer, or a call of something named
        like a tokenizer that is not a verb).  A source is a decode-method call on such a
        receiver (`_decode_source`), or an engine call (`response-calls`) in a module that
        also reads an output-text field (`output-text-fields`, a name or a string key) and
        names a sink of engine text (a rollout field, a mask, an append helper).  Without
        both, no value ever carries a re-tokenized label."""
        lists = ("decode-methods", "encode-methods", "tokenizer-names", "response-calls", "output-text-fields")
        if not string_lists(o, lists + ("rollout-fields", "mask-names", "append-calls")):
            return True
        q = quick_text(text)
        if not (
            DecodeRetokenize._may_encode(q, o)
            and (DecodeRetokenize._may_decode(q, o) or DecodeRetokenize._may_respond(q, o))
        ):
            return False  # no encode call, or no source (the checks below), seen without a parse
        f = facts(text)
        if f is None:
            return True
        tok, decode, encode = o["tokenizer-names"], o["decode-methods"], o["encode-methods"]
        calls = f.calls
        if not any(
            c.name == "apply_chat_template"
            or (c.name in encode and c.receiver is not None and matches(c.receiver, tok))
            or (matches(c.name, tok) and not matches(c.name, VERB_NAMES))
            for c in calls
        ):
            return False
        if any(c.name in decode and c.receiver is not None and matches(c.receiver, tok) for c in calls):
            return True
        resp = o["response-calls"]
        if not any(matches(c.name, resp) or matches(c.dotted, resp) for c in calls):
            return False
        words = f.words()
        if not any(w in words for w in o["output-text-fields"]):
            return False
        fields = o["rollout-fields"]
        if any(any(ch in p for ch in "*?[") for p in fields) or any(p.rsplit(".", 1)[-1] in words for p in fields):
            return True
        if any(matches(c.name, o["append-calls"]) for c in calls):
            return True
        tree = pyast.parse(text)
        return tree is None or may_size_mask(tree, o["mask-names"])

    @staticmethod
    def _may_encode(text: str, o: dict[str, Any]) -> bool:
        """The quick pass (gate.py) of `can_fire`'s encode check: a superset of the calls
        it accepts, read from the text alone."""
        tok = o["tokenizer-names"]
        if "apply_chat_template" in text:
            return True
        receivers = call_receivers(text, o["encode-methods"])
        if UNKNOWN in receivers or any(r is not None and matches(r, tok) for r in receivers):
            return True
        frags = [literal_part(t) for t in tok]
        if "" in frags:
            return True  # a tokenizer named by a pure pattern: every call may be one
        return any(matches(n, tok) and not matches(n, VERB_NAMES) for n in called_names(text, frags))

    @staticmethod
    def _may_decode(text: str, o: dict[str, Any]) -> bool:
        """The quick pass of the decode check: a decode method called on a receiver named
        like a tokenizer (or one the text does not show plainly)."""
        receivers = call_receivers(text, o["decode-methods"])
        return UNKNOWN in receivers or any(r is not None and matches(r, o["tokenizer-names"]) for r in receivers)

    @staticmethod
    def _may_respond(text: str, o: dict[str, Any]) -> bool:
        """The quick pass of the engine-call check: an output-text field named, and a call
        whose last name is an engine call's (`response-calls`: a dotted pattern's last
        part is the call's name)."""
        if not any(w in text for w in o["output-text-fields"]):
            return False
        lasts = [p.rsplit(".", 1)[-1] for p in o["response-calls"]]
        if any(ch in last for last in lasts for ch in "*?["):
            return True
        return any(n in lasts for n in called_names(text, lasts))

    @classmethod
    @per_options
    def requires_for(cls, options: dict[str, Any] | None):
        """The byte pre-filter's groups: each decode method alone; each engine call's name
        with a word every tokenizer name or encode call must contain."""
        o = {**DEFAULTS, **(options or {})}
        methods, calls, toks = o["decode-methods"], o["response-calls"], o["tokenizer-names"]
        for value in (methods, calls, toks):
            if not isinstance(value, list) or not all(isinstance(m, str) and m for m in value):
                return ()
        names = []
        for pattern in calls:
            last = pattern.rsplit(".", 1)[-1]
            if not last or any(ch in last for ch in "*?["):
                return ()  # an engine call named by a pattern: no word to ask for
            names.append(last)
        parts = sorted({literal_part(t) for t in toks})
        if "" in parts:
            return ()  # a tokenizer named by a pure pattern: no word to ask for
        words = ["apply_chat_template"] + _minimal(parts)
        groups: list[tuple[str, ...]] = [(m,) for m in _minimal(methods)]
        for n in _minimal(names):
            groups.extend((n, w) for w in words)
        return tuple(groups)

    @staticmethod
    def call_names(o: dict[str, Any]) -> tuple[str, ...]:
        """The callee names a source call can have (decode methods, engine calls' last names)."""
        return tuple(sorted(set(o["decode-methods"]) | {p.rsplit(".", 1)[-1] for p in o["response-calls"]}))

    def check_python(self) -> None:
        check_options(self.context.options, DEFAULTS)
        text = self.unit_text
        tree = pyast.parse(text)
        if tree is None:
            return
        positions = Positions(text)
        spec = RetokenizeSpec(self.opts, tree, VERB_NAMES, text)
        for h in one_per_flow(analyse(tree, spec, positions)):
            self.report_at(*positions.range(h.node), h.message, trace=h.steps, severity=h.severity)
