"""`sed -i` edits of engine files in build scripts, judged by the Python rules."""

from __future__ import annotations

import json
import subprocess

import pytest
from click.testing import CliRunner

from patchaudit.cli import main
from patchaudit.inputs.sedexpr import Unsupported, parse_substitution, pattern_literal

LINES = [
    "        out = await self.load_mm_data(prompt=p)",
    "x = foo(a, b) + foo(c)",
    "path: /usr/lib/a/b",
    "aaa bbb aaa",
    "value=12 other=345",
]
SCRIPTS = [
    r"s/self\.load_mm_data(/self.legacy_load_mm_data(/",
    r"s/foo(\([a-z]\)/bar(\1/g",
    r"s|/usr/lib|/opt|",
    r"s/aaa/X/2",
    r"s/[0-9]\{2,\}/N/g",
    r"s/\(a\+\) \(b*\)/\2-\1/",
    r"s/o\?ther/&&/",
]


@pytest.mark.parametrize("script", SCRIPTS)
def test_substitution_matches_gnu_sed(script, tmp_path):
    sub = parse_substitution(script)
    f = tmp_path / "in.txt"
    f.write_text("\n".join(LINES) + "\n")
    subprocess.run(["sed", "-i", script, str(f)], check=True)
    assert [sub.apply_line(line) for line in LINES] == f.read_text().splitlines()


@pytest.mark.parametrize(
    "script", ["1,5s/a/b/", "s/a/b/;s/c/d/", r"s/[[:alpha:]]/x/", r"s/\<a\>/b/", r"s/a/\U&/", "s/a/b/w out"]
)
def test_unsupported_is_refused(script):
    with pytest.raises(Unsupported):
        parse_substitution(script)


def test_pattern_literal():
    assert pattern_literal(r"s/self\.load_mm_data(/x/") == "self.load_mm_data("
    assert pattern_literal(r"s/a.b/x/") is None


SCRIPT = """\
#!/bin/bash
set -e
SITE=$(python -c 'import sglang, os; print(os.path.dirname(sglang.__file__))')
sed -i 's/self\\.load_mm_data(/self.legacy_load_mm_data(/' $SITE/srt/multimodal/processors/qwen_vl.py
sed -i 's/self\\.legacy_load_mm_data(/self.load_mm_data(/' $SITE/srt/multimodal/processors/other_vl.py
sed -i '1,3s/a/b/' $SITE/srt/multimodal/processors/third.py
"""

ENGINE_BASE = """\
class BaseMultimodalProcessor:
    async def load_mm_data(self, prompt, image_data=None):
        return await self.legacy_load_mm_data(prompt, image_data, input_ids=None)

    async def legacy_load_mm_data(self, prompt, image_data=None, input_ids=None):
        return prompt
"""
QWEN = """\
from sglang.srt.multimodal.processors.base_processor import BaseMultimodalProcessor


class QwenVLProcessor(BaseMultimodalProcessor):
    async def process(self, text, images):
        out = await self.load_mm_data(
            prompt=text,
            image_data=images,
        )
        return out
"""


def _engine(tmp_path):
    root = tmp_path / "engine" / "sglang"
    d = root / "srt" / "multimodal" / "processors"
    d.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "version.py").write_text('__version__ = "0.5.15.post1"\n')
    (d / "base_processor.py").write_text(ENGINE_BASE)
    (d / "qwen_vl.py").write_text(QWEN)
    (d / "other_vl.py").write_text(QWEN.replace("load_mm_data(", "legacy_load_mm_data("))
    return tmp_path / "engine"


def _pa101(out) -> list[dict]:
    data = json.loads(out.stdout)
    findings = data["findings"] if isinstance(data, dict) else data
    return [f for f in findings if f["code"] == "PA101"]


def test_sed_without_engine_judges_the_replacement(tmp_path, monkeypatch):
    (tmp_path / "post_install.sh").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(main, ["check", ".", "--no-cache", "--format", "json"])
    got = _pa101(out)
    assert [(f["path"], f["line"]) for f in got] == [("post_install.sh", 4)], out.output
    assert "1,3s/a/b/" in out.stderr and "not read" in out.stderr  # unsupported: said, not judged


def test_sed_with_engine_edits_the_engine_file(tmp_path, monkeypatch):
    (tmp_path / "post_install.sh").write_text(SCRIPT)
    engine = _engine(tmp_path)
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(
        main, ["check", "post_install.sh", "--no-cache", "--engine", f"sglang={engine}", "--format", "json"]
    )
    got = _pa101(out)
    assert [(f["path"], f["line"]) for f in got] == [("post_install.sh", 4)], out.output
    assert got[0]["target"]["path"] == "sglang/srt/multimodal/processors/qwen_vl.py"
    assert got[0]["target"]["line"] == 6
    assert "certain" in got[0]["message"]


def test_sed_suppressed_on_its_line(tmp_path, monkeypatch):
    text = SCRIPT.replace("qwen_vl.py\n", "qwen_vl.py  # patchaudit: ignore[PA101]\n", 1)
    (tmp_path / "post_install.sh").write_text(text)
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(main, ["check", ".", "--no-cache", "--format", "json"])
    assert _pa101(out) == []
