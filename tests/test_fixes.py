"""`check --fix`, `--diff`, `--unsafe-fixes` end to end (patchaudit/pipeline/fix.py): on a
small engine tree and a patch set written here, the fixed patches still apply
(`git apply --check`, GNU `patch --dry-run`), the findings are gone, `--diff` prints
the same change and writes nothing, and nothing is written when a fix cannot be."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from patchaudit.model.findings import Edit, FileError, Finding, Fix, Severity
from patchaudit.pipeline.fix import FileFix, FixOutcome, fix_findings, write_fixes
from patchaudit.pipeline.results import RunResult
from patchaudit.testing import invoke_in, write_tree

pytestmark = pytest.mark.skipif(not (shutil.which("git") and shutil.which("patch")), reason="git and GNU patch")

VAR = "SGLANG_MM_AVOID_RETOKENIZE"
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
PROC = "".join(f"# filler {i}\n" for i in range(1, 9)) + (
    "def load(prompt):\n"
    "    ids = tokenize(prompt)\n"
    "    out = process(list(ids))\n"
    "    return out\n"
    "\n"
    "\n"
    "def tokenize(prompt):\n"
    "    text = prompt.strip()\n"
    "    return list(text)\n"
    "\n"
    "\n"
    "def process(ids):\n"
    "    return ids\n"
)
ENGINE = {
    "python/sglang/__init__.py": "",
    "python/sglang/srt/__init__.py": "",
    "python/sglang/srt/qwen_vl.py": QWEN,
    "python/sglang/srt/proc.py": PROC,
    "python/sglang/srt/other.py": "a = 1\nb = 2\nc = 3\n",
    "python/sglang/srt/other2.py": "a = 1\nb = 2\nc = 3\n",
    "docker/Dockerfile": "FROM lmsysorg/sglang:latest\nRUN pip install slime\n",
}
OTHER = """\
diff --git a/python/sglang/srt/other.py b/python/sglang/srt/other.py
--- a/python/sglang/srt/other.py
+++ b/python/sglang/srt/other.py
@@ -1,3 +1,3 @@
 a = 1
-b = 2
+b = 20
 c = 3
"""
RENAME = """\
diff --git a/python/sglang/srt/qwen_vl.py b/python/sglang/srt/qwen_vl.py
index 1111111..2222222 100644
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
"""
# against PROC: hunk 1 is already applied (upstream has `list(ids)`), hunk 2 applies with
# fuzz 1 and an offset (upstream renamed `text` in its last context line and added 8 lines on top)
ENGINE_PATCH = """\
--- a/python/sglang/srt/proc.py
+++ b/python/sglang/srt/proc.py
@@ -1,5 +1,5 @@
 def load(prompt):
     ids = tokenize(prompt)
-    out = process(ids)
+    out = process(list(ids))
     return out
\x20
@@ -7,3 +7,3 @@
 def tokenize(prompt):
-    text = prompt.strip()
+    text = prompt.strip().lower()
     return list(chars)
"""
DOCKER = f"""\
--- a/docker/Dockerfile
+++ b/docker/Dockerfile
@@ -1,2 +1,3 @@
 FROM lmsysorg/sglang:latest
+ENV {VAR}=0
 RUN pip install slime
"""


def _setup(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    write_tree(root / "engine", ENGINE)
    subprocess.run(["git", "init", "-q", str(root / "engine")], check=True)
    write_tree(
        root,
        {
            "patches/rename.patch": RENAME + OTHER,
            # not OTHER's file: the folder's patches are one set (PA304 judges it whole)
            "patches/engine.patch": ENGINE_PATCH + OTHER.replace("other.py", "other2.py"),
            "patches/docker.patch": DOCKER,
            "train.py": "x = 1  # patchaudit: ignore[PA999]\n",
        },
    )
    return root


def _applies(root: Path, patch: str) -> tuple[bool, bool]:
    """(git apply --check, patch -p1 --dry-run with fuzz 0) accept `patch` in the engine tree."""
    p = str(root / patch)
    engine = root / "engine"
    git = subprocess.run(["git", "apply", "--check", p], cwd=engine, capture_output=True)
    gnu = subprocess.run(["patch", "-p1", "--dry-run", "-F0", "-s", "-i", p], cwd=engine, capture_output=True)
    return git.returncode == 0, gnu.returncode == 0


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    }


def _codes(root: Path, *args: str) -> list[str]:
    import json

    res = invoke_in(root, ["check", "--no-cache", "--output-format", "json", *args])
    return [f["code"] for f in json.loads(res.stdout)]


def test_diff_prints_what_fix_writes_and_writes_nothing(tmp_path):
    root = _setup(tmp_path)
    before = _snapshot(root)
    args = ["check", "--no-cache", "--extend-select", "PA001", "patches/rename.patch", "train.py"]
    res = invoke_in(root, [*args, "--diff"])
    assert res.exit_code == 1, res.stderr
    assert _snapshot(root) == before  # nothing written
    assert "-+        base_output = await self.legacy_load_mm_data(" in res.stdout
    assert "-x = 1  # patchaudit: ignore[PA999]\n+x = 1\n" in res.stdout
    assert "Would fix 2 findings." in res.stderr
    # the printed diff is the change --fix makes
    copy = tmp_path / "copy"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".git"))
    (tmp_path / "fix.diff").write_text(res.stdout)
    subprocess.run(["git", "apply", "--unsafe-paths", str(tmp_path / "fix.diff")], cwd=copy, check=True)
    fixed = invoke_in(root, [*args, "--fix"])
    # one summary, the report's: a warning (PA001) is never called an error
    assert "Found 2 findings (2 fixed, 0 remaining) in 2 files." in fixed.stdout, fixed.stdout
    assert "Found" not in fixed.stderr and fixed.stdout.count("Found") == 1
    assert fixed.exit_code == 0
    assert _snapshot(root) == _snapshot(copy)
    assert invoke_in(root, [*args, "--diff"]).exit_code == 0  # nothing left to fix


def test_fix_reverts_the_rename_and_the_patch_still_applies(tmp_path):
    root = _setup(tmp_path)
    assert _applies(root, "patches/rename.patch") == (True, True)
    assert "PA101" in _codes(root, "patches/rename.patch")
    res = invoke_in(root, ["check", "--no-cache", "--fix", "patches/rename.patch"])
    assert res.exit_code == 0, res.stdout + res.stderr
    assert (root / "patches/rename.patch").read_text() == OTHER
    assert _applies(root, "patches/rename.patch") == (True, True)
    assert "PA101" not in _codes(root, "patches/rename.patch")


def test_engine_fixes_drop_applied_hunks_and_refresh_fuzzed_ones(tmp_path):
    root = _setup(tmp_path)
    engine = ["--engine", "sglang=engine"]
    # upstream added 8 lines on top and changed the fuzzed hunk's last context line
    (root / "engine/python/sglang/srt/proc.py").write_text(PROC.replace("list(text)", "list(text)  # chars"))
    subprocess.run(["git", "-C", str(root / "engine"), "add", "-A"], check=True, capture_output=True)
    codes = _codes(root, *engine, "patches/engine.patch")
    assert "PA208" in codes and "PA202" in codes
    assert _applies(root, "patches/engine.patch") == (False, False)
    res = invoke_in(root, ["check", "--no-cache", *engine, "--fix", "patches/engine.patch"])
    assert "2 fixed" in res.stdout, res.stdout
    assert "Hunks: " in res.stdout and "fuzz" not in res.stdout and "already-applied" not in res.stdout
    text = (root / "patches/engine.patch").read_text()
    assert "process(ids)" not in text  # the applied hunk is gone
    assert "@@ -15,3 +15,3 @@\n" in text and "     return list(text)  # chars\n" in text  # refreshed
    assert _applies(root, "patches/engine.patch") == (True, True)
    codes = _codes(root, *engine, "patches/engine.patch")
    assert "PA208" not in codes and "PA202" not in codes


def test_unsafe_fixes_only_when_asked(tmp_path):
    root = _setup(tmp_path)
    res = invoke_in(root, ["check", "--no-cache", "--fix", "patches/docker.patch"])
    assert res.exit_code == 1
    hint = "No fixes available (1 hidden fix can be enabled with the `--unsafe-fixes` option)."
    assert hint in " ".join(res.stdout.split())  # wrapped to the width
    assert (root / "patches/docker.patch").read_text() == DOCKER
    res = invoke_in(root, ["check", "--no-cache", "--fix", "--unsafe-fixes", "patches/docker.patch"])
    assert res.exit_code == 0, res.stderr
    assert (root / "patches/docker.patch").read_text() == DOCKER.replace(f"{VAR}=0", f"{VAR}=1")
    assert _applies(root, "patches/docker.patch") == (True, True)


def test_overlapping_fixes_are_applied_over_passes(tmp_path):
    root = _setup(tmp_path)
    (root / "env.py").write_text(f'os.environ["{VAR}"] = "0"  # patchaudit: ignore[PA999]\n')
    res = invoke_in(root, ["check", "--no-cache", "--extend-select", "PA001", "--fix", "--unsafe-fixes", "env.py"])
    assert (root / "env.py").read_text() == f'os.environ["{VAR}"] = "1"\n'
    assert "2 fixed, 0 remaining" in res.stdout


def _finding(path: str, fix: Fix, code: str = "PA104") -> Finding:
    return Finding(code, "x", Severity.ERROR, "m", path, 1, fix=fix)


def test_a_fix_that_breaks_the_file_is_dropped(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(f'import os\nos.environ["{VAR}"] = "0"\n')
    from patchaudit.config.settings import Settings

    bad = Fix("break it", (Edit(2, 2, ("os.environ[",)),), safe=False)
    run = RunResult(findings=[_finding("a.py", bad)], files=1)
    out = fix_findings(run, Settings(cache=False, jobs=1), unsafe=True)
    assert out.changed == [] and out.fixed == 0
    assert any("fix dropped" in m and "a.py:1" in m for m in out.messages), out.messages
    # a file the run reported an error for is not touched
    run.errors.append(FileError("a.py", "boom"))
    good = Fix("ok", (Edit(2, 2, (f'os.environ["{VAR}"] = "1"',)),), safe=False)
    run.findings = [_finding("a.py", good)]
    out = fix_findings(run, Settings(cache=False, jobs=1), unsafe=True)
    assert out.changed == [] and "not fixed" in out.messages[0]


def test_nothing_is_written_when_one_file_cannot_be(tmp_path):
    (tmp_path / "a.py").write_text("old\n")
    outcome = FixOutcome(
        files=[
            FileFix(str(tmp_path / "a.py"), "old\n", "new\n", 1),
            FileFix(str(tmp_path / "missing" / "b.py"), "old\n", "new\n", 1),
        ]
    )
    errors = write_fixes(outcome)
    assert errors and "no file was changed" in errors[0].message
    assert (tmp_path / "a.py").read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["a.py"]  # no temporary file left


def test_fix_refuses_standard_input(tmp_path):
    res = invoke_in(tmp_path, ["check", "--fix", "-", "--stdin-filename", "x.py"])
    assert res.exit_code == 2 and "standard input" in res.stderr


def test_fix_declarations():
    """A rule's fixes count only as its class declares them (ruff's FixAvailability)."""
    from patchaudit.config.registry import all_rules
    from patchaudit.pipeline.fix import effective_fix

    rules = all_rules()
    declared = {code: r.fix for code, r in rules.items() if r.fix is not None}
    assert declared == {"PA001": "safe", "PA101": "safe", "PA104": "unsafe", "PA202": "safe", "PA208": "safe"}
    for code, rule in rules.items():  # an example that expects a fix belongs to a rule that declares one
        if any(ex.expected_fix is not None for ex in rule.INVALID):
            assert rule.fix is not None, code
    fx = Fix("f", (Edit(1, 1, ("x",)),), safe=True)
    assert effective_fix(_finding("a.py", fx, "PA104"), rules).safe is False  # the rule says unsafe
    assert effective_fix(_finding("a.py", fx, "PA201"), rules) is None  # PA201 declares no fix
    assert effective_fix(_finding("a.py", fx, "PA001"), rules) is fx
