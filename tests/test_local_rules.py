"""Local rules: `[tool.patchaudit] extend-rules` and `patchaudit test-rules` (issue 20).

The one place patchaudit imports code of the checked tree (SECURITY.md): only from
the run's configuration, only from inside its folder, only when configured.  Rules
that would leave a marker file when imported show where nothing is imported.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from patchaudit.cli import main
from patchaudit.config import local_rules
from patchaudit.testing import cli_runner

RULE = '''\
import libcst as cst
from libcst.metadata import PositionProvider

from patchaudit.lint.rule import Example, Rule
from patchaudit.model.findings import Severity
{extra}

class NoPrintTokens(Rule):
    """
    Flags printing a sample's token ids.

    ## What it does
    Reports `print(sample.tokens)` in rollout code.
    """

    code = "{code}"
    name = "no-print-tokens"
    severity = Severity.WARNING
    requires = (("print",),)
    METADATA_DEPENDENCIES = (PositionProvider,)

    VALID = [Example("print(len(sample.tokens))\\n")]
    INVALID = [Example("print(sample.tokens)\\n", line=1, contains="{contains}")]

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "print" and node.args:
            arg = node.args[0].value
            if isinstance(arg, cst.Attribute) and arg.attr.value == "tokens":
                self.report(node, "{message}")
'''


def rule_source(code="ACME101", message="token ids printed", contains="token ids", extra=""):
    return RULE.format(code=code, message=message, contains=contains, extra=extra)


def marker_rule(marker: Path) -> str:
    """A rule module that leaves `marker` when it is imported."""
    return rule_source(extra=f"open({str(marker)!r}, 'w').close()\n")


@pytest.fixture(autouse=True)
def no_local_rules_left():
    yield
    local_rules.activate({})


def run(root: Path, *args: str):
    old = os.getcwd()
    os.chdir(root)
    try:
        return cli_runner().invoke(main, list(args), catch_exceptions=False)
    finally:
        os.chdir(old)


def project(root: Path, config: str, rules: dict[str, str], files: dict[str, str] | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text("[tool.patchaudit]\n" + textwrap.dedent(config))
    for rel, text in {**rules, **(files or {"a.py": "print(sample.tokens)\nprint(len(sample.tokens))\n"})}.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def codes(res) -> list[tuple[str, int, str]]:
    return [(f["path"], f["line"], f["code"]) for f in json.loads(res.stdout)]


def test_extend_rules_loads_a_folder_of_rules(tmp_path):
    root = project(tmp_path, 'extend-rules = ["tools/patchaudit_rules"]\n',
                   {"tools/patchaudit_rules/acme101_no_print_tokens.py": rule_source(),
                    "tools/patchaudit_rules/_helpers.py": "raise RuntimeError('helpers are not rules')\n"})
    res = run(root, "check", "--no-cache", "--format", "json", "a.py")
    assert res.exit_code == 1, res.stderr
    assert codes(res) == [("a.py", 1, "ACME101")]
    # it is a rule like the others: selected by prefix, in SARIF's rule list, in `rules`
    assert codes(run(root, "check", "--no-cache", "--format", "json", "--select", "ACME", "a.py")) == [
        ("a.py", 1, "ACME101")]
    assert run(root, "check", "--no-cache", "--format", "json", "--ignore", "ACME101", "a.py").stdout.strip() == "[]"
    sarif = json.loads(run(root, "check", "--no-cache", "--format", "sarif", "a.py").stdout)
    by_id = {r["id"]: r for r in sarif["runs"][0]["tool"]["driver"]["rules"]}
    assert "helpUri" not in by_id["ACME101"] and "helpUri" in by_id["PA101"]  # docs/rules.md is the pack's
    assert "ACME101  no-print-tokens" in run(root, "rules").stdout
    assert "Reports `print(sample.tokens)`" in run(root, "explain", "ACME101").stdout


def test_a_single_file_and_a_configured_selection(tmp_path):
    root = project(tmp_path, 'extend-rules = ["lint_rules.py"]\nselect = ["ACME101"]\n',
                   {"lint_rules.py": rule_source()},
                   {"a.py": "print(sample.tokens)\nout = legacy_load_mm_data(prompt=t)\n"})
    assert codes(run(root, "check", "--no-cache", "--format", "json", "a.py")) == [("a.py", 1, "ACME101")]


def test_worker_processes_run_local_rules(tmp_path):
    files = {f"m{k}.py": "print(sample.tokens)\n" * 50 for k in range(12)}
    root = project(tmp_path, 'extend-rules = ["r"]\n', {"r/acme.py": rule_source()}, files)
    res = run(root, "check", "--no-cache", "--format", "json", "-j", "2", ".")
    assert res.exit_code == 1, res.stderr
    assert len(json.loads(res.stdout)) == 12 * 50


def test_editing_a_local_rule_is_not_hidden_by_the_cache(tmp_path):
    root = project(tmp_path, 'extend-rules = ["r"]\n', {"r/acme.py": rule_source(message="first message")})
    first = json.loads(run(root, "check", "--format", "json", "a.py").stdout)
    assert first[0]["message"] == "first message" and (root / ".patchaudit_cache").is_dir()
    local_rules.activate({})
    import sys

    for name in [n for n in sys.modules if n.startswith(local_rules.PACKAGE)]:
        del sys.modules[name]  # a new process would import the edited file
    (root / "r" / "acme.py").write_text(rule_source(message="second message"))
    again = json.loads(run(root, "check", "--format", "json", "a.py").stdout)
    assert again[0]["message"] == "second message"


# ----- where code is (never) imported from ------------------------------------------


def test_never_from_a_nested_pyproject_of_the_scanned_tree(tmp_path):
    marker = tmp_path / "imported"
    root = project(tmp_path / "repo", "select = [\"PA101\"]\n", {})
    project(root / "vendor" / "pkg", 'extend-rules = ["r"]\n', {"r/evil.py": marker_rule(marker)})
    res = run(root, "check", "--no-cache", "--format", "json", ".")
    assert res.exit_code == 0 and not marker.exists()


def test_never_when_a_trusted_config_is_given(tmp_path):
    marker = tmp_path / "imported"
    root = project(tmp_path / "repo", 'extend-rules = ["r"]\n', {"r/evil.py": marker_rule(marker)})
    trusted = tmp_path / "trusted.toml"
    trusted.write_text("[tool.patchaudit]\nselect = [\"PA101\"]\n")
    res = run(root, "check", "--no-cache", "--config", str(trusted), ".")
    assert res.exit_code == 0 and not marker.exists()
    # without --config the checkout's own configuration loads them: it is the repository's code
    run(root, "check", "--no-cache", ".")
    assert marker.exists()


@pytest.mark.parametrize("entry,needle", [
    ('"../outside"', "outside the folder"),
    ('"missing"', "does not exist"),
    ('"notes.txt"', "neither a folder"),
    ("\"r\", 1", "expected a list of strings"),
    ('"r"', "already defined"),           # a local rule that takes a built-in code
])
def test_bad_entries_are_errors_naming_the_file_and_key(tmp_path, entry, needle):
    marker = tmp_path / "imported"
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "evil.py").write_text(marker_rule(marker))
    rules = {"r/clash.py": rule_source(code="PA101")} if needle == "already defined" else {}
    root = project(tmp_path / "repo", f"extend-rules = [{entry}]\n", {**rules, "notes.txt": "x\n"})
    res = run(root, "check", "--no-cache", ".")
    assert res.exit_code == 2
    assert "pyproject.toml" in res.stderr and "extend-rules" in res.stderr and needle in res.stderr, res.stderr
    assert not marker.exists()


def test_a_rule_module_that_fails_to_import_is_an_error(tmp_path):
    root = project(tmp_path, 'extend-rules = ["r"]\n', {"r/broken.py": "import no_such_module_xyz\n"})
    res = run(root, "check", "--no-cache", ".")
    assert res.exit_code == 2 and "extend-rules" in res.stderr and "no_such_module_xyz" in res.stderr
    assert "Traceback" not in res.stderr


# ----- patchaudit test-rules ---------------------------------------------------------


def test_test_rules_runs_the_configured_rules_examples(tmp_path):
    root = project(tmp_path, 'extend-rules = ["r"]\n', {"r/acme.py": rule_source()})
    res = run(root, "test-rules")
    assert res.exit_code == 0, res.stdout + res.stderr
    assert "ACME101 VALID 0: ok" in res.stdout and "ACME101 INVALID 0: ok" in res.stdout
    assert "2 examples of 1 rule: 2 passed, 0 failed." in res.stdout


def test_test_rules_reports_an_example_that_does_not_hold(tmp_path):
    rules = tmp_path / "elsewhere"
    rules.mkdir()
    (rules / "acme.py").write_text(rule_source(contains="a text the message lacks"))
    res = run(tmp_path, "test-rules", str(rules))
    assert res.exit_code == 1
    assert "ACME101 INVALID 0: FAILED" in res.stdout and "a text the message lacks" in res.stdout
    assert "1 passed, 1 failed" in res.stdout


def test_test_rules_without_rules_is_an_error(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.patchaudit]\n")
    res = run(tmp_path, "test-rules")
    assert res.exit_code == 2 and "extend-rules" in res.stderr
    (tmp_path / "empty").mkdir()
    assert run(tmp_path, "test-rules", "empty").exit_code == 2
