"""Text output in ruff's shape: `path:line:col: CODE message`, then details.

Every value from the checkout goes through `escape.visible()` and every block
through `escape.safe_lines()`: control characters show as escapes and no line
starts a CI workflow command (patchaudit/model/escape.py).
"""

from __future__ import annotations

import click

from patchaudit.model.escape import safe_lines, visible

_SEV_COLOR = {"error": "red", "warning": "yellow", "info": "cyan"}


def style(text: str, color: bool, **kw) -> str:
    return click.style(text, **kw) if color else text


def format_finding(f, color: bool = False) -> str:
    head = (
        f"{style(visible(f.path), color, bold=True)}:{f.line}:{f.column}: "
        f"{style(visible(f.code), color, fg=_SEV_COLOR.get(f.severity.value), bold=True)} "
        f"{visible(f.message)}"
    )
    out = [head]
    if f.target is not None:
        where = visible(f.target.path) + (f":{f.target.line}" if f.target.line else "")
        sym = f" in {visible(f.target.symbol)}" if f.target.symbol else ""
        out.append(f"  {style('-->', color, fg='blue')} {where}{sym}")
    if f.trace:
        out.append("  trace:")
        for k, step in enumerate(f.trace, 1):
            out.append(f"    {k}. {visible(step.path)}:{step.line}: {visible(step.note)}")
    if f.context:
        for line in f.context:
            out.append(f"   {style('|', color, fg='blue')} {visible(line)}")
    return safe_lines("\n".join(out))


def summary(result) -> str:
    n = len(result.findings)
    by = {"error": 0, "warning": 0, "info": 0}
    for f in result.findings:
        by[f.severity.value] += 1
    files = f"{result.files} file{'s' if result.files != 1 else ''}"
    if not n:
        return f"All checks passed ({files} checked)."
    parts = ", ".join(f"{v} {k}{'s' if v != 1 else ''}" for k, v in by.items() if v)
    return f"Found {n} finding{'s' if n != 1 else ''} ({parts}) in {files}."


def hunk_summary(hunks: list[dict]) -> str:
    """Exact mode: how the hunks applied; offsets are not findings but are shown here."""
    if not hunks:
        return ""
    counts: dict[str, int] = {}
    for h in hunks:
        counts[h["status"]] = counts.get(h["status"], 0) + 1
    order = ["clean", "offset", "fuzz", "failed", "already-applied", "missing-file", "unreadable", "malformed"]
    head = "Hunks: " + ", ".join(f"{counts[k]} {k}" for k in order if k in counts)
    lines = [head]
    for h in hunks:
        if h["status"] == "clean":
            continue
        detail = h["status"]
        if h["status"] == "offset":
            detail = f"offset {h['offset']} line{'s' if abs(h['offset']) != 1 else ''}"
        elif h["status"] == "fuzz":
            detail = f"fuzz {h['fuzz']}" + (f", offset {h['offset']}" if h["offset"] else "")
        at = f":{h['engine_line']}" if h.get("engine_line") else ""
        sym = f" in {visible(h['symbol'])}" if h.get("symbol") else ""
        lines.append(
            f"  {visible(h['patch'])}:{h['patch_line']}: hunk #{h['hunk']} {detail} -> {visible(h['target'])}{at}{sym}"
        )
    return safe_lines("\n".join(lines))


def render(result, *, color: bool = False, rules=None) -> str:
    blocks = [format_finding(f, color) for f in result.findings]
    out = "\n".join(blocks)
    if out:
        out += "\n\n"
    hunks = hunk_summary(result.hunks or [])
    if hunks:
        out += hunks + "\n"
    return safe_lines(out + summary(result) + "\n")
