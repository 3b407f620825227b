"""The text report of `patchaudit bump` (a `patchaudit.pipeline.bump.BumpReport`).

The hunk table (how every hunk applies to OLD and to NEW, the ones whose code
changed upstream), the findings, and a summary line; every value escaped
(patchaudit/model/escape.py).
"""

from __future__ import annotations

from patchaudit.model.escape import safe_lines, visible


def render_text(report, color: bool = False) -> str:
    """The text report; every value escaped (patchaudit/model/escape.py)."""
    from patchaudit.reporters.text import format_finding, style

    v = visible

    out = [style(f"patchaudit bump {v(report.engine)}: {v(report.old_name)} -> {v(report.new_name)}", color, bold=True)]
    if report.hunks:
        out.append("")
        out.append(f"Hunks (on {v(report.old_name)} -> on {v(report.new_name)}):")
        for row in report.hunks:
            old = v(row.old.label()) if row.old else "-"
            new = v(row.new.label()) if row.new else "-"
            if row.moved_to:
                new += f" (moved to {v(row.moved_to)}: {v(row.moved.label()) if row.moved else '?'})"
            flag = "  [changed upstream]" if row.changed_upstream else ""
            sym = f"  {v(row.symbol)}" if row.symbol else ""
            out.append(f"  {v(row.patch)}:{row.patch_line}  {v(row.target)}  #{row.hunk}{sym}  {old} -> {new}{flag}")
    if report.findings:
        out.append("")
        out.extend(format_finding(f, color) for f in report.findings)
    out.append("")
    out.append(summary_line(report))
    return safe_lines("\n".join(out) + "\n")


def summary_line(report) -> str:
    by = {"error": 0, "warning": 0, "info": 0}
    for f in report.findings:
        by[f.severity.value] += 1
    counts = report.hunk_counts()
    on_new = f"on {visible(report.new_name)}"
    hunks = (
        f"{len(report.hunks)} hunk{'s' if len(report.hunks) != 1 else ''} {on_new}: "
        + ", ".join(f"{v} {k}" for k, v in counts.items() if v)
        if report.hunks
        else "no hunks"
    )
    n = len(report.findings)
    if not n:
        return f"No findings ({hunks})."
    parts = ", ".join(f"{v} {k}{'s' if v != 1 else ''}" for k, v in by.items() if v)
    return f"Found {n} finding{'s' if n != 1 else ''} ({parts}); {hunks}."
