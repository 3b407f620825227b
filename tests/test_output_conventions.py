"""Issue 39: findings a person can read in a terminal, and the rest of ruff's conventions.

The text shape (headline, source frame with a caret, trace, help lines wrapped between
words), the formats checked against their consumers (junitparser, GitLab Code Quality's
fields, reviewdog's rdjson fields, pylint's line pattern, the SARIF schema), JSON's
`fix` and `url`, and the options (`--show-fixes`, `--add-noqa`, `--watch`, `--fix-only`,
`--exit-non-zero-on-fix`, `--fixable/--unfixable`, `--show-files`, `--show-settings`,
`--isolated`, `-v`) and the configuration files (`.patchaudit.toml` > `patchaudit.toml`
> `pyproject.toml`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from patchaudit.cli import main
from patchaudit.model.message import split_message
from patchaudit.testing import cli_runner

REPO = Path(__file__).resolve().parents[1]
CALL = "out = legacy_load_mm_data(prompt=text)\n"
ENV_PY = 'import os\nos.environ["SGLANG_MM_AVOID_RETOKENIZE"] = "0"\n'
UNUSED = "x = 1  # patchaudit: ignore[PA999]\n"
PATCH = "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n a = 1\n-out = load_mm_data(prompt=text)\n+" + CALL


def run(root: Path, args: list[str], env: dict | None = None, input: str | None = None):
    old = os.getcwd()
    os.chdir(root)
    try:
        return cli_runner().invoke(main, list(args), catch_exceptions=False, env=env, input=input)
    finally:
        os.chdir(old)


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "a.py").write_text(CALL)
    (tmp_path / "env.py").write_text(ENV_PY)
    (tmp_path / "p.patch").write_text(PATCH)
    (tmp_path / "u.py").write_text(UNUSED)
    return tmp_path


ALL = ["check", "--no-cache", "--extend-select", "PA001", "."]


# ----- the message: headline and help, the message itself unchanged ---------------


def test_split_message_by_its_convention():
    parts = split_message("`f` called without `x=`: ids are lost; pass `x=` (call continues past; give it)",
                          ("call continues past; give it",))
    assert parts.headline == "`f` called without `x=`"
    assert parts.help == ["ids are lost", "pass `x=`"]
    assert parts.notes == ["call continues past; give it"]
    # separators inside code or brackets belong to their part
    p = split_message("`a: b` called (certain: `X` at y.py:9; z): why: because; do this")
    assert p.headline == "`a: b` called (certain: `X` at y.py:9; z)"
    assert p.help == ["why: because", "do this"]
    # no top-level separator, or unbalanced text: the whole message is the headline
    assert split_message("hunk is truncated").headline == "hunk is truncated"
    assert split_message("odd (unbalanced: yes; no").headline == "odd (unbalanced: yes; no"
    # a long headline gives its trailing aside to the help lines
    long = "the conversation is sent to the engine again as text, while the ids trained on differ " \
           "(line 22; kept in `sample.tokens`): it drifts; send ids"
    p = split_message(long)
    assert p.headline.endswith("differ") and p.help == ["line 22; kept in `sample.tokens`", "it drifts", "send ids"]


def test_json_message_is_the_rules_message_byte_for_byte(tree):
    res = run(tree, [*ALL[:-1], "--output-format", "json", "."])
    found = json.loads(res.stdout)
    concise = run(tree, [*ALL[:-1], "--output-format", "concise", "."], env={"COLUMNS": "1000"}).stdout
    for f in found:
        # the concise line carries the same message whole
        assert f"{f['path']}:{f['line']}:{f['column']}: {f['code']}" in concise
        assert f["message"] in concise
        assert set(f) == {"code", "name", "severity", "message", "path", "line", "column", "end_line",
                          "end_column", "target", "trace", "fingerprint", "fix", "url"}


# ----- the text report -------------------------------------------------------------


def test_full_text_shape_with_source_frame_caret_and_help(tree):
    res = run(tree, ["check", "--no-cache", "a.py"], env={"COLUMNS": "100"})
    assert res.stdout.splitlines()[:8] == [
        "a.py:1:7: PA101 `legacy_load_mm_data` called without `input_ids=`",
        "  |",
        "1 | out = legacy_load_mm_data(prompt=text)",
        "  |       ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        "  |",
        "  help: a list[int] prompt is decoded and re-tokenized and the caller's token ids are lost",
        "  help: pass `input_ids=` or call `load_mm_data`",
        "",
    ]
    assert res.stdout.splitlines()[-1] == "Found 1 finding (1 error) in 1 file."


def test_fixable_marker_and_summary_counts_severities_apart(tree):
    res = run(tree, ALL, env={"COLUMNS": "200"})
    out = res.stdout
    assert "p.patch:6:8: PA101 [*] `legacy_load_mm_data`" in out  # a safe fix
    assert "u.py:1:8: PA001 [*] " in out
    assert "env.py:2:1: PA104 `SGLANG" in out  # an unsafe fix: no marker without --unsafe-fixes
    assert "Found 4 findings (3 errors, 1 warning) in 4 files." in out
    assert out.rstrip().endswith(
        "[*] 2 fixable with the `--fix` option (1 hidden fix can be enabled with the `--unsafe-fixes` option)."
    )
    unsafe = run(tree, [*ALL[:-1], "--unsafe-fixes", "."], env={"COLUMNS": "200"}).stdout
    assert "env.py:2:1: PA104 [*] `SGLANG" in unsafe
    assert unsafe.rstrip().endswith("[*] 3 fixable with the `--fix` option.")


def _blocks(text: str) -> list[list[str]]:
    return [b.splitlines() for b in text.split("\n\n") if re.match(r"\S+:\d+:\d+: PA\d+", b)]


def test_examples_read_at_100_columns():
    """The README's example run: no line longer than 100 columns (so no terminal wraps one,
    inside a word or not), every word of every message whole, every .py finding with its
    source line and a caret under it."""
    res = run(REPO, ["check", "--no-cache", "examples/"], env={"COLUMNS": "100"})
    assert res.exit_code == 1
    lines = res.stdout.splitlines()
    assert lines and all(len(line) <= 100 for line in lines), [line for line in lines if len(line) > 100]
    found = json.loads(run(REPO, ["check", "--no-cache", "--output-format", "json", "examples/"]).stdout)
    def words(text: str) -> set[str]:  # the separators the split drops (`: `, `; `, an aside's brackets)
        return {w.strip("():;,") for w in text.split()}

    shown = words(res.stdout)
    for f in found:  # a word cut by the wrapping would be missing here
        missing = sorted(words(f["message"]) - shown)
        assert not missing, (f["code"], missing)
    blocks = _blocks(res.stdout)
    assert len(blocks) == len(found)
    for f, block in zip(found, blocks):
        assert block[0].startswith(f"{f['path']}:{f['line']}:{f['column']}: {f['code']}")
        if not f["path"].endswith(".py"):
            continue
        source = (REPO / f["path"]).read_text().splitlines()[f["line"] - 1]
        row = next(i for i, line in enumerate(block) if re.match(rf"\s*{f['line']} \| ", line))
        assert block[row].split(" | ", 1)[1] == source.rstrip()
        caret = block[row + 1]
        assert re.fullmatch(r"\s+\| +\^+", caret), caret
        indent = len(source) - len(source.lstrip())
        assert caret.index("^") == block[row].index(" | ") + 3 + max(f["column"] - 1, indent)


def test_long_source_lines_are_cut_to_the_width_with_the_caret_in_view(tmp_path):
    (tmp_path / "w.py").write_text("x = " + "1 + " * 40 + "legacy_load_mm_data(prompt=text)\n")
    out = run(tmp_path, ["check", "--no-cache", "w.py"], env={"COLUMNS": "60"}).stdout.splitlines()
    assert all(len(line) <= 60 for line in out)
    frame = next(i for i, line in enumerate(out) if line.startswith("1 | "))
    assert out[frame].startswith("1 | …") and "legacy_load_mm_data(" in out[frame]
    assert out[frame][out[frame + 1].index("^")] == "l"


# ----- formats ------------------------------------------------------------------


def test_junit_is_read_by_a_junit_parser(tree):
    from junitparser import Failure, JUnitXml

    res = run(tree, [*ALL[:-1], "--output-format", "junit", "."])
    assert res.exit_code == 1
    xml = JUnitXml.fromstring(res.stdout)
    suites = list(xml)
    assert {s.name for s in suites} == {"a.py", "env.py", "p.patch", "u.py"}
    cases = [c for s in suites for c in s]
    assert len(cases) == 4 and xml.failures == 4 and xml.tests == 4
    for case in cases:
        (failure,) = case.result
        assert isinstance(failure, Failure) and case.name.startswith("org.patchaudit.PA")
        assert failure.text.startswith("line ")
    # a clean run: one passing case (as ruff writes it)
    (tree / "a.py").write_text("x = 1\n")
    clean = run(tree, ["check", "--no-cache", "--output-format", "junit", "a.py"])
    xml = JUnitXml.fromstring(clean.stdout)
    assert clean.exit_code == 0 and xml.failures == 0 and [c.name for s in xml for c in s] == ["No errors found"]


def test_junit_stays_xml_with_a_hostile_file_name(tmp_path):
    from junitparser import JUnitXml

    name = "a\x1b[2J<&>\".py"
    try:
        (tmp_path / name).write_text(CALL)
    except OSError:
        pytest.skip("the file system refuses the name")
    out = run(tmp_path, ["check", "--no-cache", "--output-format", "junit", "."]).stdout
    (suite,) = list(JUnitXml.fromstring(out))
    assert suite.name == 'a\\x1b[2J<&>".py'


#: GitLab Code Quality: the fields GitLab reads (docs.gitlab.com, "Code Quality report format")
GITLAB_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["description", "check_name", "fingerprint", "severity", "location"],
        "properties": {
            "description": {"type": "string", "minLength": 1},
            "check_name": {"type": "string", "minLength": 1},
            "fingerprint": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
            "severity": {"enum": ["info", "minor", "major", "critical", "blocker"]},
            "location": {
                "type": "object",
                "required": ["path", "lines"],
                "properties": {
                    "path": {"type": "string", "not": {"pattern": "^(/|\\./)"}},
                    "lines": {
                        "type": "object",
                        "required": ["begin"],
                        "properties": {"begin": {"type": "integer", "minimum": 1},
                                       "end": {"type": "integer", "minimum": 1}},
                    },
                },
            },
        },
    },
}


def test_gitlab_code_quality(tree):
    (tree / "b.py").write_text(CALL + CALL)  # two identical findings: two fingerprints
    doc = json.loads(run(tree, [*ALL[:-1], "--output-format", "gitlab", "."]).stdout)
    jsonschema.validate(doc, GITLAB_SCHEMA)
    assert len(doc) == 6 and len({d["fingerprint"] for d in doc}) == 6
    by = {(d["location"]["path"], d["check_name"]): d for d in doc}
    assert by[("u.py", "PA001")]["severity"] == "minor" and by[("a.py", "PA101")]["severity"] == "major"
    again = json.loads(run(tree, [*ALL[:-1], "--output-format", "gitlab", "."]).stdout)
    assert [d["fingerprint"] for d in again] == [d["fingerprint"] for d in doc]  # stable


def test_pylint_lines(tree):
    out = run(tree, [*ALL[:-1], "--output-format", "pylint", "."]).stdout.splitlines()
    pattern = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): \[(?P<code>PA\d{3})\] (?P<msg>.+)$")  # %f:%l: [%t%n] %m
    assert len(out) == 4 and all(pattern.match(line) for line in out)
    assert "a.py:1: [PA101] `legacy_load_mm_data` called without `input_ids=`: " in "\n".join(out)


#: reviewdog's Diagnostic Format (proto/rdf/reviewdog.proto): the fields reviewdog reads
_POS = {"type": "object", "required": ["line"],
        "properties": {"line": {"type": "integer", "minimum": 1}, "column": {"type": "integer", "minimum": 1}}}
_RANGE = {"type": "object", "required": ["start"], "properties": {"start": _POS, "end": _POS}}
RDJSON_SCHEMA = {
    "type": "object",
    "required": ["diagnostics"],
    "properties": {
        "source": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
        "diagnostics": {"type": "array", "items": {
            "type": "object",
            "required": ["message", "location"],
            "properties": {
                "message": {"type": "string"},
                "location": {"type": "object", "required": ["path"],
                             "properties": {"path": {"type": "string"}, "range": _RANGE}},
                "severity": {"enum": ["UNKNOWN_SEVERITY", "ERROR", "WARNING", "INFO"]},
                "code": {"type": "object", "required": ["value"],
                         "properties": {"value": {"type": "string"}, "url": {"type": "string"}}},
                "suggestions": {"type": "array", "items": {
                    "type": "object", "required": ["range", "text"],
                    "properties": {"range": _RANGE, "text": {"type": "string"}}}},
            },
        }},
    },
}


def test_rdjson(tree):
    (tree / "é.py").write_text("s = 'é'; " + CALL)
    doc = json.loads(run(tree, [*ALL[:-1], "--output-format", "rdjson", "."]).stdout)
    jsonschema.validate(doc, RDJSON_SCHEMA)
    by = {d["location"]["path"]: d for d in doc["diagnostics"]}
    assert by["u.py"]["severity"] == "WARNING" and by["a.py"]["code"]["url"].endswith("docs/rules.md#pa101")
    # columns are UTF-8 bytes: `é` takes two
    assert by["é.py"]["location"]["range"]["start"]["column"] == len("s = 'é'; out = ".encode()) + 1
    (sugg,) = by["p.patch"]["suggestions"]  # the safe fix, whole lines
    # the patch's `-`/`+` pair becomes a context line again (lines 5-6 replaced, end exclusive)
    assert sugg["range"] == {"start": {"line": 5, "column": 1}, "end": {"line": 7, "column": 1}}
    assert sugg["text"] == " out = load_mm_data(prompt=text)\n"
    assert "suggestions" not in by["env.py"]  # an unsafe fix is not suggested


def test_grouped(tree):
    out = run(tree, [*ALL[:-1], "--output-format", "grouped", "."], env={"COLUMNS": "200"}).stdout
    assert "a.py:\n  1:7 PA101 `legacy_load_mm_data` called without `input_ids=`\n\n" in out
    assert "p.patch:\n  6:8 PA101 [*] " in out
    assert "Found 4 findings (3 errors, 1 warning) in 4 files." in out
    quiet = run(tree, [*ALL[:-1], "--output-format", "grouped", "-q", "."]).stdout
    assert "Found" not in quiet and "a.py:" in quiet


def test_json_fix_and_url(tree):
    found = json.loads(run(tree, [*ALL[:-1], "--output-format", "json", "."]).stdout)
    by = {f["path"]: f for f in found}
    assert by["a.py"]["fix"] is None
    assert by["a.py"]["url"] == "https://github.com/patchaudit/patchaudit/blob/main/docs/rules.md#pa101"
    assert by["u.py"]["fix"] == {"message": by["u.py"]["fix"]["message"], "applicability": "safe",
                                  "edits": [{"line": 1, "end_line": 1, "content": ["x = 1"]}]}
    assert by["env.py"]["fix"]["applicability"] == "unsafe"
    lines = run(tree, [*ALL[:-1], "--output-format", "json-lines", "."]).stdout.splitlines()
    assert [json.loads(line) for line in lines] == found


def test_sarif_fixes_validate(tree):
    schema = json.loads((REPO / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())
    doc = json.loads(run(tree, [*ALL[:-1], "--output-format", "sarif", "."]).stdout)
    jsonschema.validators.validator_for(schema)(schema).validate(doc)
    results = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]: r for r in doc["runs"][0]["results"]}
    (fix,) = results["u.py"]["fixes"]
    (change,) = fix["artifactChanges"]
    (rep,) = change["replacements"]
    assert change["artifactLocation"]["uri"] == "u.py"
    assert rep == {"deletedRegion": {"startLine": 1, "startColumn": 1, "endLine": 2, "endColumn": 1},
                   "insertedContent": {"text": "x = 1\n"}}
    assert "unsafe" in results["env.py"]["fixes"][0]["description"]["text"]
    assert "fixes" not in results["a.py"]
    rules = {r["id"]: r for r in doc["runs"][0]["tool"]["driver"]["rules"]}
    assert rules["PA101"]["helpUri"] == json.loads(
        run(tree, ["check", "--no-cache", "--output-format", "json", "a.py"]).stdout)[0]["url"]


# ----- fixes: --show-fixes, --fix-only, --exit-non-zero-on-fix, --fixable/--unfixable -----


def test_show_fixes_without_and_with_fix(tree):
    shown = run(tree, [*ALL[:-1], "--show-fixes", "u.py", "env.py"], env={"COLUMNS": "200"}).stdout
    assert "  fix: " in shown and "1 - x = 1  # patchaudit: ignore[PA999]" in shown and "1 + x = 1" in shown
    assert "(unsafe: --unsafe-fixes)" in shown
    fixed = run(tree, [*ALL[:-1], "--fix", "--show-fixes", "u.py", "env.py"], env={"COLUMNS": "200"})
    assert fixed.stdout.startswith("Fixed 1 finding:\n- u.py:\n    1 × PA001 (unused-suppression)\n\n")
    assert fixed.stdout.count("Found ") == 1 and "Found 2 findings (1 fixed, 1 remaining: 1 error)" in fixed.stdout
    assert fixed.exit_code == 1 and "Found" not in fixed.stderr


def test_fix_only_and_exit_non_zero_on_fix(tree):
    res = run(tree, [*ALL[:-1], "--fix-only", "u.py", "a.py"])
    assert res.exit_code == 0 and res.stdout == "Fixed 1 finding.\n"
    assert (tree / "u.py").read_text() == "x = 1\n"
    (tree / "u.py").write_text(UNUSED)
    res = run(tree, [*ALL[:-1], "--fix-only", "--exit-non-zero-on-fix", "u.py"])
    assert res.exit_code == 1 and (tree / "u.py").read_text() == "x = 1\n"
    # --fix with nothing left still exits 1 with --exit-non-zero-on-fix, 0 without
    (tree / "u.py").write_text(UNUSED)
    assert run(tree, [*ALL[:-1], "--fix", "--exit-non-zero-on-fix", "u.py"]).exit_code == 1
    (tree / "u.py").write_text(UNUSED)
    assert run(tree, [*ALL[:-1], "--fix", "u.py"]).exit_code == 0
    # nothing fixed: exit 0 even with --exit-non-zero-on-fix (with --fix-only)
    assert run(tree, [*ALL[:-1], "--fix-only", "--exit-non-zero-on-fix", "a.py"]).exit_code == 0


def test_fixable_and_unfixable(tree):
    res = run(tree, [*ALL[:-1], "--fix", "--unsafe-fixes", "--unfixable", "PA001", "u.py", "env.py"])
    assert (tree / "u.py").read_text() == UNUSED and '"1"' in (tree / "env.py").read_text()
    assert "u.py:1:8: PA001 " in res.stdout and "[*]" not in res.stdout.split("Found")[0]
    (tree / "env.py").write_text(ENV_PY)
    run(tree, [*ALL[:-1], "--fix", "--unsafe-fixes", "--fixable", "PA0", "u.py", "env.py"])
    assert (tree / "u.py").read_text() == "x = 1\n" and (tree / "env.py").read_text() == ENV_PY


# ----- --add-noqa -------------------------------------------------------------------


def test_add_noqa_suppresses_each_reported_line(tree):
    (tree / "m.py").write_text('x = legacy_load_mm_data(prompt=t)  # patchaudit: ignore[PA104]\n'
                               'doc = """\nlegacy_load_mm_data(prompt=t)\n"""\n')
    res = run(tree, ["check", "--no-cache", "--add-noqa", "."])
    assert res.exit_code == 0, res.stderr
    assert (tree / "a.py").read_text() == "out = legacy_load_mm_data(prompt=text)  # patchaudit: ignore[PA101]\n"
    assert (tree / "env.py").read_text().endswith('= "0"  # patchaudit: ignore[PA104]\n')
    assert (tree / "m.py").read_text().startswith("x = legacy_load_mm_data(prompt=t)  # patchaudit: ignore[PA104, PA101]\n")
    # the patch: the comment on the line it adds; the hunk still applies
    assert (tree / "p.patch").read_text().endswith("+out = legacy_load_mm_data(prompt=text)  # patchaudit: ignore[PA101]\n")
    (tree / "x.py").write_text("a = 1\nout = load_mm_data(prompt=text)\n")  # the patch's pre-image
    applied = subprocess.run(["git", "apply", "--check", "p.patch"], cwd=tree, capture_output=True, text=True)
    assert applied.returncode == 0, applied.stderr
    (tree / "x.py").unlink()
    assert "Added 4 suppression comments." in res.stderr
    again = run(tree, ["check", "--no-cache", "."])
    assert again.exit_code == 0, again.stdout
    assert "Added 0 suppression comments." in run(tree, ["check", "--no-cache", "--add-noqa", "."]).stderr


def test_add_noqa_counts_lines_as_the_parser(tmp_path):
    """Python ends a line at CRLF, a lone CR or LF only: a form feed inside a comment is no
    line end (str.splitlines counts one, and put the comment on the line after the
    finding's): issue 40's line-end rule, as the fixer counts lines."""
    (tmp_path / "r.py").write_bytes(b"# page\x0cbreak\rout = legacy_load_mm_data(prompt=text)\nkeep = 2\n")
    res = run(tmp_path, ["check", "--no-cache", "--add-noqa", "."])
    assert "Added 1 suppression comment" in res.stderr, res.stderr
    assert (tmp_path / "r.py").read_bytes() == (
        b"# page\x0cbreak\rout = legacy_load_mm_data(prompt=text)  # patchaudit: ignore[PA101]\nkeep = 2\n"
    )


def test_add_noqa_leaves_lines_a_comment_cannot_go_on(tmp_path):
    text = 'import os\ns = f"""{os.environ.setdefault("SGLANG_MM_AVOID_RETOKENIZE", "0")}\n"""\n'
    (tmp_path / "s.py").write_text(text)
    (tmp_path / "run.sh").write_text("export SGLANG_MM_AVOID_RETOKENIZE=0\n")
    res = run(tmp_path, ["check", "--no-cache", "--add-noqa", "."])
    assert (tmp_path / "run.sh").read_text() == "export SGLANG_MM_AVOID_RETOKENIZE=0\n"
    assert "run.sh: no suppression comments added: only .py files and patches take them" in res.stderr
    assert (tmp_path / "s.py").read_text() == text or "s.py:2" in res.stderr
    assert compile((tmp_path / "s.py").read_text(), "s.py", "exec")


def test_add_noqa_usage_errors(tree):
    assert run(tree, ["check", "--no-cache", "--add-noqa", "--fix", "."]).exit_code == 2
    assert run(tree, ["check", "--no-cache", "--add-noqa", "-", "--stdin-filename", "x.py"], input=CALL).exit_code == 2


# ----- --show-files, --show-settings, --isolated, -v, configuration files ------------


def test_show_files_and_settings(tree):
    (tree / "pyproject.toml").write_text('[tool.patchaudit]\nselect = ["PA104"]\n')
    files = run(tree, ["check", "--no-cache", "--show-files", "."])
    assert files.exit_code == 0
    assert files.stdout.splitlines() == ["a.py  (python)", "env.py  (python)", "p.patch  (patch)", "u.py  (python)"]
    settings = run(tree, ["check", "--no-cache", "--show-settings", "."])
    assert settings.exit_code == 0 and "Rules (1): PA104" in settings.stdout
    assert f"Configuration: {tree / 'pyproject.toml'}" in settings.stdout
    assert "  select = ['PA104']" in settings.stdout
    isolated = run(tree, ["check", "--no-cache", "--show-settings", "--isolated", "."])
    assert "Configuration: none (--isolated)" in isolated.stdout and "PA101" in isolated.stdout


def test_isolated_ignores_every_configuration_file(tree):
    (tree / "patchaudit.toml").write_text('select = ["PA104"]\n')
    assert [f["code"] for f in json.loads(run(tree, ["check", "--no-cache", "--format", "json", "."]).stdout)] == \
        ["PA104"]
    iso = json.loads(run(tree, ["check", "--no-cache", "--format", "json", "--isolated", "."]).stdout)
    assert {f["code"] for f in iso} == {"PA101", "PA104"}
    both = run(tree, ["check", "--no-cache", "--isolated", "--config", "patchaudit.toml", "."])
    assert both.exit_code == 2 and "--isolated" in both.stderr


def test_verbose_says_what_the_run_used(tree):
    res = run(tree, ["check", "--no-cache", "-v", "a.py"])
    assert "patchaudit: configuration: none: the defaults" in res.stderr
    assert re.search(r"patchaudit: 1 file checked \(0 from the cache\) in \d+\.\d\ds", res.stderr)
    assert "patchaudit:" not in run(tree, ["check", "--no-cache", "a.py"]).stderr


@pytest.mark.parametrize("present,expected", [
    ((".patchaudit.toml", "patchaudit.toml", "pyproject.toml"), ".patchaudit.toml"),
    (("patchaudit.toml", "pyproject.toml"), "patchaudit.toml"),
    (("pyproject.toml",), "pyproject.toml"),
])
def test_configuration_files_in_ruffs_order(tree, present, expected):
    select = {".patchaudit.toml": "PA001", "patchaudit.toml": "PA104", "pyproject.toml": "PA101"}
    for name in present:
        body = f'select = ["{select[name]}"]\n'
        (tree / name).write_text(f"[tool.patchaudit]\n{body}" if name == "pyproject.toml" else body)
    res = run(tree, ["check", "--no-cache", "--format", "json", "."])
    assert {f["code"] for f in json.loads(res.stdout)} == {select[expected]}


def test_own_configuration_file_errors_name_it_without_the_pyproject_table(tree):
    (tree / "patchaudit.toml").write_text('selct = ["PA101"]\n')
    res = run(tree, ["check", "--no-cache", "."])
    assert res.exit_code == 2 and "patchaudit.toml: unknown key 'selct'" in res.stderr
    assert "[tool.patchaudit]" not in res.stderr
    # the run's configuration is the project root's, never a nested one the paths name
    # (SECURITY.md R4); run from inside the sub-project, its own file is the root's
    (tree / "patchaudit.toml").write_text('select = ["PA104"]\n')
    sub = tree / "sub"
    sub.mkdir()
    (sub / "a.py").write_text(CALL)
    (sub / ".patchaudit.toml").write_text('select = ["PA101"]\n')
    assert json.loads(run(tree, ["check", "--no-cache", "--format", "json", "sub"]).stdout) == []
    assert [f["code"] for f in json.loads(run(sub, ["check", "--no-cache", "--format", "json", "."]).stdout)] == \
        ["PA101"]


def test_bump_takes_output_format():
    from patchaudit.commands.bump import bump

    names = {o for p in bump.params for o in p.opts}
    assert {"--output-format", "--format"} <= names
    res = cli_runner().invoke(main, ["bump", "--output-format", "xml"])
    assert res.exit_code == 2 and "xml" in res.stderr


# ----- --watch ------------------------------------------------------------------------


def test_watch_checks_again_when_a_file_changes(tree):
    env = {**os.environ, "PATCHAUDIT_WATCH_CYCLES": "2", "PATCHAUDIT_WATCH_INTERVAL": "0.05", "COLUMNS": "200"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "patchaudit", "check", "--no-cache", "--watch",
                             "--output-format", "concise", "a.py"],
                            cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = []
        while not first or not first[-1].startswith("Found"):
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else ""
            first.append(line)
        assert first[0].startswith("a.py:1:7: PA101")
        (tree / "a.py").write_text("x = 1\n")  # the change the watcher polls for
        rest, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0  # the second check's code: clean
    assert "All checks passed (1 file checked)." in rest
    assert "watching for file changes" in err and "a file changed: checking again" in err


def test_add_noqa_plan_in_patches_and_python():
    from patchaudit.model.findings import Finding, Severity
    from patchaudit.pipeline.noqa import add_noqa, with_codes

    assert with_codes("x = 1  # patchaudit: ignore", ["PA101"]) == "x = 1  # patchaudit: ignore"
    assert with_codes("x = 1  # noqa: PA101", ["PA101"]) == "x = 1  # noqa: PA101"
    assert with_codes("x = 1\r", ["PA104"]) == "x = 1  # patchaudit: ignore[PA104]\r"

    def at(path, line, code="PA101"):
        return Finding(code, "n", Severity.ERROR, "m", path, line)

    patch = ("--- a/run.sh\n+++ b/run.sh\n@@ -1 +1 @@\n-a\n+export X=0\n"
             "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n ctx = 1\n-y = 2\n+y = f(1, \\\n")
    py = 'a = 1 + \\\n    2\nb = """\ntext\n"""\n'
    out = add_noqa([at("p.patch", 5), at("p.patch", 9), at("p.patch", 11), at("m.py", 1), at("m.py", 4)],
                   {"p.patch": patch, "m.py": py}, set())
    assert [f.new == f.old for f in out.files] == [True, True]
    assert out.added == 0
    joined = "\n".join(out.messages)
    assert "p.patch:5: no suppression comment added: run.sh is not a Python file" in joined
    assert "p.patch:9: no suppression comment added: not a line the patch adds" in joined
    assert "p.patch:11: no suppression comment added: it continues on the next line (a backslash)" in joined
    assert "m.py:1: no suppression comment added: it continues on the next line (a backslash)" in joined
    assert "m.py:4: no suppression comment added: it ends inside a string" in joined


def test_fixable_and_unfixable_from_the_configuration(tree):
    (tree / "patchaudit.toml").write_text('extend-select = ["PA001"]\nunfixable = ["PA0"]\n')
    res = run(tree, ["check", "--no-cache", "--fix", "u.py"])
    assert (tree / "u.py").read_text() == UNUSED and "[*]" not in res.stdout
    (tree / "patchaudit.toml").write_text('extend-select = ["PA001"]\nfixable = ["PA104"]\n')
    run(tree, ["check", "--no-cache", "--fix", "--unsafe-fixes", "u.py", "env.py"])
    assert (tree / "u.py").read_text() == UNUSED and '"1"' in (tree / "env.py").read_text()
    (tree / "env.py").write_text(ENV_PY)
    run(tree, ["check", "--no-cache", "--fix", "--fixable", "PA001", "u.py", "env.py"])  # the option wins
    assert (tree / "u.py").read_text() == "x = 1\n"


def test_declared_fixes_are_read_without_importing_the_rules():
    """`[*]` and the hint read each rule's declared `fix` from its source (a replayed run
    imports no rule module); it is the class's own value."""
    from patchaudit.config.registry import all_rules
    from patchaudit.reporters.fixable import _declared

    for code, rule in all_rules().items():
        assert _declared(code) == getattr(rule, "fix", None), code
