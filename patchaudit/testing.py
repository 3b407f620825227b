"""Running a rule's VALID/INVALID examples through the real pipeline.

Used by the test suite (`tests/test_rule_examples.py`) and available to anyone
writing a rule.  An example is written to a temporary folder under the file
name its kind implies, its engine tree (if any) beside it, and checked with
only its rule selected, the way `patchaudit check --select CODE` would.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Any

from patchaudit.config.registry import all_rules
from patchaudit.config.settings import EngineSpec, Settings
from patchaudit.inputs.discover import classify
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


def run_example(rule: type[Rule], ex: Example, workdir: Path):
    """Run one example; returns (findings of the rule, all findings, errors)."""
    from patchaudit.pipeline.runner import run_check

    workdir.mkdir(parents=True, exist_ok=True)
    target = workdir / "src" / ex.file_name()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(ex.source.encode("utf-8", "surrogateescape"))
    extra = []
    for name, content in (ex.files or {}).items():
        p = target.parent / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(content).lstrip("\n"), encoding="utf-8")
        if classify(name) is not None:  # data files (a quilt `series`) are only read
            extra.append(p)
    settings = Settings(select=[rule.code], cache=False, jobs=1)
    if ex.engine is not None:
        engine_dir = workdir / "engine"
        write_tree(engine_dir, ex.engine)
        settings.engines = [EngineSpec("sglang", str(engine_dir))]
    if ex.options:
        settings.rule_options = {rule.code: dict(ex.options)}
    if ex.tokenizer is not None:
        tok = workdir / "tokenizer.json"
        tok.write_text(json.dumps(ex.tokenizer), encoding="utf-8")
        settings.tokenizer = str(tok)
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        rel = [os.path.relpath(p, workdir) for p in [target, *extra]]
        result: Any
        if ex.engine_old is not None:  # an engine-pair rule: `patchaudit bump` from engine_old to engine
            from patchaudit.pipeline.bump import run_bump

            write_tree(workdir / "engine_old", ex.engine_old)
            settings.engines = []
            result = run_bump(rel, "sglang", "engine_old", "engine", settings)
        else:
            result = run_check(rel, settings)
    finally:
        os.chdir(cwd)
    mine = [f for f in result.findings if f.code == rule.code]
    return mine, result.findings, result.errors


def check_example(rule: type[Rule], invalid: bool, ex: Example, workdir: Path) -> None:
    """Assert the example behaves as declared (AssertionError with details otherwise)."""
    mine, _, errors = run_example(rule, ex, workdir)
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
