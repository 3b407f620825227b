"""The report of `patchaudit port`: one row per hunk (ported: clean / offset / merged /
moved to X / dropped: upstream has it at Y; or flagged: why), with the verification
results, as text, Markdown (for the pull request) or JSON."""

from __future__ import annotations

from typing import Any

from patchaudit.model.escape import json_text, safe

__all__ = ["render_port"]

_ORDER = ["clean", "offset", "fuzz", "merged", "moved", "dropped", "flagged"]


def _summary(report: Any) -> str:
    counts = report.counts()
    parts = [f"{counts[s]} {s}" for s in _ORDER if counts.get(s)]
    return f"{len(report.hunks)} hunks: " + (", ".join(parts) if parts else "none")


def _what(h: Any) -> str:
    if h.status == "flagged":
        return f"flagged: {h.detail}"
    label = {"dropped": "dropped", "moved": "ported"}.get(h.status, "ported")
    detail = f" ({h.detail})" if h.detail and h.status not in ("dropped", "moved") else ""
    if h.status in ("dropped", "moved"):
        return f"{label}: {h.detail}"
    return f"{label}: {h.status}{detail}"


def _checks(h: Any) -> str:
    if not h.checks:
        return ""
    return ", ".join(f"{c.name} {'ok' if c.ok else 'FAILED'}" for c in h.checks)


def _where(h: Any) -> str:
    return f"{h.where[0]}:{h.where[1]}" if h.where else h.path


def render_text(report: Any) -> str:
    out = [f"port {report.engine}: {report.old_label} -> {report.new_label}"]
    for h in report.hunks:
        checks = _checks(h)
        out.append(
            f"{h.patch}:{h.header_line}: hunk #{h.hunk} {_where(h)}: {_what(h)}" + (f" [{checks}]" if checks else "")
        )
    for o in report.outs:
        if o.rejects:
            out.append(f"{o.name}: {sum(1 for r in o.rejects if r.startswith('# '))} conflict(s) in {o.name}.rej")
    if not report.rules_checked:
        out.append("note: the rules pass (the call-signature and token-in/token-out rules) did not run")
    out.append(_summary(report))
    return "\n".join(safe(line) for line in out) + "\n"


def _cell(text: str) -> str:
    return safe(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(report: Any) -> str:
    out = [
        f"### `patchaudit port` {_cell(report.engine)}: {_cell(report.old_label)} -> {_cell(report.new_label)}",
        "",
        _summary(report),
        "",
        "| patch | hunk | file | result | checks |",
        "|---|---|---|---|---|",
    ]
    for h in report.hunks:
        where = f"{_cell(h.patch)}:{h.header_line} | #{h.hunk} | `{_cell(_where(h))}`"
        out.append(f"| {where} | {_cell(_what(h))} | {_cell(_checks(h))} |")
    return "\n".join(out) + "\n"


def render_port(report: Any, fmt: str) -> str:
    if fmt == "json":
        return json_text(report.to_json()) + "\n"
    if fmt == "markdown":
        return render_markdown(report)
    return render_text(report)
