"""What happens to a file's findings after the rules: repeats dropped, per-file ignores,
inline suppression comments (their grammar: patchaudit/units/suppression.py), PA001's
judgement of the comments that suppressed nothing, and baseline fingerprints."""

from __future__ import annotations

import fnmatch
import os
from typing import TYPE_CHECKING, Any

from patchaudit.config.settings import Settings
from patchaudit.inputs.discover import PATCH, PYTHON, SourceFile
from patchaudit.model.findings import Finding
from patchaudit.pipeline.results import FileResult
from patchaudit.pipeline.run_rules import needs_met
from patchaudit.units.suppression import has_suppression_marker, parse_suppression

if TYPE_CHECKING:  # pragma: no cover
    from patchaudit.lint.rule import Rule


def dedupe_findings(findings: list[Finding]) -> list[Finding]:
    """`findings` sorted (Finding.sort_key), each (code, path, line, column, message) once."""
    seen = set()
    out = []
    for f in sorted(findings, key=Finding.sort_key):
        key = (f.code, f.path, f.line, f.column, f.message)
        if key in seen:
            continue
        seen.add(key)
        out.append(f)
    return out


def apply_per_file_ignores(findings: list[Finding], settings: Settings) -> list[Finding]:
    if not settings.per_file_ignores:
        return findings
    out = []
    for f in findings:
        p = f.path.replace(os.sep, "/")
        drop = False
        for glob, codes in settings.per_file_ignores.items():
            if fnmatch.fnmatch(p, glob) or fnmatch.fnmatch(os.path.basename(p), glob):
                if any(c.upper() == "ALL" or f.code.startswith(c.upper()) for c in codes):
                    drop = True
                    break
        if not drop:
            out.append(f)
    return out


def apply_suppressions(findings: list[Finding], lines: list[str]):
    """Drop findings whose reported line carries `# patchaudit: ignore[...]` or `# noqa: PA...`
    (patchaudit/units/suppression.py); returns (kept, the comments' unused parts)."""
    used: dict[int, set[str]] = {}
    comments: dict[int, tuple[str, ...] | None] = {}
    for i, text in enumerate(lines, 1):
        if has_suppression_marker(text):
            ok, codes = parse_suppression(text)
            if ok:
                comments[i] = codes
    kept = []
    for f in findings:
        codes = comments.get(f.line, ())
        if f.line in comments and (codes is None or any(f.code.startswith(c) for c in codes)):
            used.setdefault(f.line, set()).add(f.code)
            continue
        kept.append(f)
    unused: list[tuple[int, tuple[str, ...] | None]] = []
    for line, codes in comments.items():
        if codes is None:
            if line not in used:
                unused.append((line, None))
        else:
            left = tuple(c for c in codes if not any(u.startswith(c) for u in used.get(line, ())))
            if left:
                unused.append((line, left))
    return kept, unused


def settle_regions(findings: list[Finding], lines: list[str]) -> None:
    """Give every finding a region that ends after it starts, in the file it is reported in.

    A rule reports a node's span in its unit's coordinates; when the end lies in text the
    unit had to invent (a call closed artificially at the end of a hunk) or in engine
    lines outside the patch, the mapped end can fall before the start on the start's
    line (`16:30` to `16:2`).  Such a region is widened to the end of the reported line
    (the reported token and the rest of the statement on that line); on an empty line
    it covers the line break.  The end column is exclusive, as in SARIF."""
    for f in findings:
        line, column = f.line, max(1, f.column)
        end_line = f.end_line if f.end_line is not None else line
        end_column = f.end_column if f.end_column is not None else column
        if end_line > line or (end_line == line and end_column > column):
            continue
        text = lines[line - 1] if 0 < line <= len(lines) else None
        if text is not None and len(text) + 1 > column:
            f.end_line, f.end_column = line, len(text) + 1
        elif text is not None and line < len(lines):
            f.end_line, f.end_column = line + 1, 1
        else:
            f.end_line, f.end_column = line, column + 1


#: the most lines of a finding's region kept for the text report's source frame
SOURCE_LINES = 4


def attach_source(findings: list[Finding], lines: list[str]) -> None:
    """Keep with each finding the reported file's lines of its region (at most
    `SOURCE_LINES`) for the text report's source frame, and where a patch hunk shown
    under it (`context`) starts in the file."""
    for f in findings:
        if 0 < f.line <= len(lines):
            end = max(f.line, min(f.end_line or f.line, f.line + SOURCE_LINES - 1, len(lines)))
            f.source = lines[f.line - 1 : end]
        if f.context and f.context_line is None:
            f.context_line = _context_start(f.context, lines, f.line)


def _context_start(context: list[str], lines: list[str], line: int) -> int | None:
    """The 1-based line of `lines` where `context` (a hunk as shown, ending in `...` when
    cut) starts, at or before `line`."""
    shown = context[:-1] if context[-1:] == ["..."] else context
    if not shown:
        return None
    for i in range(min(line, len(lines)) - 1, max(-1, line - 1 - 10_000), -1):
        if lines[i] == shown[0] and lines[i : i + len(shown)] == shown:
            return i + 1
    return None


def finish_findings(
    src: SourceFile,
    result: FileResult,
    raw_lines: list[str],
    comment_lines,
    rules: list[type[Rule]],
    settings: Settings,
    engines: Any,
    tokenizer: Any,
) -> None:
    """The findings of rules that judge the other rules' suppressions (the role
    "unused-suppression": unused suppressions, opt-in), then baseline fingerprints."""
    for judge in [r for r in rules if "unused-suppression" in r.roles]:
        from patchaudit.config.registry import all_rules

        ran = [
            r
            for r in rules
            if needs_met(r, engine=engines if src.kind in (PATCH, PYTHON) else None, tokenizer=tokenizer)
        ]
        result.findings += apply_per_file_ignores(
            judge.suppression_findings(  # type: ignore[attr-defined]
                src.path,
                result.unused_suppressions,
                comment_lines if comment_lines is not None else raw_lines,
                rules,
                ran,
                list(all_rules()),
            ),
            settings,
        )
    from patchaudit.pipeline.baseline import assign_fingerprints

    settle_regions(result.findings, raw_lines)
    attach_source(result.findings, raw_lines)
    assign_fingerprints(result.findings, raw_lines, is_patch=src.kind == PATCH)
