"""`--format markdown`: a report a CI job posts as a pull-request comment.

For `patchaudit bump` (a `patchaudit.pipeline.bump.BumpReport`): a headline, one row
per patch file (its hunks by status on the new engine version, its findings
by rule), the findings by rule, files that moved, then the details: every
finding with its place in the patch and in the engine and the hunk it is
about (folded), and each patch's hunk table (folded).  For `check`: the
headline and the findings.

Ordered by what a reviewer must act on: every error first (always shown),
then the warnings and infos grouped by rule; a PA203 on a hunk that already
has a PA201/PA202/PA208 is folded into that finding (`reporters/bump.fold`).
GitHub refuses comments over 65,536 characters: past `LIMIT` the hunk tables
and the hunk excerpts of warnings go first, then those of errors, then the
warnings and infos are cut, the largest groups first, to fill the limit, with
a note saying how many are not shown (the json report has them all).
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


def _finding_block(f, with_hunk: bool, folded=()) -> list[str]:
    where = f"{f.path}:{f.line}"
    head = f"- {_ICON.get(f.severity.value, '')} **{f.code}** {_code(where)}"
    if f.target is not None:
        tgt = f.target.path + (f":{f.target.line}" if f.target.line else "")
        head += f" → {_code(tgt)}"
        if f.target.symbol:
            head += f" in {_code(f.target.symbol)}"
    lines = [head, f"  {_escape(f.message)}"]
    for extra in folded:  # a PA203 on the same hunk (reporters/bump.fold)
        lines.append(f"  - also **{extra.code}**: {_escape(extra.message)}")
    for k, step in enumerate(f.trace, 1):
        lines.append(f"  {k}. {_code(f'{step.path}:{step.line}')} {_escape(step.note)}")
    if with_hunk and f.context:
        body = [visible(line) for line in f.context]
        fence = md_fence(body)
        lines += ["  <details><summary>hunk</summary>", "", f"  {fence}diff"]
        lines += [f"  {line}" for line in body]
        lines += [f"  {fence}", "  </details>"]
    return lines


def _compact(f) -> str:
    """One line for an error when even the errors without their hunks do not fit."""
    return f"- **{f.code}** {_code(f'{f.path}:{f.line}')} {_escape(f.message[:300])}"


def _hunk_table(rows, old_name: str, new_name: str) -> list[str]:
    out = [
        f"| line | target | symbol | on {_escape(old_name, True)} | on {_escape(new_name, True)} | changed upstream |",
        "|--:|:--|:--|:--|:--|:--|",
    ]
    for r in rows:
        new = r.new.label() if r.new else "–"
        if r.moved_to:
            sym = f" {_code(r.moved_symbol, True)}" if r.moved_symbol else ""
            new = f"{new}; moved to {_code(r.moved_to, True)}{sym}: {r.moved.label() if r.moved else '?'}"
        changed = {True: "yes", False: "", None: "–"}[r.changed_upstream]
        out.append(
            f"| {r.patch_line} | {_code(r.target, True)} | {_code(r.symbol, True) if r.symbol else ''} | "
            f"{r.old.label() if r.old else '–'} | {new} | {changed} |"
        )
    return out


def _head(report, rules, shown_by_rule: Counter) -> list[str]:
    """The headline, the per-patch-file and per-rule tables, the files that moved."""
    counts = report.hunk_counts()
    out = [f"### patchaudit bump {_code(report.engine)}: {_code(report.old_name)} → {_code(report.new_name)}", ""]
    hunk_txt = ", ".join(f"{v} {k}" for k, v in counts.items() if v) or "none"
    out.append(
        f"{_severity_counts(report.findings)} in {_plural(len(report.patches), 'patch file')} · "
        f"{_plural(len(report.hunks), 'hunk')} on {_escape(report.new_name)}: {hunk_txt}"
    )
    note = getattr(report, "commits_note", None)
    if note:
        out += ["", f"> {_escape(note)}"]
    if report.errors:
        out.append("")
        out.append(f":no_entry: {_plural(len(report.errors), 'file')} could not be read:")
        out += [f"- {_code(str(e))}" for e in report.errors]
    out += [
        "",
        "| patch file | hunks | clean | offset | fuzz | failed | other | findings |",
        "|:--|--:|--:|--:|--:|--:|--:|:--|",
    ]
    by_file = Counter(f.path for f in report.findings)
    for p in list(report.patches) + sorted(p for p in by_file if p not in report.patches):
        c = report.hunk_counts(p)
        n = sum(c.values())
        other = n - c["clean"] - c["offset"] - c["fuzz"] - c["failed"]
        out.append(
            f"| {_code(p, True)} | {n} | {c['clean']} | {c['offset']} | {c['fuzz']} | {c['failed']} | {other} | "
            f"{_by_rule([f for f in report.findings if f.path == p])} |"
        )
    if report.findings:
        out += ["", "**Findings by rule**", "", "| rule | severity | count | shown |", "|:--|:--|--:|--:|"]
        c = Counter((f.code, f.severity.value) for f in report.findings)
        for (code, sev), n in sorted(c.items(), key=lambda kv: (_RANK.get(kv[0][1], 3), kv[0][0])):
            name = rules[code].name if code in rules else ""
            out.append(f"| {_escape(f'{code} {name}', True)} | {sev} | {n} | {shown_by_rule.get((code, sev), 0)} |")
    if report.relocations:
        out += ["", "**Files whose code moved in " + _escape(report.new_name) + "**", ""]
        out += [f"- {_escape(r.describe(report.new_name))}" for r in report.relocations]
    return out


_RANK = {"error": 0, "warning": 1, "info": 2}


def _fill(groups: dict[str, list[str]], budget: int) -> dict[str, int]:
    """How many blocks of each group fit in `budget` characters, cutting the largest groups
    first: the largest per-group count k that fits, then one more block for the smallest
    groups while there is room."""

    def cost(k: int) -> int:
        return sum(sum(len(b) for b in blocks[:k]) for blocks in groups.values())

    lo, hi = 0, max((len(b) for b in groups.values()), default=0)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if cost(mid) <= budget:
            lo = mid
        else:
            hi = mid - 1
    take = {g: min(len(b), lo) for g, b in groups.items()}
    left = budget - cost(lo)
    for g in sorted(groups, key=lambda g: len(groups[g])):
        blocks = groups[g]
        while take[g] < len(blocks) and len(blocks[take[g]]) <= left:
            left -= len(blocks[take[g]])
            take[g] += 1
    return take


def _folded_note(n: int) -> str:
    """How many findings of what changed upstream went under how their hunk applies."""
    from patchaudit.config.registry import codes_with_role

    what = "/".join(codes_with_role("changed-upstream"))
    hosts = "/".join(codes_with_role("hunk-status"))
    return f"_{_plural(n, what + ' finding')} folded into the {hosts} of the same hunk._"


def _blocks(findings, folded, with_hunk: bool) -> list[str]:
    return ["\n".join(_finding_block(f, with_hunk, folded.get(id(f), ()))) + "\n" for f in findings]


def render_bump(report, limit: int | None = None) -> str:
    """The markdown report; with `limit`, cut to that many characters: every error kept
    (with its hunk while that fits), the hunk tables and the hunks of warnings dropped
    first, then warnings and infos cut, the largest groups (by rule) first."""
    from patchaudit.config.registry import all_rules
    from patchaudit.reporters.bump import fold

    rules = all_rules()
    shown, folded = fold(report.findings)
    errors = [f for f in shown if f.severity.value == "error"]
    rest = [f for f in shown if f.severity.value != "error"]
    tables: list[str] = []
    for p in report.patches:
        rows = [r for r in report.hunks if r.patch == p]
        if rows:
            tables += ["", f"<details><summary>{_plural(len(rows), 'hunk')} of {_escape(p)}</summary>", ""]
            tables += _hunk_table(rows, report.old_name, report.new_name) + ["", "</details>"]
    foot = ["", f"<sub>from {_escape(report.old_label)} to {_escape(report.new_label)}</sub>"]
    groups_of: dict[str, list] = {}
    for f in rest:
        groups_of.setdefault(f.code, []).append(f)
    n_folded = sum(len(v) for v in folded.values())

    def assemble(err_blocks: list[str], take: dict[str, int], w_hunks: bool, with_tables: bool, note: str) -> str:
        counts = Counter((f.code, f.severity.value) for f in errors)
        for code, fs in groups_of.items():
            counts.update((f.code, f.severity.value) for f in fs[: take[code]])
        for f in [f for f in errors] + [f for code, fs in groups_of.items() for f in fs[: take[code]]]:
            counts.update((x.code, x.severity.value) for x in folded.get(id(f), ()))
        out = _head(report, rules, counts)
        if errors:
            out += ["", f"#### :x: Errors ({len(errors)})", ""] + ["".join(err_blocks).rstrip("\n")]
        if rest:
            out += ["", f"#### Warnings and infos ({len(rest)})"]
            for code, fs in groups_of.items():
                k = take[code]
                name = rules[code].name if code in rules else ""
                cut = f", {k} shown" if k < len(fs) else ""
                out += ["", f"##### {_escape(code)} {_escape(name)} ({len(fs)}{cut})", ""]
                out.append("".join(_blocks(fs[:k], folded, w_hunks)).rstrip("\n") or "_none shown_")
        if n_folded:
            out += ["", _folded_note(n_folded)]
        if not report.findings:
            out += ["", "No findings."]
        if with_tables and tables:
            out += ["", "#### Hunks"] + tables
        if note:
            out += ["", note]
        return safe_lines("\n".join(out + foot) + "\n")

    full = {code: len(fs) for code, fs in groups_of.items()}
    e_full, e_bare = _blocks(errors, folded, True), _blocks(errors, folded, False)
    text = assemble(e_full, full, True, True, "")
    if limit is None or len(text) <= limit:
        return text
    json_note = "run `patchaudit bump --format json` for the full report"
    for e_blocks, w_hunks in ((e_full, False), (e_bare, False)):
        text = assemble(e_blocks, full, w_hunks, True, "")
        if len(text) <= limit:
            return text
    notes = f"_The hunk tables and some hunk excerpts are left out (comment size limit): {json_note}._"
    for e_blocks in (e_full, e_bare):
        base = assemble(e_blocks, dict.fromkeys(full, 0), False, False, notes)
        if len(base) > limit:
            continue
        groups = {code: _blocks(fs, folded, False) for code, fs in groups_of.items()}
        take = _fill(groups, limit - len(base) - 64 * len(groups))
        hidden = sum(full[c] - take[c] for c in full)
        note = notes
        if hidden:
            note = f"_{hidden} of {len(rest)} warnings and infos not shown (comment size limit): {json_note}._"
        return assemble(e_blocks, take, False, False, note)
    # not even the errors without their hunks fit: one line each, as many as fit
    lines = [_compact(f) + "\n" for f in errors]
    base = assemble([], dict.fromkeys(full, 0), False, False, "")
    keep, size = 0, len(base) + 200
    while keep < len(lines) and size + len(lines[keep]) <= limit:
        size += len(lines[keep])
        keep += 1
    note = (
        f"_{_plural(len(errors) - keep, 'more error')} and every warning not shown (comment size limit): {json_note}._"
    )
    return assemble(lines[:keep], dict.fromkeys(full, 0), False, False, note)


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
    return render_bump(result, LIMIT)
