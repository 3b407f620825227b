"""Text output in ruff's shape: `path:line:col: CODE message`, then details.

Two shapes, as ruff's `--output-format`: `full` (the default, also named `text`)
shows under each finding the engine location, the trace of a dataflow rule and
the patch hunk; `concise` is one line per finding.  Both end with the summary
(dropped by `--quiet`), which never says "All checks passed" when a file could
not be checked.

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


def format_finding(f, color: bool = False, concise: bool = False) -> str:
    head = (
        f"{style(visible(f.path), color, bold=True)}:{f.line}:{f.column}: "
        f"{style(visible(f.code), color, fg=_SEV_COLOR.get(f.severity.value), bold=True)} "
        f"{visible(f.message)}"
    )
    if concise:
        return safe_lines(head)
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
    errors = len(getattr(result, "errors", None) or [])
    failed = f"{errors} error{'s' if errors != 1 else ''} (on stderr)" if errors else ""
    if not n:
        if errors:  # never "All checks passed" when something could not be checked
            return f"No findings, but {failed}: not everything was checked ({files} checked)."
        if not result.files:
            return "No files checked."
        return f"All checks passed ({files} checked)."
    parts = ", ".join(f"{v} {k}{'s' if v != 1 else ''}" for k, v in by.items() if v)
    tail = f"; {failed}" if errors else ""
    return f"Found {n} finding{'s' if n != 1 else ''} ({parts}) in {files}{tail}."


def hunk_summary(hunks: list[dict]) -> str:
    """Exact mode: how the hunks applied; offsets are not findings but are shown here."""
    if not hunks:
        return ""
    counts: dict[str, int] = {}
    for h in hunks:
        counts[h["status"]] = counts.get(h["status"], 0) + 1
    order = [
        "clean",
        "offset",
        "fuzz",
        "merged",
        "failed",
        "already-applied",
        "missing-file",
        "not-in-source",
        "unreadable",
        "malformed",
    ]
    head = "Hunks: " + ", ".join(f"{counts[k]} {k}" for k in order if k in counts)
    lines = [head] + patch_summary(hunks, order)
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


def patch_summary(hunks: list[dict], order: list[str]) -> list[str]:
    """Exact mode, one line per patch: its engine, the applier, its hunks by status, and
    whether the build's command applies it at all (git apply: whole or nothing)."""
    per: dict[str, list[dict]] = {}
    for h in hunks:
        per.setdefault(h["patch"], []).append(h)
    out = []
    for patch, rows in per.items():
        counts: dict[str, int] = {}
        for h in rows:
            counts[h["status"]] = counts.get(h["status"], 0) + 1
        statuses = ", ".join(f"{counts[k]} {k}" for k in order + sorted(set(counts) - set(order)) if k in counts)
        first = rows[0]
        engine = first.get("engine_title") or first.get("engine") or ""
        applier = f", {first['applier']}" if first.get("applier") else ""
        stop = next((h for h in rows if h.get("stops_build")), None)
        tail = f"; not applied: the build stops at hunk #{stop['hunk']} ({visible(stop['target'])})" if stop else ""
        out.append(f"  {visible(patch)} -> {visible(engine)}{visible(applier)}: {statuses}{tail}")
    return out


def render(result, *, color: bool = False, rules=None, style: str = "full", quiet: bool = False) -> str:
    """`style`: "full" or "concise"; `quiet`: the findings only (no hunk summary, no summary line)."""
    concise = style == "concise"
    blocks = [format_finding(f, color, concise) for f in result.findings]
    out = "\n".join(blocks)
    if quiet:
        return safe_lines(out + "\n") if out else ""
    if out:
        out += "\n" if concise else "\n\n"
    hunks = hunk_summary(result.hunks or [])
    if hunks:
        out += hunks + "\n"
    # what the run left out and why (patches of an engine not given: pipeline/plan.py), as on stderr
    for note in getattr(result, "warnings", None) or []:
        out += f"note: {visible(note)}\n"
    return safe_lines(out + summary(result) + "\n")
