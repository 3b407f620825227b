"""`--format sarif`: SARIF 2.1.0 that validates against the official schema.

The schema is vendored in tests/data/ (from the OASIS errata01 release) so the
test never depends on anything outside the checkout.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

import jsonschema
import pytest
from click.testing import CliRunner

from patchaudit.cli import main
from patchaudit.model.findings import FileError, Finding, Severity, Target, TraceStep
from patchaudit.reporters import render
from patchaudit.reporters.sarif import FINGERPRINT_KEY
from patchaudit.config.registry import all_rules
from patchaudit.pipeline.results import RunResult
from patchaudit.testing import run_example

REPO = Path(__file__).resolve().parents[1]
SCHEMA_PATH = REPO / "tests" / "data" / "sarif-schema-2.1.0.json"


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def test_vendored_schema_is_the_published_one():
    """The schema in tests/data/ is the OASIS file unmodified (its source, digest and
    licence are noted in tests/data/README.md): checked in every clone, nothing skipped."""
    import hashlib

    note = (REPO / "tests" / "data" / "README.md").read_text(encoding="utf-8")
    digest = hashlib.sha256(SCHEMA_PATH.read_bytes()).hexdigest()
    assert digest in note
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    assert schema["id"] in note and "OASIS" in note and "Licence" in note


def assert_valid(validator, doc):
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:10])
    # the schema's "uri" format is not checked by jsonschema without extra packages: check it here
    def uris(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "uri":
                    yield v
                else:
                    yield from uris(v)
        elif isinstance(node, list):
            for v in node:
                yield from uris(v)
    for uri in uris(doc):
        assert " " not in uri and uri == uri.strip()
        urlsplit(uri)


def one_finding_of_every_rule(tmp_path: Path) -> list[Finding]:
    """Run each rule's INVALID examples through the real pipeline until one fires."""
    out: list[Finding] = []
    for code, rule in all_rules().items():
        for k, ex in enumerate(rule.INVALID):
            if ex.count == 0:
                continue
            mine, _, errors = run_example(rule, ex, tmp_path / f"{code}-{k}")
            if mine and not errors:
                out.extend(mine)
                break
        else:
            pytest.fail(f"no INVALID example of {code} produced a finding")
    return out


def test_findings_of_every_rule_validate(tmp_path, validator):
    findings = one_finding_of_every_rule(tmp_path)
    assert {f.code for f in findings} == set(all_rules())
    result = RunResult(findings=findings, files=len(findings))
    doc = json.loads(render("sarif", result))
    assert_valid(validator, doc)

    run = doc["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == sorted(all_rules())
    for r in rules:
        assert r["help"]["text"] and r["help"]["markdown"].startswith(f"# {r['id']}")
        assert "## Why is this bad?" in r["help"]["markdown"]
        assert r["shortDescription"]["text"] and r["fullDescription"]["text"]
    assert len(run["results"]) == len(findings)
    for res, f in zip(run["results"], findings):
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"] == f.code
        loc = res["locations"][0]["physicalLocation"]
        assert unquote(loc["artifactLocation"]["uri"]) == f.path.replace(os.sep, "/")
        assert loc["region"]["startLine"] == f.line
        assert res["partialFingerprints"][FINGERPRINT_KEY] == f.fingerprint
    levels = {res["level"] for res in run["results"]}
    assert levels <= {"error", "warning", "note"}


def test_trace_becomes_a_code_flow_and_target_a_related_location(validator):
    f = Finding(
        code="PA101", name="legacy-loader-drops-input-ids", severity=Severity.INFO, message="m",
        path="patches/sglang.patch", line=10, column=9, end_line=12, end_column=3,
        target=Target("sglang/srt/x.py", 681, "QwenVLImageProcessor.process_mm_data_async"),
        trace=[TraceStep("patches/sglang.patch", 8, "source"), TraceStep("patches/sglang.patch", 10, "sink"),
               TraceStep("patches/0001-other.patch", 4, "the other patch")],
        fingerprint="0123456789abcdef-01234567-0",
    )
    doc = json.loads(render("sarif", RunResult(findings=[f])))
    assert_valid(validator, doc)
    (res,) = doc["runs"][0]["results"]
    assert res["level"] == "note"
    steps = res["codeFlows"][0]["threadFlows"][0]["locations"]
    assert [(s["location"]["physicalLocation"]["region"]["startLine"], s["location"]["message"]["text"])
            for s in steps] == [(8, "source"), (10, "sink"), (4, "the other patch")]
    assert steps[2]["location"]["physicalLocation"]["artifactLocation"]["uri"] == "patches/0001-other.patch"
    related = res["relatedLocations"]
    assert related[0]["physicalLocation"]["artifactLocation"] == {"uri": "sglang/srt/x.py",
                                                                  "uriBaseId": "ENGINEROOT"}
    assert related[0]["physicalLocation"]["region"]["startLine"] == 681
    assert related[1]["physicalLocation"]["artifactLocation"]["uri"] == "patches/0001-other.patch"
    assert res["locations"][0]["logicalLocations"][0]["fullyQualifiedName"] == \
        "QwenVLImageProcessor.process_mm_data_async"
    region = res["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": 10, "startColumn": 9, "endLine": 12, "endColumn": 3}


def test_regions_are_never_inverted(validator):
    f = Finding(code="PA101", name="n", severity=Severity.ERROR, message="m", path="a.py", line=5, column=7,
                end_line=3, end_column=2)
    doc = json.loads(render("sarif", RunResult(findings=[f])))
    assert_valid(validator, doc)
    region = doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]
    assert region["endLine"] >= region["startLine"] and region["endColumn"] >= region["startColumn"]


def test_cli_sarif_with_odd_paths_and_unreadable_files(tmp_path, validator):
    (tmp_path / "dir with space").mkdir()
    (tmp_path / "dir with space" / "rollout #1.py").write_text("out = legacy_load_mm_data(prompt=t)\n")
    (tmp_path / "bad.py").write_bytes(b"x = '\xff'\n")
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        try:
            runner = CliRunner(mix_stderr=False)
        except TypeError:
            runner = CliRunner()
        res = runner.invoke(main, ["check", "--no-cache", "--format", "sarif", "-o", "out.sarif", "."],
                            catch_exceptions=False)
    finally:
        os.chdir(old)
    assert res.exit_code == 2   # a file could not be read
    doc = json.loads((tmp_path / "out.sarif").read_text())
    assert_valid(validator, doc)
    run = doc["runs"][0]
    (result,) = run["results"]
    uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "dir%20with%20space/rollout%20%231.py"
    assert unquote(uri) == "dir with space/rollout #1.py"
    inv = run["invocations"][0]
    assert inv["executionSuccessful"] is False
    (note,) = inv["toolExecutionNotifications"]
    assert "UTF-8" in note["message"]["text"]
    assert note["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "bad.py"
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"].startswith("file://")


def test_empty_run_validates(validator):
    doc = json.loads(render("sarif", RunResult(errors=[FileError("x.patch", "cannot read: denied")])))
    assert_valid(validator, doc)
    assert doc["runs"][0]["results"] == []


# ----- regions, helpUri, informationUri (issue 20) ---------------------------------


def _nonzero(region: dict) -> bool:
    start = (region["startLine"], region.get("startColumn", 1))
    end = (region.get("endLine", region["startLine"]), region.get("endColumn", start[1] + 1))
    return end > start


def test_every_rule_example_has_a_region_that_ends_after_it_starts(tmp_path, validator):
    """Over every INVALID example of every rule (the real pipeline): in JSON the end is
    after the start, and in SARIF no region of a result is zero-width."""
    from patchaudit.lint.rule import iter_examples

    seen = 0
    for code, rule in all_rules().items():
        for k, (invalid, ex) in enumerate(iter_examples(rule)):
            if not invalid or ex.count == 0:
                continue
            _, findings, _ = run_example(rule, ex, tmp_path / f"{code}-{k}")
            for f in findings:
                seen += 1
                j = f.to_json()
                assert (j["end_line"], j["end_column"]) > (j["line"], j["column"]), (code, k, j)
                doc = json.loads(render("sarif", RunResult(findings=[f])))
                assert_valid(validator, doc)
                region = doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]
                assert _nonzero(region), (code, k, region)
    assert seen > len(all_rules())


def test_a_call_cut_by_the_hunk_covers_the_call_on_its_line(tmp_path):
    """Fragment mode: the closing bracket of `legacy_load_mm_data(` lies past the hunk,
    in text the unit invented; the region is the call's line from the call on, not
    `16:30` to `16:2` (the bug of issue 20)."""
    patch = (REPO / "examples" / "patches" / "sglang.patch").read_text(encoding="utf-8")
    (tmp_path / "p.patch").write_text(patch)
    from patchaudit.testing import invoke_in

    res = invoke_in(tmp_path, ["check", "--no-cache", "--select", "PA101", "--format", "json", "p.patch"])
    (f,) = json.loads(res.stdout)
    line = patch.splitlines()[f["line"] - 1]
    assert f["end_line"] == f["line"] and f["end_column"] == len(line) + 1
    assert "legacy_load_mm_data(" in line[f["column"] - 1 : f["end_column"] - 1]


def test_rules_link_their_docs_and_the_driver_its_home(validator):
    from patchaudit.reporters.sarif import REPOSITORY_URL

    doc = json.loads(render("sarif", RunResult()))
    assert_valid(validator, doc)
    driver = doc["runs"][0]["tool"]["driver"]
    assert driver["informationUri"] == REPOSITORY_URL and urlsplit(REPOSITORY_URL).scheme == "https"
    rules_md = (REPO / "docs" / "rules.md").read_text(encoding="utf-8")
    for r in driver["rules"]:
        uri = urlsplit(r["helpUri"])
        assert uri.scheme == "https" and uri.path.endswith("/docs/rules.md")
        assert uri.fragment == r["id"].lower()
        assert f"\n## {r['id']}\n" in rules_md  # the heading GitHub makes the anchor `#pa101` of
