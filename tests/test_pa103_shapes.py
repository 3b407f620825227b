"""PA103 on the shapes RL rollout code has, as small trees of several modules run through
`patchaudit check` (the real pipeline), beyond the rule's own examples.

Some flows cross modules (the text built in one module, encoded in another).  PA103 follows
a flow inside one module; the repository layer (patchaudit/analysis/repo_summaries.py) is
what carries it across modules.  The tests marked CROSS-MODULE assert what a run finds
today, explicitly: when the repository layer carries them, they change and must be updated
to the finding (the comment says which).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rule_trees import check_rule

from patchaudit.analysis.retokenize_spec import vocabulary
from patchaudit.config.registry import all_rules

RULE = "PA103"


def check(root: Path, files: dict[str, str], options: dict | None = None, errors_ok: bool = False):
    return check_rule(RULE, root, files, options, errors_ok)


TOKEN_DELTA = """
    def get_token_delta(tokenizer, messages):
        prev = tokenizer.apply_chat_template(messages[:-1], tokenize=False)
        curr = tokenizer.apply_chat_template(messages, tokenize=False)
        new_tokens = tokenizer.encode(curr[len(prev):], add_special_tokens=False)
        loss_mask = [1] * len(new_tokens)
        return new_tokens, loss_mask
"""

AGENT = """
    from .token_delta import get_token_delta
    from .http import post


    async def run_episode(res, url, tokenizer, messages):
        response_token_ids = []
        output = await post(url, {"text": tokenizer.apply_chat_template(messages, tokenize=False)})
        response = output["text"]
        if response.endswith("<|im_end|>"):
            response = response[: -len("<|im_end|>")]
        messages.append({"role": "assistant", "content": response})
        ids, mask = get_token_delta(tokenizer, messages)
        response_token_ids.extend(ids)
        res.tokens = res.prompt_ids + response_token_ids
        return res
"""


def test_cross_module_chat_template_delta_today(tmp_path):
    """CROSS-MODULE (slime tau-bench): the engine's text goes into messages here; the chat
    template is rendered again and the delta encoded in token_delta.py.  Today: no finding
    (the imported helper's result is unknown); with the repository layer: one finding at
    agent.py:14 (`res.tokens`)."""
    got, _ = check(tmp_path, {"pkg/__init__.py": "", "pkg/token_delta.py": TOKEN_DELTA, "pkg/agent.py": AGENT})
    assert got == []


def test_same_shape_in_one_module_is_found(tmp_path):
    """The tau-bench shape with the delta helper in the same module (miles' copy): found, the
    trace goes through the helper."""
    inline = AGENT.replace("    from .token_delta import get_token_delta\n", "") + TOKEN_DELTA
    got, res = check(tmp_path, {"pkg/__init__.py": "", "pkg/agent.py": inline})
    assert got == [("agent.py", 13)]
    notes = " ".join(s.note for s in res.findings[0].trace)
    assert "rendered with the chat template" in notes and "`text` of the response" in notes


POSTPROCESS = """
    import re


    def postprocess_responses(resp):
        return re.sub(r"</answer>.*", "</answer>", resp, flags=re.S)
"""

SEARCH = """
    from .post import postprocess_responses
    from .http import post


    async def generate(args, sample, url, tokenizer):
        loss_mask = []
        output = await post(url, {"text": sample.prompt})
        text = postprocess_responses(output["text"])
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        loss_mask += [1] * len(ids)
        sample.append_response_tokens(args, tokens=ids, trainable=True)
        return sample
"""


def test_cross_module_post_processing_today(tmp_path):
    """CROSS-MODULE (slime search-r1 with its post-processing imported): the text goes through
    a regex helper of another module.  Today: no finding; with the repository layer: one in
    search.py (the loss mask or the append helper, lines 10-11)."""
    got, _ = check(tmp_path, {"pkg/__init__.py": "", "pkg/post.py": POSTPROCESS, "pkg/search.py": SEARCH})
    assert got == []


def test_post_processing_in_the_module_is_found(tmp_path):
    inline = SEARCH.replace("    from .post import postprocess_responses\n", "") + POSTPROCESS
    got, res = check(tmp_path, {"pkg/search.py": inline})
    assert len(got) == 1 and got[0][0] == "search.py"
    assert "append_response_tokens" in res.findings[0].message


def test_engine_ids_kept_across_modules_are_clean(tmp_path):
    """The text goes to a reward module, the ids the engine sampled are stored: clean."""
    reward = """
        def score(tokenizer, text, label):
            return float(tokenizer.encode(text.strip()) == tokenizer.encode(label))
    """
    rollout = """
        from .reward import score
        from .http import post


        async def generate(args, sample, url, tokenizer):
            output = await post(url, {"input_ids": sample.tokens, "return_logprob": True})
            new_ids = [t for _, t, *_ in output["meta_info"]["output_token_logprobs"]]
            sample.append_response_tokens(args, tokens=new_ids, trainable=True)
            sample.loss_mask += [1] * len(new_ids)
            sample.reward = score(tokenizer, output["text"], sample.label)
            return sample
    """
    got, _ = check(tmp_path, {"pkg/reward.py": reward, "pkg/rollout.py": rollout})
    assert got == []


def test_decode_in_one_module_encode_in_another_today(tmp_path):
    """CROSS-MODULE (decode family): the ids are decoded in history.py and encoded in turns.py.
    Today: no finding; with the repository layer: one at turns.py:6."""
    history = """
        def history_text(tokenizer, ids):
            return tokenizer.decode(ids, skip_special_tokens=False)
    """
    turns = """
        from .history import history_text


        def next_turn(sample, tokenizer, user_text):
            prompt = history_text(tokenizer, sample.tokens) + user_text
            sample.tokens = tokenizer.encode(prompt, add_special_tokens=False)
    """
    got, _ = check(tmp_path, {"pkg/history.py": history, "pkg/turns.py": turns})
    assert got == []


def test_fork_back_to_the_engine_ids_is_clean(tmp_path):
    code = """
        async def turn(sample, url, tokenizer):
            output = await post(url, {"input_ids": sample.tokens})
            ids = tokenizer.encode(output["text"], add_special_tokens=False)
            if ids != output["output_ids"]:
                ids = output["output_ids"]
            sample.tokens = sample.tokens + ids
    """
    got, _ = check(tmp_path, {"m.py": code})
    assert got == []
    unguarded = code.replace(
        '            if ids != output["output_ids"]:\n                ids = output["output_ids"]\n', ""
    )
    got, _ = check(tmp_path / "b", {"m.py": unguarded})
    assert got == [("m.py", 4)]


def test_configured_engine_calls_and_text_fields(tmp_path):
    code = """
        def act(sample, engine, tokenizer, prompt):
            result = engine.query_model(prompt)
            sample.response_ids = tokenizer.encode(result.completion)
    """
    got, _ = check(tmp_path / "a", {"m.py": code})
    assert got == []
    opts = {"response-calls": ["query_model"], "output-text-fields": ["completion"]}
    got, _ = check(tmp_path / "b", {"m.py": code}, options=opts)
    assert got == [("m.py", 3)]
    got, _ = check(tmp_path / "c", {"m.py": code}, options={**opts, "rollout-fields": ["tokens"]})
    assert got == []


def test_zero_mask_and_non_trainable_append_are_not_sinks(tmp_path):
    code = """
        async def observe(args, sample, url, tokenizer):
            other = await post(url, {"text": "summarise the tool output"})
            obs_ids = tokenizer.encode(other["text"], add_special_tokens=False)
            sample.loss_mask += [0] * len(obs_ids)
            sample.append_response_tokens(args, tokens=obs_ids, trainable=False)
    """
    got, _ = check(tmp_path, {"m.py": code})
    assert got == []
    trained = code.replace("[0] * len(obs_ids)", "[1] * len(obs_ids)")
    got, _ = check(tmp_path / "b", {"m.py": trained})
    assert got == [("m.py", 4)]


def test_requires_are_the_defaults_groups():
    """The class `requires` (read statically by the registry) are `requires_for` the defaults,
    and every INVALID example passes the pre-filter with the default settings."""
    rule = all_rules()[RULE]
    assert tuple(tuple(g) for g in rule.requires) == rule.requires_for(None)
    for ex in rule.INVALID:
        if ex.kind == "python" and not ex.options:
            assert rule.can_match(ex.source), ex.title


# whose vocabulary a tokenizer's name says it holds (analysis/retokenize_spec.py)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("blip_processor", "blip"),
        ("llm_tokenizer", "llm"),
        ("self.rm_tokenizer", "rm"),
        ("tokenizer", ""),
        ("self.tokenizer", ""),
        ("processor.tokenizer", ""),
        ("self._tokenizer", ""),
        ("mp.tokenizer", ""),
        ("self.actor_tokenizer", ""),
        ("ref_tokenizer", ""),
        ("teacher_processor", ""),
        (None, ""),
    ],
)
def test_whose_vocabulary_a_name_says(name: str | None, expected: str) -> None:
    assert vocabulary(name) == expected
