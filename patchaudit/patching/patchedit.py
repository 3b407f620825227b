"""Editing files line by line, and `.patch` files so that their hunks stay valid.

Pure, no I/O.  A fix (`patchaudit.model.findings.Fix`) is a list of line edits
(`Edit`: replace lines `line..end_line` with new lines) in the file it is
reported in.  `apply_line_edits` applies them to any text; `edit_patch`
applies them to a unified diff and then repairs what an edit inside a hunk
breaks:

* the counts of every hunk an edit touches are recounted from its lines, and
  the new-side start of every later hunk of the same file section moves by
  the number of lines the earlier hunks gained or lost;
* a hunk left without a `+` or `-` line is a no-op and is dropped (GNU patch
  and git refuse such a hunk), and so is a file section left with no hunk
  (unless it also renames, copies or changes the mode of its file);
* everything else is kept byte for byte: git headers, `index` lines, free text
  before and between sections, `\\ No newline at end of file` markers, CRLF
  line ends (a new line takes the line end of the line it replaces).

The result is parsed again; a patch that would read worse than before (a
problem the reader did not see in the original) is refused with
`PatchEditError`, so an edit can never leave a patch `git apply` rejects as
corrupt.

Why not unidiff: unidiff reads a patch into objects, but writing one back
(`str(PatchSet)`) is not byte-exact: it rewrites hunk headers (`@@ -5 +5 @@`
becomes `@@ -5,1 +5,1 @@`), drops the mail header and signature of a `git format-patch` patch, and adds a space
before the `\\r` of a CRLF hunk header (see patchaudit/inputs/patches.py for what it
does on malformed input); tests/test_patchedit.py checks all three.  So the
edits work on the patch's own lines, located with the project's patch reader,
which records the patch line of every hunk line.

The fix builders (`drop_hunk`, `revert_pair`, `refresh_hunk`, `hunk_span`) turn a
rule's decision into such edits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from patchaudit.inputs.patches import FileSection, Hunk, PatchFile, parse_patch
from patchaudit.model.findings import Edit

_HEAD_RE = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")


class PatchEditError(ValueError):
    """An edit that cannot be applied (overlapping, cutting a hunk header, breaking the patch)."""


def split_keepends(text: str) -> list[str]:
    """`text` split after every "\\n" (the only line end of a diff), line ends kept."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


#: a line of a source file as the parser counts them (patchaudit/inputs `source_lines`):
#: "\r\n", a lone "\r" and "\n" each end one
_SOURCE_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def split_source_keepends(text: str) -> list[str]:
    """`text` split as Python, libcst and the rules number its lines (a lone "\\r" ends a
    line: the fix of line N must edit the line the finding names), line ends kept."""
    if "\r" not in text:
        return split_keepends(text)
    return _SOURCE_LINE.findall(text)


def _eol(raw: str, source: bool = False) -> str:
    """The line end of `raw`: "\\r\\n", "\\n", or "" (the last line); in a source file a lone
    "\\r" too (in a patch it is a character of the line)."""
    if raw.endswith("\r\n"):
        return "\r\n"
    if raw.endswith("\n"):
        return "\n"
    return "\r" if source and raw.endswith("\r") else ""


def _body(raw: str) -> str:
    return raw[: len(raw) - len(_eol(raw))]


def _check_overlaps(edits: Sequence[Edit], n: int) -> list[Edit]:
    """`edits` in order; PatchEditError if two overlap or one lies outside the file."""
    ordered = sorted(edits, key=lambda e: (e.line, e.end_line))
    last_end = 0
    last_insert = -1
    for e in ordered:
        if e.line < 1 or e.end_line < e.line - 1 or e.end_line > n or e.line > n + 1:
            raise PatchEditError(f"edit of lines {e.line}-{e.end_line} lies outside the file ({n} lines)")
        if e.end_line == e.line - 1:  # an insertion before e.line
            if e.line <= last_end or e.line == last_insert:
                raise PatchEditError(f"edits overlap at line {e.line}")
            last_insert = e.line
        else:
            if e.line <= last_end or e.line == last_insert:
                raise PatchEditError(f"edits overlap at line {e.line}")
            last_end = e.end_line
    return ordered


def _replace(raw: list[str], ordered: Sequence[Edit], first: int = 1, source: bool = False) -> list[str]:
    """`raw` (lines `first`.. of a file, ends kept) with `ordered` applied; a new line
    takes the line end of the line it replaces (or of the line before an insertion).
    `source`: the lines of a source file, where a lone "\\r" ends a line too."""
    out: list[str] = []
    pos = first  # next original line to copy
    for e in ordered:
        while pos < e.line:
            out.append(raw[pos - first])
            pos += 1
        replaced = raw[e.line - first : e.end_line - first + 1]
        if replaced:
            ends = [_eol(r, source) for r in replaced]
        else:
            if out and not _eol(out[-1], source) and e.new_lines:
                raise PatchEditError(f"cannot insert after line {e.line - 1}: it has no line end")
            before = out[-1] if out else (raw[e.line - first] if e.line - first < len(raw) else "\n")
            ends = [_eol(before, source) or "\n"]
        default = next((x for x in ends if x), "\n")
        for k, new in enumerate(e.new_lines):
            if "\n" in new or (source and "\r" in new):
                raise PatchEditError(f"an edit's line holds a line break (at line {e.line})")
            end = ends[k] if k < len(ends) else default
            if k == len(e.new_lines) - 1 and replaced and not _eol(replaced[-1], source):
                end = ""  # the file ended without a newline there: it still does
            out.append(new + end)
        pos = e.end_line + 1
    while pos - first < len(raw):
        out.append(raw[pos - first])
        pos += 1
    return out


def apply_line_edits(text: str, edits: Sequence[Edit]) -> str:
    """`text` with `edits` applied (any file but a patch: see `edit_patch`); its lines are
    numbered as the parser numbers them (`split_source_keepends`)."""
    raw = split_source_keepends(text)
    return "".join(_replace(raw, _check_overlaps(edits, len(raw)), source=True))


# ----- patches --------------------------------------------------------------------


@dataclass
class _HunkPlan:
    hunk: Hunk
    start: int  # the header's patch line
    end: int  # its last line (a "\ No newline" marker included)
    body_edits: list[Edit]
    replacement: list[str] | None = None  # whole hunk replaced: its new lines (empty: dropped)


def hunk_span(patch: PatchFile, hunk: Hunk) -> tuple[int, int]:
    """(first, last) patch line of `hunk`: its `@@` header to its last line, a trailing
    `\\ No newline at end of file` marker included."""
    end = hunk.end_line
    if end < len(patch.lines) and patch.lines[end].startswith("\\"):
        end += 1
    return hunk.header_line, end


def edit_patch(text: str, edits: Sequence[Edit]) -> str:
    """The patch `text` with `edits` applied and its hunks repaired (module docstring).

    An edit either lies inside one hunk's lines (after its header: its new lines must be
    hunk lines, starting with " ", "-", "+" or "\\"), or replaces one whole hunk (from its
    header to its last line: by nothing, to drop it, or by one hunk whose header gives the
    new old-side start), or lies outside every hunk and file header (free text)."""
    raw = split_keepends(text)
    patch = parse_patch("<patch>", text)
    ordered = _check_overlaps(edits, len(raw))
    plans: list[tuple[FileSection, list[_HunkPlan]]] = []
    by_line: dict[int, _HunkPlan] = {}
    for section in patch.sections:
        row = []
        for h in section.hunks:
            start, end = hunk_span(patch, h)
            plan = _HunkPlan(h, start, end, [])
            row.append(plan)
            for k in range(start, end + 1):
                by_line[k] = plan
        plans.append((section, row))
    structural = _structural_lines(patch)
    free: list[Edit] = []
    for e in ordered:
        _place(e, by_line, structural, free)
    out: list[str] = []
    pos = 1
    for section, row in plans:
        if not row:
            continue
        first = row[0].start
        last = row[-1].end
        sec_start = section.header_line
        new_hunks = _section_hunks(raw, row)
        keep_section = bool(new_hunks) or bool(
            section.rename_from or section.rename_to or section.copy_from or section.old_mode and section.new_mode
        )
        # what lies before the section's hunks (free text, the file header)
        lead_from = sec_start if not keep_section else first
        out.extend(_replace(raw[pos - 1 : lead_from - 1], [f for f in free if pos <= f.line < lead_from], pos))
        if keep_section:
            for line in new_hunks:
                out.append(line)
        pos = last + 1
    out.extend(_replace(raw[pos - 1 :], [f for f in free if f.line >= pos], pos))
    result = "".join(out)
    _verify(patch, result)
    return result


def _structural_lines(patch: PatchFile) -> set[int]:
    """Patch lines an edit outside the hunks may not touch: file headers, git headers."""
    out: set[int] = set()
    for s in patch.sections:
        first_hunk = s.hunks[0].header_line if s.hunks else s.header_line + 1
        out.update(range(s.header_line, first_hunk))
    return out


def _place(e: Edit, by_line: dict[int, _HunkPlan], structural: set[int], free: list[Edit]) -> None:
    lines = range(e.line, e.end_line + 1)
    if e.end_line == e.line - 1:  # insertion: inside a hunk if after its header, up to after its last line
        plan = by_line.get(e.line - 1)
        if plan is not None:  # after the header or a line of the hunk: new hunk lines
            plan.body_edits.append(e)
            return
        if e.line in structural or e.line - 1 in structural:
            raise PatchEditError(f"an insertion at line {e.line} falls inside a file header")
        free.append(e)
        return
    plan = by_line.get(e.line)
    if plan is None:
        if any(k in by_line or k in structural for k in lines):
            raise PatchEditError(f"edit of lines {e.line}-{e.end_line} cuts into a hunk or a file header")
        free.append(e)
        return
    if e.line == plan.start:
        if e.end_line != plan.end:
            raise PatchEditError(f"edit of lines {e.line}-{e.end_line} replaces part of the hunk at {plan.start}")
        new = list(e.new_lines)
        if new and (not _HEAD_RE.match(new[0]) or any(_HEAD_RE.match(x) for x in new[1:])):
            raise PatchEditError(f"the hunk at line {plan.start} can only be replaced by one hunk")
        plan.replacement = new
        return
    if e.end_line > plan.end:
        raise PatchEditError(f"edit of lines {e.line}-{e.end_line} runs past the hunk at line {plan.start}")
    plan.body_edits.append(e)


def _is_hunk_line(s: str) -> bool:
    return s == "" or s[0] in " +-\\"


def _section_hunks(raw: list[str], row: list[_HunkPlan]) -> list[str]:
    """The new lines of one section's hunks: edits applied, headers recounted, no-ops dropped."""
    out: list[str] = []
    shift = 0  # lines the section's earlier hunks gained (new side) beyond what their headers said
    for plan in row:
        h = plan.hunk
        header_raw = raw[plan.start - 1]
        if plan.replacement is not None:
            if not plan.replacement:
                shift -= h.target_length - h.source_length
                continue
            repl = Edit(plan.start, plan.end, tuple(plan.replacement))
            lines = _replace(raw[plan.start - 1 : plan.end], [repl], plan.start)
            header_raw, body = lines[0], lines[1:]
            m = _HEAD_RE.match(header_raw)
            assert m is not None
            src_start = int(m.group(1))
        else:
            body = _replace(raw[plan.start : plan.end], plan.body_edits, plan.start + 1)
            src_start = h.source_start
        texts = [_body(b) for b in body]
        bad = next((t for t in texts if not _is_hunk_line(t)), None)
        if bad is not None:
            raise PatchEditError(f"an edit of the hunk at line {plan.start} writes a non-hunk line: {bad[:40]!r}")
        if plan.body_edits:
            cut = _balance_context(h, texts, plan.start)
            body, texts, src_start = body[cut:], texts[cut:], src_start + cut
        old = sum(1 for t in texts if t == "" or t[0] in " -")
        new = sum(1 for t in texts if t == "" or t[0] in " +")
        if not any(t[:1] in ("+", "-") for t in texts):
            shift -= h.target_length - h.source_length
            continue  # a no-op: dropped
        # a side that becomes empty (or stops being empty) moves its start, as diff writes it
        if old == 0 and h.source_length > 0:
            src_start -= 1
        elif old > 0 and h.source_length == 0 and plan.replacement is None:
            src_start += 1
        tgt_start = h.target_start + shift + (src_start - h.source_start)
        if new == 0 and h.target_length > 0:
            tgt_start -= 1
        elif new > 0 and h.target_length == 0:
            tgt_start += 1
        out.append(_header(header_raw, src_start, old, tgt_start, new))
        out.extend(body)
        shift += (new - old) - (h.target_length - h.source_length)
    return out


def _context_counts(texts: Sequence[str]) -> tuple[int, int]:
    """(leading, trailing) context lines of a hunk's lines ("\\" markers skipped)."""
    kinds = [t[:1] or " " for t in texts if t[:1] != "\\"]
    changes = [i for i, k in enumerate(kinds) if k in "+-"]
    if not changes:
        return len(kinds), len(kinds)
    return changes[0], len(kinds) - 1 - changes[-1]


def _balance_context(h: Hunk, texts: Sequence[str], where: int) -> int:
    """How many leading context lines to cut so that an edit that shortened the trailing
    context leaves no more leading than trailing context (GNU patch reads a hunk with less
    trailing context as one that must end at the end of the file: it would need fuzz);
    PatchEditError when the edit leaves no trailing context at all."""
    lead, trail = _context_counts(texts)
    was_lead, was_trail = _context_counts([("+" if l.kind == "+" else l.kind) + l.text for l in h.lines])
    if trail >= lead or trail >= was_trail or was_trail < was_lead:
        return 0
    if trail == 0:
        raise PatchEditError(f"an edit leaves the hunk at line {where} without trailing context")
    return lead - trail


def _header(raw: str, s: int, slen: int, t: int, tlen: int) -> str:
    """`raw` (an `@@` line) with new numbers; a count of 1 stays omitted where it was."""
    m = _HEAD_RE.match(raw)
    assert m is not None

    def count(n: int, written: str | None) -> str:
        return "" if n == 1 and written is None else f",{n}"

    head = f"@@ -{max(s, 0)}{count(slen, m.group(2))} +{max(t, 0)}{count(tlen, m.group(4))} @@"
    return head + raw[m.end() :]


def _verify(before: PatchFile, text: str) -> None:
    after = parse_patch("<patch>", text)
    if any(s.hunks for s in before.sections) and not any(s.hunks for s in after.sections):
        raise PatchEditError("no hunk would be left in the patch (delete the patch file instead)")
    old = {p.message for p in before.problems}
    new = [p for p in after.problems if p.message not in old]
    if new:
        raise PatchEditError(f"the edited patch would be malformed at line {new[0].line}: {new[0].message}")


# ----- fix builders ----------------------------------------------------------------


def drop_hunk(patch: PatchFile, hunk: Hunk) -> Edit:
    """The edit removing `hunk` from the patch."""
    start, end = hunk_span(patch, hunk)
    return Edit(start, end, ())


def _block(hunk: Hunk, patch_line: int) -> tuple[int, int] | None:
    """(first, last) index into hunk.lines of the run of `-`/`+` lines holding `patch_line`."""
    idx = next((i for i, l in enumerate(hunk.lines) if l.patch_line == patch_line), None)
    if idx is None or hunk.lines[idx].kind == " ":
        return None
    a = idx
    while a > 0 and hunk.lines[a - 1].kind != " ":
        a -= 1
    b = idx
    while b + 1 < len(hunk.lines) and hunk.lines[b + 1].kind != " ":
        b += 1
    return a, b


def revert_pair(patch: PatchFile, hunk: Hunk, minus_line: int, plus_line: int) -> Edit | None:
    """The edit that undoes one change of a hunk: the `-` line at patch line `minus_line`
    becomes a context line and the `+` line at `plus_line` goes, in the same run of
    changes.  The rest of the run is split around it so both sides keep their order.
    None when the two are not in one run, or a `\\ No newline` marker is in it."""
    block = _block(hunk, minus_line)
    if block is None or block != _block(hunk, plus_line):
        return None
    a, b = block
    run = hunk.lines[a : b + 1]
    if any(l.no_newline for l in run):
        return None
    minus = [l for l in run if l.kind == "-"]
    plus = [l for l in run if l.kind == "+"]
    i = next((k for k, l in enumerate(minus) if l.patch_line == minus_line), None)
    j = next((k for k, l in enumerate(plus) if l.patch_line == plus_line), None)
    if i is None or j is None:
        return None
    first, last = run[0].patch_line, run[-1].patch_line
    if last - first != len(run) - 1:  # a marker or stray line inside the run
        return None
    new = (
        ["-" + l.text for l in minus[:i]]
        + ["+" + l.text for l in plus[:j]]
        + [" " + minus[i].text]
        + ["-" + l.text for l in minus[i + 1 :]]
        + ["+" + l.text for l in plus[j + 1 :]]
    )
    return Edit(first, last, tuple(new))


def refresh_hunk(
    patch: PatchFile, hunk: Hunk, engine_lines: Sequence[str], where: int, ends_with_newline: bool = True
) -> Edit | None:
    """The edit rewriting `hunk` against the engine file it was applied to (what `quilt
    refresh` does): its context lines become the engine's lines at the place the hunk's
    old side was found (`where`, 1-based, the place of its first old-side line, as the
    applier reports it), and its header the engine's line number.  Context the applier's
    fuzz ignored and that lies outside the file is dropped, and leading context is cut to
    the length of the trailing context when that is shorter (GNU patch reads a hunk with
    less trailing context as one that must end at the end of the file).  None when a removed line is
    not the engine's, or the hunk carries a `\\ No newline` marker."""
    if (
        any(l.no_newline for l in hunk.lines)
        or not ends_with_newline
        and where + hunk.source_length > len(engine_lines)
    ):
        return None
    body: list[tuple[str, int | None]] = []  # (hunk line, its engine line or None for an added line)
    k = where - 1  # index into engine_lines of the next old-side line
    for l in hunk.lines:
        if l.kind == "+":
            body.append(("+" + l.text, None))
            continue
        inside = 0 <= k < len(engine_lines)
        if l.kind == "-":
            if not inside or engine_lines[k] != l.text:
                return None
            body.append(("-" + l.text, k + 1))
        elif inside:
            bare = engine_lines[k] == "" and patch.lines[l.patch_line - 1] == ""
            body.append(("" if bare else " " + engine_lines[k], k + 1))  # an empty context line stays empty
        k += 1  # fuzzed-away context past an end of the file is dropped
    changes = [i for i, (b, _) in enumerate(body) if b[:1] in ("+", "-")]
    if not changes:
        return None
    lead, trail = changes[0], len(body) - 1 - changes[-1]
    if 0 < trail < lead:  # less trailing than leading context: GNU patch would need fuzz
        body = body[lead - trail :]
    old = [n for b, n in body if b[:1] != "+"]
    start = old[0] if old else max(where - 1 + lead, 0)
    head_raw = patch.lines[hunk.header_line - 1]
    m = _HEAD_RE.match(head_raw)
    tail = head_raw[m.end() :] if m else ""
    new = len(body) - sum(1 for b, _ in body if b[:1] == "-")
    header = f"@@ -{start},{len(old)} +{hunk.target_start},{new} @@{tail}"
    span = hunk_span(patch, hunk)
    return Edit(span[0], span[1], (header, *(b for b, _ in body)))


def renumber_hunk(patch: PatchFile, hunk: Hunk, start: int) -> Edit | None:
    """The edit moving `hunk`'s old-side start to `start` (its lines unchanged; the new
    side follows), or None when it is there already."""
    if start == hunk.source_start or hunk.source_length == 0:
        return None
    first, last = hunk_span(patch, hunk)
    head = patch.lines[first - 1]
    m = _HEAD_RE.match(head)
    if m is None:
        return None
    new_head = f"@@ -{start}{m.group(2) or ''} +{int(m.group(3)) + start - hunk.source_start}{m.group(4) or ''} @@"
    return Edit(first, last, (new_head + head[m.end() :], *patch.lines[first:last]))


def hunk_at(patch: PatchFile, header_line: int) -> Hunk | None:
    """The hunk whose `@@` header is patch line `header_line`."""
    return next((h for _, h in patch.iter_hunks() if h.header_line == header_line), None)
