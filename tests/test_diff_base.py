"""`--diff-base REF`: only findings on lines added or changed since REF (real git repositories)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import git
import pytest

from patchaudit.testing import invoke_in
from patchaudit.inputs.diffbase import parse_unified0




def cli(root: Path, *args: str):
    return invoke_in(root, ["check", "--no-cache", *args])


def found(root: Path, *args: str) -> list[tuple[str, int, str]]:
    res = cli(root, "--format", "json", *args)
    assert res.exit_code in (0, 1), res.stderr
    return [(f["path"], f["line"], f["code"]) for f in json.loads(res.stdout)]


def commit(repo: git.Repo, files: dict[str, str], message: str) -> None:
    root = Path(repo.working_tree_dir)
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    repo.index.add(list(files))
    repo.index.commit(message)


ROLLOUT_V1 = '''\
class Rollout:
    async def a(self, text):
        return await self.legacy_load_mm_data(prompt=text)

    async def b(self, text, ids):
        return await self.legacy_load_mm_data(
            prompt=text,
            input_ids=ids,
        )
'''
# the commit adds a new bad call and drops input_ids= from a multi-line call
ROLLOUT_V2 = '''\
class Rollout:
    async def a(self, text):
        return await self.legacy_load_mm_data(prompt=text)

    async def b(self, text, ids):
        return await self.legacy_load_mm_data(
            prompt=text,
        )

    async def c(self, text):
        return await self.legacy_load_mm_data(prompt=text)
'''

HUNK = """\
@@ -{start},3 +{start},3 @@ class P:
     def f(self):
-        out = self.load_mm_data(prompt=text)
+        out = self.legacy_load_mm_data(prompt=text)
         return out
"""
HEADER = "--- a/python/sglang/srt/{name}.py\n+++ b/python/sglang/srt/{name}.py\n"
PATCH_V1 = HEADER.format(name="x") + HUNK.format(start=10)
# regenerated: the old hunk moved (new offsets), one new hunk with the same problem in another file
PATCH_V2 = (HEADER.format(name="x") + HUNK.format(start=14) + HEADER.format(name="y")
            + HUNK.format(start=3).replace("def f(self)", "def g(self, text)").replace("return out", "return [out]"))


@pytest.fixture
def repo(tmp_path):
    r = git.Repo.init(tmp_path)
    commit(r, {"rollout.py": ROLLOUT_V1, "patches/sglang.patch": PATCH_V1,
               "old.sh": "export SGLANG_MM_AVOID_RETOKENIZE=0\n"}, "legacy code with findings")
    return r


def test_reports_only_findings_introduced_by_the_last_commit(repo, tmp_path):
    commit(repo, {"rollout.py": ROLLOUT_V2, "patches/sglang.patch": PATCH_V2,
                  "new.sh": "export SGLANG_MM_AVOID_RETOKENIZE=false\n"}, "the change under review")
    everything = found(tmp_path, ".")
    assert everything == [
        ("new.sh", 1, "PA104"), ("old.sh", 1, "PA104"),
        (os.path.join("patches", "sglang.patch"), 6, "PA101"),
        (os.path.join("patches", "sglang.patch"), 13, "PA101"),
        ("rollout.py", 3, "PA101"), ("rollout.py", 6, "PA101"), ("rollout.py", 11, "PA101"),
    ]
    assert found(tmp_path, "--diff-base", "HEAD~1", ".") == [
        ("new.sh", 1, "PA104"),
        (os.path.join("patches", "sglang.patch"), 13, "PA101"),   # the new hunk, not the moved one
        ("rollout.py", 6, "PA101"),     # input_ids= deleted from this call
        ("rollout.py", 11, "PA101"),    # the new call
    ]
    assert cli(tmp_path, "--diff-base", "HEAD", ".").exit_code == 0   # nothing changed since HEAD


def test_uncommitted_and_untracked_changes_count(repo, tmp_path):
    (tmp_path / "rollout.py").write_text(ROLLOUT_V1 + "\nx = legacy_load_mm_data(prompt=t)\n")
    (tmp_path / "scratch.py").write_text("y = legacy_load_mm_data(prompt=t)\n")
    (tmp_path / ".gitignore").write_text("ignored.py\n")
    (tmp_path / "ignored.py").write_text("z = legacy_load_mm_data(prompt=t)\n")
    assert found(tmp_path, "--diff-base", "HEAD", ".") == [("rollout.py", 11, "PA101"), ("scratch.py", 1, "PA101")]


def test_paths_below_the_repository_root(repo, tmp_path):
    commit(repo, {"patches/sglang.patch": PATCH_V2}, "regenerate")
    assert found(tmp_path / "patches", "--diff-base", "HEAD~1", ".") == [("sglang.patch", 13, "PA101")]
    assert found(tmp_path, "--diff-base", "HEAD~1", "patches/sglang.patch") == [
        (os.path.join("patches", "sglang.patch"), 13, "PA101")]


def test_a_renamed_file_brings_no_new_findings(repo, tmp_path):
    repo.index.move(["rollout.py", "agent_rollout.py"])
    repo.index.commit("rename")
    assert found(tmp_path, "--diff-base", "HEAD~1", ".") == []


def test_works_with_branch_names_and_shas(repo, tmp_path):
    base = repo.head.commit.hexsha
    repo.create_head("base")
    commit(repo, {"rollout.py": ROLLOUT_V2}, "change")
    expect = [("rollout.py", 6, "PA101"), ("rollout.py", 11, "PA101")]
    assert found(tmp_path, "--diff-base", "base", ".") == expect
    assert found(tmp_path, "--diff-base", base[:12], ".") == expect


@pytest.mark.parametrize("ref,needle", [
    ("no-such-branch", "not a commit"),
    ("--output={tmp}/leak", "not a usable git revision"),
    ("-p", "not a usable git revision"),
    ("HEAD~5", "not a commit"),
])
def test_bad_revisions_exit_2(repo, tmp_path, ref, needle):
    res = cli(tmp_path, f"--diff-base={ref.format(tmp=tmp_path)}", ".")
    assert res.exit_code == 2 and needle in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "leak").exists()   # never handed to git as an option


def test_outside_a_repository_exits_2(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    res = cli(tmp_path, "--diff-base", "HEAD", ".")
    assert res.exit_code == 2 and "not inside a git repository" in res.stderr


def test_diff_base_and_baseline_together(repo, tmp_path):
    commit(repo, {"rollout.py": ROLLOUT_V2}, "change")
    assert cli(tmp_path, "--write-baseline", "b.json", "rollout.py").exit_code == 0
    assert found(tmp_path, "--diff-base", "HEAD~1", "--baseline", "b.json", ".") == []


def test_parse_unified0():
    text = (
        "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -3 +3 @@\n-x\n+y\n@@ -10,2 +9,0 @@\n-a\n-b\n"
        "@@ -20,0 +19,3 @@\n+1\n+2\n+3\n"
        "diff --git a/gone.py b/gone.py\n--- a/gone.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"
        'diff --git "a/sp ace\\303\\251.py" "b/sp ace\\303\\251.py"\n--- "a/sp ace\\303\\251.py"\n'
        '+++ "b/sp ace\\303\\251.py"\n@@ -1 +1 @@\n-x\n+y\n'
    )
    assert parse_unified0(text) == {"a.py": {3, 10, 19, 20, 21}, "sp aceé.py": {1}}


def test_head_of_a_repository_without_commits_means_everything_is_new(tmp_path):
    # the first commit of a new repository, through a pre-commit hook's --diff-base HEAD
    r = git.Repo.init(tmp_path)
    (tmp_path / "a.py").write_text("x = legacy_load_mm_data(prompt=t)\n")
    r.index.add(["a.py"])
    assert found(tmp_path, "--diff-base", "HEAD", ".") == [("a.py", 1, "PA101")]
    res = cli(tmp_path, "--diff-base", "HEAD~1", ".")
    assert res.exit_code == 2 and "not a commit" in res.stderr
