"""The driver turns a rule's reports into findings: a report's lines mapped back to the place a
user reads (a `.py` file, or the patch file's own line plus the engine file's line) through the
unit's line maps (`patchaudit/units`), in one place.  Nothing below the driver builds a
`Finding` (tests/test_architecture.py)."""

from __future__ import annotations

from typing import Protocol

from patchaudit.model.findings import Finding, Report, Severity, Target, TraceStep
from patchaudit.units import INCOMPLETE_NOTE, Unit


class RuleIdentity(Protocol):
    """What the mapping needs of a rule (a `Rule` class of patchaudit/lint/rule.py has it)."""

    code: str
    name: str
    severity: Severity


def to_finding(unit: Unit, rule: RuleIdentity, rep: Report) -> Finding | None:
    """Map a report to a finding, or None when it lies outside the judged lines."""
    trace_lines = [l for l, _ in rep.trace]
    if not unit.judges(rep.line, rep.end_line) and not any(unit.judges(l, l) for l in trace_lines):
        return None
    anchor = rep.line
    info = unit.info(anchor)
    if info is None or (
        unit.judged is not None and anchor not in unit.judged and not unit.judges(rep.line, rep.end_line)
    ):
        # e.g. a trace-only hit: anchor at the first judged line of the range/trace
        cands = [l for l in range(rep.line, rep.end_line + 1) if unit.judges(l, l)] or [
            l for l in trace_lines if unit.judges(l, l)
        ]
        for c in cands:
            if unit.info(c) is not None:
                anchor, info = c, unit.info(c)
                break
    if info is None:
        return None
    column = (rep.column if anchor == rep.line else 0) + info.col_shift + 1
    end_info = unit.info(rep.end_line)
    end_line = end_info.line if end_info else info.line
    end_column = rep.end_column + (end_info.col_shift if end_info else 0) + 1
    message = rep.message
    if rep.incomplete or unit.is_incomplete(rep.end_line, rep.end_column):
        message += f" ({INCOMPLETE_NOTE})"
    target = None
    if unit.target_path is not None:
        target = Target(unit.target_path, info.target_line, unit.symbol_at(anchor))
    trace = []
    for l, note in rep.trace:
        ti = unit.info(l)
        if ti is None and unit.target_path is not None:
            # exact mode: a step outside the patch's lines is a line of the patched engine file
            trace.append(TraceStep(unit.target_path, l, note))
        else:
            trace.append(TraceStep(unit.path, ti.line if ti else l, note))
    return Finding(
        code=rule.code,
        name=rule.name,
        severity=rep.severity or rule.severity,
        message=message,
        path=unit.path,
        line=info.line,
        column=column,
        end_line=max(end_line, info.line),
        end_column=end_column,
        target=target,
        trace=trace,
        context=unit.context_lines(anchor),
        fix=rep.fix,
    )
