"""The README's promises: rule table in sync, the quick start is what CI runs."""

import re
from pathlib import Path

from patchaudit.config.registry import all_rules

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def test_rule_table_lists_every_rule():
    table = README.split("<!-- rule-table", 1)[1].split("<!-- /rule-table -->", 1)[0]
    rows = re.findall(r"^\| (PA\d{3}) \| ([a-z0-9-]+) \|", table, re.M)
    assert dict(rows) == {code: r.name for code, r in all_rules().items()}


def test_quick_start_test_command_is_what_ci_runs():
    quick = README.split("## Quick start", 1)[1].split("##", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)\n```", quick, re.S)
    assert len(blocks) == 2
    assert "patchaudit check examples/" in blocks[0]
    ci = (REPO / ".ci" / "run").read_text()
    assert blocks[1].strip() in ci
