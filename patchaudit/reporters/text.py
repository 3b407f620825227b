"""Text output in ruff's shape: `path:line:col: CODE [*] headline`, a source frame, help.

Two shapes, as ruff's `--output-format`.  `full` (the default, also named `text`)
shows each finding as

    path:line:col: CODE [*] headline
      --> engine/file.py:681 in Symbol            (a finding in a patch, exact mode)
       |
    19 |     sample.tokens = tokenizer.encode(prompt)
       |     ^^^^^^^^^^^^^
       |
      trace:                                      (PA102, PA103, PA106, PA107, PA304)
        1. path:17: ...
      help: why it is bad
      help: what to do instead
      note: a note the pipeline added

The headline and the help lines are the message split by its convention
(patchaudit/model/message.py); `[*]` marks a finding `--fix` fixes
(reporters/fixable.py).  The frame shows the reported lines of the file with a caret
under the region (a patch finding shows its hunk, the reported line marked), and
every line is wrapped to the terminal's width (`COLUMNS`, else the terminal's, else
80: `shutil.get_terminal_size`) between words, never inside one; a source line too
long for it is cut with `…`.  `concise` is one line per finding with the whole
message.  Both end with the summary (dropped by `--quiet`): the findings by
severity, ruff's hint about fixes, never "All checks passed" when a file could not
be checked.

Every value from the checkout goes through `escape.visible()` and every block
through `escape.safe_lines()`: control characters show as escapes and no line
starts a CI workflow command (patchaudit/model/escape.py).
"""

from __future__ import annotations

import shutil
import textwrap
from typing import Any

import click

from patchaudit.model.escape import safe_lines, visible
from patchaudit.model.findings import Finding
from patchaudit.model.message import split_message
from patchaudit.reporters.fixable import fixable, hint

_SEV_COLOR = {"error": "red", "warning": "yellow", "info": "cyan"}
#: the narrowest width the text is wrapped to
MIN_WIDTH = 40


def style(text: str, color: bool, **kw) -> str:
    return click.style(text, **kw) if color else text


def terminal_width() -> int:
    """`COLUMNS`, else the terminal's width, else 80 (never below `MIN_WIDTH`)."""
    return max(MIN_WIDTH, shutil.get_terminal_size((80, 24)).columns)


def wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    """`text` (already visible) wrapped between words: `first` before the first line, `rest`
    before the others; a word longer than the width stays whole."""
    return textwrap.wrap(
        text,
        width=width,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [first.rstrip()]


def _notes() -> tuple[str, ...]:
    from patchaudit.units import INCOMPLETE_NOTE

    return (INCOMPLETE_NOTE,)


def headline(f: Finding, color: bool, marker: bool, text: str) -> str:
    code = style(visible(f.code), color, fg=_SEV_COLOR.get(f.severity.value), bold=True)
    star = " [*]" if marker else ""
    return f"{style(visible(f.path), color, bold=True)}:{f.line}:{f.column}: {code}{star} {text}"


def _display(text: str) -> str:
    return visible(text.expandtabs(4))


def _caret_span(text: str, start: int, end: int) -> tuple[int, int]:
    """Display offsets of characters `start`..`end` (0-based, end exclusive) of `text`."""
    a = len(_display(text[: max(0, start)]))
    b = len(_display(text[: max(start + 1, end)]))
    return a, max(a + 1, b)


def _fit(shown: str, span: tuple[int, int] | None, room: int) -> tuple[str, tuple[int, int] | None]:
    """A displayed line cut to `room` columns with `…`, keeping the caret's start in view."""
    if len(shown) <= room:
        return shown, span
    room = max(room, 8)
    if span is None or span[0] < room - 1:
        cut = shown[: room - 1] + "…"
        return cut, (span[0], min(span[1], room - 1)) if span else None
    begin = min(span[0] - 4, len(shown) - (room - 2))
    body = shown[begin : begin + room - 2]
    tail = "…" if begin + room - 2 < len(shown) else ""
    new = (span[0] - begin + 1, min(span[1] - begin + 1, len(body) + 1))
    return "…" + body + tail, new


def _region_spans(f: Finding, lines: list[str], first: int) -> dict[int, tuple[int, int]]:
    """Display spans of the caret on each shown line (by index in `lines`, whose first is
    file line `first`)."""
    line, column, end_line, end_column = f.region()
    out = {}
    for i, text in enumerate(lines):
        n = first + i
        if n < line or n > end_line:
            continue
        stripped = len(text) - len(text.lstrip())
        start = column - 1 if n == line else stripped
        if start < stripped:  # a region from the line's start: the caret under its text
            start = stripped
        end = end_column - 1 if n == end_line else len(text.rstrip())
        if start >= len(text):  # the region is the line break (or past it): one caret after the text
            a = len(_display(text))
            out[i] = (a, a + 1)
        else:
            out[i] = _caret_span(text, start, min(max(end, start + 1), len(text)))
    return out


def source_frame(f: Finding, color: bool, width: int) -> list[str]:
    """The reported lines with a caret under the region, or the patch hunk (its reported line
    marked when the hunk's place in the patch is known)."""
    if f.context:
        lines, first = list(f.context), f.context_line
        spans = _region_spans(f, lines, first) if first is not None else {}
        if first is not None and lines[-1:] == ["..."]:
            lines = lines[:-1]
    elif f.source:
        lines, first = list(f.source), f.line
        spans = _region_spans(f, lines, first)
    else:
        return []
    numbered = first is not None
    start = first or 0
    gutter = len(str(start + len(lines) - 1)) if numbered else 0
    bar = style("|", color, fg="blue")
    pad = " " * (gutter + 1)
    out = [f"{pad}{bar}"] if numbered else []
    for i, text in enumerate(lines):
        shown, span = _fit(_display(text), spans.get(i), width - gutter - 3)
        num = f"{start + i:>{gutter}} " if numbered else "   "
        out.append(f"{num}{bar} {shown}".rstrip())
        if span is not None:
            carets = style("^" * (span[1] - span[0]), color, fg="red", bold=True)
            out.append(f"{pad}{bar} {' ' * span[0]}{carets}")
    if numbered:
        out.append(f"{pad}{bar}")
    return out


def fix_lines(f: Finding, width: int) -> list[str]:
    """`--show-fixes`: the finding's fix, its applicability and its edits (`-` the lines it
    replaces, when the frame holds them; `+` the new ones)."""
    from patchaudit.reporters.fixable import offered_fix

    fx = offered_fix(f)
    if fx is None:
        return []
    how = "safe" if fx.safe else "unsafe: --unsafe-fixes"
    out = wrap(f"{visible(fx.description)} ({how})", width, "  fix: ", "       ")
    known = {f.line + i: text for i, text in enumerate(f.source)}
    if f.context and f.context_line is not None:
        known.update({f.context_line + i: text for i, text in enumerate(f.context)})
    for e in fx.edits:
        olds = [known.get(n) for n in range(e.line, e.end_line + 1)]
        if all(o is not None for o in olds):
            out += [f"    {n:>5} - {_display(o or '')}" for n, o in zip(range(e.line, e.end_line + 1), olds)]
        elif e.end_line >= e.line:
            out.append(f"    lines {e.line}-{e.end_line} replaced by:")
        out += [f"    {e.line:>5} + {_display(new)}" for new in e.new_lines]
    return out


def format_finding(
    f: Finding,
    color: bool = False,
    concise: bool = False,
    *,
    unsafe: bool = False,
    width: int | None = None,
    show_fixes: bool = False,
) -> str:
    marker = fixable(f, unsafe)
    if concise:
        return safe_lines(headline(f, color, marker, visible(f.message)))
    width = width or terminal_width()
    parts = split_message(f.message, _notes())
    plain = headline(f, False, marker, visible(parts.headline))
    out = wrap(plain, width, "", "    ")
    if color:  # the colours go on the wrapped text (the path and code are on its first line)
        prefix = headline(f, False, marker, "")
        if out[0].startswith(prefix.rstrip()):
            out[0] = headline(f, True, marker, "").rstrip() + out[0][len(prefix.rstrip()) :]
    if f.target is not None:
        where = visible(f.target.path) + (f":{f.target.line}" if f.target.line else "")
        sym = f" in {visible(f.target.symbol)}" if f.target.symbol else ""
        out += wrap(f"{where}{sym}", width, f"  {style('-->', color, fg='blue')} ", "      ")
    out += source_frame(f, color, width)
    if f.trace:
        out.append("  trace:")
        for k, step in enumerate(f.trace, 1):
            text = f"{visible(step.path)}:{step.line}: {visible(step.note)}"
            out += wrap(text, width, f"    {k}. ", " " * (len(str(k)) + 6))
    for label, texts in (("help", parts.help), ("note", parts.notes)):
        for text in texts:
            block = wrap(visible(text), width, f"  {label}: ", " " * (len(label) + 4))
            if color:
                block[0] = f"  {style(label + ':', color, bold=True)}" + block[0][len(label) + 3 :]
            out += block
    if show_fixes:
        out += fix_lines(f, width)
    return safe_lines("\n".join(out))


def _counts(findings: list[Finding]) -> str:
    by = {"error": 0, "warning": 0, "info": 0}
    for f in findings:
        by[f.severity.value] += 1
    return ", ".join(f"{v} {k}{'s' if v != 1 else ''}" for k, v in by.items() if v)


def summary(result, unsafe: bool = False) -> str:
    """The closing lines: findings by severity (and, after `--fix`, how many were fixed),
    the errors, then ruff's hint about fixes."""
    n = len(result.findings)
    fixed = getattr(result, "fixed", 0) or 0
    files = f"{result.files} file{'s' if result.files != 1 else ''}"
    errors = len(getattr(result, "errors", None) or [])
    failed = f"{errors} error{'s' if errors != 1 else ''} (on stderr)" if errors else ""
    tail = f"; {failed}" if errors else ""
    if fixed:
        total = n + fixed
        left = f"{n} remaining: {_counts(result.findings)}" if n else "0 remaining"
        head = f"Found {total} finding{'s' if total != 1 else ''} ({fixed} fixed, {left}) in {files}{tail}."
    elif not n:
        if errors:  # never "All checks passed" when something could not be checked
            return f"No findings, but {failed}: not everything was checked ({files} checked)."
        if not result.files:
            return "No files checked."
        return f"All checks passed ({files} checked)."
    else:
        head = f"Found {n} finding{'s' if n != 1 else ''} ({_counts(result.findings)}) in {files}{tail}."
    more = hint(result.findings, unsafe)
    return head + (f"\n{more}" if more else "")


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


def render(
    result,
    *,
    color: bool = False,
    rules=None,
    style: str = "full",
    quiet: bool = False,
    unsafe_fixes: bool = False,
    width: int | None = None,
    show_fixes: bool = False,
    **_: Any,
) -> str:
    """`style`: "full" or "concise"; `quiet`: the findings only (no hunk summary, no summary
    line); `unsafe_fixes`: `[*]` marks unsafe fixes too; `width`: wrap to it (default: the
    terminal's); `show_fixes`: each finding's fix under it (full only)."""
    concise = style == "concise"
    width = width or terminal_width()
    blocks = [
        format_finding(f, color, concise, unsafe=unsafe_fixes, width=width, show_fixes=show_fixes)
        for f in result.findings
    ]
    out = "\n".join(blocks) if concise else "\n\n".join(blocks)
    if quiet:
        return safe_lines(out + "\n") if out else ""
    if out:
        out += "\n" if concise else "\n\n"
    return safe_lines(out) + closing(result, unsafe_fixes=unsafe_fixes, width=width)


def closing(result, *, unsafe_fixes: bool = False, width: int | None = None) -> str:
    """What follows the findings: exact mode's hunk table, the run's notes, the summary."""
    width = width or terminal_width()
    out = ""
    hunks = hunk_summary(result.hunks or [])
    if hunks:
        out += hunks + "\n"
    # what the run left out and why (patches of an engine not given: pipeline/plan.py), as on stderr
    for note in getattr(result, "warnings", None) or []:
        out += "\n".join(wrap(f"note: {visible(note)}", width, "", "      ")) + "\n"
    lines = [w for line in summary(result, unsafe_fixes).split("\n") for w in wrap(line, width, "", "")]
    return safe_lines(out + "\n".join(lines) + "\n")
