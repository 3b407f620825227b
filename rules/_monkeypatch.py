"""Shared pieces of the monkey-patch rules (PA206, PA207, and PA203 under
`patchaudit bump`): the engine tree of their examples, the rule base that runs
recognition once per file, and the judgement of a patch across a bump."""

from __future__ import annotations

from typing import Any, ClassVar

from libcst.metadata import PositionProvider, QualifiedNameProvider, ScopeProvider

from patchaudit.analysis import monkeypatch
from patchaudit.analysis.monkeypatch_filter import engine_packages, may_have_sites
from patchaudit.analysis.monkeypatch_records import MonkeyPatch
from patchaudit.lint.rule import PYTHON, Rule
from patchaudit.model.findings import Finding, Target

from .pa203_patched_code_changed_upstream import PatchedCodeChangedUpstream

SCHEDULER = """\
class Scheduler:
    def __init__(self, server_args):
        self.server_args = server_args

    def process_input_requests(self, recv_reqs):
        return [self.handle(r) for r in recv_reqs]

    def handle(self, req, priority=0):
        return req

    async def generate_request(self, obj, request=None):
        return obj

    @staticmethod
    def is_ready(state):
        return state == "ready"
"""

ENGINE_MOD = """\
def _set_envs_and_config(server_args):
    return server_args
"""


def engine_tree(scheduler: str = SCHEDULER) -> dict[str, str]:
    return {
        "python/sglang/__init__.py": "",
        "python/sglang/srt/__init__.py": "",
        "python/sglang/srt/managers/__init__.py": "",
        "python/sglang/srt/managers/scheduler.py": scheduler,
        "python/sglang/srt/entrypoints/__init__.py": "",
        "python/sglang/srt/entrypoints/engine.py": ENGINE_MOD,
    }


class MonkeypatchRule(Rule):
    """Base of PA206/PA207: recognition and checks run once per file (cached
    on the unit) and each rule reports the issues of its kind."""

    kinds = frozenset({PYTHON})
    needs = frozenset({"engine"})
    #: sound for the default engine packages; with settings, `can_match` uses
    #: the run's packages (`engine-packages`, `--engine NAME=...`)
    requires = (("sglang",), ("vllm",), ("megatron",))
    METADATA_DEPENDENCIES = (PositionProvider, ScopeProvider, QualifiedNameProvider)
    #: the kind of `monkeypatch.Issue` this rule reports
    issue_kind: ClassVar[str] = ""
    #: a patch's monkey-patch is judged on its own statement and the engine's index (which
    #: sees the whole patched file): exact mode runs these rules on the changed definitions
    sliceable = True

    @classmethod
    def can_match(cls, text: str, settings: Any = None) -> bool:
        return may_have_sites(text, engine_packages(settings))

    @classmethod
    def can_match_unit(cls, unit: Any, settings: Any = None) -> bool:
        """A patched engine file whose judged lines (the patch's) hold no site: nothing to
        report there, so no scope analysis of the whole file."""
        judged = getattr(unit, "judged", None)
        return judged is None or may_have_sites(unit.text, engine_packages(settings), judged)

    @classmethod
    def judges(cls, issue: monkeypatch.Issue) -> bool:
        """Whether this rule reports `issue`."""
        return issue.kind == cls.issue_kind

    #: [tool.patchaudit.rules.PA206] / [...PA207]: also list assignments in test files
    #: (tests/, test_*.py, conftest.py), which are stubs of the engine, not patches of it
    options = {"include-tests": False}

    def visit_Module(self, node) -> None:
        include_tests = bool(self.opts.get("include-tests", False))
        for issue in monkeypatch.unit_issues(self, node, include_tests, self.context.read):
            if not self.judges(issue):
                continue
            mp = issue.patch
            self.report_at(mp.line, mp.column, mp.end_line, mp.end_column, issue.message)


def finding_for(rule: type[Rule], issue: monkeypatch.Issue, lines: list[str] | None = None) -> Finding:
    """A Finding of `rule` for an issue, located at the patch site, its target the engine definition."""
    mp = issue.patch
    target = None
    got = issue.lookup
    if got is not None and got.path is not None:
        target = Target(got.path, got.line, got.qualname)
    context = []
    if lines is not None and 0 < mp.line <= len(lines):
        context = [lines[mp.line - 1]]
    return Finding(
        code=rule.code,
        name=rule.name,
        severity=rule.severity,
        message=issue.message,
        path=mp.path,
        line=mp.line,
        column=mp.column + 1,
        end_line=mp.end_line,
        end_column=mp.end_column + 1,
        target=target,
        context=context,
    )


def bump_findings(
    rules: list[type[Rule]], mp: MonkeyPatch, old_ctx, new_ctx, lines: list[str] | None = None
) -> list[Finding]:
    """What the selected `rules` report for one monkey-patch across an engine bump:
    PA203 when the patched target's definition changed between OLD and NEW (its
    source text, so a definition that only moved is unchanged; a patch gated off
    on both versions is skipped), PA206/PA207 against NEW."""
    findings = []
    if PatchedCodeChangedUpstream in rules and not (
        monkeypatch.gated_off(mp, old_ctx) and monkeypatch.gated_off(mp, new_ctx)
    ):
        issue = monkeypatch.changed_upstream(mp, old_ctx, new_ctx)
        if issue is not None:
            findings.append(finding_for(PatchedCodeChangedUpstream, issue, lines))
    site_rules = [r for r in rules if issubclass(r, MonkeypatchRule)]
    for issue in monkeypatch.check_site(mp, new_ctx):
        for rule in site_rules:
            if rule.judges(issue):
                findings.append(finding_for(rule, issue, lines))
    return findings
