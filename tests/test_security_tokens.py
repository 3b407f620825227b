"""`tokens` and a checkout's tokenizer cannot hang or take the run down.

A recorded sample that drifts every third id made the per-sample diff cubic (one 30 KB
record: four minutes); the work is counted here, never timed.
"""

from __future__ import annotations

import json

import pytest
from test_tokenizer import build_tokenizer, write_tokenizer  # (tests/ is on sys.path)
from test_security_readers import MAX_RSS_KB, no_traceback, pa
from test_tokens_command import audit

from patchaudit.inputs.tokenizer import load_tokenizer
from patchaudit.pipeline import tokens as tokens_mod

pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("model")
    raw = build_tokenizer()
    write_tokenizer(folder, raw)
    return folder, raw


def _drifting_record(raw, repeats: int) -> tuple[list[int], int, int, int]:
    """[a, b, comma] * repeats where the tokenizer writes a + b as one id ab."""
    (ab,) = raw.encode(" truly", add_special_tokens=False).ids
    comma = raw.encode(",", add_special_tokens=False).ids
    canonical = raw.encode(" truly," * repeats, add_special_tokens=False).ids
    assert canonical == [ab, *comma] * repeats
    merges = json.loads(raw.to_str())["model"]["merges"]
    token = raw.id_to_token(ab)
    for m in merges:
        x, y = m if isinstance(m, list) else m.split(" ")
        if x + y == token:
            a, b = raw.token_to_id(x), raw.token_to_id(y)
            return [a, b, *comma] * repeats, a, b, ab
    raise AssertionError("no merge makes ' truly'")


def test_a_long_drifting_record_is_diffed_in_linear_work(model, tmp_path, monkeypatch):
    folder, raw = model
    record, a, b, ab = _drifting_record(raw, 2000)  # 6,000 ids drifting every third id
    work = {"pairs": 0}
    real = tokens_mod.SequenceMatcher

    class Counting(real):  # type: ignore[misc,valid-type]
        def set_seqs(self, x, y):
            work["pairs"] += len(x) * len(y)
            super().set_seqs(x, y)

    monkeypatch.setattr(tokens_mod, "SequenceMatcher", Counting)
    rollouts = tmp_path / "r.jsonl"
    rollouts.write_text(json.dumps({"tokens": record}) + "\n")
    code, out, _ = audit([rollouts], load_tokenizer(folder), fmt="json", all_samples=True)
    assert code == 1
    (sample,) = json.loads(out)["samples"]
    assert len(sample["differences"]) == 2000
    assert all(d["ids"] == [a, b] and d["becomes"] == [ab] for d in sample["differences"])
    assert work["pairs"] <= 64 * 64 * 2000  # difflib on the whole record: 6,000 x 4,000 at least


def test_diff_ids_agrees_with_difflib_on_local_drifts():
    import random
    from difflib import SequenceMatcher

    rng = random.Random(7)
    for _ in range(300):
        a = [rng.randrange(5000) for _ in range(rng.randint(1, 200))]
        b = list(a)
        for _ in range(rng.randint(1, 4)):
            k = rng.randrange(len(b))
            b[k : k + rng.choice((1, 2))] = [6000 + rng.randrange(1000) for _ in range(rng.choice((1, 2)))]
        want = [
            (i1, tuple(a[i1:i2]), tuple(b[j1:j2]))
            for tag, i1, i2, j1, j2 in SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
            if tag != "equal"
        ]
        assert [(d.start, d.ids, d.becomes) for d in tokens_mod.diff_ids(a, b)] == want


# ---------------------------------------------------------------------------
# a tokenizer.json whose pipeline grows text without bound is refused at load

BIG = 8 * 1024 * 1024


def _hostile_tokenizer(folder, model, section: str, node) -> None:
    src, _ = model
    data = json.loads((src / "tokenizer.json").read_text())
    data[section] = node
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokenizer.json").write_text(json.dumps(data))


HOSTILE = {
    "normalizer-replace": ("normalizer", {"type": "Replace", "pattern": {"String": "a"}, "content": "x" * BIG}),
    "decoder-replace": ("decoder", {"type": "Replace", "pattern": {"String": "a"}, "content": "x" * BIG}),
    "normalizer-chain": (
        "normalizer",
        {"type": "Sequence", "normalizers": [{"type": "Replace", "pattern": {"String": "a"}, "content": "aa"}] * 40},
    ),
    "pre-tokenizer-metaspace": ("pre_tokenizer", {"type": "Metaspace", "replacement": "x" * BIG}),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_tokenizer_that_grows_text_is_refused_by_check_and_tokens(model, tmp_path, case):
    section, node = HOSTILE[case]
    _hostile_tokenizer(tmp_path / "model", model, section, node)
    (tmp_path / "pyproject.toml").write_text('[tool.patchaudit]\ntokenizer = "model"\n')
    (tmp_path / "proc.py").write_text('image_token = "<|kimi_image_placeholder|>"\n' + "a" * 2000 + " = 1\n")
    (tmp_path / "r.jsonl").write_text(json.dumps({"tokens": list(range(5, 200))}) + "\n")
    for args in (("check", "--select", "PA105", "--no-cache", "proc.py"), ("tokens", "r.jsonl", "--tokenizer", "model")):
        res = pa(tmp_path, *args, limit_memory=True)
        no_traceback(res)
        assert res.returncode == 2, (args, res)
        assert "tokenizer.json" in res.stderr and section in res.stderr and "refused" in res.stderr, (args, res)
        assert res.maxrss_kb is None or res.maxrss_kb < MAX_RSS_KB


def test_a_sample_that_would_decode_past_the_bound_is_an_error_of_its_line(model, tmp_path, monkeypatch):
    folder, _ = model
    monkeypatch.setattr(tokens_mod, "MAX_DECODED", 1000)
    rollouts = tmp_path / "r.jsonl"
    rollouts.write_text(json.dumps({"tokens": [5] * 10}) + "\n" + json.dumps({"tokens": [5] * 5000}) + "\n")
    code, out, err = audit([rollouts], load_tokenizer(folder))
    assert code == 2 and ":2:" in err and "not audited" in err, err


# ---------------------------------------------------------------------------
# a tokenizer that fails on one sample: an error of that sample, the others reported


def test_a_sample_that_breaks_the_tokenizer_is_an_error_of_its_line(model, tmp_path):
    src, raw = model
    data = json.loads((src / "tokenizer.json").read_text())
    # onig (the library's regex engine) gives up on this one with its retry limit
    split = {"type": "Split", "pattern": {"Regex": "(a|aa)+$"}, "behavior": "Isolated", "invert": False}
    data["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [split, data["pre_tokenizer"]]}
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "tokenizer.json").write_text(json.dumps(data))
    fine = raw.encode("it is truly great", add_special_tokens=False).ids
    breaks = raw.encode("a" * 300 + "b", add_special_tokens=False).ids
    lines = [{"tokens": fine}, {"tokens": breaks}, {"tokens": fine}]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(o) + "\n" for o in lines))
    res = pa(tmp_path, "tokens", "r.jsonl", "--tokenizer", "model", "--format", "json", "--all-samples")
    no_traceback(res)
    assert res.returncode == 2, res
    assert "r.jsonl:2: error: the tokenizer failed on this sample" in res.stderr, res
    got = json.loads(res.stdout)
    assert [s["line"] for s in got["samples"]] == [1, 3]
