"""`--format markdown`: a report a CI job posts as a pull-request comment.

For `patchaudit bump` (a `patchaudit.pipeline.bump.BumpReport`): a headline, one row
per patch file (its hunks by status on the new engine version, its findings
by rule), the findings by rule, files that moved, then the details: every
finding with its place in the patch and in the engine and the hunk it is
about (folded), and each patch's hunk table (folded).  For `check`: the
headline and the findings.

GitHub refuses comments over 65,536 characters: past `LIMIT` the hunk
excerpts are left out, then the details are cut with a note saying how many
findings are not shown (the json report has them all).
"""

from __future__ import annotations

from collections import Counter

from patchaudit.model.escape import md_code, md_fence, md_text, safe_lines, visible

LIMIT = 60_000
_ICON = {"error": ":x:", "warning": ":warning:", "info": ":information_source:"}


def _escape(text: str, table: bool = False) -> str:
    """Markdown-safe text (escape.md_text): its code spans kept, `<` `>` `&` outside them as
    entities, unpaired backticks escaped, in a table cell `|` escaped everywhere."""
    return md_text(text, table)


def _code(text: str, table: bool = False) -> str:
    """`text` as one code span that nothing in it can close (escape.md_code)."""
    return md_code(text, table)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _severity_counts(findings) -> str:
    c = Counter(f.severity.value for f in findings)
    parts = [
        f"{_ICON[k]} **{_plural(c[k], k)}**" if k == "error" else _plural(c[k], k)
        for k in ("error", "warning", "info")
        if c[k]
    ]
    return ", ".join(parts) if parts else ":white_check_mark: no findings"


def _by_rule(findings) -> str:
    c = Counter(f.code for f in findings)
    return " · ".join(f"{code} ×{n}" for code, n in sorted(c.items())) or "–"


def _finding_block(f, with_hunk: bool) -> list[str]:
    where = f"{f.path}:{f.line}"
    head = f"- {_ICON.get(f.severity.value, '')} **{f.code}** {_code(where)}"
    if f.target is not None:
        tgt = f.target.path + (f":{f.target.line}" if f.target.line else "")
        head += f" → {_code(tgt)}"
        if f.target.symbol:
            head += f" in {_code(f.target.symbol)}"
    lines = [head, f"  {_escape(f.message)}"]
    for k, step in enumerate(f.trace, 1):
        lines.append(f"  {k}. {_code(f'{step.path}:{step.line}')} {_escape(step.note)}")
    if with_hunk and f.context:
        body = [visible(line) for line in f.context]
        fence = md_fence(body)
        lines += ["  <details><summary>hunk</summary>", "", f"  {fence}diff"]
        lines += [f"  {line}" for line in body]
        lines += [f"  {fence}", "  </details>"]
    return lines


def _hunk_table(rows, old_name: str, new_name: str) -> list[str]:
    out = [
        f"| line | target | symbol | on {_escape(old_name, True)} | on {_escape(new_name, True)} | changed upstream |",
        "|--:|:--|:--|:--|:--|:--|",
    ]
    for r in rows:
        new = r.new.label() if r.new else "–"
        if r.moved_to:
            new = f"moved to {_code(r.moved_to, True)}: {r.moved.label() if r.moved else '?'}"
        changed = {True: "yes", False: "", None: "–"}[r.changed_upstream]
        out.append(
            f"| {r.patch_line} | {_code(r.target, True)} | {_code(r.symbol, True) if r.symbol else ''} | "
            f"{r.old.label() if r.old else '–'} | {new} | {changed} |"
        )
    return out


def render_bump(report, with_hunks: bool = True, max_findings: int | None = None) -> str:
    from patchaudit.config.registry import all_rules

    rules = all_rules()
    counts = report.hunk_counts()
    out = [f"### patchaudit bump {_code(report.engine)}: {_code(report.old_name)} → {_code(report.new_name)}", ""]
    hunk_txt = ", ".join(f"{v} {k}" for k, v in counts.items() if v) or "none"
    out.append(
        f"{_severity_counts(report.findings)} in {_plural(len(report.patches), 'patch file')} · "
        f"{_plural(len(report.hunks), 'hunk')} on {_escape(report.new_name)}: {hunk_txt}"
    )
    if report.errors:
        out.append("")
        out.append(f":no_entry: {_plural(len(report.errors), 'file')} could not be read:")
        out += [f"- {_code(str(e))}" for e in report.errors]
    out.append("")
    # one row per patch file
    out += [
        "| patch file | hunks | clean | offset | fuzz | failed | other | findings |",
        "|:--|--:|--:|--:|--:|--:|--:|:--|",
    ]
    by_file: dict[str, list] = {}
    for f in report.findings:
        by_file.setdefault(f.path, []).append(f)
    files = list(report.patches) + sorted(p for p in by_file if p not in report.patches)
    for p in files:
        c = report.hunk_counts(p)
        n = sum(c.values())
        other = n - c["clean"] - c["offset"] - c["fuzz"] - c["failed"]
        out.append(
            f"| {_code(p, True)} | {n} | {c['clean']} | {c['offset']} | {c['fuzz']} | {c['failed']} | {other} | "
            f"{_by_rule(by_file.get(p, []))} |"
        )
    if report.findings:
        out += ["", "**Findings by rule**", "", "| rule | severity | count |", "|:--|:--|--:|"]
        c = Counter((f.code, f.severity.value) for f in report.findings)
        for (code, sev), n in sorted(c.items()):
            name = rules[code].name if code in rules else ""
            out.append(f"| {_escape(f'{code} {name}', True)} | {sev} | {n} |")
    moved = [r for r in report.relocations]
    if moved:
        out += ["", "**Files that no longer exist in " + _escape(report.new_name) + "**", ""]
        out += [f"- {_escape(r.describe(report.new_name))}" for r in moved]
    out += ["", "#### Details"]
    shown = 0
    hidden = 0
    for p in files:
        fs = by_file.get(p, [])
        rows = [r for r in report.hunks if r.patch == p]
        out += ["", f"##### {_code(p)}", ""]
        for f in fs:
            if max_findings is not None and shown >= max_findings:
                hidden += 1
                continue
            out += _finding_block(f, with_hunks)
            shown += 1
        if not fs:
            out.append("No findings.")
        if rows:
            out += ["", f"<details><summary>{_plural(len(rows), 'hunk')} of {_escape(p)}</summary>", ""]
            out += _hunk_table(rows, report.old_name, report.new_name)
            out += ["", "</details>"]
    if hidden:
        out += [
            "",
            f"_{_plural(hidden, 'more finding')} not shown (comment size limit): run "
            f"`patchaudit bump --format json` for the full report._",
        ]
    out += ["", f"<sub>from {_escape(report.old_label)} to {_escape(report.new_label)}</sub>"]
    return safe_lines("\n".join(out) + "\n")


def render_check(result) -> str:
    out = ["### patchaudit", "", f"{_severity_counts(result.findings)} in {_plural(result.files, 'file')}", ""]
    for f in result.findings:
        out += _finding_block(f, True)
    for e in result.errors:
        out.append(f"- :no_entry: {_code(str(e))}")
    return safe_lines("\n".join(out) + "\n")


def render(result, *, color: bool = False, rules=None) -> str:
    if not hasattr(result, "relocations"):
        return render_check(result)
    text = render_bump(result)
    if len(text) > LIMIT:
        text = render_bump(result, with_hunks=False)
    n = len(result.findings)
    while len(text) > LIMIT and n > 0:
        n = n // 2 if n > 10 else n - 1
        text = render_bump(result, with_hunks=False, max_findings=n)
    return text
