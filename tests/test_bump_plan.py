"""`bump` with no versions given (patchaudit/pipeline/bump_plan.py): `bump --diff-base REF` on
a GitPython repository whose last commit moves the Dockerfile's pin and the patch folder,
compared with the explicit `bump PATCHES --engine sglang --from OLD --to NEW`; `bump --to`;
the engines found by version in an `--engine-dir` of wheels the test built, `--offline`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import git
import pytest
from click.testing import CliRunner
from enginewheels import build_wheel
from test_bump import PROC_PATCH, SEED_PATCH, TREE_V1, _tree_v2

from patchaudit.cli import main
from patchaudit.engine import resolve

DOCKERFILE = """\
FROM python:3.11
ARG PATCH_VERSION={v}
RUN pip install sglang=={v}
COPY docker/patch/${{PATCH_VERSION}}/sglang*.patch /sgl-workspace/sglang/
RUN cd /sgl-workspace/sglang && \\
    for p in sglang.patch sglang-scheduler.patch; do git apply "$p"; done
"""


def _wheel_tree(tree: dict[str, str]) -> dict[str, str]:
    return {k.removeprefix("python/"): v for k, v in tree.items()}


@pytest.fixture()
def project(tmp_path, monkeypatch):
    """wheels/ (sglang 0.1.0 and 0.2.0), and a repository at 0.1.0 (HEAD~1) moved to 0.2.0 (HEAD)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.delenv("PATCHAUDIT_OFFLINE", raising=False)
    resolve.clear()
    wheels = tmp_path / "wheels"
    old = build_wheel(wheels, "sglang", "0.1.0", _wheel_tree(TREE_V1))
    new = build_wheel(wheels, "sglang", "0.2.0", _wheel_tree(_tree_v2()))
    root = tmp_path / "proj"
    (root / "docker" / "patch" / "0.1.0").mkdir(parents=True)
    (root / "docker" / "Dockerfile").write_text(DOCKERFILE.format(v="0.1.0"))
    (root / "docker" / "patch" / "0.1.0" / "sglang.patch").write_text(SEED_PATCH)
    (root / "docker" / "patch" / "0.1.0" / "sglang-scheduler.patch").write_text(PROC_PATCH)
    repo = git.Repo.init(root)
    repo.index.add(["docker"])
    repo.index.commit("sglang 0.1.0")
    monkeypatch.chdir(root)
    yield root, repo, wheels, old, new
    resolve.clear()


def _move_to_020(root: Path, repo) -> None:
    """The pull request: the pin and the patch folder move to 0.2.0 (one patch refreshed)."""
    (root / "docker" / "Dockerfile").write_text(DOCKERFILE.format(v="0.2.0"))
    shutil.move(root / "docker" / "patch" / "0.1.0", root / "docker" / "patch" / "0.2.0")
    p = root / "docker" / "patch" / "0.2.0" / "sglang-scheduler.patch"
    p.write_text(p.read_text().replace("self.prepare(batch)", "self.prepare(batch)  "))
    repo.git.add("-A")
    repo.index.commit("bump sglang to 0.2.0")


def _run(*args: str):
    return CliRunner().invoke(main, ["bump", *args], catch_exceptions=False)


def _report(res) -> dict:
    assert res.exit_code in (0, 1), res.output + res.stderr
    return json.loads(res.stdout)


def test_diff_base_gives_the_report_of_the_explicit_bump(project):
    root, repo, wheels, old, new = project
    _move_to_020(root, repo)
    got = _run("--diff-base", "HEAD~1", "--engine-dir", str(wheels), "--offline", "--format", "json")
    pair = "docker/patch/0.2.0/sglang.patch", "docker/patch/0.2.0/sglang-scheduler.patch"
    want = _run(*pair, "--engine", "sglang", "--from", str(old), "--to", str(new), "--format", "json")
    assert _report(got) == _report(want)
    assert got.exit_code == want.exit_code == 1
    assert {f["code"] for f in _report(got)["findings"]} >= {"PA204", "PA203"}
    assert "sglang: 0.1.0 at HEAD~1 -> 0.2.0 (docker/Dockerfile:6)" in got.stderr
    assert "patches docker/patch/0.2.0 (were docker/patch/0.1.0)" in got.stderr
    assert f"--from sglang 0.1.0 (engine-dirs: {old})" in got.stderr
    # the text and markdown reports too
    for fmt in ("text", "markdown"):
        a = _run("--diff-base", "HEAD~1", "--engine-dir", str(wheels), "--offline", "--format", fmt)
        b = _run(*pair, "--engine", "sglang", "--from", str(old), "--to", str(new), "--format", fmt)
        assert a.stdout == b.stdout and a.exit_code == b.exit_code


def test_engine_dirs_of_the_configuration_and_a_download_with_pip(project, monkeypatch):
    root, repo, wheels, old, new = project
    _move_to_020(root, repo)
    (root / "pyproject.toml").write_text(f'[tool.patchaudit]\nengine-dirs = ["{wheels}"]\n')
    res = _run("--diff-base", "HEAD~1", "--format", "json")
    assert _report(res)["to"]["label"] == new.name and f"(engine-dirs: {new})" in res.stderr
    # a trusted configuration kept outside the repository (CI's --config): the project is still the repository
    trusted = root.parent / "trusted" / "pyproject.toml"
    trusted.parent.mkdir()
    trusted.write_text('[tool.patchaudit]\nengine-dirs = ["../wheels"]\noffline = true\n')
    res = _run("--diff-base", "HEAD~1", "--config", str(trusted), "--format", "json")
    assert _report(res)["to"]["label"] == new.name and "patches docker/patch/0.2.0" in res.stderr
    # no engine-dirs: pip (as configured: a folder of wheels, no index) into the user cache
    (root / "pyproject.toml").unlink()
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    res = _run("--diff-base", "HEAD~1", "--format", "json")
    cache = root.parent / "xdg" / "patchaudit" / "engines" / "sglang"
    assert _report(res)["from"]["label"] == old.name
    assert f"--from sglang 0.1.0 (downloaded: {cache / '0.1.0' / old.name})" in res.stderr
    assert "patchaudit: downloading sglang==0.1.0 with pip" in res.stderr
    assert (cache / "0.1.0" / old.name).read_bytes() == old.read_bytes()


def test_offline_without_the_engines_names_them_and_how_to_give_them(project):
    root, repo, wheels, old, new = project
    _move_to_020(root, repo)
    res = _run("--diff-base", "HEAD~1", "--offline")
    assert res.exit_code == 2
    assert "sglang 0.1.0: not in engine-dirs" in res.stderr
    assert "pip download --no-deps sglang==0.1.0 -d DIR" in res.stderr and "--engine sglang=PATH" in res.stderr


def test_to_alone_starts_from_the_plans_pin(project):
    root, repo, wheels, old, new = project
    got = _run("--to", "0.2.0", "--engine-dir", str(wheels), "--offline", "--format", "json")
    pair = "docker/patch/0.1.0/sglang.patch", "docker/patch/0.1.0/sglang-scheduler.patch"
    want = _run(*pair, "--engine", "sglang", "--from", str(old), "--to", str(new), "--format", "json")
    assert _report(got) == _report(want)
    # a path for --to works as before
    assert _report(_run("--to", str(new), "--engine-dir", str(wheels), "--format", "json")) == _report(want)


def test_nothing_moved_is_no_bump_and_a_bad_ref_is_an_error(project):
    root, repo, wheels, old, new = project
    (root / "notes.txt").write_text("x\n")
    repo.index.add(["notes.txt"])
    repo.index.commit("unrelated")
    res = _run("--diff-base", "HEAD~1", "--engine-dir", str(wheels))
    assert res.exit_code == 0 and "no engine pin changed since HEAD~1" in res.stderr and res.stdout == ""
    for ref in ("--output=x", "no-such-ref"):
        bad = _run("--diff-base", ref)
        assert bad.exit_code == 2 and "--diff-base" in bad.stderr


def test_bare_versions_in_the_explicit_form_are_found_by_version(project):
    root, repo, wheels, old, new = project
    pair = "docker/patch/0.1.0/sglang.patch", "docker/patch/0.1.0/sglang-scheduler.patch"
    bare = _run(*pair, "--engine", "sglang", "--from", "0.1.0", "--to", "0.2.0", "--engine-dir", str(wheels),
                "--offline", "--format", "json")
    want = _run(*pair, "--engine", "sglang", "--from", str(old), "--to", str(new), "--format", "json")
    assert _report(bare) == _report(want)
    missing = _run(*pair, "--engine", "sglang", "--from", "0.1.0", "--to", "0.3.0", "--engine-dir", str(wheels),
                   "--offline")
    assert missing.exit_code == 2 and "--to: sglang 0.3.0: not in engine-dirs" in missing.stderr


def test_pip_is_killed_past_its_timeout(tmp_path):
    from patchaudit.inputs.gitrun import ProgramError, run_pip

    with pytest.raises(ProgramError, match="did not finish in"):
        run_pip(["download", "--no-deps", "-d", str(tmp_path), "sglang==0.1.0"], cwd=str(tmp_path), timeout=0.01)
