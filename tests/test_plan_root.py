"""The plan is the project root's, whatever the paths (pipeline/plan_inputs.py), a wheel is
one layout (units/exact.py NOT_IN_SOURCE), and a fix keeps the build's set applying
(pipeline/fix_stack.py).

A small repository made here with GitPython: an engine checkout (`engine/`, git, version
1.0; `engine09/`, version 0.9), a Dockerfile that copies `docker/patch/${PATCH_VERSION}/`
into it and applies `eng.patch` then `eng-b.patch` with `git apply`, and patches of two
version folders.  `eng-b.patch` is written on the result of `eng.patch`: real `git apply`
takes it only after `eng.patch` (the oracle), and patchaudit must check it that way
whether it is given the root, the patch folder or the one file (as pre-commit does).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import git
import pytest

from patchaudit.testing import invoke_in, write_tree

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

QWEN = """\
class QwenVLImageProcessor:
    async def process_mm_data_async(self, image_data, input_text, request_obj, **kwargs):
        entry_time = time.perf_counter()
        base_output = await self.load_mm_data(
            prompt=input_text,
            image_data=image_data,
        )
        return base_output
"""
TOOLS = "".join(f"def tool_{i}(x):\n    return x + {i}\n\n\n" for i in range(6))


def engine_files(version: str) -> dict[str, str]:
    return {
        "python/sglang/__init__.py": "",
        "python/sglang/version.py": f'__version__ = "{version}"\n',
        "python/sglang/srt/__init__.py": "",
        "python/sglang/srt/qwen_vl.py": QWEN,
        "python/sglang/srt/tools.py": TOOLS,
        "python/pyproject.toml": f'[project]\nname = "sglang"\nversion = "{version}"\n',
        "sgl-kernel/csrc/k.cu": "int k() { return 1; }\n",
    }


# eng.patch renames the loader (PA101: its fix reverts the rename)
ENG = """\
diff --git a/python/sglang/srt/qwen_vl.py b/python/sglang/srt/qwen_vl.py
--- a/python/sglang/srt/qwen_vl.py
+++ b/python/sglang/srt/qwen_vl.py
@@ -1,7 +1,7 @@ class QwenVLImageProcessor:
 class QwenVLImageProcessor:
     async def process_mm_data_async(self, image_data, input_text, request_obj, **kwargs):
         entry_time = time.perf_counter()
-        base_output = await self.load_mm_data(
+        base_output = await self.legacy_load_mm_data(
             prompt=input_text,
             image_data=image_data,
         )
diff --git a/python/sglang/srt/tools.py b/python/sglang/srt/tools.py
--- a/python/sglang/srt/tools.py
+++ b/python/sglang/srt/tools.py
@@ -19,6 +19,6 @@ def tool_4(x):
 
 
 def tool_5(x):
-    return x + 5
+    return x + 50
 
 
"""
# eng-b.patch: written on eng.patch's result (its context holds the renamed call)
ENG_B = """\
diff --git a/python/sglang/srt/qwen_vl.py b/python/sglang/srt/qwen_vl.py
--- a/python/sglang/srt/qwen_vl.py
+++ b/python/sglang/srt/qwen_vl.py
@@ -3,6 +3,6 @@ class QwenVLImageProcessor:
         entry_time = time.perf_counter()
         base_output = await self.legacy_load_mm_data(
             prompt=input_text,
-            image_data=image_data,
+            image_data=list(image_data),
         )
         return base_output
"""
# eng-b.patch of another kind: its own file, nothing of eng.patch under it
ENG_B_ALONE = """\
diff --git a/python/sglang/srt/tools.py b/python/sglang/srt/tools.py
--- a/python/sglang/srt/tools.py
+++ b/python/sglang/srt/tools.py
@@ -1,5 +1,5 @@
 def tool_0(x):
-    return x + 0
+    return x + 100
 
 
 def tool_1(x):
"""
KERNEL = """\
diff --git a/sgl-kernel/csrc/k.cu b/sgl-kernel/csrc/k.cu
--- a/sgl-kernel/csrc/k.cu
+++ b/sgl-kernel/csrc/k.cu
@@ -1 +1 @@
-int k() { return 1; }
+int k() { return 2; }
"""
DOCKERFILE = """\
FROM lmsysorg/sglang:v1.0-cu129
ARG PATCH_VERSION=latest
COPY docker/patch/${PATCH_VERSION}/eng*.patch /sgl-workspace/sglang/
RUN cd /sgl-workspace/sglang && \\
  for patch in eng.patch eng-b.patch; do \\
    git apply "$patch" || exit 1; \\
  done
"""


def make_repo(tmp: Path, eng_b: str = ENG_B) -> Path:
    root = tmp / "repo"
    write_tree(
        root,
        {
            "docker/Dockerfile": DOCKERFILE,
            "docker/patch/latest/eng.patch": ENG,
            "docker/patch/latest/eng-b.patch": eng_b,
            "docker/patch/v0.9/eng.patch": ENG,
        },
    )
    repo = git.Repo.init(root)
    repo.index.add(["docker"])
    actor = git.Actor("t", "t@example.invalid")
    repo.index.commit("patch set", author=actor, committer=actor)
    for name, version in (("engine", "1.0"), ("engine09", "0.9")):
        write_tree(tmp / name, engine_files(version))
        eng = git.Repo.init(tmp / name)
        eng.index.add(list(engine_files(version)))
        eng.index.commit("engine", author=actor, committer=actor)
    return root


def git_apply(tree: Path, *patches: Path) -> list[int]:
    """Real `git apply` of `patches` in order in `tree` (the Dockerfile's loop): exit codes."""
    out = []
    for p in patches:
        out.append(subprocess.run(["git", "apply", str(p)], cwd=tree, capture_output=True).returncode)
    return out


def findings(root: Path, *args: str) -> tuple[list[dict], object]:
    res = invoke_in(root, ["check", "--no-cache", "--output-format", "json", *args])
    assert "Traceback" not in res.stderr, res.stderr
    return json.loads(res.stdout or "[]"), res


def keyed(fs: list[dict], path: str) -> list[tuple]:
    return sorted((f["code"], f["line"], f["message"]) for f in fs if f["path"] == path)


def test_one_stacked_patch_gets_the_root_runs_findings(tmp_path):
    root = make_repo(tmp_path)
    engine = ["--engine", f"sglang={tmp_path / 'engine'}"]
    # the oracle: eng-b.patch applies only on top of eng.patch
    alone = tmp_path / "alone"
    shutil.copytree(tmp_path / "engine", alone)
    assert git_apply(alone, root / "docker/patch/latest/eng-b.patch") == [1]
    stacked = tmp_path / "stacked"
    shutil.copytree(tmp_path / "engine", stacked)
    latest = root / "docker/patch/latest"
    assert git_apply(stacked, latest / "eng.patch", latest / "eng-b.patch") == [0, 0]

    whole, _ = findings(root, *engine)
    folder, _ = findings(root, *engine, "docker/patch/")
    one, res = findings(root, *engine, "docker/patch/latest/eng-b.patch")
    b = "docker/patch/latest/eng-b.patch"
    assert keyed(one, b) == keyed(whole, b) == keyed(folder, b)
    assert not [f for f in one if f["code"] in ("PA201", "PA202", "PA208")], one  # it applies, as git says
    for path in {f["path"] for f in whole if f["path"].startswith("docker/patch/")}:
        assert keyed(folder, path) == keyed(whole, path), path
    # the Dockerfile's command, not GNU patch's defaults
    text = invoke_in(root, ["check", "--no-cache", *engine, "docker/patch/latest/eng-b.patch"])
    assert "eng-b.patch -> sglang 1.0, git apply: 1 clean" in text.stdout, text.stdout
    assert "no recipe" not in text.stdout


def test_another_version_folder_goes_to_that_versions_engine_or_none(tmp_path):
    root = make_repo(tmp_path)
    v09 = "docker/patch/v0.9/eng.patch"
    res = invoke_in(root, ["check", "--no-cache", "--engine", f"sglang={tmp_path / 'engine'}", v09])
    said = " ".join(res.stdout.split())  # notes are wrapped to the terminal's width
    assert "1 sglang patch of other PATCH_VERSION folders (v0.9) not applied" in said, res.stdout
    assert "give --engine sglang=PATH of that version" in said
    assert res.stderr.count("not applied") == 0  # said once: in the report, not again on stderr
    assert "give --engine to confirm" not in res.stdout
    # both versions given: the folder goes to its own
    both = ["--engine", f"sglang={tmp_path / 'engine'}", "--engine", f"sglang={tmp_path / 'engine09'}"]
    res = invoke_in(root, ["check", "--no-cache", *both, v09])
    assert f"{v09} -> sglang 0.9, git apply" in res.stdout, res.stdout
    assert "1 patch of the folder PATCH_VERSION=v0.9 applied to sglang 0.9, its version" in " ".join(res.stdout.split())
    assert "not applied" not in res.stdout


def test_engine_for_matches_configured_engines_by_version(tmp_path):
    from patchaudit.config.settings import EngineSpec, Settings
    from patchaudit.pipeline.plan import Plan
    from patchaudit.pipeline.plan_engines import engine_for

    make_repo(tmp_path)
    s = Settings(
        engines=[EngineSpec("sglang", str(tmp_path / "engine")), EngineSpec("sglang", str(tmp_path / "engine09"))]
    )
    assert engine_for(Plan(), "sglang", "0.9", s) == s.engines[1]
    assert engine_for(Plan(), "sglang", "v1.0", s) == s.engines[0]
    assert engine_for(Plan(), "sglang", "0.5.15", s) is None
    assert engine_for(Plan(), "vllm", "1.0", s) is None


def test_a_wheel_target_outside_its_packages_is_a_note_not_pa201(tmp_path):
    root = tmp_path / "repo"
    write_tree(root, {"patches/k.patch": KERNEL + ENG})
    git.Repo.init(root)
    whl = tmp_path / "sglang-1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        for rel, text in engine_files("1.0").items():
            if rel.startswith("python/sglang/"):
                z.writestr(rel.removeprefix("python/"), text)
        z.writestr("sglang-1.0.dist-info/METADATA", "Name: sglang\nVersion: 1.0\n")
        z.writestr("sglang-1.0.dist-info/RECORD", "")
    fs, res = findings(root, "--engine", f"sglang={whl}")
    assert not [f for f in fs if f["code"] == "PA201"], fs
    assert "1 file not in this engine source" in res.stderr and "sgl-kernel/csrc/k.cu" in res.stderr
    # a file of the package that is not there is still PA201, named as the patch names it
    write_tree(root, {"patches/k.patch": KERNEL + ENG.replace("qwen_vl.py", "moved_vl.py")})
    fs, _ = findings(root, "--engine", f"sglang={whl}")
    (pa201,) = [f for f in fs if f["code"] == "PA201"]
    assert pa201["message"].startswith("python/sglang/srt/moved_vl.py does not exist"), pa201


def test_a_fix_that_breaks_the_set_is_refused_and_one_that_keeps_it_is_written(tmp_path):
    root = make_repo(tmp_path)
    engine = ["--engine", f"sglang={tmp_path / 'engine'}"]
    patch = root / "docker/patch/latest/eng.patch"
    fs, _ = findings(root, *engine, "docker/patch/latest/eng.patch")
    assert any(f["code"] == "PA101" for f in fs), fs
    # the fix reverts eng.patch's rename: eng-b.patch's context is the renamed call
    res = invoke_in(root, ["check", "--no-cache", *engine, "--fix", "--unsafe-fixes", "docker/patch/latest/eng.patch"])
    assert (
        "fixes not written" in res.stderr
        and "the set's docker/patch/latest/eng-b.patch would no longer apply with `git apply`" in res.stderr
    ), res.stderr
    assert patch.read_text() == ENG  # nothing written
    # the oracle: the refused fix would have broken the build's git apply sequence
    fixed = tmp_path / "fixed.patch"
    fixed.write_text(ENG[ENG.index("diff --git a/python/sglang/srt/tools.py") :])  # the fix's text
    tree = tmp_path / "oracle"
    shutil.copytree(tmp_path / "engine", tree)
    assert git_apply(tree, fixed, root / "docker/patch/latest/eng-b.patch") == [0, 1]

    # eng-b.patch on a file of its own: the same fix keeps the set applying, and is written
    other = make_repo(tmp_path / "other", eng_b=ENG_B_ALONE)
    engine = ["--engine", f"sglang={tmp_path / 'other' / 'engine'}"]
    res = invoke_in(other, ["check", "--no-cache", *engine, "--fix", "--unsafe-fixes", "docker/patch/latest/eng.patch"])
    assert "fixes not written" not in res.stderr, res.stderr
    latest = other / "docker/patch/latest"
    assert latest.joinpath("eng.patch").read_text() != ENG
    tree = tmp_path / "oracle2"
    shutil.copytree(tmp_path / "other" / "engine", tree)
    assert git_apply(tree, latest / "eng.patch", latest / "eng-b.patch") == [0, 0]


def test_plan_of_one_patch_shows_its_set_and_only_python_seds(tmp_path):
    root = make_repo(tmp_path)
    write_tree(
        root,
        {
            "build.sh": "sed -i '/^ *- nodefaults$/d' ~/.condarc\n"
            "sed -i 's/a/b/' /etc/apt/sources.list\n"
            "sed -i 's/x = 1/x = 2/' /usr/lib/python3/site-packages/sglang/x.py\n"
        },
    )
    one = invoke_in(root, ["plan", "docker/patch/latest/eng-b.patch"])
    assert one.exit_code == 0, one.output
    assert "docker/Dockerfile:6: sglang (1.0) in /sgl-workspace/sglang" in one.output, one.output
    assert "  2. docker/patch/latest/eng-b.patch  [git apply]" in one.output
    assert "v0.9" not in one.output and "sed" not in one.output  # another folder's, the root's seds: not its own
    whole = invoke_in(root, ["plan"])
    assert "sed edits of Python files:" in whole.output and "(None)" not in whole.output
    assert ".condarc" not in whole.output and "sources.list" not in whole.output
    seds = json.loads(invoke_in(root, ["plan", "--format", "json"]).output)["sed"]
    assert seds[0]["files"] == ["~/.condarc"]  # the shell's home: kept as written, never under the repository


def test_the_engine_a_version_folder_needs_comes_from_engine_for(tmp_path, monkeypatch):
    """`engine_for` is the one place an engine is found by version: what it returns is
    added to the run's engines (the resolver of NAME==VERSION answers there)."""
    from patchaudit.config.settings import EngineSpec
    from patchaudit.pipeline import plan_engines

    root = make_repo(tmp_path)
    asked = []

    def found(plan, name, version, settings, notes=None, download=True):
        asked.append((name, version))
        return EngineSpec(name, str(tmp_path / "engine09")) if version == "0.9" else None

    monkeypatch.setattr(plan_engines, "engine_for", found)
    res = invoke_in(root, ["check", "--no-cache", "--engine", f"sglang={tmp_path / 'engine'}", "docker/patch/"])
    assert asked == [("sglang", "0.9")], asked  # 1.0 is the engine given: not asked
    assert "docker/patch/v0.9/eng.patch -> sglang 0.9, git apply" in res.stdout, res.stdout
    assert f"engine sglang 0.9 for the plan: {tmp_path / 'engine09'}" in " ".join(res.stdout.split())
