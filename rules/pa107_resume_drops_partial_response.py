from __future__ import annotations

import ast
import functools
import re
from typing import Any

from patchaudit.analysis.dataflow import Positions, analyse, matches
from patchaudit.analysis.gate import facts, literal_part, some_word_may_match, string_lists
from patchaudit.analysis.resume_spec import DEFAULTS, ResumeSpec, drops
from patchaudit.analysis.turn_syntax import field_of, layout
from patchaudit.inputs import pyast
from patchaudit.lint.rule import PYTHON, Example, Rule
from patchaudit.model.findings import Severity

from .pa102_expanded_ids_as_rollout_tokens import check_options

MESSAGE = (
    "a resumed sample's request sends only its original prompt (`{key}`), while the sample already holds "
    "its partial response (it admits a partially generated sample at line {resume}, and the new output is "
    "appended after the held one at line {append}): the engine generates the continuation without the partial "
    "response, and the trained ids join two generations that never followed each other; send the held tokens "
    "(prompt plus partial response), or discard the partial response before resuming"
)


@functools.lru_cache(maxsize=32)
def _word_re(names: tuple[str, ...]) -> "re.Pattern[str]":
    alts = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"(?<![\w])(?:{alts})(?![\w])")


class ResumeDropsPartialResponse(Rule):
    """
    Flags a resumed partial rollout whose request sends only the original prompt while the
    sample already holds the partial response.

    ## What it does
    In a function that admits a partially generated sample (its status compared with an
    aborted value: `sample.status == Sample.Status.ABORTED`, `status-values`; or its partial
    response measured: `sample.response_length`, `partial-fields`), follows the sample's
    original prompt (`sample.prompt`: `prompt-fields`) and its ids
    (`tokenizer.encode(sample.prompt)`, `tokenizer(...)["input_ids"]`,
    `apply_chat_template(..., tokenize=True)`, a processor's `input_ids`) through
    assignments, branches and helper functions of the module into the prompt of an
    engine request (`prompt-keys`: `text`, `input_ids`, `prompt_token_ids`... as a key of
    the payload or a keyword of a `response-calls` call).  It reports the request when
    the value sent holds nothing the sample already generated (`held-fields`:
    `sample.tokens`, `sample.response`), the function appends the new output to the
    held one afterwards (`sample.append_response_tokens(...)`, `sample.tokens += ...`:
    `append-calls`), and it does not discard the partial response first.

    Clean: the held tokens sent (`payload["input_ids"] = sample.tokens` when the sample
    has a response, or a helper that returns `sample.tokens` for a resumed sample); the
    prompt and the partial response sent together (`sample.prompt + sample.response`);
    the partial response discarded before the request (`sample.tokens = prompt_ids`,
    `sample.response = ""`, `sample.reset_for_retry()`: `reset-calls`); a function that
    never admits a resumed sample.

    Options (`[tool.patchaudit.rules.PA107]`): `sample-names`, `prompt-fields`,
    `held-fields`, `prompt-keys`, `status-fields`, `status-values`, `partial-fields`,
    `reset-calls`, `response-calls`, `tokenizer-names`, `processor-names`,
    `encode-methods`, `ids-fields`, `append-calls` (the shared ones default to PA103's).

    ## Why is this bad?
    Partial rollouts abort long generations at a weight update and resume them later.
    The aborted sample keeps its partial response in `sample.tokens`, its log-probs and
    its loss mask.  If the resumed request sends only the prompt, the engine starts over:
    the new tokens are a fresh answer to the prompt, not a continuation, yet they are
    appended after the partial response.  The trained sequence is two half answers glued
    together, the log-probs of the second half belong to a context the trainer never
    shows, and `max_new_tokens` (reduced by the partial length) cuts the new answer short.

    ## Example
    ```python
    async def generate(args, sample, sampling_params):
        assert sample.status in (Sample.Status.PENDING, Sample.Status.ABORTED)
        sampling_params["max_new_tokens"] -= sample.response_length
        payload = {"text": sample.prompt, "sampling_params": sampling_params}
        output = await post(url, payload)
        sample.append_response_tokens(args, tokens=output_ids(output), trainable=True)
    ```

    ## Use instead
    Send the held tokens when the sample already has a response:
    ```python
    async def generate(args, sample, sampling_params):
        assert sample.status in (Sample.Status.PENDING, Sample.Status.ABORTED)
        sampling_params["max_new_tokens"] -= sample.response_length
        payload = {"input_ids": sample.tokens, "sampling_params": sampling_params}
        output = await post(url, payload)
        sample.append_response_tokens(args, tokens=output_ids(output), trainable=True)
    ```

    ## Incident
    slime's default `generate` (slime/rollout/sglang_rollout.py) accepts ABORTED samples
    for partial rollout and resumes text prompts from `sample.tokens`, but for a sample with
    images it sends `payload["text"] = sample.prompt` (so that SGLang expands the image
    placeholders) and then appends the new tokens after the held partial response.
    miles' generate resumes correctly: `payload["input_ids"] = sample.tokens` when
    `len(sample.response) > 0`.
    """

    code = "PA107"
    roles = frozenset({"port-check"})
    name = "resume-drops-partial-response"
    severity = Severity.ERROR
    kinds = frozenset({PYTHON})
    requires = (
        ("ABORTED", "status", "prompt", "sample"),
        ("aborted", "status", "prompt", "sample"),
        ("PARTIAL", "status", "prompt", "sample"),
        ("partial", "status", "prompt", "sample"),
        ("response_length", "prompt", "sample"),
    )
    options = {k: list(v) for k, v in DEFAULTS.items()}
    reads_tree = False

    VALID = [
        Example(
            """\
            async def generate(args, sample, url, tokenizer, sampling_params):
                assert sample.status in (Sample.Status.PENDING, Sample.Status.ABORTED)
                prompt_ids = tokenizer.encode(sample.prompt, add_special_tokens=False)
                if len(sample.response) > 0:
                    payload = {"input_ids": sample.tokens, "sampling_params": sampling_params}
                else:
                    payload = {"input_ids": prompt_ids, "sampling_params": sampling_params}
                    sample.tokens = prompt_ids
                output = await post(url, payload)
                sample.append_response_tokens(args, tokens=output["meta_info"]["output_ids"], trainable=True)
                return sample
            """,
            title="miles shape: the held tokens sent when the sample has a response",
        ),
        Example(
            """\
            def prompt_ids_of(sample, tokenizer):
                if sample.tokens:
                    return sample.tokens
                return tokenizer.encode(sample.prompt, add_special_tokens=False)

            async def generate(args, sample, url, tokenizer):
                assert sample.status == Sample.Status.PENDING or sample.status == Sample.Status.ABORTED
                ids = prompt_ids_of(sample, tokenizer)
                output = await post(url, {"input_ids": ids})
                sample.append_response_tokens(args, tokens=output["meta_info"]["output_ids"], trainable=True)
            """,
            title="a helper that returns the held tokens for a resumed sample",
        ),
        Example(
            """\
            async def generate(args, sample, url):
                if sample.status == Sample.Status.ABORTED:
                    sample.tokens = []
                    sample.response = ""
                output = await post(url, {"text": sample.prompt})
                sample.response += output["text"]
            """,
            title="the partial response discarded before resuming",
        ),
        Example(
            """\
            async def generate(args, sample, url):
                assert sample.status in {Sample.Status.PENDING, Sample.Status.ABORTED}
                output = await post(url, {"text": sample.prompt + sample.response})
                sample.response += output["text"]
            """,
            title="the prompt and the partial response sent together as text",
        ),
        Example(
            """\
            async def generate(args, sample, url, tokenizer):
                ids = tokenizer.encode(sample.prompt)
                output = await post(url, {"input_ids": ids})
                sample.tokens = ids + output["meta_info"]["output_ids"]
                if output["meta_info"]["finish_reason"]["type"] == "abort":
                    sample.status = Sample.Status.ABORTED
                return sample
            """,
            title="a sample marked aborted, never resumed here",
        ),
        Example(
            """\
            async def generate(args, sample, url, tokenizer):
                if sample.status == Sample.Status.ABORTED:
                    return sample
                output = await post(url, {"text": sample.prompt})
                sample.append_response_tokens(args, tokens=output["meta_info"]["output_ids"], trainable=True)
                return sample
            """,
            title="aborted samples turned away, not resumed",
        ),
    ]
    INVALID = [
        Example(
            """\
            def prompt_ids_of(sample, tokenizer, processor):
                if sample.tokens and sample.train_inputs is not None:
                    return sample.tokens
                if processor and sample.images:
                    return processor(text=sample.prompt, images=sample.images)["input_ids"][0]
                return tokenizer.encode(sample.prompt, add_special_tokens=False)

            async def generate(args, sample, url, tokenizer, processor, sampling_params):
                assert sample.status == Sample.Status.PENDING or sample.status == Sample.Status.ABORTED
                prompt_ids = prompt_ids_of(sample, tokenizer, processor)
                sampling_params["max_new_tokens"] -= sample.response_length
                payload = {"sampling_params": sampling_params, "return_logprob": True}
                if sample.images:
                    payload["image_data"] = [encode(image) for image in sample.images]
                    payload["text"] = sample.prompt
                else:
                    payload["input_ids"] = prompt_ids
                if not sample.tokens:
                    sample.tokens = prompt_ids
                output = await post(url, payload)
                new_tokens = [item[1] for item in output["meta_info"]["output_token_logprobs"]]
                sample.append_response_tokens(args, tokens=new_tokens, trainable=True)
                return sample
            """,
            line=15,
            contains="`text`",
            title="slime shape: a resumed sample with images sends `sample.prompt` as text",
        ),
        Example(
            """\
            async def generate(args, sample, url, tokenizer, sampling_params):
                assert sample.status in (Sample.Status.PENDING, Sample.Status.ABORTED)
                prompt_ids = tokenizer(sample.prompt, add_special_tokens=False)["input_ids"]
                if sample.response_length > 0:
                    sampling_params["max_new_tokens"] -= sample.response_length
                output = await post(url, {"input_ids": prompt_ids, "sampling_params": sampling_params})
                sample.tokens += output["meta_info"]["output_ids"]
                return sample
            """,
            line=6,
            contains="`input_ids`",
            title="the prompt's ids sent; new tokens added to the held ones",
        ),
        Example(
            """\
            async def resume(engine, sample, tokenizer, messages):
                if sample.status != "aborted":
                    return sample
                ids = tokenizer.apply_chat_template([{"role": "user", "content": sample.prompt}], tokenize=True)
                out = await engine.async_generate(input_ids=ids, sampling_params={})
                sample.response_ids.extend(out["output_ids"])
                return sample
            """,
            line=5,
            contains="`input_ids`",
            title="the chat template over the prompt only, sent as a keyword",
        ),
    ]

    @classmethod
    def can_match(cls, text: str, settings: Any = None) -> bool:
        """A word of the resume evidence (a status value or a partial field) and a prompt
        field; the class `requires` are these groups for the default names."""
        options = settings.options_for(cls.code) if settings is not None else None
        o = {**DEFAULTS, **(options or {})}
        keys = ("status-values", "status-fields", "partial-fields", "prompt-fields", "sample-names", "held-fields")
        if not string_lists(o, (*keys, "append-calls")):
            return True  # the rule reports the bad option
        words = [*o["status-values"], *o["status-fields"], *o["partial-fields"], *o["prompt-fields"], *o["held-fields"]]
        if any(ch in w for w in words for ch in "*?[") or not words:
            return True
        # each ingredient as the hooks and the syntax reader see it: a field as an attribute or a
        # string key (`sample.prompt`, `sample["prompt"]`), a status value as a name or a string
        status = field_of(text, o["status-fields"]) and _word_re(tuple(o["status-values"])).search(text)
        if not (status or field_of(text, o["partial-fields"])):
            return False
        if not field_of(text, o["prompt-fields"]):
            return False
        if not field_of(text, o["held-fields"]) and not any(a in text for a in o["append-calls"]):
            return False
        runs = [literal_part(n) for n in o["sample-names"]]
        if "" not in runs and not any(r in text for r in runs):
            return False
        return cls.can_fire(text, o)

    @staticmethod
    def can_fire(text: str, o: dict[str, Any]) -> bool:
        """Whether the module names every ingredient of a finding (read with `ast`,
        patchaudit/analysis/gate.py): an engine call, a prompt key or keyword, a prompt
        field, and an append (an append helper, or a held field grown)."""
        lists = ("response-calls", "prompt-keys", "prompt-fields", "held-fields", "append-calls")
        if not string_lists(o, lists):
            return True
        f = facts(text)
        if f is None:
            return True
        resp, words = o["response-calls"], f.words()
        if not any(matches(c.name, resp) or matches(c.dotted, resp) for c in f.calls):
            return False
        if not some_word_may_match(words, o["prompt-keys"]) or not some_word_may_match(words, o["prompt-fields"]):
            return False
        if any(matches(c.name, o["append-calls"]) for c in f.calls):
            return True
        return some_word_may_match(words, o["held-fields"]) and (
            "+=" in text or any(c.name in ("extend", "append") for c in f.calls) or "+" in text
        )

    def check_python(self) -> None:
        check_options(self.context.options, DEFAULTS)
        text = self.unit_text
        tree = pyast.parse(text)
        if not isinstance(tree, ast.Module):
            return
        spec = ResumeSpec(self.opts)
        analyse(tree, spec, Positions(text))
        if not spec.sent:
            return
        for d in drops(spec, tree, layout(tree)):
            message = MESSAGE.format(key=d.key, resume=d.resume, append=d.append)
            self.report_at(d.line, 0, d.line, 0, message, trace=d.steps)
