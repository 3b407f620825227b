"""PA107 (resume-drops-partial-response) on the shapes partial-rollout code has, as small
trees run through `patchaudit check` (the real pipeline), beyond the rule's own examples."""

from __future__ import annotations

from pathlib import Path

from rule_trees import check_rule

from patchaudit.config.registry import all_rules

RULE = "PA107"


def check(root: Path, files: dict[str, str], options: dict | None = None, errors_ok: bool = False):
    return check_rule(RULE, root, files, options, errors_ok)


RESUME = """
    async def generate(args, sample, url, tokenizer):
        assert sample.status in (Sample.Status.PENDING, Sample.Status.ABORTED)
        text = tokenizer.apply_chat_template([{"role": "user", "content": sample.prompt}], tokenize=False)
        output = await post(url, {"text": text, "sampling_params": {}})
        sample.append_response_tokens(args, tokens=output["meta_info"]["output_ids"], trainable=True)
        return sample
"""


def test_a_rendered_prompt_is_followed_to_the_request(tmp_path):
    got, res = check(tmp_path, {"m.py": RESUME})
    assert got == [("m.py", 4)]
    (f,) = res.findings
    notes = [s.note for s in f.trace]
    assert notes[0].startswith("the sample's original prompt `sample.prompt`"), notes
    assert "sent to the engine by `post(" in notes[-1], notes
    assert "line 2" in f.message and "line 5" in f.message


def test_discarding_the_partial_response_first_is_clean(tmp_path):
    code = RESUME.replace(
        "    text = tokenizer",
        "    if sample.status == Sample.Status.ABORTED:\n"
        "            sample.reset_for_retry()\n"
        "        text = tokenizer",
    )
    got, _ = check(tmp_path / "a", {"m.py": code})
    assert got == []
    code = RESUME.replace(
        "    text = tokenizer", '    sample.response = ""\n        sample.tokens = []\n        text = tokenizer'
    )
    got, _ = check(tmp_path / "b", {"m.py": code})
    assert got == []


def test_prompt_and_partial_response_rendered_together_are_clean(tmp_path):
    code = RESUME.replace(
        '"content": sample.prompt}', '"content": sample.prompt}, {"role": "assistant", "content": sample.response}'
    )
    got, _ = check(tmp_path, {"m.py": code})
    assert got == []


def test_no_append_after_the_request_is_clean(tmp_path):
    code = RESUME.replace(
        '    sample.append_response_tokens(args, tokens=output["meta_info"]["output_ids"], trainable=True)\n',
        '    sample.tokens = output["meta_info"]["output_ids"]\n',
    )
    got, _ = check(tmp_path, {"m.py": code})
    assert got == []


def test_a_sending_helper_of_the_module(tmp_path):
    code = """
        async def _send(url, prompt_ids):
            return await post(url, {"input_ids": prompt_ids})

        async def generate(args, sample, url, tokenizer):
            if sample.response_length >= args.max_len:
                return sample
            ids = tokenizer(sample.prompt)["input_ids"]
            output = await _send(url, ids)
            sample.tokens += output["meta_info"]["output_ids"]
            return sample
    """
    got, res = check(tmp_path, {"m.py": code})
    assert got == [("m.py", 2)]
    notes = " | ".join(s.note for s in res.findings[0].trace)
    assert "to `_send()`" in notes


def test_configured_sample_names_and_status_values(tmp_path):
    code = """
        async def continue_traj(traj, engine, tokenizer):
            if traj.state != "interrupted":
                return traj
            ids = tokenizer.encode(traj.question)
            out = await engine.async_generate(input_ids=ids)
            traj.tokens.extend(out["output_ids"])
            return traj
    """
    got, _ = check(tmp_path / "a", {"m.py": code})
    assert got == []
    opts = {
        "sample-names": ["traj"],
        "prompt-fields": ["question"],
        "status-fields": ["state"],
        "status-values": ["interrupted"],
    }
    got, _ = check(tmp_path / "b", {"m.py": code}, options=opts)
    assert got == [("m.py", 5)]


def test_a_bad_option_is_an_error_naming_it(tmp_path):
    _, res = check(tmp_path, {"m.py": RESUME}, options={"status-values": [1]}, errors_ok=True)
    assert res.errors and "status-values" in str(res.errors[0])


def test_a_patch_that_adds_the_prompt_only_request(tmp_path):
    patch = """
        --- a/rollout.py
        +++ b/rollout.py
        @@ -1,4 +1,4 @@
         async def generate(args, sample, url):
             assert sample.status in (Sample.Status.PENDING, Sample.Status.ABORTED)
        -    output = await post(url, {"input_ids": sample.tokens})
        +    output = await post(url, {"text": sample.prompt})
             sample.append_response_tokens(args, tokens=output["meta_info"]["output_ids"], trainable=True)
    """
    got, _ = check(tmp_path, {"resume.patch": patch})
    assert got == [("resume.patch", 7)]


def test_prefilter_is_strict_and_sound_on_the_examples():
    rule = all_rules()[RULE]
    assert not rule.can_match("output = post(url, {'text': sample.prompt})\nsample.tokens += ids\n")
    aborted = "if sample.status == ABORTED:\n    pass\n"
    assert not rule.can_match(aborted + "output = post(url, {'text': sample.prompt})\n"), "no append"
    assert rule.can_match(aborted + "output = post(url, {'text': sample.prompt})\nsample.tokens += ids\n")
    assert not rule.can_match(aborted + "print(sample.prompt)\nsample.tokens += ids\n"), "no engine call"
    for ex in rule.INVALID:
        if ex.kind == "python" and not ex.options:
            assert rule.can_match(ex.source), ex.title
