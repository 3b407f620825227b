"""A run reads each file once and parses each text at most once (issue 35).

The whole-repository pre-pass, the scan and the patch-set rules of a `check`, and the
patches and engine files of a `bump`, share one read of each file
(`files/reader.py` `reading_once`); each text is parsed at most once by `ast` and at
most once by libcst.  The tests count what really happens (the reader's opens, the
parsers' calls) on trees written here, and show that the counting sees a second read
when the sharing is off.
"""

from __future__ import annotations

import ast
import collections
import contextlib
import os
import textwrap
from pathlib import Path

import libcst
import pytest

from patchaudit.config.settings import Settings
from patchaudit.files import reader
from patchaudit.pipeline.bump import run_bump
from patchaudit.pipeline.runner import run_check

# a dataset module whose function returns a processor's ids (PA102 summarises it across
# modules), a rollout that sends them with the images, a module that decodes and
# encodes again (PA103), a patch, and a recipe that applies it
FILES = {
    "pyproject.toml": "[tool.patchaudit]\n",
    "rl/__init__.py": "",
    "rl/dataset.py": """\
        def prompt_ids(processor, row):
            return processor(text=row["text"], images=row["images"])["input_ids"][0].tolist()
        """,
    "rl/rollout.py": """\
        from rl.dataset import prompt_ids


        async def generate(engine, processor, row):
            ids = prompt_ids(processor, row)
            return await engine.async_generate(input_ids=ids, image_data=row["images"])
        """,
    "rl/retok.py": """\
        def again(tokenizer, ids):
            text = tokenizer.decode(ids)
            sample_tokens = tokenizer.encode(text)
            return sample_tokens
        """,
    "docker/patch/engine.patch": """\
        --- a/python/eng/core.py
        +++ b/python/eng/core.py
        @@ -1,3 +1,3 @@
         def load(prompt, input_ids=None):
        -    return prompt
        +    return legacy_load_mm_data(prompt)
         
        """,
    "docker/Dockerfile": """\
        FROM python:3.11
        COPY patch/ /patch/
        RUN cd /usr/lib/python3/site-packages && patch -p2 < /patch/engine.patch
        """,
}


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))


class Counts:
    def __init__(self) -> None:
        self.opens: collections.Counter[str] = collections.Counter()
        self.ast: collections.Counter[str] = collections.Counter()
        self.cst: collections.Counter[str] = collections.Counter()


@contextlib.contextmanager
def counting(monkeypatch, texts: set[str]):
    """Count the reader's opens by path, and the parses of the given whole-file texts."""
    counts = Counts()
    open_checked = reader._open_checked
    ast_parse, cst_parse = ast.parse, libcst.parse_module

    def opened(path, limit, root):
        counts.opens[os.path.realpath(path)] += 1
        return open_checked(path, limit, root)

    def parsed_ast(source, *args, **kwargs):
        if isinstance(source, str) and source in texts:
            counts.ast[source] += 1
        return ast_parse(source, *args, **kwargs)

    def parsed_cst(source, *args, **kwargs):
        if isinstance(source, str) and source in texts:
            counts.cst[source] += 1
        return cst_parse(source, *args, **kwargs)

    monkeypatch.setattr(reader, "_open_checked", opened)
    monkeypatch.setattr(ast, "parse", parsed_ast)
    monkeypatch.setattr(libcst, "parse_module", parsed_cst)
    yield counts


def _settings() -> Settings:
    s = Settings()
    s.jobs = 1
    s.cache = False
    return s


def _texts(root: Path) -> set[str]:
    return {p.read_text() for p in root.rglob("*.py")}


def test_check_reads_every_file_once_and_parses_each_text_at_most_once(tmp_path, monkeypatch):
    _write(tmp_path, FILES)
    monkeypatch.chdir(tmp_path)
    with counting(monkeypatch, _texts(tmp_path)) as counts:
        result = run_check(["."], _settings())
    codes = sorted(f.code for f in result.findings)
    assert {"PA101", "PA102", "PA103"} <= set(codes), codes  # the tree exercises the pre-pass
    assert counts.opens, "the counting sees the reads"
    assert {p: n for p, n in counts.opens.items() if n > 1} == {}
    assert {t[:40]: n for t, n in counts.ast.items() if n > 1} == {}
    assert {t[:40]: n for t, n in counts.cst.items() if n > 1} == {}
    # every source the pre-pass followed was read: the dataset module once, not once per stage
    assert counts.opens[os.path.realpath(tmp_path / "rl" / "dataset.py")] == 1


def test_without_the_sharing_the_same_run_reads_files_again(tmp_path, monkeypatch):
    """The counting is not blind: with `reading_once` made a no-op, the pre-pass and the scan
    each open the rollout modules."""
    _write(tmp_path, FILES)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(reader, "reading_once", contextlib.nullcontext)
    with counting(monkeypatch, _texts(tmp_path)) as counts:
        run_check(["."], _settings())
    assert max(counts.opens.values()) > 1


def test_a_kept_read_answers_each_caller_as_a_fresh_read_would(tmp_path):
    big = tmp_path / "big.py"
    big.write_bytes(b"x = 1\n" * 100)
    gone = tmp_path / "gone.py"
    with reader.reading_once() as once:
        with pytest.raises(reader.TooLarge):
            reader.read_bytes(str(big), 10)
        assert reader.read_bytes(str(big), 10_000) == b"x = 1\n" * 100  # a larger limit reads again
        with pytest.raises(reader.TooLarge):
            reader.read_bytes(str(big), 10)  # kept bytes over a caller's limit are refused to it
        with pytest.raises(reader.ReadError) as first:
            reader.read_bytes(str(gone), 100)
        gone.write_text("y = 2\n")
        with pytest.raises(reader.ReadError) as again:
            reader.read_bytes(str(gone), 100)  # within the run, the answer it had
        assert again.value.reason == first.value.reason
        assert once.reads == 3
    assert reader.read_bytes(str(gone), 100) == b"y = 2\n"  # outside a run: a fresh read


ENGINE_OLD = """\
def load(prompt, input_ids=None):
    return prompt
"""

ENGINE_NEW = """\
def load(prompt, input_ids=None, image_data=None):
    return prompt
"""


def test_bump_reads_every_patch_and_engine_file_once(tmp_path, monkeypatch):
    for name, text in (("old", ENGINE_OLD), ("new", ENGINE_NEW)):
        (tmp_path / name / "eng").mkdir(parents=True)
        (tmp_path / name / "eng" / "__init__.py").write_text("")
        (tmp_path / name / "eng" / "core.py").write_text(text)
    patches = tmp_path / "patches"
    patches.mkdir()
    (patches / "engine.patch").write_text(textwrap.dedent(FILES["docker/patch/engine.patch"]))
    (patches / "second.patch").write_text(
        "--- a/python/eng/core.py\n+++ b/python/eng/core.py\n@@ -1,2 +1,2 @@\n"
        " def load(prompt, input_ids=None):\n-    return prompt\n+    return prompt or input_ids\n"
    )
    monkeypatch.chdir(tmp_path)
    texts = _texts(tmp_path)
    with counting(monkeypatch, texts) as counts:
        report = run_bump([str(patches)], "eng", str(tmp_path / "old"), str(tmp_path / "new"), _settings())
    assert report.hunks, "the bump audited the hunks"
    assert counts.opens[os.path.realpath(patches / "engine.patch")] == 1
    assert {p: n for p, n in counts.opens.items() if n > 1} == {}
    assert {t[:40]: n for t, n in counts.cst.items() if n > 1} == {}
