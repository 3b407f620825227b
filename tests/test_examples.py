"""`examples/` shows every rule that needs no engine or tokenizer (examples/README.md
promises it): the list of those rules comes from the registry, not from this file,
so a new engine-free rule without an example fails here."""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path

from patchaudit.config.registry import all_rules
from patchaudit.testing import invoke_in

REPO = Path(__file__).resolve().parents[1]


def fired(*args: str) -> dict[str, set[str]]:
    res = invoke_in(REPO, ["check", "--no-cache", "--format", "json", *args, "examples/"])
    assert res.exit_code == 1, res.stderr
    out: dict[str, set[str]] = {}
    for f in json.loads(res.stdout):
        out.setdefault(f["code"], set()).add(f["path"])
    return out


def engine_free() -> dict[str, bool]:
    """code -> on by default, for every built-in rule that needs nothing beyond its input."""
    return {code: r.default_enabled for code, r in all_rules().items() if not r.needs}


def test_every_engine_free_rule_fires_on_the_examples():
    rules = engine_free()
    assert {"PA101", "PA103", "PA301", "PA302", "PA304"} <= set(rules)  # the registry is read
    default = fired()
    missing = sorted(c for c, on in rules.items() if on and c not in default)
    assert not missing, f"engine-free rules with no example in examples/: {missing}"
    everything = fired("--extend-select", "PA001")
    assert not sorted(set(rules) - set(everything)), "opt-in engine-free rules without an example"


def test_the_clean_counterparts_stay_clean():
    res = invoke_in(REPO, ["check", "--no-cache", "examples/clean", "examples/rollout/geo3k_vlm_multi_turn_ok.py"])
    assert res.exit_code == 0, res.stdout


def test_the_readme_table_names_what_fires():
    """Each rule of examples/README.md's table fires at the file the row names."""
    table = (REPO / "examples" / "README.md").read_text(encoding="utf-8")
    found = fired("--extend-select", "PA001")
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert rows
    for row in rows:
        where, rule = row.split("|")[1:3]
        code = re.search(r"PA\d{3}", rule).group(0)
        names = re.findall(r"`([^`]+)`", where)
        hits = [n for n in names if any(fnmatch.fnmatch(p, f"examples/{n}") for p in found.get(code, ()))]
        assert hits, (code, names, found.get(code))
