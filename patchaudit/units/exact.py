"""Exact mode: patches applied in memory to the real engine source.

For each file section of a patch, the engine file (or, for a git engine, the
exact pre-image blob named by the `index` line) is patched in memory with the
GNU-patch-compatible applier, and the whole patched file becomes one unit:
rules see complete code, and only findings on lines the patch added or changed
are kept, reported at the patch line *and* the engine line with the enclosing
engine symbol.  Per-hunk results (clean / offset / fuzz / failed /
already-applied) feed PA201, PA202, PA208; a patched file that does not parse
feeds PA302.  A hunk that fails still gets its fragment-mode units, so the
rules still judge what it adds.

One bad input costs the smallest unit it belongs to (SECURITY.md, promise 6): a
hunk the applier refuses (no added or removed line) is left out of the
application and marked "malformed" (PA301 reports it), the other hunks of the
file apply; an engine file over `max-file-size` (or one the engine source
cannot read) is reported once per run as an error naming it and the limit, the
rules see the engine without it, and a section whose pre-image it is is judged
in fragment mode ("unreadable"); an unexpected failure inside one file section
is an error naming the patch and the section's line, and that section falls
back to fragment mode while the other sections keep their exact results.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from patchaudit.engine.sources import EngineError
from patchaudit.model.findings import FileError
from patchaudit.patching.appliers import DEFAULT_APPLIER, Applier, is_default
from patchaudit.units import LineInfo, PythonUnit, TextUnit
from patchaudit.units.engines import BoundedSource, EngineContext
from patchaudit.units.exact_unit import ExactPythonUnit, original_index, syntax_error

#: a hunk's status when a wheel (an installed engine: its packages only) cannot hold its file
NOT_IN_SOURCE = "not-in-source"


@dataclass
class HunkRecord:
    patch: str
    patch_line: int  # the hunk's "@@" line in the patch file
    section_path: str  # the path the patch names (without a/ b/)
    engine_path: str | None
    index: int
    # clean | offset | fuzz | failed | already-applied | missing-file | not-in-source | unreadable (the engine
    # file is over max-file-size or cannot be read) | malformed (the applier refuses the hunk)
    status: str
    offset: int = 0
    fuzz: int = 0
    line: int | None = None  # where the pre-image matched in the engine file
    nearest: tuple[int, int, int] | None = None
    symbol: str | None = None
    engine: str = ""
    source_line: int | None = None  # where the hunk was found (or expected) in the original file
    #: what the build's command does with it beyond its status (patching/build.py: an
    #: already-applied hunk's GIT_FAILS, GNU_SKIPS, ...; "conflict" under --3way)
    action: str = ""
    applier: str = ""  # the command, as a user writes it (`git apply --3way`)
    title: str = ""  # the engine as a user names it (`sglang 0.5.15.post1`)
    stops: bool = False  # git apply stops at this hunk: nothing of the patch is applied

    def to_json(self) -> dict[str, Any]:
        return {
            "patch": self.patch,
            "patch_line": self.patch_line,
            "target": self.engine_path or self.section_path,
            "hunk": self.index + 1,
            "status": self.status,
            "offset": self.offset,
            "fuzz": self.fuzz,
            "engine_line": self.source_line if self.source_line is not None else self.line,
            "patched_line": self.line,
            "nearest": list(self.nearest) if self.nearest else None,
            "symbol": self.symbol,
            "engine": self.engine,
            "applier": self.applier,
            "action": self.action,
            "engine_title": self.title or self.engine,
            "stops_build": self.stops,
        }


@dataclass
class SectionRecord:
    section: Any
    engine_path: str | None
    missing: bool = False
    #: the target is outside what this kind of engine source holds (NOT_IN_SOURCE)
    outside: bool = False
    hunks: list[HunkRecord] = field(default_factory=list)
    syntax_error: tuple[int, int | None, str] | None = None  # (patched line, patch line, message)
    patched_text: str | None = None
    original_text: str | None = None


@dataclass
class ExactResult:
    engine_label: str
    engine_name: str
    strip: int
    prefix: str
    sections: list[SectionRecord] = field(default_factory=list)
    #: what went wrong inside one section or hunk (the patch file and line named)
    errors: list[FileError] = field(default_factory=list)
    #: the command the build applies the patch with (a recipe's; else GNU patch's defaults)
    applier: Applier = DEFAULT_APPLIER
    #: git apply / git am: the first hunk that does not apply; the build applies nothing
    #: of the patch and stops there (None: the patch applies, or GNU patch)
    stopped_at: HunkRecord | None = None
    #: hunk records and patched texts only, no units (bump's OLD side: no rule reads them)
    records_only: bool = False

    @property
    def hunks(self) -> list[HunkRecord]:
        return [h for s in self.sections for h in s.hunks]

    @property
    def patch_applied(self) -> bool:
        return self.stopped_at is None


def _refused(source, path: str | None = None, blob: str | None = None) -> bool:
    return bool(source.refused(path, blob)) if isinstance(source, BoundedSource) else False


def _changed_hunk_lines(hunk) -> set[int]:
    """Indexes (into hunk.lines) of added lines and of the line after each removal run."""
    out: set[int] = set()
    pending = False
    for i, l in enumerate(hunk.lines):
        if l.kind == "+":
            out.add(i)
            pending = False
        elif l.kind == "-":
            pending = True
        else:
            if pending:
                out.add(i)
            pending = False
    return out


def _blob(source, sha: str, path: str | None) -> bytes | None:
    if isinstance(source, BoundedSource):
        return source.blob(sha, path)
    return source.blob(sha)


def _read_original(ctx: EngineContext, section, use_blob: bool = True) -> tuple[str | None, str | None, bool]:
    """(pre-image text, engine path it came from, refused): `refused` when the engine
    has the file but it was not read (over max-file-size, unreadable: BoundedSource).
    `use_blob=False`: the build's command (a recipe's) patches the engine's file, not
    the blob the `index` line names."""
    src_path = ctx.engine_path(section.source_path) if section.source_path else None
    path = src_path or ctx.engine_path(section.raw_path)
    # bump compares two revisions of one repository: there the file at the
    # revision counts, not the pre-image blob the index line names
    if use_blob and ctx.use_index_blob and section.index and not set(section.index[0]) <= {"0"}:
        blob = _blob(ctx.source, section.index[0], path)
        if blob is not None:
            return blob.decode("utf-8", "surrogateescape"), path, False
        if _refused(ctx.source, blob=section.index[0]):
            return None, path, True  # the named pre-image is too large: not another version instead
    if path is None:
        return None, None, False
    text = ctx.source.read_text(path)
    return text, path, text is None and _refused(ctx.source, path)


def hunk_defect(hunk) -> str | None:
    """Why the applier (like GNU patch, "malformed patch") refuses a hunk, or None."""
    if not any(l.kind in "+-" for l in hunk.lines):
        return "has no added or removed line"
    old = sum(1 for l in hunk.lines if l.kind != "+")
    new = sum(1 for l in hunk.lines if l.kind != "-")
    if old != hunk.source_length or new != hunk.target_length:
        return (
            f"has {old} old and {new} new lines where its header says "
            f"-{hunk.source_start},{hunk.source_length} +{hunk.target_start},{hunk.target_length}"
        )
    return None


def exact_units(
    patch, ctx: EngineContext, report_path: str, applier: Applier = DEFAULT_APPLIER, records_only: bool = False
):
    """Units of a patch in exact mode: (python units, text units, ExactResult).

    `applier` is the build's command (a recipe's `git apply --3way`, `patch -F3`):
    it decides fuzz, all-or-nothing and what an already-applied hunk does.

    Each file section is judged on its own: a failure inside one (reported in
    `ExactResult.errors` with the section's line) leaves it to fragment mode and
    the other sections as they are."""
    from patchaudit.inputs.discover import classify

    result = ExactResult(ctx.label, ctx.source.name, ctx.strip, ctx.prefix, applier=applier, records_only=records_only)
    py: list[PythonUnit] = []
    text_units: list[TextUnit] = []
    # a file changed by two sections of one patch: the second applies to the first's result,
    # as GNU patch does
    patched_so_far: dict[str, tuple[str, str | None]] = {}
    problem_lines = {p.line for p in patch.problems}
    for section in patch.sections:
        if section.is_binary:
            continue
        try:
            target = (
                ctx.engine_path(
                    section.target_path or section.rename_to and ("b/" + section.rename_to) or section.raw_path
                )
                or section.path
            )
        except Exception:  # never lose the section over its name (map_path is not known to raise)
            target = section.path
        rec = SectionRecord(section, target)
        result.sections.append(rec)
        kind = "python" if section.is_python else classify(section.path)
        if not section.hunks:
            continue
        sec_py: list[PythonUnit] = []
        sec_text: list[TextUnit] = []
        try:
            _exact_section(
                patch,
                ctx,
                report_path,
                section,
                rec,
                target,
                kind,
                patched_so_far,
                problem_lines,
                result,
                sec_py,
                sec_text,
            )
        except Exception as exc:  # one section's failure never costs the others (RecursionError too)
            import traceback

            tb = traceback.extract_tb(exc.__traceback__)[-1]
            result.errors.append(
                FileError(
                    report_path,
                    f"internal error in exact mode on the file section for {section.path}: {exc!r} "
                    f"at {os.path.basename(tb.filename)}:{tb.lineno}; its hunks were checked "
                    f"without the engine",
                    section.header_line,
                )
            )
            rec.hunks, rec.missing, rec.syntax_error, rec.patched_text = [], False, None, None
            sec_py, sec_text = [], []
            try:
                _fallback_units(patch, section, section.hunks, report_path, kind, sec_py, sec_text, ctx)
            except Exception:
                sec_py, sec_text = [], []
        py.extend(sec_py)
        text_units.extend(sec_text)
    py, text_units = _as_built(patch, ctx, report_path, applier, result, py, text_units)
    pair = ctx.pair
    if pair is not None and is_default(applier):  # bump: NEW's hunk records, computed once
        pair.offer_new_result(patch, ctx, result)
    return py, text_units, result


#: hunk statuses at which git apply stops (and applies nothing of the patch)
_STOPS = ("failed", "already-applied", "malformed")


def _as_built(patch, ctx: EngineContext, report_path: str, applier: Applier, result: ExactResult, py, text_units):
    """The units as the build's command leaves the engine: under git apply a patch with a
    hunk that does not apply is applied not at all, so no patched file is the build's
    result and the rules judge what the patch adds (fragment mode)."""
    from patchaudit.engine.versions import engine_title
    from patchaudit.inputs.discover import classify

    title = engine_title(ctx, ctx.source.name)
    command = applier.describe() + (" (no recipe: GNU patch's defaults)" if is_default(applier) else "")
    for h in result.hunks:
        h.applier, h.title = command, title
    if not applier.all_or_nothing:
        return py, text_units
    from patchaudit.engine.versions import expected_file

    # a file the engine lacks stops git apply where the build's checkout has it
    missing = [h for h in result.hunks if h.status == "missing-file" and expected_file(ctx.source, h.engine_path)]
    stop = next((h for h in result.hunks if (h.status in _STOPS and h.action != "merged") or h in missing), None)
    if stop is None:
        return py, text_units
    stop.stops = True
    result.stopped_at = stop
    py, text_units = [], []
    for rec in result.sections:
        rec.syntax_error, rec.patched_text = None, None
        good = [h for h in rec.section.hunks if hunk_defect(h) is None]
        kind = "python" if rec.section.is_python else classify(rec.section.path)
        _fallback_units(patch, rec.section, good, report_path, kind, py, text_units, ctx)
    return py, text_units


def _exact_section(
    patch,
    ctx: EngineContext,
    report_path: str,
    section,
    rec: SectionRecord,
    target: str,
    kind,
    patched_so_far: dict,
    problem_lines: set[int],
    result: ExactResult,
    py: list,
    text_units: list,
) -> None:
    """One file section in exact mode: its hunk records and units (appended to `py`/`text_units`)."""
    from patchaudit.inputs.discover import PYTHON
    from patchaudit.patching.apply import split_lines

    # hunks the applier refuses are left out; the others apply as GNU patch would apply them
    records: dict[int, HunkRecord] = {}
    good = _applicable_hunks(report_path, ctx, section, target, problem_lines, records, result)

    def finish_records() -> None:
        rec.hunks = [records[k] for k in sorted(records)]

    def fallback(hunks) -> None:
        _fallback_units(patch, section, hunks, report_path, kind, py, text_units, ctx)

    if not good:
        finish_records()
        return
    original: str | None
    orig_path: str | None
    if section.is_new and section.source_path is None:
        original, orig_path, refused = "", target, False
        same = _existing_new_file(report_path, ctx, section, target, good, records)
        if same is not None:
            finish_records()
            if not same:
                fallback(good)
            return
    else:
        original, orig_path, refused = _section_original(ctx, report_path, section, target, patched_so_far, result)
    if original is None:
        from patchaudit.engine.versions import outside_source

        # not a missing file of the engine: one its kind cannot hold; the path stays the patch's
        outside = not refused and outside_source(ctx.source, section.path, target)
        rec.missing, rec.outside = not refused and not outside, outside
        for h in good:
            records[h.index] = HunkRecord(
                report_path,
                h.header_line,
                section.path,
                None if outside else target,
                h.index,
                "unreadable" if refused else NOT_IN_SOURCE if outside else "missing-file",
                engine=ctx.label,
            )
        finish_records()
        fallback(good)
        return
    rec.original_text = original
    lines, eol = split_lines(original)
    applied, actions = _apply(
        ctx, section, orig_path or target, result.applier, lines, [h.to_spec() for h in good], eol
    )
    # the engine's own file: the index its engine context has (or will have) of that text
    orig_index = original_index(ctx, orig_path or target, original) if kind == PYTHON else None
    _applied_records(report_path, ctx, section, target, good, applied, orig_index, records, actions)
    finish_records()
    failed = [h for h, r in zip(good, applied.hunks) if r.status == "failed"]
    if section.is_deleted:
        return
    patched = "\n".join(applied.lines) + ("\n" if applied.ends_with_newline and applied.lines else "")
    rec.patched_text = patched
    patched_so_far[target] = (patched, target)
    if result.records_only:
        return
    unit = _section_unit(patch, ctx, report_path, section, rec, target, kind, good, applied, patched, orig_index)
    if unit is _BROKEN:
        fallback(good)
        return
    if isinstance(unit, PythonUnit):
        py.append(unit)
    elif unit is not None:
        text_units.append(unit)
    if failed:
        fallback(failed)


#: `_section_unit`: the patched Python file does not parse
_BROKEN = object()


def _section_unit(
    patch,
    ctx: EngineContext,
    report_path: str,
    section,
    rec: SectionRecord,
    target: str,
    kind,
    good: list,
    applied,
    patched: str,
    orig_index,
):
    """The exact-mode unit of a section's patched file: None for a kind rules do not read,
    _BROKEN when the patched Python does not parse (the caller falls back to fragments;
    a syntax error is recorded when the original parsed)."""
    from patchaudit.inputs.discover import PATCH, PYTHON

    lines_map, judged, hunk_of = _patched_lines(good, applied)
    common: dict[str, Any] = dict(
        path=report_path,
        lines_map=lines_map,
        judged=frozenset(judged),
        target_path=target,
        patch=patch,
        section=section,
        mode="exact",
    )
    if kind == PYTHON:
        from patchaudit.inputs.pyast import over_limit

        # over max-parse-size: never parsed (not a syntax error); the runner reports the unit
        too_large = over_limit(patched) is not None
        # indexed once, shared with the rules' engine context and bump's patched overlay
        patched_tree = None if too_large else original_index(ctx, target, patched).tree
        if patched_tree is None and not too_large:
            if orig_index is not None and orig_index.tree is not None:  # the patch broke it
                rec.syntax_error = syntax_error(patched, lines_map)
            return _BROKEN
        unit = ExactPythonUnit(**common, text=patched, engine=ctx)
        unit.hunk_of = hunk_of
        unit.patched_tree = patched_tree  # reused by EngineContext.unit_module: one ast parse
        return unit
    elif kind not in (None, PATCH):
        text_unit = TextUnit(**common, flavor=kind, lines=list(applied.lines))
        text_unit.hunk_of = hunk_of
        return text_unit
    return None


def _applicable_hunks(
    report_path: str,
    ctx: EngineContext,
    section,
    target: str,
    problem_lines: set[int],
    records: dict,
    result: ExactResult,
) -> list:
    """The section's hunks the applier takes; the others get a "malformed" record (and an
    error, unless the patch reader reported them already)."""
    good = []
    for h in section.hunks:
        defect = hunk_defect(h)
        if defect is None:
            good.append(h)
            continue
        records[h.index] = HunkRecord(
            report_path, h.header_line, section.path, target, h.index, "malformed", engine=ctx.label
        )
        if h.header_line not in problem_lines:  # PA301 reports what the patch reader found
            result.errors.append(
                FileError(
                    report_path,
                    f"hunk #{h.index + 1} {defect}: not applied (GNU patch refuses it as malformed)",
                    h.header_line,
                )
            )
    return good


def _existing_new_file(
    report_path: str, ctx: EngineContext, section, target: str, good: list, records: dict
) -> bool | None:
    """A section creating a file: None when the engine lacks it; else the engine already has
    it (GNU patch asks "Assume -R?"), its hunks are recorded "already-applied" or "failed",
    and the answer is whether the engine's file is the one the patch creates."""
    try:
        existing = ctx.source.read_text(target) if target else None
    except EngineError:
        existing = None
    if existing is None:
        return None
    post = "\n".join(l.text for h in good for l in h.post_image)
    same = existing.rstrip("\n") == post.rstrip("\n")
    for h in good:
        records[h.index] = HunkRecord(
            report_path,
            h.header_line,
            section.path,
            target,
            h.index,
            "already-applied" if same else "failed",
            line=1,
            engine=ctx.label,
        )
    return same


def _section_original(
    ctx: EngineContext, report_path: str, section, target: str, patched_so_far: dict, result: ExactResult
) -> tuple[str | None, str | None, bool]:
    """(pre-image text, its engine path, refused) of a section changing a file: what an
    earlier section of the patch made of it, else the engine's (`_read_original`)."""
    source_key = ctx.engine_path(section.source_path) if section.source_path else target
    if source_key in patched_so_far:
        original, orig_path = patched_so_far[source_key]
        return original, orig_path, False
    try:
        return _read_original(ctx, section, use_blob=is_default(result.applier))
    except EngineError as exc:  # an engine source that raises (not a BoundedSource)
        result.errors.append(FileError(report_path, f"engine file not read: {exc}", section.header_line))
        return None, None, True


def _apply(ctx: EngineContext, section, path: str, applier: Applier, lines: list[str], specs: list, eol: bool):
    """(ApplyResult, {hunk index: action}) of one section as the build's command applies it."""
    from patchaudit.patching.build import build_apply

    sha = section.index[0] if section.index and not set(section.index[0]) <= {"0"} else None
    return build_apply(applier, lines, specs, eol, lambda: _blob(ctx.source, sha, path) if sha else None)


def _applied_records(
    report_path: str,
    ctx: EngineContext,
    section,
    target: str,
    good: list,
    applied,
    orig_index,
    records: dict,
    actions: dict[int, str],
) -> None:
    """The record of each hunk the applier applied (or failed to)."""
    for h, r in zip(good, applied.hunks):
        # the symbol around the hunk's first change (not its leading context), looked up
        # in the original (r.line is in patched-file coordinates)
        lead = next((k for k, l in enumerate(h.lines) if l.kind != " "), 0)
        if lead and h.lines[lead].kind == "+":
            lead -= 1  # an insertion: the line it follows
        at = (r.source_line or r.line or h.source_start) + lead
        symbol = orig_index.symbol_at(at) if orig_index else None
        records[h.index] = HunkRecord(
            report_path,
            h.header_line,
            section.path,
            target,
            h.index,
            r.status,
            r.offset,
            r.fuzz,
            r.line,
            r.nearest,
            symbol,
            ctx.label,
            source_line=r.source_line,
            action=actions.get(r.index, ""),
        )


def _patched_lines(good: list, applied) -> tuple[dict[int, LineInfo], set[int], dict[int, Any]]:
    """(lines map, judged lines, hunk of each line) of the patched file's lines the hunks gave."""
    lines_map: dict[int, LineInfo] = {}
    judged: set[int] = set()
    hunk_of: dict[int, Any] = {}
    changed_idx = [_changed_hunk_lines(h) for h in good]
    for line_no, (hi, li) in applied.origin.items():
        h = good[hi]
        hl = h.lines[li]
        is_changed = li in changed_idx[hi]
        lines_map[line_no] = LineInfo(hl.patch_line, 1, line_no, is_changed)
        hunk_of[line_no] = h
        if is_changed:
            judged.add(line_no)
    return lines_map, judged, hunk_of


def _fallback_units(patch, section, hunks, report_path, kind, py, text_units, ctx) -> None:
    """Fragment-mode units for hunks exact mode cannot place (failed, missing file)."""
    from patchaudit.inputs.discover import PATCH, PYTHON
    from patchaudit.units.fragments import fragment_units, hunk_text_unit

    for h in hunks:
        if kind == PYTHON:
            for u in fragment_units(patch, section, h, report_path=report_path):
                u.engine = ctx
                u.target_path = ctx.engine_path(section.raw_path) or section.path
                py.append(u)
        elif kind not in (None, PATCH):
            text_units.append(hunk_text_unit(patch, section, h, kind, report_path))
