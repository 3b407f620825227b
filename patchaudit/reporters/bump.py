"""The text report of `patchaudit bump` (a `patchaudit.pipeline.bump.BumpReport`).

Ordered by what a reviewer must act on: the errors first, then the warnings
and infos, each in patch order; a PA203 (patched code changed upstream) on a
hunk that already has a PA201/PA202/PA208 is folded under that finding (one
hunk, one entry).  Then the hunk table (how every hunk applies to OLD and to
NEW, where the code of a moved file went) and a summary line; every value
escaped (patchaudit/model/escape.py).
"""

from __future__ import annotations

from patchaudit.config.registry import codes_with_role
from patchaudit.model.escape import safe_lines, visible
from patchaudit.model.findings import Finding

_RANK = {"error": 0, "warning": 1, "info": 2}


def fold(findings: list[Finding]) -> tuple[list[Finding], dict[int, list[Finding]]]:
    """(the findings to show, errors first, then warnings, then infos, each in patch order;
    {id(host): the PA203 findings folded into it}): a PA203 at the @@ line (or file header)
    of a hunk that has a PA201, PA202 or PA208 there says nothing the reviewer does not
    already act on, so it goes under that finding."""
    # the rules name their roles (`Rule.roles`): how a hunk applies hosts what changed upstream
    host_codes, folded_codes = codes_with_role("hunk-status"), codes_with_role("changed-upstream")
    hosts: dict[tuple[str, int], Finding] = {}
    for f in findings:
        if f.code in host_codes:
            hosts.setdefault((f.path, f.line), f)
    shown: list[Finding] = []
    folded: dict[int, list[Finding]] = {}
    for f in findings:
        host = hosts.get((f.path, f.line)) if f.code in folded_codes else None
        if host is not None:
            folded.setdefault(id(host), []).append(f)
        else:
            shown.append(f)
    shown.sort(key=lambda f: (_RANK.get(f.severity.value, 3), f.path, f.line, f.column, f.code))
    return shown, folded


def render_text(report, color: bool = False) -> str:
    """The text report; every value escaped (patchaudit/model/escape.py)."""
    from patchaudit.reporters.text import format_finding, style

    v = visible
    out = [style(f"patchaudit bump {v(report.engine)}: {v(report.old_name)} -> {v(report.new_name)}", color, bold=True)]
    note = report.commits_note
    if note:
        out.append(note.replace("`", ""))
    shown, folded = fold(report.findings)
    if shown:
        out.append("")
        for f in shown:
            out.append(format_finding(f, color))
            for extra in folded.get(id(f), []):
                out.append(f"    also {extra.code}: {v(extra.message)}")
    if report.hunks:
        out.append("")
        out.append(f"Hunks (on {v(report.old_name)} -> on {v(report.new_name)}):")
        for row in report.hunks:
            old = v(row.old.label()) if row.old else "-"
            new = v(row.new.label()) if row.new else "-"
            if row.moved_to:
                sym = f" {v(row.moved_symbol)}" if row.moved_symbol else ""
                new += f" (moved to {v(row.moved_to)}{sym}: {v(row.moved.label()) if row.moved else '?'})"
            flag = "  [changed upstream]" if row.changed_upstream else ""
            sym = f"  {v(row.symbol)}" if row.symbol else ""
            out.append(f"  {v(row.patch)}:{row.patch_line}  {v(row.target)}  #{row.hunk}{sym}  {old} -> {new}{flag}")
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
    _, folded = fold(report.findings)
    n_folded = sum(len(v) for v in folded.values())
    what, hosts = "/".join(codes_with_role("changed-upstream")), "/".join(codes_with_role("hunk-status"))
    also = f", {n_folded} {what} folded into their hunk's {hosts}" if n_folded else ""
    return f"Found {n} finding{'s' if n != 1 else ''} ({parts}{also}); {hunks}."
