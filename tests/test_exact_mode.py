"""Exact mode (issue 3): patches applied in memory to engine sources of every kind."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import git
import pytest

from patchaudit.cli import main
from patchaudit.testing import cli_runner

BASE_V2 = """\
class BaseMultimodalProcessor:
    def __init__(self, tokenizer):
        self._tokenizer = tokenizer

    async def load_mm_data(self, prompt, multimodal_tokens, image_data=None):
        input_ids = prompt if isinstance(prompt, list) else None
        return await self.legacy_load_mm_data(
            prompt=prompt,
            multimodal_tokens=multimodal_tokens,
            image_data=image_data,
            input_ids=input_ids,
        )

    async def legacy_load_mm_data(self, prompt, multimodal_tokens, image_data=None, input_ids=None):
        if isinstance(prompt, list):
            prompt = self._tokenizer.decode(prompt)
        return prompt, input_ids
"""

BASE_V1 = """\
class BaseMultimodalProcessor:
    def __init__(self, tokenizer):
        self._tokenizer = tokenizer

    async def load_mm_data(self, prompt, multimodal_tokens, image_data=None):
        return await self.legacy_load_mm_data(
            prompt=prompt,
            multimodal_tokens=multimodal_tokens,
            image_data=image_data,
        )

    async def legacy_load_mm_data(self, prompt, multimodal_tokens, image_data=None):
        if isinstance(prompt, list):
            prompt = self._tokenizer.decode(prompt)
        return prompt, None
"""

QWEN = """\
import time

from sglang.srt.multimodal.processors.base_processor import (
    BaseMultimodalProcessor as SGLangBaseProcessor,
)


class QwenVLImageProcessor(SGLangBaseProcessor):
    models = ["Qwen2VLForConditionalGeneration"]

    async def process_mm_data_async(
        self,
        image_data,
        input_text,
        request_obj,
        **kwargs,
    ):
        entry_time = time.perf_counter()
        base_output = await self.load_mm_data(
            prompt=input_text,
            image_data=image_data,
            multimodal_tokens=self.mm_tokens,
        )
        load_time = time.perf_counter()
        return base_output, load_time - entry_time
"""

PATCH = """\
diff --git a/python/sglang/srt/multimodal/processors/qwen_vl.py b/python/sglang/srt/multimodal/processors/qwen_vl.py
--- a/python/sglang/srt/multimodal/processors/qwen_vl.py
+++ b/python/sglang/srt/multimodal/processors/qwen_vl.py
@@ -16,7 +16,7 @@ class QwenVLImageProcessor(SGLangBaseProcessor):
         **kwargs,
     ):
         entry_time = time.perf_counter()
-        base_output = await self.load_mm_data(
+        base_output = await self.legacy_load_mm_data(
             prompt=input_text,
             image_data=image_data,
             multimodal_tokens=self.mm_tokens,
"""

PATCH_WITH_IDS = PATCH.replace("@@ -16,7 +16,7 @@", "@@ -16,7 +16,8 @@").replace(
    "+        base_output = await self.legacy_load_mm_data(\n",
    "+        base_output = await self.legacy_load_mm_data(\n+            input_ids=input_text,\n",
)

PKG = "python/sglang/srt/multimodal/processors/"


def tree(base: str) -> dict[str, str]:
    return {
        "python/sglang/__init__.py": "",
        "python/sglang/srt/__init__.py": "",
        "python/sglang/srt/multimodal/__init__.py": "",
        PKG + "__init__.py": "",
        PKG + "base_processor.py": base,
        PKG + "qwen_vl.py": QWEN,
    }


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content)
    return root


def as_directory(tmp: Path, files) -> str:
    return str(write(tmp / "engine_dir", files))


def as_git(tmp: Path, files) -> str:
    root = write(tmp / "engine_git", files)
    repo = git.Repo.init(root)
    repo.index.add(list(files))
    repo.index.commit("engine")
    repo.create_tag("v1")
    return f"{root}@v1"


def as_wheel(tmp: Path, files) -> str:
    whl = tmp / "sglang-1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        for rel, content in files.items():
            z.writestr(rel.removeprefix("python/"), content)
        z.writestr("sglang-1.0.dist-info/METADATA", "Name: sglang\nVersion: 1.0\n")
        z.writestr("sglang-1.0.dist-info/RECORD", "")
    return str(whl)


KINDS = {"directory": as_directory, "git": as_git, "wheel": as_wheel}


def check(tmp: Path, patch: str, engine: str, *extra: str):
    (tmp / "fix.patch").write_text(patch)
    old = os.getcwd()
    os.chdir(tmp)
    try:
        res = cli_runner().invoke(
            main,
            ["check", "--format", "json", "--engine", f"sglang={engine}", *extra, "fix.patch"],
            catch_exceptions=False,
        )
    finally:
        os.chdir(old)
    assert "Traceback" not in res.stderr, res.stderr
    return res, json.loads(res.stdout or "[]")


@pytest.mark.parametrize("kind", KINDS)
def test_certain_pa101_names_both_locations(tmp_path, kind):
    res, out = check(tmp_path, PATCH, KINDS[kind](tmp_path, tree(BASE_V2)))
    assert [f["code"] for f in out] == ["PA101"], out
    f = out[0]
    assert f["path"] == "fix.patch" and f["line"] == 9
    assert "certain" in f["message"] and "continues past the hunk" not in f["message"]
    assert "base_processor.py:14" in f["message"]
    assert f["target"]["path"].endswith("sglang/srt/multimodal/processors/qwen_vl.py")
    assert f["target"]["line"] == 19
    assert f["target"]["symbol"] == "QwenVLImageProcessor.process_mm_data_async"
    assert res.exit_code == 1


@pytest.mark.parametrize("kind", KINDS)
def test_engine_without_the_parameter_says_it_retokenizes(tmp_path, kind):
    _, out = check(tmp_path, PATCH, KINDS[kind](tmp_path, tree(BASE_V1)))
    assert [f["code"] for f in out] == ["PA101"]
    assert "re-tokenizes" in out[0]["message"] and out[0]["severity"] == "warning"


@pytest.mark.parametrize("kind", KINDS)
def test_passing_input_ids_is_clean(tmp_path, kind):
    res, out = check(tmp_path, PATCH_WITH_IDS, KINDS[kind](tmp_path, tree(BASE_V2)))
    assert out == [] and res.exit_code == 0


def test_failed_hunks_give_pa201_with_nearest_match_and_fuzz_gives_pa202(tmp_path):
    moved = (
        QWEN.replace("        entry_time = time.perf_counter()\n", "        entry_time = time.monotonic()\n")
        .replace("            prompt=input_text,\n", "            prompt=input_text or '',\n")
        .replace("        **kwargs,\n", "        **extra,\n")
    )
    engine = as_directory(tmp_path, {**tree(BASE_V2), PKG + "qwen_vl.py": moved})
    _, out = check(tmp_path, PATCH, engine)
    codes = [f["code"] for f in out]
    assert codes.count("PA201") == 1
    pa201 = next(f for f in out if f["code"] == "PA201")
    assert pa201["line"] == 4 and "nearest match at line 16" in pa201["message"]
    # the failed hunk is still judged in fragment mode, with the engine to resolve the callee
    assert "PA101" in codes

    fuzzed = QWEN.replace("        **kwargs,\n", "        **extra,\n")
    engine2 = str(write(tmp_path / "e2", {**tree(BASE_V2), PKG + "qwen_vl.py": fuzzed}))
    _, out = check(tmp_path, PATCH, engine2)
    assert sorted(f["code"] for f in out) == ["PA101", "PA202"]
    assert "fuzz 1" in next(f for f in out if f["code"] == "PA202")["message"]


def test_offset_alone_is_not_a_finding_but_is_shown(tmp_path):
    shifted = "# a header comment\n# added upstream\n" + QWEN
    engine = as_directory(tmp_path, {**tree(BASE_V2), PKG + "qwen_vl.py": shifted})
    (tmp_path / "fix.patch").write_text(PATCH_WITH_IDS)
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        res = cli_runner().invoke(main, ["check", "--engine", f"sglang={engine}", "fix.patch"])
    finally:
        os.chdir(old)
    assert res.exit_code == 0, res.stdout
    assert "offset 2" in res.stdout


def test_already_applied_hunk_is_pa208(tmp_path):
    applied = QWEN.replace(
        "await self.load_mm_data(", "await self.legacy_load_mm_data(\n            input_ids=input_text,"
    )
    engine = as_directory(tmp_path, {**tree(BASE_V2), PKG + "qwen_vl.py": applied})
    _, out = check(tmp_path, PATCH_WITH_IDS, engine)
    assert [f["code"] for f in out] == ["PA208"]
    assert out[0]["severity"] == "info"


def test_missing_target_file_is_one_pa201_per_section(tmp_path):
    engine = as_directory(tmp_path, {k: v for k, v in tree(BASE_V2).items() if not k.endswith("qwen_vl.py")})
    two_hunks = PATCH + PATCH.split("\n", 3)[3].replace("@@ -16,7 +16,7 @@", "@@ -40,7 +40,7 @@")
    _, out = check(tmp_path, two_hunks, engine)
    pa201 = [f for f in out if f["code"] == "PA201"]
    assert len(pa201) == 1 and "does not exist" in pa201[0]["message"] and pa201[0]["line"] == 1


def test_git_engine_uses_the_blob_named_by_the_index_line(tmp_path):
    files = tree(BASE_V2)
    root = write(tmp_path / "eng", files)
    repo = git.Repo.init(root)
    repo.index.add(list(files))
    repo.index.commit("v1")
    repo.create_tag("v1")
    blob = repo.commit("v1").tree / (PKG + "qwen_vl.py")
    # the work tree and HEAD move on; the patch names the old blob
    (root / PKG / "qwen_vl.py").write_text("# rewritten\n")
    repo.index.add([PKG + "qwen_vl.py"])
    repo.index.commit("rewrite")
    patch = PATCH.replace("--- a/python", f"index {blob.hexsha[:12]}..0000000 100644\n--- a/python", 1)
    _, out = check(tmp_path, patch, f"{root}@HEAD")
    assert [f["code"] for f in out] == ["PA101"]
    assert "certain" in out[0]["message"]
    assert repo.git.status("--porcelain") == ""


def test_two_sections_of_one_file_apply_in_sequence(tmp_path):
    """GNU patch applies a second section for the same file to the first one's result."""
    engine = as_directory(tmp_path, tree(BASE_V2))
    first = PATCH_WITH_IDS
    # the second section's context is the first section's result
    second = (
        "--- a/python/sglang/srt/multimodal/processors/qwen_vl.py\n"
        "+++ b/python/sglang/srt/multimodal/processors/qwen_vl.py\n"
        "@@ -19,3 +19,3 @@ class QwenVLImageProcessor(SGLangBaseProcessor):\n"
        "         base_output = await self.legacy_load_mm_data(\n"
        "-            input_ids=input_text,\n"
        "+            input_ids=list(input_text),\n"
        "             prompt=input_text,\n"
    )
    res, out = check(tmp_path, first + second, engine)
    assert out == [], out
    assert res.exit_code == 0


# ---------------------------------------------------------------------------
# progress and the per-patch summary (issue 17)


def test_progress_after_a_second_names_the_patch_engine_and_applier():
    import io

    from patchaudit.reporters.progress import FileProgress

    out = io.StringIO()
    bar = FileProgress(stream=out, enabled=True)
    bar(3)
    assert out.getvalue() == ""  # under a second and under MIN_FILES: nothing drawn
    bar.started -= 2
    bar(3)
    assert "2/3 files" in out.getvalue()
    bar.note("fix.patch -> sglang 0.5.15.post1, git apply")
    assert out.getvalue().rstrip().endswith("2/3 files  fix.patch -> sglang 0.5.15.post1, git apply")
    bar.close()
    assert out.getvalue().endswith("\r\x1b[K")
    quiet = io.StringIO()
    off = FileProgress(stream=quiet)  # not a terminal: never drawn
    off.started -= 5
    off(1)
    off.note("x")
    assert quiet.getvalue() == ""


def test_text_summary_lists_each_patch_engine_applier_and_counts(tmp_path):
    eng = tmp_path / "engine"
    write(
        eng,
        {
            "sglang/__init__.py": "",
            "sglang/_version.py": "__version__ = version = '0.5.15.post1'\n",
            "sglang/srt/proc.py": "class P:\n    def load(self, p):\n        ids = self.tok(p)\n        return ids\n",
        },
    )
    good = (
        "--- a/python/sglang/srt/proc.py\n+++ b/python/sglang/srt/proc.py\n@@ -1,4 +1,4 @@\n class P:\n"
        "     def load(self, p):\n-        ids = self.tok(p)\n+        ids = self.tok(list(p))\n         return ids\n"
    )
    (tmp_path / "a.patch").write_text(good)
    (tmp_path / "b.patch").write_text(good.replace("self.tok(p)", "self.other(p)"))
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        res = cli_runner().invoke(main, ["check", "--no-cache", "--engine", f"sglang={eng}", "a.patch", "b.patch"])
    finally:
        os.chdir(cwd)
    assert "  a.patch -> sglang 0.5.15.post1, patch (no recipe: GNU patch's defaults): 1 clean" in res.output
    assert "  b.patch -> sglang 0.5.15.post1, patch (no recipe: GNU patch's defaults): 1 failed" in res.output


# another project's patch beside the engine's (slime ships megatron.patch next to its
# SGLang patches): with only SGLang given and no recipe to say where it goes
OTHER_PROJECT = """\
diff --git a/megatron/core/parallel_state.py b/megatron/core/parallel_state.py
--- a/megatron/core/parallel_state.py
+++ b/megatron/core/parallel_state.py
@@ -1,3 +1,3 @@
 import os
-WORLD = 1
+WORLD = 2
 RANK = 0
"""


@pytest.mark.parametrize("kind", KINDS)
def test_another_projects_patch_is_checked_without_the_engine(tmp_path, kind):
    """No PA201 "does not exist" for each of its files: it names none of the engine's
    packages, so it is checked in fragment mode, and the run says so once.  A patch of
    the engine whose file moved still gets its PA201 (the test above and PA201's own)."""
    engine = KINDS[kind](tmp_path, tree(BASE_V2))
    res, out = check(tmp_path, OTHER_PROJECT, engine)
    assert out == [], out
    assert res.exit_code == 0
    assert "1 patch whose files are in no engine given and whose paths name none of its packages" in res.stderr
    assert "fix.patch" in res.stderr
    moved = PATCH.replace("qwen_vl.py", "moved_vl.py")
    res, out = check(tmp_path, moved, engine)
    assert any(f["code"] == "PA201" and "does not exist" in f["message"] for f in out), out
    assert "another project" not in res.stderr
    # an engine file written outside the tree is the engine's patch (PA305 says where it writes)
    escapes = PATCH.replace("+++ b/python/sglang/srt/multimodal/processors/qwen_vl.py", "+++ b/../../etc/x.sh")
    res, out = check(tmp_path, escapes, engine)
    assert "another project" not in res.stderr
    assert "PA305" in {f["code"] for f in out}, out
