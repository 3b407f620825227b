"""A dataflow hit (patchaudit/analysis) as the rule reports it: the rules build their reports,
the analysis layer does not (tests/test_architecture.py)."""

from __future__ import annotations

from typing import Any

from patchaudit.analysis.dataflow import file_steps
from patchaudit.model.findings import Report


def hit_report(hit: Any, position: Any) -> Report:
    """A hit as the rule would report it (`Rule.report`): its node's range, its trace."""
    pos = position(hit.node)
    return Report(
        pos.start.line,
        pos.start.column,
        pos.end.line,
        pos.end.column,
        hit.message,
        file_steps(hit.steps),
        hit.severity,
    )
