"""The GitHub Action (action.yml): a composite action that installs patchaudit from
its own checkout, checks, annotates and uploads SARIF.  Its shell steps are run here
with bash, as the runner would, against a small tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from patchaudit.commands.check import check

REPO = Path(__file__).resolve().parents[1]
ACTION = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))


def step(name: str) -> dict:
    return next(s for s in ACTION["runs"]["steps"] if s.get("name") == name or s.get("id") == name)


def test_composite_install_run_upload():
    assert ACTION["runs"]["using"] == "composite"
    uses = [s.get("uses", "") for s in ACTION["runs"]["steps"]]
    assert any(u.startswith("actions/setup-python@") for u in uses)
    assert any(u.startswith("github/codeql-action/upload-sarif@") for u in uses)
    install = step("Install patchaudit")
    assert install["env"]["PATCHAUDIT_SOURCE"] == "${{ github.action_path }}"
    assert "pip install" in install["run"]
    upload = step("Upload SARIF to code scanning")
    assert upload["with"]["sarif_file"] == "${{ inputs.sarif-file }}" and upload["if"].startswith("always()")
    for s in ACTION["runs"]["steps"]:  # inputs reach a script only through the environment
        assert "${{" not in s.get("run", ""), s.get("name")


def test_the_check_step_uses_options_that_exist():
    opts = {o for p in check.params for o in p.opts}
    script = step("check")["run"]
    for opt in ("--output-format", "--also"):
        assert opt in script and opt in opts


def shell(script: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-e", "-c", script], env={**os.environ, **env}, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def shim(tmp_path: Path) -> str:
    """A `patchaudit` on PATH that is this interpreter's patchaudit."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "patchaudit"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m patchaudit "$@"\n')
    exe.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"


def test_the_check_step_annotates_writes_sarif_and_records_the_exit_code(tmp_path):
    tree = tmp_path / "repo"
    tree.mkdir()
    (tree / "run.sh").write_text("export SGLANG_MM_AVOID_RETOKENIZE=0\n")
    out = tmp_path / "github_output"
    env = {"PATH": shim(tmp_path), "GITHUB_OUTPUT": str(out), "PATCHAUDIT_PATHS": ".",
           "PATCHAUDIT_ARGS": "--no-cache --severity warning", "PATCHAUDIT_SARIF": "patchaudit.sarif",
           "PATCHAUDIT_ANNOTATIONS": "true"}
    res = shell(step("check")["run"], env, tree)
    assert res.returncode == 0, res.stderr  # the step records the code; a later step exits with it
    assert "exit-code=1" in out.read_text()
    assert res.stdout.startswith("::error file=run.sh,line=1,")
    sarif = json.loads((tree / "patchaudit.sarif").read_text())
    assert [r["ruleId"] for r in sarif["runs"][0]["results"]] == ["PA104"]
    (tree / "run.sh").write_text("true\n")
    out.write_text("")
    assert shell(step("check")["run"], env, tree).returncode == 0 and "exit-code=0" in out.read_text()


def test_the_last_step_fails_on_findings_unless_told_not_to(tmp_path):
    script = step("Exit with patchaudit's code")["run"]
    assert shell(script, {"PATCHAUDIT_CODE": "1", "PATCHAUDIT_FAIL_ON_FINDINGS": "true"}, tmp_path).returncode == 1
    assert shell(script, {"PATCHAUDIT_CODE": "1", "PATCHAUDIT_FAIL_ON_FINDINGS": "false"}, tmp_path).returncode == 0
    assert shell(script, {"PATCHAUDIT_CODE": "2", "PATCHAUDIT_FAIL_ON_FINDINGS": "false"}, tmp_path).returncode == 2


def test_readme_documents_the_action_and_its_inputs():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "uses: <org>/patchaudit@" in readme
    for name in ACTION["inputs"]:
        assert f"`{name}`" in readme, name


def test_on_a_pull_request_only_the_lines_it_changes_are_annotated(tmp_path):
    """`github.base_ref` set: the base branch is fetched (depth 1) and `--diff-base` passed."""
    import git

    origin = tmp_path / "origin"
    repo = git.Repo.init(origin, initial_branch="main")
    (origin / "run.sh").write_text("export SGLANG_MM_AVOID_RETOKENIZE=0\n")
    repo.index.add(["run.sh"])
    repo.index.commit("base")
    tree = tmp_path / "pr"
    pr = git.Repo.clone_from(f"file://{origin}", tree, depth=1)
    pr.git.checkout("-b", "feature")
    (tree / "run.sh").write_text("export SGLANG_MM_AVOID_RETOKENIZE=0\nexport SGLANG_MM_AVOID_RETOKENIZE=false\n")
    pr.git.commit("-am", "pr")
    pr.git.update_ref("-d", "refs/remotes/origin/main")  # as actions/checkout leaves it: no base ref
    out = tmp_path / "github_output"
    env = {"PATH": shim(tmp_path), "GITHUB_OUTPUT": str(out), "PATCHAUDIT_PATHS": ".",
           "PATCHAUDIT_ARGS": "--no-cache", "PATCHAUDIT_SARIF": "patchaudit.sarif",
           "PATCHAUDIT_ANNOTATIONS": "true", "PATCHAUDIT_DIFF_BASE": "true", "PATCHAUDIT_BASE_REF": "main"}
    res = shell(step("check")["run"], env, tree)
    assert res.returncode == 0, res.stderr
    assert [line.split(",")[1] for line in res.stdout.splitlines() if line.startswith("::error")] == ["line=2"]
    assert "exit-code=1" in out.read_text()
    # diff-base: false, or a push (no base_ref): every finding
    for extra in ({"PATCHAUDIT_DIFF_BASE": "false"}, {"PATCHAUDIT_BASE_REF": ""}):
        res = shell(step("check")["run"], {**env, **extra}, tree)
        assert sum(line.startswith("::error") for line in res.stdout.splitlines()) == 2, res.stdout
    # a base that cannot be fetched: a warning, every finding
    res = shell(step("check")["run"], {**env, "PATCHAUDIT_BASE_REF": "no-such-branch"}, tree)
    assert "::warning::patchaudit: cannot fetch" in res.stdout
    assert sum(line.startswith("::error") for line in res.stdout.splitlines()) == 2
