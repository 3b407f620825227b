"""docs/rules.md is generated from the rule docs (`patchaudit rules --format markdown`)
and checked in: SARIF's `helpUri` points at its sections.  This test keeps the
checked-in file equal to the generated one; after editing a rule's docstring run
`patchaudit rules --format markdown > docs/rules.md`."""

from __future__ import annotations

from pathlib import Path

from patchaudit.config.registry import all_rules
from patchaudit.reporters.rule_docs import render
from patchaudit.testing import invoke_in

REPO = Path(__file__).resolve().parents[1]


def test_checked_in_rules_md_is_the_generated_one():
    generated = render(all_rules().values())
    checked_in = (REPO / "docs" / "rules.md").read_text(encoding="utf-8")
    assert checked_in == generated, "docs/rules.md is stale: run `patchaudit rules --format markdown > docs/rules.md`"


def test_the_command_prints_it(tmp_path):
    res = invoke_in(tmp_path, ["rules", "--format", "markdown"])
    assert res.exit_code == 0
    assert res.stdout == render(all_rules().values())


def test_every_rule_has_its_section_and_anchor():
    text = render(all_rules().values())
    for code, rule in all_rules().items():
        assert f"\n## {code}\n" in text and f"](#{code.lower()})" in text
        assert rule.name in text
    # the rules' own `## What it does` are one level down, under the code
    assert "\n### What it does\n" in text and "\n## What it does\n" not in text


def test_incidents_cite_public_references_not_internal_seed_numbers():
    """`explain` and docs/rules.md are read outside this repository: an incident names
    a public issue or pull request (owner/repo#N) or is described in plain words."""
    for code, rule in all_rules().items():
        doc = rule.docs()
        assert "seed report" not in doc and "seed-0" not in doc, code
        assert "## Incident" in doc, code
