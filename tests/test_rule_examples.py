"""Every rule's VALID and INVALID examples, run through the real pipeline."""

import pytest

from patchaudit.config.registry import all_rules
from patchaudit.testing import all_examples, check_example

EXAMPLES = all_examples()


@pytest.mark.parametrize("rule,invalid,ex", [e[:3] for e in EXAMPLES], ids=[e[3] for e in EXAMPLES])
def test_example(rule, invalid, ex, tmp_path):
    check_example(rule, invalid, ex, tmp_path)


@pytest.mark.parametrize("code", list(all_rules()))
def test_rule_is_documented_and_has_examples(code):
    rule = all_rules()[code]
    doc = rule.docs()
    for heading in ("## What it does", "## Why is this bad?", "## Example", "## Use instead", "## Incident"):
        assert heading in doc, f"{code} docs lack {heading!r}"
    assert rule.name and rule.code.startswith("PA")
    assert rule.INVALID, f"{code} has no INVALID examples"
    assert rule.VALID, f"{code} has no VALID examples"
