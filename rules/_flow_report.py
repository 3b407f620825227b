"""A dataflow hit (patchaudit/analysis) as the rule reports it: the rules build their reports,
the analysis layer does not (tests/test_architecture.py)."""

from __future__ import annotations

from typing import Any

from patchaudit.analysis.dataflow import file_steps
from patchaudit.model.findings import Report


def hit_report(hit: Any, positions: Any) -> Report:
    """A hit as the rule reports it: its node's range (libcst's columns: flow_nodes.Positions), its trace."""
    line, column, end_line, end_column = positions.range(hit.node)
    return Report(line, column, end_line, end_column, hit.message, file_steps(hit.steps), hit.severity)
