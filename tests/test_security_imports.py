"""Where local rules (`extend-rules`) are imported from, in a hostile checkout (SECURITY.md,
"The one place code from the checked tree is imported"): only the run's configuration
(the one at the project root, or `--config`), never a nested `pyproject.toml` that the
first path named; never a rule-folder member that is a symlink out of the
configuration's folder; never by `plan`, `tokens` or `inventory`, which run no rule.
Each rule module here leaves a marker file when it is imported."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchaudit.config import local_rules
from patchaudit.config.settings import find_pyproject, project_root
from patchaudit.testing import invoke_in, write_tree

RULE = """\
from patchaudit.lint.rule import Rule
from patchaudit.model.findings import Severity
open({marker!r}, "w").close()


class Acme(Rule):
    \"\"\"
    Flags nothing.

    ## What it does
    Nothing.
    \"\"\"

    code = "ACME101"
    name = "acme"
    severity = Severity.WARNING
"""


@pytest.fixture(autouse=True)
def no_local_rules_left():
    yield
    local_rules.activate({})
    import sys

    for name in [n for n in sys.modules if n.startswith(local_rules.PACKAGE)]:
        del sys.modules[name]


def _marker_rule(marker: Path) -> str:
    return RULE.format(marker=str(marker))


@pytest.mark.parametrize("member", ["acme.py", "_helpers.py", "__init__.py", "pkg/acme.py"])
def test_a_rule_folder_member_symlinked_out_is_not_imported(tmp_path, member):
    marker = tmp_path / "imported"
    outside = tmp_path / "outside"
    write_tree(outside, {"evil.py": _marker_rule(marker)})
    root = tmp_path / "repo"
    write_tree(
        root,
        {
            "pyproject.toml": '[tool.patchaudit]\nextend-rules = ["rules"]\n',
            "rules/own.py": "from . import _helpers  # noqa\n" if member == "_helpers.py" else "x = 1\n",
            "a.py": "x = 1\n",
        },
    )
    link = root / "rules" / member
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside / "evil.py")
    res = invoke_in(root, ["check", "--no-cache", "a.py"])
    assert not marker.exists()
    assert res.exit_code == 2 and "symlink out of the folder" in res.stderr and member in res.stderr, res.stderr
    assert "extend-rules" in res.stderr and "pyproject.toml" in res.stderr


def _nested(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "imported"
    root = tmp_path / "repo"
    write_tree(
        root,
        {
            "pyproject.toml": '[tool.patchaudit]\nselect = ["PA101"]\n',
            "a.py": "x = 1\n",
            "sub/b.py": "y = 2\n",
            "sub/pyproject.toml": '[tool.patchaudit]\nextend-rules = ["r"]\n',
            "sub/r/evil.py": _marker_rule(marker),
        },
    )
    return root, marker


@pytest.mark.parametrize("paths", [["sub/b.py", "a.py"], ["sub/b.py"], ["sub"]])
def test_a_nested_configuration_named_by_the_paths_is_not_the_runs(tmp_path, paths):
    """`check sub/b.py a.py` (and pre-commit's `check sub/b.py`, the changed files) run with
    the project root's configuration: sub/pyproject.toml loads nothing."""
    root, marker = _nested(tmp_path)
    res = invoke_in(root, ["check", "--no-cache", *paths])
    assert not marker.exists()
    assert res.exit_code == 0, res.stderr
    old = os.getcwd()
    os.chdir(root)
    try:
        assert find_pyproject(paths) == root / "pyproject.toml"
        assert project_root(paths) == str(root)
    finally:
        os.chdir(old)


def test_a_project_named_from_outside_it_uses_its_own_configuration(tmp_path):
    """`check repo/sub` from a folder that is no project: the configuration above the paths."""
    root, _ = _nested(tmp_path)
    (root / "sub" / "pyproject.toml").unlink()
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert find_pyproject(["repo/sub/b.py", "repo/a.py"]) == Path("repo/pyproject.toml").absolute()
    finally:
        os.chdir(old)


def test_a_symlinked_folder_below_the_current_one_does_not_choose_the_configuration(tmp_path):
    marker = tmp_path / "imported"
    outside = tmp_path / "outside"
    write_tree(
        outside,
        {"pyproject.toml": '[tool.patchaudit]\nextend-rules = ["r"]\n', "r/evil.py": _marker_rule(marker), "b.py": ""},
    )
    root = tmp_path / "repo"
    write_tree(root, {"a.py": "x = 1\n", ".git/HEAD": "ref: refs/heads/main\n"})
    (root / "vendor").symlink_to(outside, target_is_directory=True)
    invoke_in(root, ["check", "--no-cache", "vendor"])
    assert not marker.exists()


@pytest.mark.parametrize(
    "command",
    [["plan", "."], ["inventory", "."], ["tokens", "rollouts.jsonl"]],
    ids=["plan", "inventory", "tokens"],
)
def test_commands_that_run_no_rule_import_no_local_rule(tmp_path, command):
    marker = tmp_path / "imported"
    root = tmp_path / "repo"
    write_tree(
        root,
        {
            "pyproject.toml": '[tool.patchaudit]\nextend-rules = ["r"]\ntokenizer = "missing-tokenizer.json"\n',
            "r/evil.py": _marker_rule(marker),
            "a.py": "x = 1\n",
            "rollouts.jsonl": '{"tokens": [1, 2]}\n',
        },
    )
    invoke_in(root, command)
    assert not marker.exists()
    invoke_in(root, ["check", "--no-cache", "a.py"])  # the configuration does load them for check
    assert marker.exists()
