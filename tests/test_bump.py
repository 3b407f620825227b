"""`patchaudit bump`: a patch set audited between two engine versions.

The engine is a real git repository made with GitPython (two tags, commits
in between), or two real wheels built with zipfile from the same trees; the
patches are real unified diffs of those trees.
"""

from __future__ import annotations

import json
import sys
import types
import zipfile
from pathlib import Path

import git
import pytest
from click.testing import CliRunner

from patchaudit.pipeline.bump import BumpError, run_bump
from patchaudit.cli import main
from patchaudit.config.settings import Settings

PKG = "python/sglang/srt/multimodal/processors"

BASE_V1 = """\
class BaseMultimodalProcessor:
    def __init__(self, tokenizer):
        self._tokenizer = tokenizer

    async def load_mm_data(self, prompt, multimodal_tokens, image_data=None, video_data=None):
        if isinstance(prompt, list):
            prompt = self._tokenizer.decode(prompt)
        return await self.legacy_load_mm_data(
            prompt=prompt,
            multimodal_tokens=multimodal_tokens,
            image_data=image_data,
            video_data=video_data,
        )

    async def legacy_load_mm_data(self, prompt, multimodal_tokens, image_data=None, video_data=None):
        if isinstance(prompt, list):
            prompt = self._tokenizer.decode(prompt)
        return prompt
"""

BASE_V2 = """\
class BaseMultimodalProcessor:
    def __init__(self, tokenizer):
        self._tokenizer = tokenizer

    async def load_mm_data(self, prompt, multimodal_tokens, image_data=None, video_data=None):
        input_ids = prompt if isinstance(prompt, list) else None
        if isinstance(prompt, list):
            prompt = self._tokenizer.decode(prompt)
        return await self.legacy_load_mm_data(
            prompt=prompt,
            multimodal_tokens=multimodal_tokens,
            image_data=image_data,
            video_data=video_data,
            input_ids=input_ids,
        )

    async def legacy_load_mm_data(self, prompt, multimodal_tokens, image_data=None, video_data=None,
                                  input_ids=None):
        if isinstance(prompt, list):
            prompt = self._tokenizer.decode(prompt)
        return prompt
"""

QWEN = """\
import time

from sglang.srt.multimodal.processors.base_processor import BaseMultimodalProcessor as SGLangBaseProcessor


class QwenVLImageProcessor(SGLangBaseProcessor):
    async def process_mm_data_async(self, image_data, input_text, request_obj, *args, **kwargs):
        entry_time = time.perf_counter()
        base_output = await self.load_mm_data(
            prompt=input_text,
            image_data=image_data,
            video_data=request_obj.video_data,
            multimodal_tokens=self.mm_tokens,
        )
        load_time = time.perf_counter()
        return base_output, load_time - entry_time
"""

SEED_PATCH = f"""\
diff --git a/{PKG}/qwen_vl.py b/{PKG}/qwen_vl.py
--- a/{PKG}/qwen_vl.py
+++ b/{PKG}/qwen_vl.py
@@ -6,7 +6,7 @@ from sglang.srt.multimodal.processors.base_processor import BaseMultimodalProces
 class QwenVLImageProcessor(SGLangBaseProcessor):
     async def process_mm_data_async(self, image_data, input_text, request_obj, *args, **kwargs):
         entry_time = time.perf_counter()
-        base_output = await self.load_mm_data(
+        base_output = await self.legacy_load_mm_data(
             prompt=input_text,
             image_data=image_data,
             video_data=request_obj.video_data,
"""

PROC_V1 = """\
import time


class Scheduler:
    def step(self, batch):
        start = time.perf_counter()
        batch = self.prepare(batch)
        out = self.run(batch)
        self.record(start)
        return out

    def prepare(self, batch):
        batch = list(batch)
        batch.sort()
        return batch

    def run(self, batch):
        return batch

    def record(self, start):
        return start
"""

PROC_V2 = PROC_V1.replace("def step(self, batch):", "def step(self, batch, stream=None):")

PROC_PATCH = """\
--- a/python/sglang/srt/proc.py
+++ b/python/sglang/srt/proc.py
@@ -6,6 +6,6 @@ class Scheduler:
         start = time.perf_counter()
         batch = self.prepare(batch)
-        out = self.run(batch)
+        out = self.run(list(batch))
         self.record(start)
         return out
 
@@ -12,6 +12,7 @@ class Scheduler:
     def prepare(self, batch):
         batch = list(batch)
         batch.sort()
+        batch = batch[:64]
         return batch
 
     def run(self, batch):
"""

UTILS_V1 = """\
class TokenizerHelper:
    def encode(self, text):
        return list(text)

    def decode(self, ids):
        return "".join(ids)

    def pad(self, ids, length):
        return ids + [0] * (length - len(ids))


def get_helper():
    return TokenizerHelper()
"""

UTILS_V2 = UTILS_V1.replace("class TokenizerHelper:", "class HFTokenizerHelper:").replace(
    "return TokenizerHelper()", "return HFTokenizerHelper()")

UTILS_PATCH = """\
--- a/python/sglang/srt/utils/tok_utils.py
+++ b/python/sglang/srt/utils/tok_utils.py
@@ -5,7 +5,7 @@ class TokenizerHelper:
     def decode(self, ids):
         return "".join(ids)
 
-    def pad(self, ids, length):
+    def pad(self, ids, length, value=0):
         return ids + [0] * (length - len(ids))
 
 
"""

SAMPLER_V1 = """\
class Sampler:
    def sample(self, logits, temperature):
        probs = self.softmax(logits, temperature)
        return self.pick(probs)

    def softmax(self, logits, temperature):
        return logits

    def pick(self, probs):
        return probs[0]
"""

SAMPLER_V2 = SAMPLER_V1.replace("probs = self.softmax(logits, temperature)",
                                "probs = self.softmax(logits, temperature=temperature, top_k=0)").replace(
    "def softmax(self, logits, temperature):", "def softmax(self, logits, temperature, top_k):")

SAMPLER_PATCH = """\
--- a/python/sglang/srt/sampler.py
+++ b/python/sglang/srt/sampler.py
@@ -1,5 +1,5 @@
 class Sampler:
     def sample(self, logits, temperature):
-        probs = self.softmax(logits, temperature)
+        probs = self.softmax(logits, temperature * 0.5)
         return self.pick(probs)
 
"""

INIT = {"python/sglang/__init__.py": "", "python/sglang/srt/__init__.py": "",
        "python/sglang/srt/multimodal/__init__.py": "", f"{PKG}/__init__.py": "",
        "python/sglang/srt/utils/__init__.py": ""}

TREE_V1 = {**INIT, f"{PKG}/base_processor.py": BASE_V1, f"{PKG}/qwen_vl.py": QWEN,
           "python/sglang/srt/proc.py": PROC_V1, "python/sglang/srt/utils/tok_utils.py": UTILS_V1,
           "python/sglang/srt/sampler.py": SAMPLER_V1}


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def engine_repo(tmp_path_factory):
    """v1 -> four upstream commits -> v2; returns (repo path, {name: commit sha})."""
    root = tmp_path_factory.mktemp("sglang")
    repo = git.Repo.init(root)
    _write(root, TREE_V1)
    repo.index.add(list(TREE_V1))
    repo.index.commit("sglang v1")
    repo.create_tag("v1")
    shas = {}
    _write(root, {f"{PKG}/base_processor.py": BASE_V2})
    repo.index.add([f"{PKG}/base_processor.py"])
    shas["input_ids"] = repo.index.commit("Preserve caller token ids in legacy_load_mm_data").hexsha
    _write(root, {"python/sglang/srt/proc.py": PROC_V2})
    repo.index.add(["python/sglang/srt/proc.py"])
    shas["stream"] = repo.index.commit("Scheduler.step takes the CUDA stream").hexsha
    repo.index.move(["python/sglang/srt/utils/tok_utils.py", "python/sglang/srt/utils/hf_tokenizer_utils.py"])
    _write(root, {"python/sglang/srt/utils/hf_tokenizer_utils.py": UTILS_V2})
    repo.index.add(["python/sglang/srt/utils/hf_tokenizer_utils.py"])
    shas["move"] = repo.index.commit("Move the tokenizer helpers next to the HF utilities").hexsha
    _write(root, {"python/sglang/srt/sampler.py": SAMPLER_V2})
    repo.index.add(["python/sglang/srt/sampler.py"])
    shas["sampler"] = repo.index.commit("Sampler: top_k in softmax").hexsha
    repo.create_tag("v2")
    repo.close()
    return root, shas


def _tree_v2() -> dict[str, str]:
    tree = dict(TREE_V1)
    tree.pop("python/sglang/srt/utils/tok_utils.py")
    tree.update({f"{PKG}/base_processor.py": BASE_V2, "python/sglang/srt/proc.py": PROC_V2,
                 "python/sglang/srt/utils/hf_tokenizer_utils.py": UTILS_V2,
                 "python/sglang/srt/sampler.py": SAMPLER_V2})
    return tree


def _wheel(path: Path, version: str, tree: dict[str, str]) -> Path:
    """A real wheel (zip) of the tree: python/sglang/... installed as sglang/..."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel, text in tree.items():
            zf.writestr(rel.removeprefix("python/"), text)
        zf.writestr(f"sglang-{version}.dist-info/METADATA",
                    f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")
        zf.writestr(f"sglang-{version}.dist-info/RECORD", "")
    return path


@pytest.fixture()
def patches(tmp_path):
    d = tmp_path / "patches"
    d.mkdir()
    (d / "0001-qwen-vl-legacy-loader.patch").write_text(SEED_PATCH, encoding="utf-8")
    (d / "0002-scheduler.patch").write_text(PROC_PATCH, encoding="utf-8")
    (d / "0003-tokenizer-pad.patch").write_text(UTILS_PATCH, encoding="utf-8")
    (d / "0004-sampler.patch").write_text(SAMPLER_PATCH, encoding="utf-8")
    return d


def _bump(paths, old, new, **settings_kw):
    settings = Settings(cache=False, jobs=1, **settings_kw)
    return run_bump([str(p) for p in paths], "sglang", str(old), str(new), settings)


def _codes(report, code, path_part=""):
    return [f for f in report.findings if f.code == code and path_part in f.path]


# --------------------------------------------------------------------------
# the seed (acceptance)


def test_seed_between_tags_reports_new_parameter_and_certain_pa101(engine_repo, patches):
    repo, _ = engine_repo
    report = _bump([patches / "0001-qwen-vl-legacy-loader.patch"], f"{repo}@v1", f"{repo}@v2")
    assert not report.errors
    (pa204,) = _codes(report, "PA204")
    assert pa204.line == 9      # the added `legacy_load_mm_data(` line of the patch
    assert "`input_ids`" in pa204.message and "new in v2" in pa204.message
    assert "1 of 1" in pa204.message
    assert f"{PKG}/base_processor.py:9" in pa204.message   # upstream's call site in load_mm_data
    assert "BaseMultimodalProcessor.load_mm_data" in pa204.message
    assert pa204.severity.value == "error"
    assert pa204.target.symbol == "QwenVLImageProcessor.process_mm_data_async"
    pa101 = _codes(report, "PA101")
    assert len(pa101) == 1 and "certain" in pa101[0].message
    # the hunk applies cleanly to both versions
    (row,) = report.hunks
    assert (row.old.status, row.new.status) == ("clean", "clean")
    assert row.symbol == "QwenVLImageProcessor.process_mm_data_async"
    assert report.exit_code == 1


def test_seed_same_tag_reports_neither(engine_repo, patches):
    repo, _ = engine_repo
    report = _bump([patches / "0001-qwen-vl-legacy-loader.patch"], f"{repo}@v1", f"{repo}@v1")
    assert not report.errors
    assert not _codes(report, "PA204")
    assert not [f for f in _codes(report, "PA101") if "certain" in f.message]
    # at v1 the engine itself has no input_ids: PA101 says so, as a warning
    (pa101,) = _codes(report, "PA101")
    assert "re-tokenizes" in pa101.message and pa101.severity.value == "warning"
    assert not _codes(report, "PA203")
    assert report.exit_code == 0


def test_the_same_results_from_wheels(engine_repo, patches, tmp_path):
    old = _wheel(tmp_path / "sglang-0.1.0-py3-none-any.whl", "0.1.0", TREE_V1)
    new = _wheel(tmp_path / "sglang-0.2.0-py3-none-any.whl", "0.2.0", _tree_v2())
    report = _bump(sorted(patches.iterdir()), old, new)
    assert not report.errors
    (pa204,) = [f for f in _codes(report, "PA204") if "qwen" in f.path]
    assert "new in sglang 0.2.0" in pa204.message and "sglang/srt/multimodal/processors/base_processor.py:9" \
        in pa204.message
    assert "certain" in _codes(report, "PA101")[0].message
    # PA203 from comparing the two wheels (no git: no commits named)
    (changed,) = _codes(report, "PA203", "0002")
    assert changed.line == 3 and "`Scheduler.step` changed upstream" in changed.message
    assert "commit" not in changed.message
    moved = _codes(report, "PA203", "0003")
    assert any("sglang/srt/utils/hf_tokenizer_utils.py" in f.message for f in moved)
    # and the same hunk table as from git (paths differ by the wheel layout)
    statuses = [(r.patch.rsplit("/", 1)[-1], r.patch_line, r.old.status, r.new.status if r.new else None)
                for r in report.hunks]
    repo, _ = engine_repo
    from_git = _bump(sorted(patches.iterdir()), f"{repo}@v1", f"{repo}@v2")
    assert statuses == [(r.patch.rsplit("/", 1)[-1], r.patch_line, r.old.status, r.new.status if r.new else None)
                        for r in from_git.hunks]
    assert sorted((f.code, Path(f.path).name, f.line) for f in report.findings) == \
        sorted((f.code, Path(f.path).name, f.line) for f in from_git.findings)
    # a mix: git OLD, wheel NEW
    mixed = _bump([patches / "0001-qwen-vl-legacy-loader.patch"], f"{repo}@v1", new)
    assert [f.code for f in mixed.findings if f.code in ("PA101", "PA204")] == ["PA101", "PA204"]


# --------------------------------------------------------------------------
# PA203


def test_changed_function_names_the_upstream_commit(engine_repo, patches):
    repo, shas = engine_repo
    report = _bump([patches / "0002-scheduler.patch"], f"{repo}@v1", f"{repo}@v2")
    found = _codes(report, "PA203")
    assert [f.line for f in found] == [3]          # hunk 1 (in step), not hunk 2 (in prepare)
    msg = found[0].message
    assert "`Scheduler.step` changed upstream" in msg and "still applies cleanly" in msg
    assert shas["stream"][:10] in msg and "Scheduler.step takes the CUDA stream" in msg
    assert shas["input_ids"][:10] not in msg
    assert found[0].target.path == "python/sglang/srt/proc.py" and found[0].target.symbol == "Scheduler.step"
    rows = {r.patch_line: r for r in report.hunks}
    assert rows[3].changed_upstream is True and rows[11].changed_upstream is False
    assert (rows[3].new.status, rows[11].new.status) == ("clean", "clean")


def test_unchanged_tags_give_no_pa203(engine_repo, patches):
    repo, _ = engine_repo
    report = _bump(sorted(patches.iterdir()), f"{repo}@v2", f"{repo}@v2", ignore=["PA201"])
    assert not _codes(report, "PA203")


def test_index_line_blob_is_not_used_for_the_revisions(engine_repo, tmp_path):
    """A git-style patch names its pre-image blob (the v1 file); against v2 the v2 file counts."""
    repo, _ = engine_repo
    r = git.Repo(repo)
    blob = r.git.rev_parse("v1:python/sglang/srt/proc.py")
    r.close()
    patch = tmp_path / "indexed.patch"
    patch.write_text(
        "diff --git a/python/sglang/srt/proc.py b/python/sglang/srt/proc.py\n"
        f"index {blob[:12]}..{'1' * 12} 100644\n"
        "--- a/python/sglang/srt/proc.py\n+++ b/python/sglang/srt/proc.py\n"
        "@@ -5,3 +5,3 @@ class Scheduler:\n"
        "     def step(self, batch):\n"
        "-        start = time.perf_counter()\n"
        "+        start = time.time()\n"
        "         batch = self.prepare(batch)\n", encoding="utf-8")
    report = _bump([patch], f"{repo}@v1", f"{repo}@v2")
    assert not report.errors
    (row,) = report.hunks
    assert row.old.status == "clean"
    assert row.new.status == "fuzz"    # the v2 file (def line changed), not the v1 blob of the index line
    assert _codes(report, "PA202")


# --------------------------------------------------------------------------
# failed hunks, moved files


def test_failed_hunk_still_audited_against_new(engine_repo, patches):
    repo, shas = engine_repo
    report = _bump([patches / "0004-sampler.patch"], f"{repo}@v1", f"{repo}@v2")
    (row,) = report.hunks
    assert (row.old.status, row.new.status) == ("clean", "failed")
    assert [f.line for f in _codes(report, "PA201")] == [3]
    # the added call is checked against v2's signature: top_k is now required
    (pa204,) = _codes(report, "PA204")
    assert pa204.line == 7 and "`top_k`" in pa204.message and "requires" in pa204.message
    assert "new in v2" in pa204.message
    (pa203,) = _codes(report, "PA203")
    assert "`Sampler.sample` changed upstream" in pa203.message and "does not apply" in pa203.message
    assert shas["sampler"][:10] in pa203.message


def test_moved_file_names_where_its_code_went(engine_repo, patches):
    repo, _ = engine_repo
    report = _bump([patches / "0003-tokenizer-pad.patch"], f"{repo}@v1", f"{repo}@v2")
    section = [f for f in _codes(report, "PA203") if f.line == 1]
    assert len(section) == 1
    msg = section[0].message
    assert "python/sglang/srt/utils/tok_utils.py does not exist in v2" in msg
    assert "moved to python/sglang/srt/utils/hf_tokenizer_utils.py" in msg
    assert "class TokenizerHelper is now HFTokenizerHelper" in msg
    assert section[0].target.path == "python/sglang/srt/utils/hf_tokenizer_utils.py"
    (row,) = report.hunks
    assert row.new.status == "missing-file"
    assert row.moved_to == "python/sglang/srt/utils/hf_tokenizer_utils.py"
    assert row.moved.status == "clean" and row.moved.symbol == "HFTokenizerHelper.pad"
    assert [r.to_json() for r in report.relocations] == [{
        "old_path": "python/sglang/srt/utils/tok_utils.py",
        "new_path": "python/sglang/srt/utils/hf_tokenizer_utils.py", "matched": 4, "total": 4,
        "classes": {"TokenizerHelper": "HFTokenizerHelper"}, "others": [], "shim": [],
        "symbols": {q: {"old": q, "path": "python/sglang/srt/utils/hf_tokenizer_utils.py",
                        "new": q.replace("TokenizerHelper", "HFTokenizerHelper"),
                        "how": "renamed" if q in ("TokenizerHelper", "get_helper") and q == "TokenizerHelper"
                        else "same name", "score": 1.0}
                    for q in ("TokenizerHelper", "TokenizerHelper.decode", "TokenizerHelper.encode",
                              "TokenizerHelper.pad", "get_helper")}}]
    assert _codes(report, "PA201")    # the file does not exist: PA201 as well


# --------------------------------------------------------------------------
# upstream share, options


SHARE_V1 = """\
class Engine:
    def encode(self, text, lora_path=None):
        return text

    def a(self, t):
        return self.encode(t)

    def b(self, t):
        return self.encode(t)

    def c(self, t):
        return self.encode(t)

    def patched(self, t):
        x = 1
        return x
"""

SHARE_V2 = SHARE_V1.replace("lora_path=None):", "lora_path=None, rid=None):").replace(
    "    def a(self, t):\n        return self.encode(t)", "    def a(self, t):\n        return self.encode(t, rid=1)").replace(
    "    def b(self, t):\n        return self.encode(t)", "    def b(self, t):\n        return self.encode(t, rid=2)")

SHARE_PATCH = """\
--- a/python/sglang/srt/engine.py
+++ b/python/sglang/srt/engine.py
@@ -13,4 +13,4 @@ class Engine:
 
     def patched(self, t):
-        x = 1
+        x = self.encode(t)
         return x
"""


def test_upstream_share_is_configurable(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    _write(old, {"python/sglang/__init__.py": "", "python/sglang/srt/engine.py": SHARE_V1})
    _write(new, {"python/sglang/__init__.py": "", "python/sglang/srt/engine.py": SHARE_V2})
    patch = tmp_path / "share.patch"
    patch.write_text(SHARE_PATCH, encoding="utf-8")
    assert not _codes(_bump([patch], old, new), "PA204")     # 2 of 3 upstream sites: not all
    report = _bump([patch], old, new, rule_options={"PA204": {"upstream-share": 0.6}})
    (f,) = _codes(report, "PA204")
    assert "`rid`" in f.message and "2 of 3" in f.message and "new in" in f.message
    report = _bump([patch], old, new, rule_options={"PA204": {"upstream-share": 0.6, "min-upstream-calls": 4}})
    assert not _codes(report, "PA204")


def test_bad_options_and_sources_are_clear_errors(tmp_path, engine_repo, patches):
    repo, _ = engine_repo
    with pytest.raises(BumpError, match="upstream-share"):
        _bump([patches], f"{repo}@v1", f"{repo}@v2", rule_options={"PA204": {"upstream-share": 2}})
    with pytest.raises(BumpError, match="--to: .*revision 'v9' not found"):
        _bump([patches], f"{repo}@v1", f"{repo}@v9")
    with pytest.raises(BumpError, match="--from: .*does not exist"):
        _bump([patches], tmp_path / "nope", f"{repo}@v2")


def test_monkeypatch_audit_is_called_for_py_files(engine_repo, patches, tmp_path, monkeypatch):
    """Issue 9's audit_bump(py_files, old_ctx, new_ctx, settings) gets the .py files given."""
    from patchaudit.model.findings import Finding, Severity
    from patchaudit.units.engines import EngineContext

    calls = []

    def audit_bump(py_files, old_ctx, new_ctx, settings):
        calls.append((list(py_files), old_ctx, new_ctx, settings))
        return [Finding("PA206", "monkeypatch-target-missing", Severity.ERROR, "target gone", py_files[0], 1)]

    fake = types.ModuleType("patchaudit.pipeline.bump_monkeypatch")
    fake.audit_bump = audit_bump
    monkeypatch.setitem(sys.modules, "patchaudit.pipeline.bump_monkeypatch", fake)
    py = tmp_path / "hooks.py"
    py.write_text("import sglang\n", encoding="utf-8")
    repo, _ = engine_repo
    report = _bump([patches / "0001-qwen-vl-legacy-loader.patch", py], f"{repo}@v1", f"{repo}@v2",
                   select=["PA2"])
    ((files, old_ctx, new_ctx, settings),) = calls
    assert files == [str(py)]
    assert isinstance(old_ctx, EngineContext) and isinstance(new_ctx, EngineContext)
    assert old_ctx.source.rev == "v1" and new_ctx.source.rev == "v2"
    assert old_ctx.index.resolve("sglang.srt.multimodal.processors.base_processor.BaseMultimodalProcessor")
    assert [f.code for f in report.findings if f.path == str(py)] == ["PA206"]


# --------------------------------------------------------------------------
# the command and its formats


def _run(args):
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    return result.exit_code, result.output


def test_cli_bare_revisions_of_the_engine_repository(engine_repo, patches):
    repo, _ = engine_repo
    code, out = _run(["bump", str(patches / "0001-qwen-vl-legacy-loader.patch"), "--engine", f"sglang={repo}",
                      "--from", "v1", "--to", "v2"])
    assert code == 1
    assert "PA204" in out and "new in v2" in out and "clean -> clean" in out
    code, out = _run(["bump", str(patches / "0001-qwen-vl-legacy-loader.patch"), "--engine", f"sglang={repo}",
                      "--from", "v1", "--to", "v1"])
    assert code == 0 and "PA204" not in out


def test_cli_errors_exit_2(engine_repo, patches, tmp_path):
    repo, _ = engine_repo
    code, out = _run(["bump", str(patches), "--engine", f"sglang={repo}", "--from", "v1", "--to", "nosuchtag"])
    assert code == 2 and "revision 'nosuchtag' not found" in out
    code, out = _run(["bump", str(tmp_path / "missing.patch"), "--engine", "sglang", "--from", f"{repo}@v1",
                      "--to", f"{repo}@v2"])
    assert code == 2 and "missing.patch" in out and "no such file" in out
    code, out = _run(["bump", str(patches), "--engine", "-x", "--from", f"{repo}@v1", "--to", f"{repo}@v2"])
    assert code == 2


def test_json_has_findings_and_hunks(engine_repo, patches, tmp_path):
    repo, _ = engine_repo
    out_file = tmp_path / "bump.json"
    code, _ = _run(["bump", str(patches), "--engine", "sglang", "--from", f"{repo}@v1", "--to", f"{repo}@v2",
                    "--format", "json", "-o", str(out_file)])
    assert code == 1
    data = json.loads(out_file.read_text())
    assert set(data) >= {"findings", "hunks"}
    # findings are the objects `check --format json` prints; line is the patch file's line
    check_keys = {"code", "name", "severity", "message", "path", "line", "column", "end_line", "end_column",
                  "target", "trace", "fingerprint"}
    assert all(set(f) == check_keys for f in data["findings"])
    seed = [f for f in data["findings"] if f["code"] == "PA204" and "0001" in f["path"]]
    assert seed[0]["line"] == 9
    hunks = data["hunks"]
    assert len(hunks) == 5
    first = hunks[0]
    assert first["patch"].endswith("0001-qwen-vl-legacy-loader.patch") and first["patch_line"] == 4
    assert first["target"] == f"{PKG}/qwen_vl.py"
    assert first["symbol"] == "QwenVLImageProcessor.process_mm_data_async"
    assert first["old"]["status"] == "clean" and first["new"]["status"] == "clean"
    assert [h["new"]["status"] for h in hunks] == ["clean", "clean", "clean", "missing-file", "failed"]


def test_markdown_report_for_several_patch_files(engine_repo, patches):
    repo, _ = engine_repo
    code, md = _run(["bump", str(patches), "--engine", "sglang", "--from", f"{repo}@v1", "--to", f"{repo}@v2",
                     "--format", "markdown"])
    assert code == 1
    assert md.startswith("### patchaudit bump `sglang`: `v1` → `v2`")
    # the summary table: one row per patch file with its hunks by status and findings by rule
    rows = [l for l in md.splitlines() if l.startswith("| `") and "patches/000" in l]
    assert len(rows) == 4
    seed_row = next(l for l in rows if "0001" in l)
    assert seed_row.split("|")[2:8] == [" 1 ", " 1 ", " 0 ", " 0 ", " 0 ", " 0 "]
    assert "PA101 ×1" in seed_row and "PA204 ×1" in seed_row
    sampler_row = next(l for l in rows if "0004" in l)
    assert sampler_row.split("|")[6] == " 1 "      # failed on v2
    assert "**Findings by rule**" in md and "| PA204 call-signature-drift | error |" in md
    assert "moved to python/sglang/srt/utils/hf_tokenizer_utils.py" in md
    assert md.index("#### :x: Errors") < md.index("#### Warnings and infos") < md.index("#### Hunks")
    assert "```diff" in md
    assert md.count("<details>") == md.count("</details>")
    assert len(md) < 65536


def test_sarif_when_the_reporter_exists(engine_repo, patches):
    from patchaudit.reporters import available_formats

    if "sarif" not in available_formats():
        pytest.skip("the sarif reporter is not in this build")
    repo, _ = engine_repo
    code, out = _run(["bump", str(patches / "0001-qwen-vl-legacy-loader.patch"), "--engine", "sglang",
                      "--from", f"{repo}@v1", "--to", f"{repo}@v2", "--format", "sarif"])
    assert code == 1
    data = json.loads(out)
    results = data["runs"][0]["results"]
    assert {r["ruleId"] for r in results} >= {"PA101", "PA204"}


def test_pyproject_configures_the_upstream_share(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    _write(old, {"python/sglang/__init__.py": "", "python/sglang/srt/engine.py": SHARE_V1})
    _write(new, {"python/sglang/__init__.py": "", "python/sglang/srt/engine.py": SHARE_V2})
    (tmp_path / "share.patch").write_text(SHARE_PATCH, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text("[tool.patchaudit.rules.PA204]\nupstream-share = 0.6\n",
                                             encoding="utf-8")
    args = ["bump", str(tmp_path / "share.patch"), "--engine", "sglang", "--from", str(old), "--to", str(new),
            "--select", "PA204"]
    code, out = _run(args)
    assert code == 1 and "`rid`" in out and "2 of 3" in out
    (tmp_path / "pyproject.toml").write_text("[tool.patchaudit.rules.PA204]\nupstream-share = \"all\"\n",
                                             encoding="utf-8")
    code, out = _run(args)
    assert code == 2 and "pyproject.toml" in out and "upstream-share" in out


def test_markdown_stays_under_githubs_comment_limit():
    from patchaudit.pipeline.bump import BumpReport, HunkRow, Side
    from patchaudit.model.findings import Finding, Severity, Target
    from patchaudit.reporters.markdown import render

    findings = [Finding("PA204", "call-signature-drift", Severity.ERROR, f"`f{k}()` leaves out `x` | <b>" + "y" * 200,
                        "patches/big.patch", k + 1, target=Target("sglang/srt/x.py", k, "A.f"),
                        context=["@@ -1,3 +1,3 @@", " a", "-b", "+c", " d"]) for k in range(2000)]
    rows = [HunkRow("patches/big.patch", k, 1, "python/sglang/srt/x.py", Side("clean", "x.py"),
                    Side("failed", "x.py")) for k in range(50)]
    report = BumpReport("sglang", "old.whl", "new.whl", "sglang 1", "sglang 2", findings=findings, hunks=rows,
                        patches=["patches/big.patch"], files=1)
    md = render(report)
    assert len(md) < 65536
    assert "more errors and every warning not shown" in md and "--format json" in md
    assert "&lt;b&gt;" in md and "<b>" not in md            # messages never open HTML
    small = BumpReport("sglang", "o", "n", "1", "2", findings=findings[:3], hunks=rows[:1],
                       patches=["patches/big.patch"], files=1)
    md = render(small)
    assert "```diff" in md and "not shown" not in md
    row = next(l for l in md.splitlines() if l.startswith("| `patches/big.patch`"))
    assert row.count("|") == 9                              # the table row is not split by a `|` in text


# --------------------------------------------------------------------------
# the engine-pair rules judge; analysis computes (issue 14)


def test_pa204_options_live_on_the_rule():
    from patchaudit.rules.pa204_call_signature_drift import CallSignatureDrift

    assert CallSignatureDrift.options == {"upstream-share": 1.0, "min-upstream-calls": 1, "include-tests": False}
    CallSignatureDrift.check_options({})
    CallSignatureDrift.check_options({"upstream-share": 0.5, "min-upstream-calls": 2, "include-tests": True})
    for bad, says in [({"upstream-share": 0}, "upstream-share: expected a number in (0, 1], got 0"),
                      ({"upstream-share": True}, "upstream-share"),
                      ({"min-upstream-calls": 0}, "min-upstream-calls: expected a positive integer, got 0"),
                      ({"include-tests": "yes"}, "include-tests: expected true or false, got 'yes'"),
                      ({"nope": 1}, "[tool.patchaudit.rules.PA204]: unknown option(s) ['nope']")]:
        with pytest.raises(ValueError) as info:
            CallSignatureDrift.check_options(bad)
        assert says in str(info.value)


def test_signature_comparison_is_pure():
    from patchaudit.analysis.signatures import bind_problems, renamed_keywords, shifted_positional
    from patchaudit.engine.definitions import index_module

    mod = index_module("m.py", "def f(a, b=1, *, c, d=None):\n    pass\n\ndef g(a, x, b=1):\n    pass\n"
                       "\nf(1, 2, 3, e=4, a=5)\n")
    f_params, g_params = mod.functions["f"].params, mod.functions["g"].params
    shape = next(s for s in _shapes(mod) if s[0] == "f")[1]
    unknown, too_many, missing, twice = bind_problems(f_params, shape)
    assert (unknown, too_many, missing, twice) == (["e"], 1, ["c"], ["a"])
    assert renamed_keywords(["e"], f_params, ["a", "b", "c", "d", "e"]) == {}
    assert shifted_positional(f_params, g_params, 2) == (1, "b", "x")
    assert shifted_positional(f_params, f_params, 2) is None


def _shapes(mod):
    import ast

    from patchaudit.engine.symbols import ast_call_shape, ast_callee

    return [(ast_callee(n.func), ast_call_shape(n)) for n in ast.walk(mod.tree) if isinstance(n, ast.Call)]


def test_upstream_changes_are_pure():
    from patchaudit.analysis.upstream import changed_lines, function_ranges, normalise

    old = "class A:\n    def f(self):\n        return 1\n\n    @staticmethod\n    def g():\n        pass\n"
    assert function_ranges(old) == [("A.f", 2, 3), ("A.g", 5, 7)]
    assert normalise(["    x = 1  ", "        y"]) == ["x = 1", "    y"]
    assert changed_lines(["a", "b", "c"], ["a", "B", "c", "d"]) == (1, 2)
