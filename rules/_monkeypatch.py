"""Shared pieces of the monkey-patch rules (PA206, PA207): the engine tree of
their examples and the rule base that runs recognition once per file."""

from __future__ import annotations

from typing import Any

from libcst.metadata import PositionProvider, QualifiedNameProvider, ScopeProvider

from patchaudit.analysis import monkeypatch
from patchaudit.model.findings import Severity
from patchaudit.lint.rule import PYTHON, Rule

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
    on the unit) and each rule reports the issues of its code."""

    kinds = frozenset({PYTHON})
    needs = frozenset({"engine"})
    #: sound for the default engine packages; with settings, `can_match` uses
    #: the run's packages (`engine-packages`, `--engine NAME=...`)
    requires = (("sglang",), ("vllm",), ("megatron",))
    METADATA_DEPENDENCIES = (PositionProvider, ScopeProvider, QualifiedNameProvider)

    @classmethod
    def can_match(cls, text: str, settings: Any = None) -> bool:
        return monkeypatch.may_have_sites(text, monkeypatch.engine_packages(settings))

    def visit_Module(self, node) -> None:
        for issue in monkeypatch.unit_issues(self, node):
            if issue.code != self.code:
                continue
            mp = issue.patch
            self.report_at(mp.line, mp.column, mp.end_line, mp.end_column, issue.message,
                           severity=Severity(issue.severity) if issue.severity else None)
