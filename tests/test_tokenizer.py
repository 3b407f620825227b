"""Loading a local tokenizer, and PA105 (placeholder-not-atomic) end to end.

Every tokenizer here is built in the test with the `tokenizers` library: a tiny
byte-level BPE trained on a fixed corpus, with `<|im_end|>` and `<|media_pad|>`
registered as special tokens and `<|kimi_image_placeholder|>` deliberately not.
Nothing is downloaded.  `build_tokenizer` and `remerging_pair` are shared with
tests/test_tokens_command.py.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from patchaudit.cli import main
from patchaudit.inputs.tokenizer import TokenizerError, load_tokenizer

tokenizers = pytest.importorskip("tokenizers")

CORPUS = [
    "it is truly great", "I am truly happy", "truly a good day", "the tree is green",
    "Describe the picture", "a true story", "what is shown in the image", "the cat sat on the mat",
] * 40
SPECIAL = ("<|im_end|>", "<|media_pad|>")


def build_tokenizer(special=SPECIAL, added=()):
    """A byte-level BPE trained on CORPUS, special tokens registered, `added` as plain added tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=330, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=list(special[:1]), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    if special[1:]:
        tok.add_special_tokens(list(special[1:]))
    if added:
        tok.add_tokens(list(added))
    return tok


def write_tokenizer(folder: Path, tok=None, **configs) -> Path:
    """tokenizer.json (and any `name=dict` config file, e.g. tokenizer_config) in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tokenizer.json"
    (tok or build_tokenizer()).save(str(path))
    for name, data in configs.items():
        (folder / f"{name}.json").write_text(json.dumps(data), encoding="utf-8")
    return path


def remerging_pair(tok) -> tuple[int, int, int]:
    """(a, b, ab): two vocabulary ids whose text re-encodes as the single id ab (" truly")."""
    (merged,) = tok.encode(" truly", add_special_tokens=False).ids
    merged_token = tok.id_to_token(merged)
    merges = json.loads(tok.to_str())["model"]["merges"]
    for m in merges:
        a, b = m if isinstance(m, list) else m.split(" ")
        if a + b == merged_token:
            return tok.token_to_id(a), tok.token_to_id(b), merged
    raise AssertionError("the corpus no longer yields a merged ' truly'")


def cli():
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:  # click >= 8.2 keeps stderr apart already
        return CliRunner()


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("model")
    write_tokenizer(folder)
    return folder


# --------------------------------------------------------------------------
# loading


def test_load_file_and_folder_agree(tok_dir):
    a = load_tokenizer(tok_dir / "tokenizer.json")
    b = load_tokenizer(tok_dir)
    text = "I am truly happy<|im_end|>"
    assert a.encode(text) == b.encode(text)
    ids = a.encode(text)
    assert a.decode(ids) == text
    assert a.token(ids[-1]) == "<|im_end|>"
    assert a.tokens(ids[:1]) == ["I"]


def test_special_and_added_tokens(tmp_path):
    path = write_tokenizer(tmp_path, build_tokenizer(added=("<|plain_added|>",)))
    tok = load_tokenizer(path)
    pad = tok.token_to_id("<|media_pad|>")
    assert tok.encode("<|media_pad|>") == [pad]
    assert tok.is_special("<|media_pad|>") and tok.is_special(pad) and tok.is_added(pad)
    assert tok.is_added("<|plain_added|>") and not tok.is_special("<|plain_added|>")
    assert not tok.is_added("<|kimi_image_placeholder|>")
    truly = tok.encode(" truly")
    assert len(truly) == 1 and not tok.is_added(truly[0]), "an ordinary vocabulary id is not an added token"
    assert len(tok.encode("<|kimi_image_placeholder|>")) > 1


def test_model_folder_configuration_is_read(tmp_path):
    """tokenizer_config.json / special_tokens_map.json register tokens the way transformers does."""
    folder = tmp_path / "model"
    write_tokenizer(
        folder,
        tokenizer_config={
            "added_tokens_decoder": {"400": {"content": "<|video_pad|>", "special": True, "lstrip": False,
                                             "rstrip": False, "normalized": False, "single_word": False}},
            "clean_up_tokenization_spaces": True,
        },
        special_tokens_map={"additional_special_tokens": ["<|vision_start|>"],
                            "eos_token": {"content": "<|im_end|>"}},
    )
    tok = load_tokenizer(folder)
    assert [os.path.basename(p) for p in tok.config_paths] == ["tokenizer_config.json", "special_tokens_map.json"]
    for content in ("<|video_pad|>", "<|vision_start|>"):
        ids = tok.encode(content)
        assert len(ids) == 1 and tok.is_special(content), content
    assert tok.is_special("<|im_end|>")
    # clean_up_tokenization_spaces: decode drops the space before punctuation, as transformers does
    ids = tok.encode("truly .")
    assert tok.decode(ids) == "truly."
    # a path to the tokenizer.json reads the configuration beside it; another file name does not
    assert load_tokenizer(tmp_path / "model" / "tokenizer.json").decode(ids) == "truly."
    bare = tmp_path / "bare.json"
    bare.write_bytes((folder / "tokenizer.json").read_bytes())
    assert load_tokenizer(bare).decode(ids) == "truly ."
    assert not load_tokenizer(bare).is_added("<|video_pad|>")


def test_pickle_round_trip(tok_dir):
    tok = load_tokenizer(tok_dir)
    again = pickle.loads(pickle.dumps(tok))
    assert again.encode("the tree<|media_pad|>") == tok.encode("the tree<|media_pad|>")
    assert again.fingerprint == tok.fingerprint and again.path == tok.path


def test_fingerprint_follows_content(tmp_path):
    a = load_tokenizer(write_tokenizer(tmp_path / "a"))
    b = load_tokenizer(write_tokenizer(tmp_path / "b", build_tokenizer(added=("<|x|>",))))
    assert a.fingerprint != b.fingerprint


def _put(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("setup,expected", [
    (lambda d: d / "missing.json", "no such tokenizer file or folder"),
    (lambda d: d, "no tokenizer.json in this folder"),
    (lambda d: _put(d / "tokenizer.model", b"x").parent, "(found tokenizer.model)"),
    (lambda d: _put(d / "t.json", b'{"model": {'),
     "not valid JSON: Expecting property name enclosed in double quotes (line 1, column 12)"),
    (lambda d: _put(d / "t.json", b'{"vocab": {}}'), "not a tokenizer.json"),
    (lambda d: _put(d / "t.json", b'{"model": {"type": "Nope"}}'),
     "not a tokenizer.json the `tokenizers` library can read"),
    (lambda d: _put(d / "t.json", b'{"model": "\xff"}'), "not valid UTF-8"),
], ids=["missing", "empty-folder", "slow-tokenizer-only", "bad-json", "not-a-tokenizer", "bad-model",
        "not-utf8"])
def test_bad_tokenizer_is_a_clear_error(tmp_path, setup, expected):
    target = setup(tmp_path)
    with pytest.raises(TokenizerError) as info:
        load_tokenizer(target)
    msg = str(info.value)
    assert expected in msg
    assert str(target) in msg or str(tmp_path) in msg, "the message names the file"


def test_bad_tokenizer_config_names_the_file(tmp_path):
    write_tokenizer(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text("[1, 2", encoding="utf-8")
    with pytest.raises(TokenizerError, match="tokenizer_config.json: not valid JSON"):
        load_tokenizer(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(TokenizerError, match="tokenizer_config.json: expected a JSON object"):
        load_tokenizer(tmp_path)


# --------------------------------------------------------------------------
# PA105 through the command line

KIMI = 'class P:\n    def __init__(self):\n        self.image_placeholder = "<|kimi_image_placeholder|>"\n'
PAD = 'class P:\n    def __init__(self):\n        self.image_placeholder = "<|media_pad|>"\n'


def _check(args, cwd: Path):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return cli().invoke(main, ["check", "--no-cache", *args])
    finally:
        os.chdir(old)


def test_pa105_unregistered_placeholder_lists_its_pieces(tmp_path, tok_dir):
    (tmp_path / "proc.py").write_text(KIMI, encoding="utf-8")
    # concise: the whole message on the finding's line (the full report wraps it)
    res = _check(["--select", "PA105", "--output-format", "concise", "--tokenizer", str(tok_dir), "proc.py"], tmp_path)
    assert res.exit_code == 1, res.output + res.stderr
    raw = build_tokenizer().encode("<|kimi_image_placeholder|>", add_special_tokens=False)
    assert len(raw.ids) > 1
    line = next(l for l in res.stdout.splitlines() if "PA105" in l)
    assert line.startswith("proc.py:3:35: PA105 '<|kimi_image_placeholder|>' is not a registered token")
    assert f"shatters into {len(raw.ids)} ids" in line
    shown = min(len(raw.ids), 12)
    assert "[" + ", ".join(map(str, raw.ids[:shown])) in line
    assert "(" + ", ".join(repr(t) for t in raw.tokens[:shown]) in line
    assert "<|media_pad|>" in line, "the message points at the registered placeholder"


def test_pa105_registered_placeholder_is_clean(tmp_path, tok_dir):
    (tmp_path / "proc.py").write_text(PAD, encoding="utf-8")
    res = _check(["--select", "PA105", "--tokenizer", str(tok_dir / "tokenizer.json"), "proc.py"], tmp_path)
    assert res.exit_code == 0, res.output + res.stderr
    assert "PA105" not in res.stdout


def test_pa105_is_silent_without_a_tokenizer_and_says_so(tmp_path):
    (tmp_path / "proc.py").write_text(KIMI, encoding="utf-8")
    res = _check(["--select", "PA105", "proc.py"], tmp_path)
    assert res.exit_code == 0 and "PA105" not in res.stdout
    doc = cli().invoke(main, ["explain", "PA105"])
    assert doc.exit_code == 0
    assert "Needs: tokenizer." in doc.stdout
    assert "Without a tokenizer this rule does not run" in doc.stdout


def test_pa105_in_a_patch(tmp_path, tok_dir):
    (tmp_path / "kimi.patch").write_text(textwrap.dedent("""\
        --- a/proc.py
        +++ b/proc.py
        @@ -1,3 +1,3 @@
         class P:
             def __init__(self):
        -        self.image_placeholder = "<|media_pad|>"
        +        self.image_placeholder = "<|kimi_image_placeholder|>"
        """), encoding="utf-8")
    res = _check(["--select", "PA105", "--tokenizer", str(tok_dir), "kimi.patch"], tmp_path)
    assert res.exit_code == 1
    assert "kimi.patch:7:" in res.stdout and "shatters into" in res.stdout


def test_pa105_tokenizer_from_configuration(tmp_path, tok_dir):
    write_tokenizer(tmp_path / "model")
    (tmp_path / "pyproject.toml").write_text('[tool.patchaudit]\ntokenizer = "model"\n', encoding="utf-8")
    (tmp_path / "proc.py").write_text(KIMI, encoding="utf-8")
    res = _check(["--select", "PA105", "proc.py"], tmp_path)
    assert res.exit_code == 1 and "PA105" in res.stdout


def test_check_with_missing_tokenizer_is_exit_2(tmp_path):
    (tmp_path / "proc.py").write_text(PAD, encoding="utf-8")
    res = _check(["--tokenizer", "nowhere/tokenizer.json", "proc.py"], tmp_path)
    assert res.exit_code == 2
    assert "nowhere/tokenizer.json: no such tokenizer file or folder" in res.stderr
    assert "Traceback" not in res.output + res.stderr


# --------------------------------------------------------------------------
# without the optional extra

BLOCKER = textwrap.dedent("""\
    import sys

    class _NoTokenizers:
        def find_spec(self, name, path=None, target=None):
            if name == "tokenizers" or name.startswith("tokenizers."):
                raise ModuleNotFoundError("No module named 'tokenizers'", name=name)
            return None

    sys.meta_path.insert(0, _NoTokenizers())
    for mod in [m for m in sys.modules if m == "tokenizers" or m.startswith("tokenizers.")]:
        del sys.modules[mod]
    sys.argv = ["patchaudit"] + sys.argv[1:]
    from patchaudit.cli import main
    try:
        main()
    finally:
        assert "tokenizers" not in sys.modules
""")


def _without_extra(args, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR")}
    return subprocess.run([sys.executable, "-c", BLOCKER, *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=120)


def test_without_the_extra_everything_else_works(tmp_path, tok_dir):
    (tmp_path / "proc.py").write_text(KIMI + 'os.environ["SGLANG_MM_AVOID_RETOKENIZE"] = "0"\n', encoding="utf-8")
    (tmp_path / "r.jsonl").write_text('{"tokens": [1, 2]}\n', encoding="utf-8")
    probe = _without_extra(["--version"], tmp_path)
    assert probe.returncode == 0, probe.stderr
    rules = _without_extra(["rules"], tmp_path)
    assert rules.returncode == 0 and "PA105" in rules.stdout, rules.stderr
    explain = _without_extra(["explain", "PA105"], tmp_path)
    assert explain.returncode == 0 and "does not run" in explain.stdout
    check = _without_extra(["check", "--no-cache", "proc.py"], tmp_path)
    assert check.returncode == 1, check.stderr
    assert "PA104" in check.stdout and "PA105" not in check.stdout

    hint = "pip install 'patchaudit[tokenizer]'"
    with_tok = _without_extra(["check", "--no-cache", "--tokenizer", str(tok_dir), "proc.py"], tmp_path)
    assert with_tok.returncode == 2
    assert hint in with_tok.stderr and "Traceback" not in with_tok.stderr
    tokens = _without_extra(["tokens", "--tokenizer", str(tok_dir), "r.jsonl"], tmp_path)
    assert tokens.returncode == 2
    assert hint in tokens.stderr and "Traceback" not in tokens.stderr
