"""Baselines: `--write-baseline FILE` records findings, `--baseline FILE` reports only new ones."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from patchaudit.pipeline.baseline import assign_fingerprints, filter_new, read_baseline, split_fingerprint
from patchaudit.testing import invoke_in
from patchaudit.model.findings import Finding, Severity




def cli(root: Path, *args: str):
    return invoke_in(root, ["check", "--no-cache", *args])


def found(root: Path, *args: str) -> list[tuple[str, int, str]]:
    res = cli(root, "--format", "json", *args)
    assert res.exit_code in (0, 1), res.stderr
    return [(f["path"], f["line"], f["code"]) for f in json.loads(res.stdout)]


ROLLOUT = '''\
import asyncio


class Rollout:
    async def generate(self, text, images):
        out = await self.legacy_load_mm_data(prompt=text, image_data=images)
        return out

    def other(self):
        return 1
'''
FILLER = "".join(f"# filler line {k}\n" for k in range(20))


def test_finding_moved_20_lines_down_stays_hidden_and_a_new_copy_is_reported(tmp_path):
    (tmp_path / "rollout.py").write_text(ROLLOUT)
    assert found(tmp_path, "rollout.py") == [("rollout.py", 6, "PA101")]
    res = cli(tmp_path, "--write-baseline", "baseline.json", "rollout.py")
    assert res.exit_code == 0 and "wrote 1 finding" in res.stderr

    # edits above it: the finding moves 20 lines down
    (tmp_path / "rollout.py").write_text(ROLLOUT.replace("import asyncio\n", "import asyncio\n" + FILLER))
    assert found(tmp_path, "rollout.py") == [("rollout.py", 26, "PA101")]
    res = cli(tmp_path, "--baseline", "baseline.json", "rollout.py")
    assert res.exit_code == 0, res.stdout
    assert "1 finding of the baseline" in res.stderr

    # a second copy of the same problem, elsewhere: reported, and only it
    moved = ROLLOUT.replace("import asyncio\n", "import asyncio\n" + FILLER)
    copy = moved.replace("    def other(self):\n        return 1\n",
                         "    async def other(self, text):\n"
                         "        out = await self.legacy_load_mm_data(prompt=text, image_data=images)\n"
                         "        return out\n")
    (tmp_path / "rollout.py").write_text(copy)
    assert found(tmp_path, "rollout.py") == [("rollout.py", 26, "PA101"), ("rollout.py", 30, "PA101")]
    assert found(tmp_path, "--baseline", "baseline.json", "rollout.py") == [("rollout.py", 30, "PA101")]
    res = cli(tmp_path, "--baseline", "baseline.json", "rollout.py")
    assert res.exit_code == 1


def test_a_copy_right_below_the_original_is_reported_once(tmp_path):
    (tmp_path / "rollout.py").write_text(ROLLOUT)
    cli(tmp_path, "--write-baseline", "b.json", "rollout.py")
    line = "        out = await self.legacy_load_mm_data(prompt=text, image_data=images)\n"
    (tmp_path / "rollout.py").write_text(ROLLOUT.replace(line, line + line))
    assert len(found(tmp_path, "--baseline", "b.json", "rollout.py")) == 1


def test_fixed_finding_plus_a_different_new_one(tmp_path):
    (tmp_path / "rollout.py").write_text(ROLLOUT)
    cli(tmp_path, "--write-baseline", "b.json", "rollout.py")
    fixed = ROLLOUT.replace("image_data=images)", "image_data=images, input_ids=ids)")
    (tmp_path / "rollout.py").write_text(fixed + "x = legacy_load_mm_data(prompt=t)\n")
    assert found(tmp_path, "--baseline", "b.json", "rollout.py") == [("rollout.py", 11, "PA101")]


HUNK = """\
@@ -{old},7 +{new},7 @@ class QwenVLImageProcessor(SGLangBaseProcessor):
         **kwargs,
     ):
         entry_time = time.perf_counter()
-        base_output = await self.load_mm_data(
+        base_output = await self.legacy_load_mm_data(
             prompt=input_text,
             image_data=image_data,
             video_data=request_obj.video_data,
"""
HEADER = """\
diff --git a/python/sglang/srt/multimodal/processors/qwen_vl.py b/python/sglang/srt/multimodal/processors/qwen_vl.py
--- a/python/sglang/srt/multimodal/processors/qwen_vl.py
+++ b/python/sglang/srt/multimodal/processors/qwen_vl.py
"""
OTHER_SECTION = """\
diff --git a/python/sglang/srt/utils.py b/python/sglang/srt/utils.py
--- a/python/sglang/srt/utils.py
+++ b/python/sglang/srt/utils.py
@@ -10,3 +10,{n} @@ def helper():
     a = 1
-    b = 2
+    b = 3
{added}     return a
"""


def other_section(n_added: int) -> str:
    added = "".join(f"+    c{k} = {k}\n" for k in range(n_added))
    return OTHER_SECTION.format(n=3 + n_added, added=added)


def test_regenerated_patch_with_new_offsets_stays_hidden(tmp_path):
    patch = tmp_path / "patches" / "sglang.patch"
    patch.parent.mkdir()
    patch.write_text(HEADER + HUNK.format(old=678, new=678))
    assert found(tmp_path, "patches") == [(os.path.join("patches", "sglang.patch"), 9, "PA101")]
    assert cli(tmp_path, "--write-baseline", "b.json", "patches").exit_code == 0

    # regenerated against a newer engine: new offsets, another file's section before it
    regenerated = other_section(20) + HEADER + HUNK.format(old=702, new=723)
    patch.write_text(regenerated)
    assert found(tmp_path, "patches") == [(os.path.join("patches", "sglang.patch"), 37, "PA101")]
    assert found(tmp_path, "--baseline", "b.json", "patches") == []

    # a second hunk with the same problem further down the same file: new
    patch.write_text(regenerated + HUNK.format(old=902, new=923).replace("QwenVLImageProcessor", "Qwen3VL"))
    assert found(tmp_path, "--baseline", "b.json", "patches") == [(os.path.join("patches", "sglang.patch"), 46, "PA101")]


def test_baseline_works_from_another_working_directory(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "rollout.py").write_text(ROLLOUT)
    (tmp_path / "ci").mkdir()
    assert cli(tmp_path, "--write-baseline", "ci/baseline.json", "src").exit_code == 0
    data = json.loads((tmp_path / "ci" / "baseline.json").read_text())
    assert [e["path"] for e in data["findings"]] == ["../src/rollout.py"]
    assert found(tmp_path / "src", "--baseline", "../ci/baseline.json", ".") == []


def test_baseline_hides_only_its_own_file(tmp_path):
    (tmp_path / "a.py").write_text(ROLLOUT)
    cli(tmp_path, "--write-baseline", "b.json", "a.py")
    (tmp_path / "b.py").write_text(ROLLOUT)
    assert found(tmp_path, "--baseline", "b.json", ".") == [("b.py", 6, "PA101")]


def test_written_baseline_is_stable_and_readable(tmp_path):
    (tmp_path / "a.py").write_text(ROLLOUT + "y = legacy_load_mm_data(prompt=t)\n")
    cli(tmp_path, "--write-baseline", "b.json", "a.py")
    first = (tmp_path / "b.json").read_text()
    cli(tmp_path, "--write-baseline", "b.json", "a.py")
    assert (tmp_path / "b.json").read_text() == first
    entries = read_baseline(str(tmp_path / "b.json"))
    assert [(e.path, e.line, e.code) for e in entries] == [("a.py", 6, "PA101"), ("a.py", 11, "PA101")]


def test_json_output_carries_the_fingerprint(tmp_path):
    (tmp_path / "a.py").write_text(ROLLOUT)
    res = cli(tmp_path, "--format", "json", "a.py")
    (f,) = json.loads(res.stdout)
    primary, context = split_fingerprint(f["fingerprint"])
    assert len(primary) == 16 and len(context) == 8


@pytest.mark.parametrize("content,needle", [
    (None, "cannot read the baseline"),
    ("{not json", "b.json:1: baseline is not valid JSON"),
    ('{"findings": []}', "not a patchaudit baseline"),
    ('{"patchaudit-baseline": 99, "findings": []}', "version 99"),
    ('{"patchaudit-baseline": 1, "findings": [{"path": "a.py"}]}', "findings[0]"),
    ('{"patchaudit-baseline": 1, "findings": {}}', "'findings' must be a list"),
])
def test_bad_baseline_exits_2_naming_the_file(tmp_path, content, needle):
    (tmp_path / "a.py").write_text(ROLLOUT)
    if content is not None:
        (tmp_path / "b.json").write_text(content)
    res = cli(tmp_path, "--baseline", "b.json", "a.py")
    assert res.exit_code == 2
    assert "b.json" in res.stderr and needle in res.stderr
    assert "Traceback" not in res.stderr


def test_write_baseline_to_an_unwritable_place_exits_2(tmp_path):
    (tmp_path / "a.py").write_text(ROLLOUT)
    res = cli(tmp_path, "--write-baseline", "no/such/dir/b.json", "a.py")
    assert res.exit_code == 2 and "cannot write the baseline" in res.stderr


# ----- the fingerprint itself ----------------------------------------------------


def _finding(line: int, message: str = "m", code: str = "PA101") -> Finding:
    return Finding(code=code, name="n", severity=Severity.ERROR, message=message, path="a.py", line=line)


def test_fingerprints_ignore_line_numbers_whitespace_and_numbers_in_messages():
    a, b = _finding(2, "at line 12"), _finding(5, "at line 40")
    assign_fingerprints([a], ["x", "  call(x)", "y"], is_patch=False)
    assign_fingerprints([b], ["", "", "x", "", "call(x)   ", "", "y"], is_patch=False)
    assert a.fingerprint == b.fingerprint


def test_fingerprints_are_unique_in_a_file_and_differ_by_code_and_text():
    fs = [_finding(1), _finding(2), _finding(3, code="PA104")]
    assign_fingerprints(fs, ["call(x)", "call(x)", "call(x)"], is_patch=False)
    assert len({f.fingerprint for f in fs}) == 3
    assert split_fingerprint(fs[0].fingerprint)[0] == split_fingerprint(fs[1].fingerprint)[0]
    assert split_fingerprint(fs[0].fingerprint)[0] != split_fingerprint(fs[2].fingerprint)[0]
    other = _finding(1)
    assign_fingerprints([other], ["call(y)"], is_patch=False)
    assert split_fingerprint(other.fingerprint)[0] != split_fingerprint(fs[0].fingerprint)[0]


def test_patch_fingerprints_ignore_the_diff_column_and_hunk_offsets():
    a, b = _finding(3), _finding(3)
    assign_fingerprints([a], ["@@ -10,3 +10,3 @@ def f():", " ctx", "+    call(x)"], is_patch=True)
    assign_fingerprints([b], ["@@ -99,3 +120,3 @@ def f():", " ctx", "+    call(x)"], is_patch=True)
    assert a.fingerprint == b.fingerprint


def test_filter_new_by_count(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fs = [_finding(1), _finding(9)]
    assign_fingerprints(fs, ["call(x)"] + ["z"] * 7 + ["call(x)"], is_patch=False)
    from patchaudit.pipeline.baseline import Entry

    entries = [Entry("a.py", "PA101", 1, "m", fs[0].fingerprint)]
    new, hidden = filter_new(fs, entries, str(tmp_path / "b.json"))
    assert hidden == 1 and [f.line for f in new] == [9]


def test_findings_without_a_fingerprint_get_one_from_their_file(tmp_path, monkeypatch):
    from patchaudit.pipeline.baseline import ensure_fingerprints

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text("x\ncall(x)\ny\n")
    f = _finding(2)
    ensure_fingerprints([f])
    g = _finding(2)
    assign_fingerprints([g], ["x", "call(x)", "y"], is_patch=False)
    assert f.fingerprint == g.fingerprint
