"""PA106 (conversation-resent-as-text) on the shapes multi-turn rollouts have, as small trees
run through `patchaudit check` (the real pipeline), beyond the rule's own examples."""

from __future__ import annotations

from pathlib import Path

from rule_trees import check_rule

from patchaudit.config.registry import all_rules

RULE = "PA106"


def check(root: Path, files: dict[str, str], options: dict | None = None, errors_ok: bool = False):
    return check_rule(RULE, root, files, options, errors_ok)


VLLM = """
    def rollout(llm, params, tokenizer, sample, env):
        prompt = sample.prompt
        ids = tokenizer.encode(prompt)
        for _ in range(4):
            outputs = llm.generate(prompt, params)
            out = outputs[0].outputs[0]
            ids += out.token_ids
            obs = env.step(out.text)
            prompt = prompt + out.text + obs
            ids += tokenizer.encode(obs)
        sample.tokens = ids
"""


def test_vllm_positional_prompt_is_followed(tmp_path):
    got, res = check(tmp_path, {"m.py": VLLM})
    assert got == [("m.py", 5)]
    (f,) = res.findings
    notes = [s.note for s in f.trace]
    assert notes[0].startswith("the engine's output text: `text`"), notes
    assert "sent again as the request's text" in notes[-1]
    assert "the engine's sampled ids and separately tokenized text" in f.message
    assert "`sample.tokens`, line 11" in f.message


def test_the_same_loop_sending_ids_is_clean(tmp_path):
    code = VLLM.replace("llm.generate(prompt, params)", "llm.generate({'prompt_token_ids': ids}, params)")
    got, _ = check(tmp_path, {"m.py": code})
    assert got == []


def test_while_loop_and_a_payload_helper(tmp_path):
    code = """
        def build(history, params):
            return {"text": history, "sampling_params": params}

        async def generate(args, sample, url, tokenizer):
            history, done = sample.prompt, False
            while not done:
                output = await post(url, build(history, {}))
                history += output["text"]
                sample.append_response_tokens(args, tokens=output["meta_info"]["output_ids"], trainable=True)
                done = output["meta_info"]["finish_reason"]["type"] == "stop"
            return sample
    """
    got, res = check(tmp_path, {"m.py": code})
    assert got == [("m.py", 7)]
    notes = " | ".join(s.note for s in res.findings[0].trace)
    assert "to `build()`" in notes


def test_flag_bound_to_a_local_is_reported_where_it_is_read(tmp_path):
    code = """
        async def generate(self, sample, url, tokenizer, messages):
            resend = self.cfg.resend_text_history
            tokens = tokenizer.apply_chat_template(messages, tokenize=True)
            for _ in range(self.cfg.max_turns):
                if resend:
                    payload = {"text": tokenizer.apply_chat_template(messages, tokenize=False)}
                else:
                    payload = {"input_ids": tokens}
                output = await post(url, payload)
                tokens.extend(output["meta_info"]["output_ids"])
                messages.append({"role": "assistant", "content": output["text"]})
            sample.tokens = tokens
    """
    got, res = check(tmp_path, {"m.py": code})
    assert got == [("m.py", 2)]
    assert "`resend = self.cfg.resend_text_history`" in res.findings[0].message


def test_configured_engine_call_and_text_key(tmp_path):
    code = """
        def rollout(engine, sample, tokenizer):
            conversation, ids = sample.prompt, []
            for _ in range(3):
                reply = engine.query_model(conversation=conversation)
                ids += reply.sampled
                conversation = conversation + reply.answer
            sample.tokens = ids
    """
    got, _ = check(tmp_path / "a", {"m.py": code})
    assert got == []
    opts = {
        "response-calls": ["query_model"],
        "output-text-fields": ["answer"],
        "engine-ids-fields": ["sampled"],
        "text-keys": ["conversation"],
    }
    got, _ = check(tmp_path / "b", {"m.py": code}, options=opts)
    assert got == [("m.py", 4)]
    got, _ = check(tmp_path / "c", {"m.py": code}, options={**opts, "rollout-fields": ["response_ids"]})
    assert got == []


def test_a_bad_option_is_an_error_naming_it(tmp_path):
    _, res = check(tmp_path, {"m.py": VLLM}, options={"text-keys": "text"}, errors_ok=True)
    assert res.errors and "text-keys" in str(res.errors[0])


def test_another_calls_output_in_a_new_prompt_is_clean(tmp_path):
    code = """
        async def debate(url, tokenizer, question, sample):
            ids = []
            answer = await post(url, {"text": question})
            for _ in range(3):
                critique = await post(url + "/critic", {"text": answer["text"]})
                ids += critique["meta_info"]["output_ids"]
            sample.tokens = ids
    """
    got, _ = check(tmp_path, {"m.py": code})
    assert got == []


def test_cross_module_sender_today(tmp_path):
    """CROSS-MODULE: the request is posted by another module's helper (`client.send`) that is
    not an engine call by name: PA106 is a one-module rule today and does not see it."""
    files = {
        "pkg/__init__.py": "",
        "pkg/client.py": """
            async def send(url, payload):
                return await post(url, payload)
        """,
        "pkg/agent.py": """
            from .client import send

            async def generate(args, sample, url):
                response = ""
                for _ in range(3):
                    output = await send(url, {"text": sample.prompt + response})
                    response += output["text"]
                    sample.append_response_tokens(args, tokens=output["meta_info"]["output_ids"], trainable=True)
                return sample
        """,
    }
    got, _ = check(tmp_path, files)
    assert got == []


def test_prefilter_is_strict_and_sound_on_the_examples():
    rule = all_rules()[RULE]
    assert not rule.can_match("output = post(url, {'text': t})\nprint(output['text'])\n")
    assert not rule.can_match("for x in y:\n    r = post(url, {'text': t})\n    print(r['text'])\n")
    loop = "for x in y:\n    r = post(url, {'text': t})\n    ids += r['meta_info']['output_token_logprobs']\n"
    assert not rule.can_match(loop), "no rollout field, no append helper"
    assert rule.can_match(loop + "sample.tokens = ids\n")
    assert not rule.can_match("def f(text):\n    return text.strip()\n")
    for ex in rule.INVALID:
        if ex.kind == "python" and not ex.options:
            assert rule.can_match(ex.source), ex.title


def test_an_if_that_is_no_switch_names_no_flag(tmp_path):
    code = """
        async def generate(self, sample, url, tokenizer, messages):
            tokens = []
            for _ in range(3):
                if self.tokenizer is not None:
                    payload = {"text": tokenizer.apply_chat_template(messages, tokenize=False)}
                output = await post(url, payload)
                tokens += output["meta_info"]["output_ids"]
                messages.append({"role": "assistant", "content": output["text"]})
            sample.tokens = tokens
    """
    got, res = check(tmp_path, {"m.py": code})
    assert got == [("m.py", 6)]
    assert "turned on by" not in res.findings[0].message
