"""The command-line conventions ruff users expect (issue 20), one test each.

`--output-format` (`--format`, PATCHAUDIT_OUTPUT_FORMAT), `json-lines`, `concise`/
`full`, `--statistics`, `-q`/`-s`, `--color` with NO_COLOR/FORCE_COLOR, `-` with
`--stdin-filename`, several reports in one run (`--also FORMAT:FILE`), `--severity`,
PATCHAUDIT_CACHE_DIR/PATCHAUDIT_NO_CACHE, the "no files" warning and no "All checks
passed" after an error, the `--engine NAME` message, and ruff's option names.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from patchaudit.cli import main
from patchaudit.testing import cli_runner

CALL = "out = legacy_load_mm_data(prompt=text)\n"
GUARD = "export SGLANG_MM_AVOID_RETOKENIZE=0\n"


def run(root: Path, args: list[str], env: dict | None = None, input: bytes | str | None = None):
    old = os.getcwd()
    os.chdir(root)
    try:
        return cli_runner().invoke(main, list(args), catch_exceptions=False, env=env, input=input)
    finally:
        os.chdir(old)


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "a.py").write_text(CALL)
    (tmp_path / "run.sh").write_text(GUARD + GUARD.replace("=0", "=false"))
    return tmp_path


# ----- formats ------------------------------------------------------------------


def test_output_format_its_alias_and_its_environment_variable(tree):
    base = run(tree, ["check", "--no-cache", "--output-format", "json", "."])
    assert base.exit_code == 1 and len(json.loads(base.stdout)) == 3
    assert run(tree, ["check", "--no-cache", "--format", "json", "."]).stdout == base.stdout
    env = run(tree, ["check", "--no-cache", "."], env={"PATCHAUDIT_OUTPUT_FORMAT": "json"})
    assert env.stdout == base.stdout
    # the command line wins over the environment
    text = run(tree, ["check", "--no-cache", "--output-format", "concise", "."],
               env={"PATCHAUDIT_OUTPUT_FORMAT": "json"})
    assert text.stdout.startswith("a.py:1:")
    bad = run(tree, ["check", "--no-cache", "."], env={"PATCHAUDIT_OUTPUT_FORMAT": "xml"})
    assert bad.exit_code == 2 and "xml" in bad.stderr


def test_json_lines_is_the_json_array_one_object_per_line(tree):
    array = json.loads(run(tree, ["check", "--no-cache", "--format", "json", "."]).stdout)
    res = run(tree, ["check", "--no-cache", "--format", "json-lines", "."])
    lines = res.stdout.splitlines()
    assert res.exit_code == 1 and [json.loads(line) for line in lines] == array
    (tree / "a.py").write_text("x = 1\n")
    (tree / "run.sh").write_text("true\n")
    empty = run(tree, ["check", "--no-cache", "--format", "json-lines", "."])
    assert empty.exit_code == 0 and empty.stdout == ""


def test_concise_is_one_line_per_finding_and_full_is_text(tree):
    full = run(tree, ["check", "--no-cache", "--output-format", "full", "."])
    assert run(tree, ["check", "--no-cache", "--output-format", "text", "."]).stdout == full.stdout
    assert run(tree, ["check", "--no-cache", "."]).stdout == full.stdout  # the default
    concise = run(tree, ["check", "--no-cache", "--output-format", "concise", "."], env={"COLUMNS": "200"})
    lines = concise.stdout.splitlines()
    assert len(lines) == 5 and lines[3].startswith("Found 3 findings")
    assert lines[4] == "No fixes available (2 hidden fixes can be enabled with the `--unsafe-fixes` option)."
    assert all(line.split(":")[0] in ("a.py", "run.sh") for line in lines[:3])
    # full shows a patch's hunk under its finding, concise does not
    (tree / "p.patch").write_text(
        "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n a = 1\n-out = load_mm_data(prompt=text)\n+" + CALL
    )
    args = ["check", "--no-cache", "--select", "PA101", "p.patch"]
    full_patch = run(tree, [*args, "--output-format", "full"]).stdout
    assert "6 | +out = legacy_load_mm_data(prompt=text)\n  |        ^^^" in full_patch
    assert len(run(tree, [*args, "--output-format", "concise"]).stdout.splitlines()) == 3  # + the fix hint


def test_statistics_counts_findings_per_rule(tree):
    res = run(tree, ["check", "--no-cache", "--statistics", "."])
    assert res.exit_code == 1
    rows = [line.split("\t") for line in res.stdout.splitlines()]
    assert rows[:2] == [["2", "PA104", "retokenize-guard-disabled"], ["1", "PA101", "legacy-loader-drops-input-ids"]]
    assert rows[2] == ["No fixes available (2 hidden fixes can be enabled with the `--unsafe-fixes` option)."]
    # with --unsafe-fixes the unsafe fixes count: ruff's `[*]` column
    unsafe = run(tree, ["check", "--no-cache", "--statistics", "--unsafe-fixes", "."]).stdout.splitlines()
    assert unsafe[0].split("\t") == ["2", "PA104", "[*] retokenize-guard-disabled"]
    assert unsafe[1].split("\t") == ["1", "PA101", "[ ] legacy-loader-drops-input-ids"]
    assert unsafe[2] == "[*] 2 fixable with the `--fix` option."
    stats = json.loads(run(tree, ["check", "--no-cache", "--statistics", "--format", "json", "."]).stdout)
    assert [(s["code"], s["count"]) for s in stats] == [("PA104", 2), ("PA101", 1)]


def test_quiet_prints_only_the_findings_and_silent_nothing(tree):
    quiet = run(tree, ["check", "--no-cache", "-q", "--output-format", "concise", "."])
    assert quiet.exit_code == 1 and len(quiet.stdout.splitlines()) == 3 and "Found" not in quiet.stdout
    assert run(tree, ["check", "--no-cache", "--quiet", "--output-format", "concise", "."]).stdout == quiet.stdout
    silent = run(tree, ["check", "--no-cache", "-s", "."])
    assert silent.exit_code == 1 and silent.stdout == "" and silent.stderr == ""
    assert run(tree, ["check", "--no-cache", "--silent", "."]).exit_code == 1
    # a report asked for in a file is still written; errors are still shown (exit 2)
    out = run(tree, ["check", "--no-cache", "-s", "--format", "json", "-o", "r.json", ".", "missing.py"])
    assert out.exit_code == 2 and out.stdout == "" and "missing.py" in out.stderr
    assert len(json.loads((tree / "r.json").read_text())) == 3
    # -q drops warnings too (the "no files" warning)
    (tree / "empty").mkdir()
    assert run(tree, ["check", "--no-cache", "-q", "empty"]).stderr == ""


@pytest.mark.parametrize("args,env,colored", [
    (["--color", "always"], {}, True),
    (["--color", "never"], {"FORCE_COLOR": "1"}, False),
    ([], {"FORCE_COLOR": "1"}, True),
    (["--color", "auto"], {"FORCE_COLOR": "1"}, True),
    ([], {"NO_COLOR": "1"}, False),
    (["--color", "always"], {"NO_COLOR": "1"}, True),   # the command line wins
    ([], {}, False),                                    # not a terminal
])
def test_color(tree, args, env, colored):
    res = run(tree, ["check", "--no-cache", *args, "."], env={"NO_COLOR": None, "FORCE_COLOR": None, **env})
    assert ("\x1b[" in res.stdout) is colored
    # a report written to a file never holds colours
    run(tree, ["check", "--no-cache", *args, "-o", "report.txt", "."], env=env)
    assert "\x1b[" not in (tree / "report.txt").read_text()


# ----- standard input -------------------------------------------------------------


def test_stdin_with_stdin_filename(tmp_path):
    res = run(tmp_path, ["check", "--no-cache", "--format", "json", "-", "--stdin-filename", "src/mod.py"],
              input=CALL)
    assert res.exit_code == 1
    (f,) = json.loads(res.stdout)
    assert f["path"] == "src/mod.py" and f["code"] == "PA101"
    # the kind comes from the name: the same text as a shell script is not Python
    sh = run(tmp_path, ["check", "--no-cache", "--format", "json", "-", "--stdin-filename", "x.sh"], input=GUARD)
    assert [f["code"] for f in json.loads(sh.stdout)] == ["PA104"]
    patch = "--- /dev/null\n+++ b/python/sglang/srt/new.py\n@@ -0,0 +1,2 @@\n+def f(x):\n+return x\n"
    p = run(tmp_path, ["check", "--no-cache", "--format", "json", "-", "--stdin-filename", "p.patch"], input=patch)
    assert [f["code"] for f in json.loads(p.stdout)] == ["PA302"]
    assert not (tmp_path / "src").exists()  # nothing is written for it


def test_stdin_usage_errors(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    no_name = run(tmp_path, ["check", "--no-cache", "-"], input=CALL)
    assert no_name.exit_code == 2 and "--stdin-filename" in no_name.stderr
    assert "All checks passed" not in no_name.stdout
    mixed = run(tmp_path, ["check", "--no-cache", "-", "a.py", "--stdin-filename", "x.py"], input=CALL)
    assert mixed.exit_code == 2
    kind = run(tmp_path, ["check", "--no-cache", "-", "--stdin-filename", "notes.txt"], input=CALL)
    assert kind.exit_code == 2 and "notes.txt" in kind.stderr


def test_stdin_is_read_within_max_file_size(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.patchaudit]\nmax-file-size = 100\n")
    res = run(tmp_path, ["check", "--no-cache", "-", "--stdin-filename", "big.py"], input="x = 1\n" * 100)
    assert res.exit_code == 2 and "big.py" in res.stderr and "limit" in res.stderr
    assert "All checks passed" not in res.stdout
    ok = run(tmp_path, ["check", "--no-cache", "-", "--stdin-filename", "small.py"], input="x = 1\n")
    assert ok.exit_code == 0


# ----- several reports, severity -----------------------------------------------


def test_several_reports_in_one_run(tree):
    res = run(tree, ["check", "--no-cache", "--output-format", "github", "--also", "sarif:p.sarif",
                     "--also", "json:findings.json", "."])
    assert res.exit_code == 1 and res.stdout.count("::error ") == 3
    sarif = json.loads((tree / "p.sarif").read_text())
    assert len(sarif["runs"][0]["results"]) == 3
    assert len(json.loads((tree / "findings.json").read_text())) == 3
    bad = run(tree, ["check", "--no-cache", "--also", "yaml:x.yaml", "."])
    assert bad.exit_code == 2 and "--also" in bad.stderr and not (tree / "x.yaml").exists()
    assert run(tree, ["check", "--no-cache", "--also", "sarif", "."]).exit_code == 2
    # a report that cannot be written is an error (exit 2), not "findings" (exit 1)
    unwritable = run(tree, ["check", "--no-cache", "--also", "json:no/such/dir/f.json", "."])
    assert unwritable.exit_code == 2 and "cannot write" in unwritable.stderr


def test_severity_filter(tmp_path):
    (tmp_path / "a.py").write_text(CALL)
    (tmp_path / "b.py").write_text("x = 1  # patchaudit: ignore\n")  # PA001: a warning
    args = ["check", "--no-cache", "--format", "json", "--extend-select", "PA001"]
    every = json.loads(run(tmp_path, [*args, "."]).stdout)
    assert sorted(f["severity"] for f in every) == ["error", "warning"]
    warn = run(tmp_path, [*args, "--severity", "warning", "."])
    assert len(json.loads(warn.stdout)) == 2
    err = run(tmp_path, [*args, "--severity", "error", "."])
    assert [f["code"] for f in json.loads(err.stdout)] == ["PA101"]
    (tmp_path / "a.py").write_text("x = 1\n")
    only_warning = run(tmp_path, [*args, "--severity", "error", "."])
    assert only_warning.exit_code == 0 and json.loads(only_warning.stdout) == []


# ----- cache environment -----------------------------------------------------------


def test_cache_dir_and_no_cache_from_the_environment(tmp_path):
    (tmp_path / "a.py").write_text(CALL)
    (tmp_path / "pyproject.toml").write_text("[tool.patchaudit]\n")
    cache = tmp_path / "elsewhere"
    res = run(tmp_path, ["check", "."], env={"PATCHAUDIT_CACHE_DIR": str(cache)})
    assert res.exit_code == 1 and cache.is_dir() and any(cache.rglob("*.pickle"))
    assert not (tmp_path / ".patchaudit_cache").exists()
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "a.py").write_text(CALL)
    (fresh / "pyproject.toml").write_text("[tool.patchaudit]\n")
    res = run(fresh, ["check", "."], env={"PATCHAUDIT_NO_CACHE": "1"})
    assert res.exit_code == 1 and not (fresh / ".patchaudit_cache").exists()
    run(fresh, ["check", "."], env={"PATCHAUDIT_NO_CACHE": None})
    assert (fresh / ".patchaudit_cache").is_dir()  # the default, for contrast


# ----- messages: no files, failures, --engine -------------------------------------


def test_no_files_to_check_is_a_warning(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("nothing patchaudit reads\n")
    res = run(tmp_path, ["check", "--no-cache", "empty"])
    assert res.exit_code == 0
    assert "warning: no files to check under empty" in res.stderr
    assert "All checks passed" not in res.stdout and "No files checked." in res.stdout


@pytest.mark.parametrize("args", [["/nonexistent/x"], ["ok.py", "missing.py"]])
def test_never_all_checks_passed_when_something_failed(tmp_path, args):
    (tmp_path / "ok.py").write_text("x = 1\n")
    res = run(tmp_path, ["check", "--no-cache", *args])
    assert res.exit_code == 2
    assert "All checks passed" not in res.stdout
    assert "error" in res.stdout and "not everything was checked" in res.stdout
    assert "no such file" in res.stderr


def test_findings_and_errors_are_both_counted(tmp_path):
    (tmp_path / "a.py").write_text(CALL)
    res = run(tmp_path, ["check", "--no-cache", "a.py", "missing.py"])
    assert res.exit_code == 2 and "Found 1 finding" in res.stdout and "1 error" in res.stdout


def test_engine_name_without_source_says_what_is_expected(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    res = run(tmp_path, ["check", "--no-cache", "--engine", "sglang", "a.py"])
    assert res.exit_code == 2
    assert "--engine NAME=SOURCE expected; did you mean --engine sglang=PATH?" in res.stderr
    assert "does not exist" not in res.stderr
    # a bare SOURCE that exists is still an engine (named "engine")
    (tmp_path / "sglang").mkdir()
    assert run(tmp_path, ["check", "--no-cache", "--engine", "sglang", "a.py"]).exit_code == 0


def test_explain_cites_public_references():
    res = cli_runner().invoke(main, ["explain", "PA101"])
    assert res.exit_code == 0 and "seed report" not in res.stdout
    assert "THUDM/slime#2388" in res.stdout and "sgl-project/sglang#26555" in res.stdout


# ----- ruff's option names --------------------------------------------------------

#: ruff check's options and their patchaudit equivalents (ruff 0.x `ruff check --help`);
#: ruff options with no patchaudit equivalent are in NO_EQUIVALENT
RUFF_TO_PATCHAUDIT = {
    "--select": "--select",
    "--ignore": "--ignore",
    "--extend-select": "--extend-select",
    "--per-file-ignores": "--per-file-ignores",
    "--exclude": "--exclude",
    "--extend-exclude": "--extend-exclude",
    "--output-format": "--output-format",
    "--output-file": "--output-file",
    "-o": "-o",
    "--config": "--config",
    "--no-cache": "--no-cache",
    "--cache-dir": "--cache-dir",
    "--exit-zero": "--exit-zero",
    "--statistics": "--statistics",
    "--quiet": "--quiet",
    "-q": "-q",
    "--silent": "--silent",
    "-s": "-s",
    "--stdin-filename": "--stdin-filename",
    "--fix": "--fix",
    "--diff": "--diff",
    "--unsafe-fixes": "--unsafe-fixes",
    # issue 39
    "--show-fixes": "--show-fixes",
    "--watch": "--watch",
    "-w": "-w",
    "--fix-only": "--fix-only",
    "--exit-non-zero-on-fix": "--exit-non-zero-on-fix",
    "--fixable": "--fixable",
    "--unfixable": "--unfixable",
    "--extend-fixable": "--extend-fixable",
    "--add-noqa": "--add-noqa",  # writes `# patchaudit: ignore[CODE]`, ours (pipeline/noqa.py)
    "--add-ignore": "--add-ignore",  # ruff's own-comment form: the same as --add-noqa here
    "--show-files": "--show-files",
    "--show-settings": "--show-settings",
    "--isolated": "--isolated",
    "--verbose": "--verbose",
    "-v": "-v",
    "-n": "-n",
    "-e": "-e",
    "--color": "--color",
    "--extend-per-file-ignores": "--extend-per-file-ignores",
}
#: environment variables: ruff's -> patchaudit's
RUFF_ENV = {"RUFF_OUTPUT_FORMAT": "PATCHAUDIT_OUTPUT_FORMAT", "RUFF_CACHE_DIR": "PATCHAUDIT_CACHE_DIR",
            "RUFF_NO_CACHE": "PATCHAUDIT_NO_CACHE"}
#: ruff check's options patchaudit does not take, each with the reason
NO_EQUIVALENT = {
    "--target-version": "the Python version is not a setting: rules read what the engine and the checkout hold",
    "--preview": "no rule or fix is in preview: every rule is stable or off by default (select it)",
    "--extension": "file kinds come from names (.patch/.diff, .py, Dockerfile, shell, YAML, .env), "
                   "not a mapping: --stdin-filename names standard input's",
    "--respect-gitignore": ".gitignore is always respected (a file named on the command line is always read)",
    "--force-exclude": "excludes always apply to what a folder holds; a file named explicitly is always read",
    "--ignore-noqa": "a suppression comment is the patch author's decision; --select/--per-file-ignores "
                     "and PA001 (unused suppressions) audit them instead",
    "--line-length": "no rule measures lines",
}


def _ruff_check_flags() -> set[str]:
    """The flags of the installed ruff's `ruff check --help` (ruff is a test dependency)."""
    import re
    import shutil
    import subprocess

    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    text = subprocess.run([ruff, "check", "--help"], capture_output=True, text=True, check=True).stdout
    flags = set()
    for line in text.splitlines():
        m = re.match(r"\s+(-[A-Za-z]), (--[a-z][a-z0-9-]*)|\s+(--[a-z][a-z0-9-]*)", line)
        if m:
            flags.update(x for x in m.groups() if x)
    return flags


def test_every_ruff_check_flag_is_mapped_or_has_a_reason():
    flags = _ruff_check_flags()
    assert "--fix" in flags and "--select" in flags  # the help was read
    # -h/--help: every patchaudit command takes both (cli.py's context settings)
    unknown = sorted(flags - set(RUFF_TO_PATCHAUDIT) - set(NO_EQUIVALENT) - {"-h", "--help"})
    assert not unknown, f"ruff check flags neither mapped nor listed with a reason: {unknown}"
    assert all(reason.strip() for reason in NO_EQUIVALENT.values())


def test_ruff_option_names_work():
    from patchaudit.commands.check import check

    opts = {o for p in check.params for o in (*p.opts, *p.secondary_opts)}
    missing = sorted(p for p in RUFF_TO_PATCHAUDIT.values() if p not in opts)
    assert not missing, f"ruff's options without their patchaudit equivalent: {missing}"
    assert not (set(NO_EQUIVALENT) & opts), "an option listed as missing now exists: move it to the mapping"
    envs = {p.envvar for p in check.params if p.envvar}
    assert "PATCHAUDIT_OUTPUT_FORMAT" in envs


def test_ruff_options_parse_and_act(tree):
    """The mapped options do what ruff's do, on a real run."""
    (tree / "vendor").mkdir()
    (tree / "vendor" / "b.py").write_text(CALL)
    args = ["check", "--no-cache", "--output-format", "json", "--output-file", "o.json", "--exit-zero",
            "--extend-exclude", "vendor", "--per-file-ignores", "run.sh:PA104", "."]
    res = run(tree, args)
    assert res.exit_code == 0
    found = json.loads((tree / "o.json").read_text())
    assert [(f["path"], f["code"]) for f in found] == [("a.py", "PA101")]
    res = run(tree, ["check", "--no-cache", "--format", "json", "--exclude", "a.py", "--select", "PA104", "."])
    assert {f["path"] for f in json.loads(res.stdout)} == {"run.sh"}
    bad = run(tree, ["check", "--no-cache", "--per-file-ignores", "nocolon", "."])
    assert bad.exit_code == 2 and "GLOB:CODES" in bad.stderr
