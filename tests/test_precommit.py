"""patchaudit as a pre-commit hook, run by the real `pre-commit` package.

`pre-commit try-repo` installs the hook repository into its own virtualenv
(`language: python`: `pip install .`) and runs the hook in a temporary git
repository made here.  The hook repository is this checkout's working tree
(pyproject.toml, README, the package, the rule pack, .pre-commit-hooks.yaml)
copied into a git repository of its own: try-repo on the checkout itself
would only see committed and tracked files, and the test must exercise the
code under test.

try-repo always installs into a fresh temporary store (about 20 s here), so
it runs once; the other runs use the hook the way an RL repository does, from
its `.pre-commit-config.yaml` (`repo:` this copy, `rev:` its commit), with
PRE_COMMIT_HOME in pytest's cache folder.  The copy's path and commit depend
only on its content, so that virtualenv is reused until the code changes.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import git
import pytest
import yaml

from patchaudit.inputs.discover import classify

REPO = Path(__file__).resolve().parents[1]
SOURCES = ["pyproject.toml", "README.md", "LICENSE", "setup.cfg", "MANIFEST.in", ".pre-commit-hooks.yaml",
           "patchaudit", "rules"]
FIXED_DATE = "2025-01-01T00:00:00+0000"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="pre-commit needs git")


def _source_files() -> list[tuple[str, bytes]]:
    out = []
    for name in SOURCES:
        p = REPO / name
        if p.is_file():
            out.append((name, p.read_bytes()))
        elif p.is_dir():
            for f in sorted(p.rglob("*")):
                rel = f.relative_to(REPO)
                if f.is_file() and "__pycache__" not in rel.parts and not f.name.endswith((".pyc", ".pyo")) \
                        and not any(part.endswith(".egg-info") for part in rel.parts):
                    out.append((rel.as_posix(), f.read_bytes()))
    return out


@pytest.fixture(scope="module")
def hook_env(request, tmp_path_factory):
    """(hook repository, PRE_COMMIT_HOME) for this checkout's current content."""
    files = _source_files()
    h = hashlib.sha256()
    for rel, data in files:
        h.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
    digest = h.hexdigest()[:16]
    try:
        base = Path(request.config.cache.mkdir("patchaudit-precommit"))
    except Exception:  # cache provider disabled
        base = tmp_path_factory.mktemp("precommit")
    for old in base.glob("*"):
        if old.name != digest:
            shutil.rmtree(old, ignore_errors=True)
    root = base / digest
    repo_dir, home = root / "hookrepo", root / "home"
    if not (repo_dir / ".git").exists():
        shutil.rmtree(root, ignore_errors=True)
        repo_dir.mkdir(parents=True)
        for rel, data in files:
            p = repo_dir / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        repo = git.Repo.init(repo_dir)
        repo.index.add([rel for rel, _ in files])
        actor = git.Actor("patchaudit tests", "tests@patchaudit.invalid")
        repo.index.commit("hook repository under test", author=actor, committer=actor,
                          author_date=FIXED_DATE, commit_date=FIXED_DATE)
    return repo_dir, home


def _pre_commit(hook_env, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PRE_COMMIT_HOME=str(hook_env[1]), PRE_COMMIT_COLOR="never", NO_COLOR="1")
    env.pop("PRE_COMMIT", None)
    return subprocess.run([sys.executable, "-m", "pre_commit", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL)


def try_repo(hook_env, cwd: Path, hook: str) -> subprocess.CompletedProcess:
    """`pre-commit try-repo HOOK-REPO HOOK --all-files` (a fresh install each time)."""
    return _pre_commit(hook_env, cwd, "try-repo", str(hook_env[0]), hook, "--all-files", "--verbose")


def run_hook(hook_env, cwd: Path, hook: str) -> subprocess.CompletedProcess:
    """`pre-commit run HOOK --all-files` with a config that pins the hook repository."""
    repo_dir = hook_env[0]
    rev = git.Repo(repo_dir).head.commit.hexsha
    config = Path(cwd) / ".pre-commit-config.yaml"
    config.write_text(f"repos:\n  - repo: {repo_dir}\n    rev: {rev}\n    hooks:\n"
                      f"      - id: patchaudit\n      - id: patchaudit-diff\n")
    git.Repo(cwd).index.add([".pre-commit-config.yaml"])
    return _pre_commit(hook_env, cwd, "run", hook, "--all-files", "--verbose")


GOOD_PATCH = """\
--- a/python/sglang/srt/multimodal/processors/qwen_vl.py
+++ b/python/sglang/srt/multimodal/processors/qwen_vl.py
@@ -10,3 +10,3 @@ class QwenVLImageProcessor:
     async def process(self, text, images, ids):
-        out = await self.load_mm_data(prompt=text, image_data=images)
+        out = await self.load_mm_data(prompt=text, image_data=images, input_ids=ids)
         return out
"""
BAD_PATCH = GOOD_PATCH.replace("self.load_mm_data(prompt=text, image_data=images, input_ids=ids)",
                               "self.legacy_load_mm_data(prompt=text, image_data=images)")


def user_repo(path: Path, files: dict[str, str]) -> git.Repo:
    repo = git.Repo.init(path)
    add(repo, files)
    return repo


def add(repo: git.Repo, files: dict[str, str]) -> None:
    for name, text in files.items():
        p = Path(repo.working_tree_dir) / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    repo.index.add(list(files))


FILES = {
    "slime/rollout.py": "def f(ids):\n    return list(ids)\n",
    "NOTES.txt": "not a file patchaudit reads: the hook's `files` pattern must leave it out\n",
}


def test_try_repo_fails_on_a_bad_patch(hook_env, tmp_path):
    user_repo(tmp_path, {"docker/patch/latest/sglang.patch": BAD_PATCH, **FILES})
    bad = try_repo(hook_env, tmp_path, "patchaudit")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert re.search(r"^patchaudit\.+Failed$", bad.stdout, re.M), bad.stdout
    assert "docker/patch/latest/sglang.patch:6:" in bad.stdout and "PA101" in bad.stdout


def test_hook_passes_on_a_clean_patch_and_fails_on_bad_ones(hook_env, tmp_path):
    repo = user_repo(tmp_path, {"docker/patch/latest/sglang.patch": GOOD_PATCH, **FILES})
    ok = run_hook(hook_env, tmp_path, "patchaudit")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert re.search(r"^patchaudit\.+Passed$", ok.stdout, re.M), ok.stdout

    add(repo, {"docker/patch/latest/sglang.patch": BAD_PATCH})
    bad = run_hook(hook_env, tmp_path, "patchaudit")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert re.search(r"^patchaudit\.+Failed$", bad.stdout, re.M), bad.stdout
    assert "docker/patch/latest/sglang.patch:6:" in bad.stdout and "PA101" in bad.stdout

    add(repo, {"docker/patch/latest/sglang.patch": GOOD_PATCH.replace("@@ -10,3 +10,3 @@", "@@ -10,4 +10,4 @@")})
    broken = run_hook(hook_env, tmp_path, "patchaudit")
    assert broken.returncode == 1 and "PA301" in broken.stdout, broken.stdout


def test_diff_hook_reports_only_what_the_commit_changes(hook_env, tmp_path):
    repo = user_repo(tmp_path, {"legacy/old.patch": BAD_PATCH})
    repo.index.commit("legacy patch set with a known finding")
    # nothing staged changes a line with a finding: the legacy finding does not block the commit
    add(repo, {"legacy/new.py": "x = 1\n"})
    ok = run_hook(hook_env, tmp_path, "patchaudit-diff")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    add(repo, {"rollout.py": "out = legacy_load_mm_data(prompt=t)\n"})
    bad = run_hook(hook_env, tmp_path, "patchaudit-diff")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "rollout.py:1:" in bad.stdout and "old.patch" not in bad.stdout


@pytest.mark.parametrize("name", [
    "a.patch", "x/B.DIFF", "m.py", "t.pyi", "run.sh", "r.bash", "c.yaml", "c.yml", "Dockerfile", "x/Dockerfile.gpu",
    "img.dockerfile", "Containerfile", ".env", "x/.env.local", "prod.env",
    "README.md", "a.txt", "setup.cfg", "x.patch.orig", "envs/README", "Dockerfile/readme.md", "a.python",
])
def test_hook_files_pattern_matches_what_patchaudit_reads(name):
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    for hook in hooks:
        pattern = re.compile(hook["files"])
        assert bool(pattern.search(name)) == (classify(name) is not None), (hook["id"], name)


def test_documented_snippets_parse_and_name_real_hooks():
    doc = (REPO / "docs" / "workflow.md").read_text()
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", doc, re.S)]
    ids = {h["id"] for h in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
    configs = [b for b in blocks if isinstance(b, dict) and "repos" in b]
    assert configs and all(h["id"] in ids for c in configs for r in c["repos"] for h in r["hooks"])
    workflows = [b for b in blocks if isinstance(b, dict) and "jobs" in b]
    (wf,) = workflows
    steps = wf["jobs"]["patchaudit"]["steps"]
    assert any(s.get("uses", "").startswith("github/codeql-action/upload-sarif") for s in steps)
    assert any("--format sarif" in s.get("run", "") for s in steps)
    assert any("--format github" in s.get("run", "") for s in steps)


def test_hook_on_a_commit_of_one_stacked_patch_checks_it_on_its_set(hook_env, tmp_path):
    """pre-commit passes the one changed file: patchaudit still reads the Dockerfile at the
    root and checks `eng-b.patch` on top of `eng.patch`, with `git apply`, as the build
    (and the root run) does; real git is the oracle that it needs `eng.patch` under it."""
    engine = tmp_path / "engine"
    tools = "".join(f"def tool_{i}(x):\n    return x + {i}\n\n\n" for i in range(6))
    engine_files = {"python/sglang/__init__.py": "", "python/sglang/version.py": '__version__ = "1.0"\n',
                    "python/sglang/srt/__init__.py": "", "python/sglang/srt/tools.py": tools}
    user_repo(engine, engine_files).index.commit("engine")
    head = ("diff --git a/python/sglang/srt/tools.py b/python/sglang/srt/tools.py\n"
            "--- a/python/sglang/srt/tools.py\n+++ b/python/sglang/srt/tools.py\n@@ -19,6 +19,6 @@\n \n \n")
    first = head + " def tool_5(x):\n-    return x + 5\n+    return x + 50\n \n \n"
    second = head + "-def tool_5(x):\n+def tool_5(x, y=0):\n     return x + 50\n \n \n"
    dockerfile = ("FROM lmsysorg/sglang:v1.0\nARG PATCH_VERSION=latest\n"
                  "COPY docker/patch/${PATCH_VERSION}/eng*.patch /sgl-workspace/sglang/\n"
                  "RUN cd /sgl-workspace/sglang && for p in eng.patch eng-b.patch; do git apply $p; done\n")
    project = tmp_path / "project"
    repo = user_repo(project, {"docker/Dockerfile": dockerfile, "docker/patch/latest/eng.patch": first,
                               "docker/patch/latest/eng-b.patch": second})
    alone = subprocess.run(["git", "apply", "--check", str(project / "docker/patch/latest/eng-b.patch")],
                           cwd=engine, capture_output=True)
    assert alone.returncode == 1  # the oracle: eng-b.patch alone does not apply
    rev = git.Repo(hook_env[0]).head.commit.hexsha
    (project / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {hook_env[0]}\n    rev: {rev}\n    hooks:\n      - id: patchaudit\n"
        f"        args: [--no-cache, --engine, 'sglang={engine}']\n")
    repo.index.add([".pre-commit-config.yaml"])
    repo.index.commit("the set")
    add(repo, {"docker/patch/latest/eng-b.patch": "Keep tool_5's new argument.\n\n" + second})
    res = _pre_commit(hook_env, project, "run", "patchaudit", "--verbose")
    assert res.returncode == 0, res.stdout + res.stderr
    assert re.search(r"^patchaudit\.+Passed$", res.stdout, re.M), res.stdout
    assert "eng-b.patch -> sglang 1.0, git apply: 1 clean" in res.stdout, res.stdout
    assert "eng.patch ->" not in res.stdout  # only the commit's file is reported
