from __future__ import annotations

import re
from typing import Any

from patchaudit.analysis.dataflow import FlowSpec, Positions, analyse, matches
from patchaudit.analysis.gate import facts, literal_part, some_word_may_match, string_lists
from patchaudit.analysis.multiturn_spec import DEFAULTS, ENGINE_IDS, PIECE_IDS, ResendSpec, parse_layout, resends
from patchaudit.analysis.turn_syntax import calls_containing, calls_one_of, field_of
from patchaudit.inputs import pyast
from patchaudit.lint.rule import PYTHON, Example, Rule
from patchaudit.model.findings import Severity

from .pa102_expanded_ids_as_rollout_tokens import check_options

MESSAGE = (
    "the conversation is sent to the engine again as text (`{key}`), with the engine's earlier output text "
    "in it, while the ids trained on are assembled turn by turn from {pieces} (line {acc}; {trained}, "
    "line {tline}): the engine tokenizes the whole text anew each "
    "turn, so at turn boundaries its context ids differ from the trained ones ([' tr', 'uly'] comes back as "
    "[' truly']) and the log-probs no longer line up; send the ids instead (previous ids + output ids + the "
    "observation's ids)"
)
FLAG = "; the resend is turned on by `{name}`"


#: `+=` or a list mutator the dataflow layer follows (FlowSpec.mutators)
_ACCUMULATE = re.compile(r"\+=|\.(?:append|extend|insert|add|appendleft|extendleft)\b")
_LOOP = re.compile(r"(?m)^\s*(?:async\s+)?(?:for|while)\b")


def _pieces(labels: frozenset[str]) -> str:
    if ENGINE_IDS in labels and PIECE_IDS in labels:
        return "the engine's sampled ids and separately tokenized text"
    if ENGINE_IDS in labels:
        return "the engine's sampled ids, one turn at a time"
    return "pieces of the conversation tokenized separately"


class ConversationResentAsText(Rule):
    """
    Flags a multi-turn rollout that sends the whole conversation to the engine as text each
    turn while it trains on ids assembled from the engine's ids and separately tokenized pieces.

    ## What it does
    Follows, inside a module, the engine's output text (`output["text"]`,
    `choices[0].message.content`, `outputs[0].text`, `engine_output["responses"]`:
    `output-text-fields` of what a `response-calls` call returned) through string
    concatenation, message lists (`messages.append({"role": "assistant", "content": text})`),
    `apply_chat_template(..., tokenize=False)` and helper functions of the module, to the
    *text* of a later request to the same engine call: a `text`, `prompt` or `messages`
    key or keyword (`text-keys`).  It reports the resend when the turn's loop also
    accumulates the ids it trains on (`+=`, `.extend()`, an append helper) from the
    engine's sampled ids (`output_token_logprobs`, `output_ids`: `engine-ids-fields`) or
    from separately tokenized text (`tokenizer(obs)["input_ids"]`, `tokenizer.encode(...)`,
    a helper given the tokenizer such as `get_token_delta(tokenizer, messages)`), and those
    ids are kept as the rollout's (`sample.tokens`, `response_ids=`, an append helper:
    `rollout-fields`, `append-calls`).  The trace names where the text is read, where it
    is put into the request and sent, and the message where the ids are assembled and kept.

    When the resend sits under an `if` that reads a configuration flag (`args.x`,
    `self.cfg.x`, `CONFIGS["x"]`, or a local bound to one: `config-names`), the finding is
    reported where the flag is read, with its name.

    Clean: the next request sends ids (previous ids + output ids + observation ids); a loop
    that reads back the engine's own prompt ids (`prompt_token_ids`: it can compare them
    with the held ids and fork or fail on drift); per-turn samples that record the ids of
    each turn's own prompt and response without accumulating; each completion trained as its
    own sample; another call's output in a new prompt.

    Options (`[tool.patchaudit.rules.PA106]`): `response-calls`, `output-text-fields`,
    `response-parts`, `engine-ids-fields`, `engine-prompt-fields`, `text-keys`,
    `tokenizer-names`, `processor-names`, `encode-methods`, `ids-fields`, `piece-calls`,
    `rollout-fields`, `append-calls`, `config-names` (the shared ones default to PA103's).

    ## Why is this bad?
    The engine tokenizes the text it is sent.  The text of turn k+1 holds the output text
    of turn k, and tokenizing the concatenation is not the concatenation of the ids: a
    non-canonical split the model sampled (`[" tr", "uly"]`) comes back canonical
    (`[" truly"]`), and pieces tokenized on their own merge across their boundary
    (`"</search>" + "\\n<information>"`).  The trainer sees the assembled ids, the engine
    saw the re-tokenized text: the positions drift from the first boundary on, and the
    log-probs the engine returned belong to another sequence than the trained one.

    ## Example
    ```python
    async def generate(args, sample, url, tokenizer):
        prompt_ids = tokenizer(sample.prompt)["input_ids"]
        response, response_ids = "", []
        for _ in range(args.max_turns):
            output = await post(url, {"text": sample.prompt + response})
            ids = [t for _, t, *_ in output["meta_info"]["output_token_logprobs"]]
            response += output["text"]
            response_ids += ids
            obs = await run_tool(output["text"])
            response += obs
            response_ids += tokenizer(obs, add_special_tokens=False)["input_ids"]
        sample.tokens = prompt_ids + response_ids
    ```

    ## Use instead
    Keep the conversation as ids and send them (token in, token out):
    ```python
    async def generate(args, sample, url, tokenizer):
        tokens = tokenizer(sample.prompt)["input_ids"]
        for _ in range(args.max_turns):
            output = await post(url, {"input_ids": tokens})
            tokens += [t for _, t, *_ in output["meta_info"]["output_token_logprobs"]]
            obs = await run_tool(output["text"])
            tokens += tokenizer(obs, add_special_tokens=False)["input_ids"]
        sample.tokens = tokens
    ```

    ## Incident
    slime's search-r1 example sends `{"text": prompt_text + response}` every turn, with
    `response` accumulating the engine's output text and the search results, while it
    trains on `output_token_logprobs` ids and separately tokenized observations; its
    tau-bench example renders the messages again with `apply_chat_template(...,
    tokenize=False)` each turn and trains on per-message token deltas (miles carries both
    examples).  SkyRL's generator documents the same break as an exception to its
    token-in-token-out guarantee (`custom_chat_template` re-tokenizes the chat history).
    """

    code = "PA106"
    roles = frozenset({"port-check"})
    name = "conversation-resent-as-text"
    severity = Severity.ERROR
    kinds = frozenset({PYTHON})
    requires = (
        ("completion", "content"),
        ("completion", "responses"),
        ("completion", "text"),
        ("create", "content"),
        ("create", "responses"),
        ("create", "text"),
        ("generate", "content"),
        ("generate", "responses"),
        ("generate", "text"),
        ("post", "content"),
        ("post", "responses"),
        ("post", "text"),
    )
    options = {k: list(v) for k, v in DEFAULTS.items()}
    reads_tree = False

    VALID = [
        Example(
            """\
            async def generate(args, sample, url, tokenizer):
                tokens = tokenizer(sample.prompt)["input_ids"]
                for _ in range(args.max_turns):
                    output = await post(url, {"input_ids": tokens})
                    tokens += [t for _, t, *_ in output["meta_info"]["output_token_logprobs"]]
                    obs = await run_tool(output["text"])
                    tokens += tokenizer(obs, add_special_tokens=False)["input_ids"]
                sample.tokens = tokens
            """,
            title="token in, token out: previous ids + output ids + observation ids",
        ),
        Example(
            """\
            async def generate(args, sample, url, tokenizer):
                held, response = tokenizer(sample.prompt)["input_ids"], ""
                for _ in range(args.max_turns):
                    output = await post(url, {"text": sample.prompt + response})
                    engine_prompt = output["meta_info"]["prompt_token_ids"]
                    if engine_prompt[: len(held)] != held:
                        raise RuntimeError("the engine re-tokenized the conversation")
                    held = engine_prompt + output["meta_info"]["output_ids"]
                    response += output["text"]
                    held += tokenizer(await run_tool(output["text"]))["input_ids"]
                sample.tokens = held
            """,
            title="the engine's own prompt ids read back and compared with the held ones",
        ),
        Example(
            """\
            async def generate(args, sample, url, tokenizer):
                samples, response = [], ""
                for _ in range(args.max_turns):
                    prompt = sample.prompt + response
                    output = await post(url, {"text": prompt})
                    ids = output["meta_info"]["output_ids"]
                    samples.append(Sample(tokens=tokenizer(prompt)["input_ids"] + ids, response_length=len(ids)))
                    response += output["text"] + await run_tool(output["text"])
                return samples
            """,
            title="step-wise samples: each turn's own prompt ids and response ids, nothing accumulated",
        ),
        Example(
            """\
            async def solve(url, tokenizer, question):
                samples = []
                first = await post(url, {"text": question})
                samples.append(Sample(tokens=first["meta_info"]["output_ids"]))
                review = await post(url, {"text": f"Review: {first['text']}"})
                samples.append(Sample(tokens=review["meta_info"]["output_ids"]))
                return samples
            """,
            title="each completion trained as its own sample",
        ),
        Example(
            """\
            async def chat(client, messages, turns):
                for _ in range(turns):
                    completion = await client.chat.completions.create(model="m", messages=messages)
                    messages.append({"role": "assistant", "content": completion.choices[0].message.content})
                return messages
            """,
            title="a chat loop with no trained ids (evaluation, data generation)",
        ),
        Example(
            """\
            async def generate(args, sample, url, tokenizer, messages):
                response_ids = []
                for _ in range(args.max_turns):
                    ids = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
                    output = await post(url, {"input_ids": ids})
                    response_ids += output["meta_info"]["output_ids"]
                    messages.append({"role": "assistant", "content": output["text"]})
                sample.tokens = response_ids
            """,
            title="ids sent (not this rule's: PA103 judges re-rendered ids)",
        ),
    ]
    INVALID = [
        Example(
            """\
            async def generate(args, sample, url, tokenizer):
                prompt_text = sample.prompt
                prompt_ids = tokenizer(prompt_text, add_special_tokens=False)["input_ids"]
                response, response_token_ids = "", []
                for _ in range(args.max_turns):
                    payload = {"text": prompt_text + response, "sampling_params": {}, "return_logprob": True}
                    output = await post(url, payload)
                    cur_response = output["text"]
                    cur_ids = [item[1] for item in output["meta_info"]["output_token_logprobs"]]
                    response += cur_response
                    response_token_ids += cur_ids
                    next_obs = await execute_predictions(cur_response)
                    obs_ids = tokenizer(next_obs, add_special_tokens=False)["input_ids"]
                    response += next_obs
                    response_token_ids += obs_ids
                sample.tokens = prompt_ids + response_token_ids
                return sample
            """,
            line=7,
            contains="`text`",
            title="slime search-r1 shape: {'text': prompt_text + response}, ids from output_token_logprobs",
        ),
        Example(
            """\
            from token_delta import get_token_delta

            class Agent:
                async def _call_llm(self, url, payload):
                    return await post(url, payload)

                async def asolve(self, state, url, messages, res):
                    response_token_ids, loss_masks = [], []
                    prompt_token_ids = state.tokenizer(messages[0]["content"])["input_ids"]
                    for _ in range(30):
                        text_input = state.tokenizer.apply_chat_template(messages, tokenize=False)
                        payload = {"text": text_input, "sampling_params": {}}
                        output = await self._call_llm(url, payload)
                        messages.append({"role": "assistant", "content": output["text"]})
                        ids, mask = get_token_delta(state.tokenizer, messages)
                        response_token_ids.extend(ids)
                        loss_masks.extend(mask)
                    res.tokens = prompt_token_ids + response_token_ids
                    return res
            """,
            line=12,
            contains="separately",
            title="slime tau-bench shape: messages rendered again as text, token deltas trained",
            files={
                "token_delta.py": """\
                def get_token_delta(tokenizer, messages):
                    prev = tokenizer.apply_chat_template(messages[:-1], tokenize=False)
                    curr = tokenizer.apply_chat_template(messages, tokenize=False)
                    ids = tokenizer.encode(curr[len(prev):], add_special_tokens=False)
                    return ids, [1] * len(ids)
                """
            },
        ),
        Example(
            """\
            async def rollout(args, sample, client, tokenizer, messages):
                ids = []
                for _ in range(args.max_turns):
                    completion = await client.chat.completions.create(model="policy", messages=messages, logprobs=True)
                    choice = completion.choices[0]
                    ids.extend(choice.token_ids)
                    messages.append({"role": "assistant", "content": choice.message.content})
                    obs = await run_tool(choice.message.content)
                    messages.append({"role": "tool", "content": obs})
                    ids.extend(tokenizer.encode(obs, add_special_tokens=False))
                sample.append_response_tokens(args, tokens=ids, trainable=True)
            """,
            line=4,
            contains="`messages`",
            title="chat messages to an OpenAI-compatible endpoint, ids accumulated from its token ids",
        ),
        Example(
            """\
            async def generate(args, sample, url, tokenizer, messages):
                tokens = tokenizer.apply_chat_template(messages, tokenize=True)
                for _ in range(args.max_turns):
                    if args.resend_text:
                        text = tokenizer.apply_chat_template(messages, tokenize=False)
                        payload = {"text": text}
                    else:
                        payload = {"input_ids": tokens}
                    output = await post(url, payload)
                    tokens += output["meta_info"]["output_ids"]
                    messages.append({"role": "assistant", "content": output["text"]})
                sample.tokens = tokens
            """,
            line=4,
            contains="`args.resend_text`",
            title="a config flag turns the resend on: reported where the flag is read",
        ),
        Example(
            """\
            async def generate(args, sample, url, tokenizer):
                history = sample.prompt
                for _ in range(args.max_turns):
                    output = await post(url, {"text": history})
                    history = history + output["text"]
                    sample.append_response_tokens(args, tokens=output["meta_info"]["output_ids"], trainable=True)
                    obs = await run_tool(output["text"])
                    history += obs
                    sample.append_response_tokens(args, tokens=tokenizer.encode(obs), trainable=False)
                return sample
            """,
            line=4,
            contains="append_response_tokens",
            title="the framework's append helper assembles the trained ids",
        ),
    ]

    @classmethod
    def can_match(cls, text: str, settings: Any = None) -> bool:
        """The class `requires`, then: a call of an engine (`name(`), a loop, and an
        accumulation (`+=`, `.extend(`, `.append`, an append helper)."""
        options = settings.options_for(cls.code) if settings is not None else None
        o = {**DEFAULTS, **(options or {})}
        if not string_lists(o, tuple(DEFAULTS)):
            return True  # the rule reports the bad option
        if not any(k in (options or {}) for k in ("response-calls", "output-text-fields")):
            if not any(all(s in text for s in g) for g in cls.requires):
                return False
        calls = tuple({p.rsplit(".", 1)[-1] for p in o["response-calls"]})
        if any(ch in c for c in calls for ch in "*?[") or not calls:
            return True
        if not calls_one_of(text, calls) or _LOOP.search(text) is None:  # the regex last
            return False
        texts = o["output-text-fields"]
        if not any(any(ch in p for ch in "*?[") for p in texts) and not field_of(text, texts):
            return False  # no output-text field read as an attribute or a string key
        helper = any(a in text for a in o["append-calls"])
        if _ACCUMULATE.search(text) is None and not helper:
            return False
        fields = o["rollout-fields"]
        if not helper and not any(any(ch in p for ch in "*?[") for p in fields):
            if not field_of(text, [p.rsplit(".", 1)[-1] for p in fields], keyword=True):
                return False  # no rollout field as an attribute, a key or a keyword
        if not cls.may_assemble(text, o):
            return False
        return cls.can_fire(text, o)

    @staticmethod
    def may_assemble(text: str, o: dict[str, Any]) -> bool:
        """Whether ids to accumulate can come from somewhere: an engine-ids field read (an
        attribute or a string key), an encode-method call, or a call of something named like
        a tokenizer or a piece helper (`tokenizer(`, `get_token_delta(`)."""
        if field_of(text, o["engine-ids-fields"]) or calls_one_of(text, o["encode-methods"]):
            return True
        runs = [literal_part(p) for p in (*o["tokenizer-names"], *o["piece-calls"])]
        return "" in runs or calls_containing(text, runs)

    @staticmethod
    def can_fire(text: str, o: dict[str, Any]) -> bool:
        """Whether the module names every ingredient of a finding (read with `ast`,
        patchaudit/analysis/gate.py): an engine call, an output-text field, a rollout field or
        an append helper (the trained ids), and an accumulation (`+=`, a list mutator, an append helper)."""
        lists = ("response-calls", "output-text-fields", "rollout-fields", "append-calls")
        if not string_lists(o, lists):
            return True
        f = facts(text)
        if f is None:
            return True
        resp, words = o["response-calls"], f.words()
        if not any(matches(c.name, resp) or matches(c.dotted, resp) for c in f.calls):
            return False
        if not some_word_may_match(words, o["output-text-fields"]):
            return False  # (a text key is not asked: a positional prompt is sent too)
        helper = any(matches(c.name, o["append-calls"]) for c in f.calls)
        if not helper and not some_word_may_match(words, o["rollout-fields"]):
            return False
        return helper or "+=" in text or any(c.name in FlowSpec.mutators for c in f.calls)

    def check_python(self) -> None:
        check_options(self.context.options, DEFAULTS)
        text = self.unit_text
        lay = parse_layout(text)
        tree = pyast.parse(text)
        if lay is None or not lay.loops or tree is None:
            return
        positions = Positions(text)
        config = self.opts["config-names"]
        # labels only first (no trace), then the traced run for a module that has a resend
        spec = ResendSpec(self.opts)
        analyse(tree, spec, positions)
        if not resends(spec, lay, config):
            return
        spec = ResendSpec(self.opts, traced=True)
        analyse(tree, spec, positions)
        for r in resends(spec, lay, config):
            message = MESSAGE.format(
                key=r.key, pieces=_pieces(r.pieces), acc=r.accumulated, trained=r.trained_note, tline=r.trained
            )
            line = r.report_line
            if r.flag is not None:
                message += FLAG.format(name=r.flag.name)
                line = r.flag.line
            self.report_at(line, 0, line, 0, message, trace=r.steps)
