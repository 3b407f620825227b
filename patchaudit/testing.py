"""Running a rule's VALID/INVALID examples through the real pipeline.

Used by the test suite (`tests/test_rule_examples.py`) and available to anyone
writing a rule.  An example is written to a temporary folder under the file
name its kind implies, its engine tree (if any) beside it, and checked with
only its rule selected, the way `patchaudit check --select CODE` would.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from patchaudit.config.registry import all_rules
from patchaudit.lint.rule import Example, Rule, iter_examples


def example_id(rule: type[Rule], invalid: bool, index: int, ex: Example) -> str:
    kind = "INVALID" if invalid else "VALID"
    title = f"-{ex.title}" if ex.title else ""
    return f"{rule.code}-{kind}-{index}{title}".replace(" ", "_")


def all_examples():
    """(rule, invalid, example, id) for every example of every rule."""
    out = []
    for rule in all_rules().values():
        counters = {True: 0, False: 0}
        for invalid, ex in iter_examples(rule):
            out.append((rule, invalid, ex, example_id(rule, invalid, counters[invalid], ex)))
            counters[invalid] += 1
    return out


def write_tree(root: Path, files: dict[str, str]) -> None:
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content, encoding="utf-8")


def run_example(rule: type[Rule], ex: Example, workdir: Path, keep: dict | None = None):
    """Run one example; returns (findings of the rule, all findings, errors).  `keep`, if
    given, receives the run's "settings", "result" and the example's "path" (for `check_fix`).
    The run is `patchaudit test-rules`'s (patchaudit/pipeline/rule_examples.py)."""
    from patchaudit.pipeline.rule_examples import run_example as run

    return run(rule, ex, workdir, keep)


def check_example(rule: type[Rule], invalid: bool, ex: Example, workdir: Path) -> None:
    """Assert the example behaves as declared (AssertionError with details otherwise)."""
    keep: dict[str, Any] = {}
    mine, _, errors = run_example(rule, ex, workdir, keep)
    shown = "\n".join(f"  {f.path}:{f.line}:{f.column}: {f.code} {f.message}" for f in mine) or "  (none)"
    assert not errors, f"errors while running the example: {[str(e) for e in errors]}"
    if not invalid:
        assert not mine, f"VALID example of {rule.code} produced findings:\n{shown}"
        return
    assert len(mine) == ex.count, f"expected {ex.count} finding(s) of {rule.code}, got {len(mine)}:\n{shown}"
    if ex.count == 0:
        return
    first = mine[0]
    if ex.line is not None:
        assert first.line == ex.line, f"expected the finding on line {ex.line}:\n{shown}"
    if ex.contains is not None:
        assert ex.contains in first.message, f"expected {ex.contains!r} in the message:\n{shown}"
    if ex.expected_fix is not None:
        check_fix(rule, ex, workdir, keep)


def check_fix(rule: type[Rule], ex: Example, workdir: Path, keep: dict[str, Any]) -> None:
    """The example's file after its rule's fixes (`--fix`, `--unsafe-fixes` unless the example
    says otherwise) is `ex.expected_fix`, re-checked with fewer findings of the rule; the
    file on disk is not written (`--diff`'s path)."""
    from patchaudit.pipeline.fix import fix_findings

    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        outcome = fix_findings(keep["result"], keep["settings"], unsafe=ex.unsafe_fixes)
    finally:
        os.chdir(cwd)
    got = next((f.new for f in outcome.files if f.path == keep["path"]), ex.source)
    assert got == ex.fixed_source, (
        f"{rule.code}: the fixed file differs from expected_fix "
        f"(messages: {outcome.messages}):\n--- got ---\n{got}--- expected ---\n{ex.fixed_source}"
    )
    if got != ex.source:
        before = sum(f.code == rule.code for f in keep["result"].findings)
        after = sum(f.code == rule.code for f in outcome.remaining)
        assert after < before, f"{rule.code}: the fix leaves {after} of {before} findings"


def cli_runner():
    """A click CliRunner with stderr captured apart from stdout, on click 8.1 and 8.2+."""
    from click.testing import CliRunner

    try:
        return CliRunner(mix_stderr=False)  # click < 8.2
    except TypeError:
        return CliRunner()


def invoke_in(root, args: list[str]):
    """Run the `patchaudit` command line with `args` from folder `root` (as a user in it would)."""
    from patchaudit.cli import main

    old = os.getcwd()
    os.chdir(root)
    try:
        return cli_runner().invoke(main, list(args), catch_exceptions=False)
    finally:
        os.chdir(old)
