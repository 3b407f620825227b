"""`patchaudit tokens`: recorded rollout ids that would drift under decode and re-encode.

The tokenizer is trained in the test (tests/test_tokenizer.py's builder); the
non-canonical pair is read off its merges: two ids whose text re-encodes as one
(`[Ġ, truly]` -> `[Ġtruly]`, the shape of seed 002's `[479, 3770]` -> `[9149]`).
"""

from __future__ import annotations

import gzip
import io
import json
import os
from pathlib import Path

import pytest

from patchaudit.cli import main
from patchaudit.pipeline.tokens import diff_ids
from patchaudit.reporters.tokens import run_audit
from patchaudit.inputs.tokenizer import load_tokenizer

from test_tokenizer import build_tokenizer, cli, remerging_pair, write_tokenizer

pytest.importorskip("tokenizers")

TEXTS = [
    "I am truly happy<|im_end|>",
    "the tree is green",
    "Describe the picture<|media_pad|> what is shown in the image",
    "it is truly great, truly",
    "",
]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """(tokenizer path, loaded tokenizer, raw library tokenizer, (a, b, ab))."""
    folder = tmp_path_factory.mktemp("model")
    raw = build_tokenizer()
    write_tokenizer(folder, raw)
    return folder, load_tokenizer(folder), raw, remerging_pair(raw)


def encode(raw, text):
    return raw.encode(text, add_special_tokens=False).ids


def split_first(ids, ab, a, b):
    """`ids` with its first `ab` written as the non-canonical pair [a, b]; the span's start."""
    k = ids.index(ab)
    return ids[:k] + [a, b] + ids[k + 1:], k


def make_rollouts(path: Path, raw, pair, *, canonical_copies=2):
    """Canonical samples, plus drifting ones on known lines; returns {line: [span starts]}."""
    a, b, ab = pair
    lines, drifting = [], {}
    for _ in range(canonical_copies):
        for t in TEXTS:
            lines.append({"tokens": encode(raw, t), "index": len(lines)})
    # one split, then two splits in one sample, then a split inside a nested field
    ids, k = split_first(encode(raw, "I am truly happy<|im_end|>"), ab, a, b)
    lines.append({"tokens": ids, "index": len(lines)})
    drifting[len(lines)] = [k]
    ids, k1 = split_first(encode(raw, "it is truly great, truly"), ab, a, b)
    ids, k2 = split_first(ids, ab, a, b)
    lines.append({"tokens": ids, "index": len(lines)})
    drifting[len(lines)] = [k1, k2]  # spans are positions in the recorded ids
    with open(path, "w", encoding="utf-8") as fh:
        for obj in lines:
            fh.write(json.dumps(obj) + "\n")
    return drifting


def audit(files, tok, **kw):
    out, err = io.StringIO(), io.StringIO()
    opts = dict(field="tokens", id_field=None, fmt="text", out=out, err=err, top=10, all_samples=False,
                summary_only=False, progress_enabled=False, out_is_terminal=False)
    opts.update(kw)
    code = run_audit([str(f) for f in files], tok, **opts)
    return code, out.getvalue(), err.getvalue()


# --------------------------------------------------------------------------


def test_pair_really_is_non_canonical(setup):
    _, tok, raw, (a, b, ab) = setup
    assert a != ab and b != ab
    assert tok.decode([a, b]) == tok.decode([ab]) == " truly"
    assert tok.encode(tok.decode([a, b])) == [ab]


def test_diff_ids_spans():
    assert diff_ids([1, 2, 3], [1, 2, 3]) == []
    (d,) = diff_ids([5, 1, 2, 6], [5, 9, 6])
    assert (d.start, d.end, d.new_start, d.ids, d.becomes) == (1, 3, 1, (1, 2), (9,))
    d1, d2 = diff_ids([1, 2, 7, 7, 1, 2], [3, 7, 7, 3])
    assert (d1.start, d1.end, d1.becomes) == (0, 2, (3,)) and (d2.start, d2.end, d2.new_start) == (4, 6, 3)
    (d,) = diff_ids([1, 2], [1, 2, 4])
    assert (d.start, d.end, d.ids, d.becomes) == (2, 2, (), (4,))


def test_reports_exactly_the_drifting_samples_json(setup, tmp_path):
    folder, tok, raw, pair = setup
    a, b, ab = pair
    data = tmp_path / "rollouts.jsonl"
    drifting = make_rollouts(data, raw, pair)
    res = cli().invoke(main, ["tokens", "--tokenizer", str(folder), "--format", "json", str(data)])
    assert res.exit_code == 1, res.stderr
    report = json.loads(res.stdout)
    assert {s["line"] for s in report["samples"]} == set(drifting)
    for s in report["samples"]:
        assert s["drifts"] is True and s["path"] == str(data)
        assert [d["start"] for d in s["differences"]] == drifting[s["line"]]
        for d in s["differences"]:
            assert d["end"] == d["start"] + 2
            assert d["ids"] == [a, b] and d["becomes"] == [ab]
            assert d["tokens"] == [tok.token(a), tok.token(b)] and d["becomes_tokens"] == [tok.token(ab)]
        assert s["new_length"] == s["length"] - len(s["differences"])
    summary = report["summary"]
    assert summary["samples_checked"] == 2 * len(TEXTS) + 2
    assert summary["samples_drifting"] == 2
    assert summary["errors"] == 0 and report["errors"] == []
    (top,) = summary["top_pairs"]
    assert (top["ids"], top["becomes"], top["count"], top["samples"]) == ([a, b], [ab], 3, 2)


def test_reports_exactly_the_drifting_samples_text(setup, tmp_path):
    folder, tok, raw, pair = setup
    a, b, ab = pair
    data = tmp_path / "rollouts.jsonl"
    drifting = make_rollouts(data, raw, pair)
    res = cli().invoke(main, ["tokens", "--tokenizer", str(folder / "tokenizer.json"), str(data),
                              "--id-field", "index"])
    assert res.exit_code == 1
    heads = [l for l in res.stdout.splitlines() if "drifts under decode" in l]
    assert [int(h.split(":")[1].split(" ")[0]) for h in heads] == sorted(drifting)
    first_line = sorted(drifting)[0]
    k = drifting[first_line][0]
    pair_text = (f"[{k}:{k + 2}] [{a}, {b}] ({tok.token(a)!r}, {tok.token(b)!r}) -> "
                 f"[{ab}] ({tok.token(ab)!r})")
    assert pair_text in res.stdout
    assert f"(id {first_line - 1})" in res.stdout
    assert f"Checked {2 * len(TEXTS) + 2} samples" in res.stdout and ": 2 would drift" in res.stdout
    assert "Most frequent drifting spans:" in res.stdout
    assert "3x" in res.stdout and "(in 2 samples)" in res.stdout


def test_canonical_rollouts_exit_0(setup, tmp_path):
    folder, tok, raw, _ = setup
    data = tmp_path / "clean.jsonl"
    data.write_text("".join(json.dumps({"tokens": encode(raw, t)}) + "\n" for t in TEXTS), encoding="utf-8")
    code, out, err = audit([data], tok)
    assert code == 0 and err == ""
    assert "drifts under decode" not in out
    assert f"Checked {len(TEXTS)} samples" in out and ": 0 would drift" in out


def test_response_cut_inside_a_character_drifts(setup, tmp_path):
    """A byte-level response truncated mid-character decodes to U+FFFD, which re-encodes differently."""
    folder, tok, raw, _ = setup
    ids = encode(raw, "the cat é")
    assert len(ids) >= 2 and tok.decode(ids[-1:]) != "é", "é is two byte tokens"
    data = tmp_path / "cut.jsonl"
    data.write_text(json.dumps({"tokens": ids[:-1]}) + "\n", encoding="utf-8")
    code, out, _ = audit([data], tok, fmt="json")
    assert code == 1
    (sample,) = json.loads(out)["samples"]
    (d,) = sample["differences"]
    assert d["ids"] == [ids[-2]] and d["start"] == len(ids) - 2
    assert tok.decode(d["becomes"]) == "\ufffd"


def test_batches_and_streaming_keep_every_sample(setup, tmp_path):
    folder, tok, raw, pair = setup
    a, b, ab = pair
    good = encode(raw, "it is truly great")
    bad, _ = split_first(good, ab, a, b)
    data = tmp_path / "many.jsonl"
    expected = []
    with open(data, "w", encoding="utf-8") as fh:
        for n in range(1, 1001):
            drift = n % 37 == 0
            if drift:
                expected.append(n)
            fh.write(json.dumps({"tokens": bad if drift else good}) + "\n")
    for batch in (1, 7, 256, 5000):
        code, out, _ = audit([data], tok, fmt="json", batch=batch)
        report = json.loads(out)
        assert [s["line"] for s in report["samples"]] == expected, batch
        assert report["summary"]["samples_checked"] == 1000


def test_gzip_nested_field_bare_lists_and_all_samples(setup, tmp_path):
    folder, tok, raw, pair = setup
    a, b, ab = pair
    bad, _ = split_first(encode(raw, "I am truly happy"), ab, a, b)
    data = tmp_path / "nested.jsonl.gz"
    with gzip.open(data, "wt", encoding="utf-8") as fh:
        fh.write(json.dumps({"response": {"ids": encode(raw, "the tree")}}) + "\n")
        fh.write("\n")  # blank lines are skipped
        fh.write(json.dumps({"response": {"ids": bad}}) + "\n")
    code, out, err = audit([data], tok, field="response.ids", fmt="json", all_samples=True)
    assert code == 1, err
    report = json.loads(out)
    assert [(s["line"], s["drifts"]) for s in report["samples"]] == [(1, False), (3, True)]
    text_code, text_out, _ = audit([data], tok, field="response.ids", all_samples=True)
    assert f"{data}:1: round-trips unchanged, length {len(encode(raw, 'the tree'))}" in text_out
    assert f"{data}:3: drifts under decode and re-encode: 1 difference" in text_out
    bare = tmp_path / "bare.jsonl"
    bare.write_text(json.dumps(bad) + "\n", encoding="utf-8")
    code, out, _ = audit([bare], tok)
    assert code == 1 and "bare.jsonl:1: drifts" in out


def test_bad_lines_are_named_and_skipped(setup, tmp_path):
    folder, tok, raw, pair = setup
    a, b, ab = pair
    bad, _ = split_first(encode(raw, "I am truly happy"), ab, a, b)
    data = tmp_path / "mixed.jsonl"
    data.write_bytes(b"\n".join([
        json.dumps({"tokens": encode(raw, "the tree")}).encode(),
        b"{not json",
        json.dumps({"ids": [1, 2]}).encode(),
        json.dumps({"tokens": [1, "two"]}).encode(),
        json.dumps({"tokens": [1, tok.max_id + 1]}).encode(),
        json.dumps({"tokens": [-1]}).encode(),
        json.dumps({"tokens": {"a": 1}}).encode(),
        b'{"tokens": [1], "x": "\xff"}',
        json.dumps({"tokens": bad}).encode(),
        b"",
    ]))
    res = cli().invoke(main, ["tokens", "--tokenizer", str(folder), str(data), "--format", "json"])
    assert res.exit_code == 2
    errs = res.stderr.splitlines()
    assert errs[0] == f"{data}:2: error: not valid JSON: Expecting property name enclosed in double quotes (column 2)"
    assert errs[1].startswith(f"{data}:3: error: no field 'tokens' of an object (keys: ids)")
    assert errs[2] == f"{data}:4: error: field 'tokens': item 1 is \"two\", not a token id"
    assert errs[3].startswith(f"{data}:5: error: field 'tokens': id {tok.max_id + 1} is not in the tokenizer's")
    assert errs[4].startswith(f"{data}:6: error: field 'tokens': id -1 is not in the tokenizer's")
    assert errs[5] == f"{data}:7: error: field 'tokens' is an object, not a list of token ids"
    assert errs[6].startswith(f"{data}:8: error: not valid UTF-8")
    assert len(errs) == 7 and "Traceback" not in res.stderr
    report = json.loads(res.stdout)
    assert [s["line"] for s in report["samples"]] == [9], "the run goes on past bad lines"
    assert report["summary"]["errors"] == 7 and len(report["errors"]) == 7
    assert report["summary"]["samples_checked"] == 2


def test_missing_file_and_directory(setup, tmp_path):
    folder, tok, raw, _ = setup
    ok = tmp_path / "ok.jsonl"
    ok.write_text(json.dumps({"tokens": encode(raw, "the tree")}) + "\n", encoding="utf-8")
    code, out, err = audit([tmp_path / "nope.jsonl", tmp_path, ok], tok)
    assert code == 2
    assert f"{tmp_path / 'nope.jsonl'}: error: no such file" in err
    assert f"{tmp_path}: error: is a directory" in err
    assert "Checked 1 sample " in out


def test_truncated_gzip_names_the_file_and_line(setup, tmp_path):
    folder, tok, raw, _ = setup
    whole = gzip.compress("".join(json.dumps({"tokens": encode(raw, f"the tree {i}")}) + "\n"
                                  for i in range(2000)).encode())
    data = tmp_path / "cut.jsonl.gz"
    data.write_bytes(whole[: len(whole) // 2])
    code, out, err = audit([data], tok)
    assert code == 2
    assert err.startswith(f"{data}: error: cannot read") and "Compressed file ended" in err
    assert "Traceback" not in err and "Checked " in out


def test_summary_only_and_output_file(setup, tmp_path):
    folder, tok, raw, pair = setup
    data = tmp_path / "r.jsonl"
    make_rollouts(data, raw, pair, canonical_copies=1)
    report = tmp_path / "out" / "report.txt"
    report.parent.mkdir()
    res = cli().invoke(main, ["tokens", "--tokenizer", str(folder), str(data), "--summary-only", "-o", str(report)])
    assert res.exit_code == 1 and res.stdout == ""
    text = report.read_text(encoding="utf-8")
    assert "drifts under decode" not in text and ": 2 would drift" in text


def test_progress_bar_only_when_asked(setup, tmp_path):
    folder, tok, raw, pair = setup
    data = tmp_path / "r.jsonl"
    make_rollouts(data, raw, pair)
    _, out_plain, err_plain = audit([data], tok)
    assert err_plain == ""
    _, out_bar, err_bar = audit([data], tok, progress_enabled=True, out_is_terminal=True, batch=3)
    assert "100.0%" in err_bar and "samples," in err_bar and "drifting" in err_bar
    assert err_bar.endswith("\r\x1b[K"), "the bar is cleared at the end"
    assert out_bar == out_plain, "the bar never lands in the report"


def test_tokenizer_from_configuration_and_missing(setup, tmp_path):
    folder, tok, raw, _ = setup
    (tmp_path / "pyproject.toml").write_text(f'[tool.patchaudit]\ntokenizer = "{folder.as_posix()}"\n',
                                             encoding="utf-8")
    data = tmp_path / "r.jsonl"
    data.write_text(json.dumps({"tokens": encode(raw, "the tree")}) + "\n", encoding="utf-8")
    res = cli().invoke(main, ["tokens", str(data)])
    assert res.exit_code == 0, res.stderr
    os.remove(tmp_path / "pyproject.toml")
    res = cli().invoke(main, ["tokens", str(data)])
    assert res.exit_code == 2 and "--tokenizer PATH" in res.stderr
    res = cli().invoke(main, ["tokens", "--tokenizer", str(tmp_path / "none"), str(data)])
    assert res.exit_code == 2 and f"{tmp_path / 'none'}: no such tokenizer file or folder" in res.stderr


def test_empty_file_json_is_valid(setup, tmp_path):
    folder, tok, _, _ = setup
    data = tmp_path / "empty.jsonl"
    data.write_text("", encoding="utf-8")
    code, out, _ = audit([data], tok, fmt="json")
    assert code == 0
    report = json.loads(out)
    assert report["samples"] == [] and report["summary"]["samples_checked"] == 0
