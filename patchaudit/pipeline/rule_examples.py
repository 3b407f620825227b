"""The driver of `patchaudit test-rules`: a rule's VALID/INVALID examples through the real pipeline.

Each example is written to a temporary folder under the file name its kind
implies (its engine tree, other patches, tokenizer beside it) and checked with
only its rule selected, as `patchaudit check --select CODE` would: a VALID
example must give no finding of the rule, an INVALID one `count` findings, the
first on `line` and containing `contains` when the example says so.  The same
judgement as the built-in rules' tests (patchaudit/testing.py,
tests/test_rule_examples.py); `example_problems` returns what is wrong instead
of raising, so a command can report every example.
"""

from __future__ import annotations

import json
import os
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from patchaudit.config.settings import EngineSpec, Settings
from patchaudit.inputs.discover import classify


@dataclass
class ExampleOutcome:
    code: str
    kind: str  # VALID | INVALID
    index: int
    title: str
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _write_tree(root: Path, files: dict[str, str]) -> None:
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content, encoding="utf-8")


def _example_settings(rule: Any, ex: Any, workdir: Path) -> Settings:
    settings = Settings(select=[rule.code], cache=False, jobs=1)
    if ex.engine is not None:
        _write_tree(workdir / "engine", ex.engine)
        settings.engines = [EngineSpec("sglang", str(workdir / "engine"))]
    if ex.options:
        settings.rule_options = {rule.code: dict(ex.options)}
    if ex.tokenizer is not None:
        tok = workdir / "tokenizer.json"
        tok.write_text(json.dumps(ex.tokenizer), encoding="utf-8")
        settings.tokenizer = str(tok)
    return settings


def run_example(rule: Any, ex: Any, workdir: Path, keep: dict | None = None):
    """Run one example in `workdir`; returns (findings of the rule, all findings, errors).
    `keep`, if given, receives the run's "settings", "result" and the example's "path"
    (for checking its fix, patchaudit/testing.py `check_fix`)."""
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
    settings = _example_settings(rule, ex, workdir)
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        rel = [os.path.relpath(p, workdir) for p in [target, *extra]]
        result: Any
        if ex.engine_old is not None:  # an engine-pair rule: `patchaudit bump` from engine_old to engine
            from patchaudit.pipeline.bump import run_bump

            _write_tree(workdir / "engine_old", ex.engine_old)
            settings.engines = []
            result = run_bump(rel, "sglang", "engine_old", "engine", settings)
        else:
            result = run_check(rel, settings)
    finally:
        os.chdir(cwd)
    if keep is not None:
        keep.update(settings=settings, result=result, path=rel[0])
    mine = [f for f in result.findings if f.code == rule.code]
    return mine, result.findings, result.errors


def example_problems(rule: Any, invalid: bool, ex: Any, workdir: Path) -> list[str]:
    """What is wrong with one example's run (an empty list: it behaves as declared)."""
    try:
        mine, _, errors = run_example(rule, ex, workdir)
    except Exception as exc:  # the rule's own code: a crash is that example's failure
        return [f"the run failed: {exc!r}"]
    shown = "; ".join(f"{f.path}:{f.line}:{f.column}: {f.message}" for f in mine) or "none"
    out = [f"error while running it: {e}" for e in errors]
    if not invalid:
        if mine:
            out.append(f"a VALID example gave {len(mine)} finding(s): {shown}")
        return out
    if len(mine) != ex.count:
        out.append(f"expected {ex.count} finding(s), got {len(mine)}: {shown}")
    elif mine and ex.line is not None and mine[0].line != ex.line:
        out.append(f"expected the finding on line {ex.line}, got line {mine[0].line}")
    if mine and ex.contains is not None and ex.contains not in mine[0].message:
        out.append(f"expected {ex.contains!r} in the message: {mine[0].message}")
    return out


def run_rule_examples(rules: Iterable[Any]) -> list[ExampleOutcome]:
    """Every example of every rule of `rules`, in a temporary folder removed afterwards."""
    from patchaudit.lint.rule import iter_examples

    outcomes = []
    with tempfile.TemporaryDirectory(prefix="patchaudit-test-rules-") as tmp:
        for rule in rules:
            counters = {True: 0, False: 0}
            for invalid, ex in iter_examples(rule):
                k = counters[invalid]
                counters[invalid] += 1
                kind = "INVALID" if invalid else "VALID"
                workdir = Path(tmp) / f"{rule.code}-{kind}-{k}"
                outcomes.append(
                    ExampleOutcome(rule.code, kind, k, ex.title, example_problems(rule, invalid, ex, workdir))
                )
    return outcomes
