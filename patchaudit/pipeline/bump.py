"""The engine-bump audit behind `patchaudit bump`: a patch set against OLD and NEW.

When a pinned engine moves from OLD to NEW (`sglang==0.5.12.post1` becomes
`sglang==0.5.15.post1`), a hunk can still apply while the code around it, or
the function it calls, changed underneath it: that is how the seed-002 bug
happened (upstream added `input_ids` to `legacy_load_mm_data` and a patch
that called it kept applying and silently dropped the ids).  This module:

- applies every hunk in memory to OLD and to NEW (exact mode, `units/exact.py`)
  and keeps both results per hunk (clean / offset / fuzz / failed, with the
  enclosing engine symbol): the hunk table of the report (`bump_report.py`);
- runs every rule on NEW with the patches applied, through the normal runner
  (`analyse.analyse_file`), with a `PairContext` (`bump_engines.py`): the NEW
  engine context that also carries the OLD side (`.pair`).  The two
  engine-pair rules read it and judge for themselves: PA203 (patched code
  changed upstream) and PA204 (call-signature drift); what they judge is
  computed by `BumpAudit` (`bump_audit.py`: `upstream_changes`,
  `call_target`) with the pure comparisons of `patchaudit/analysis/upstream.py`
  and `patchaudit/analysis/signatures.py`;
- finds where the definitions of a patched file that NEW no longer has went
  (`BumpAudit.relocation`);
- runs the monkey-patch audit of issue 9 (`bump_monkeypatch.audit_bump`) on
  the `.py` files given, when that module exists.

Three views of the engine are indexed (`units/symbols.EngineIndex`): OLD and
NEW as released, and NEW with every patch of the set applied in order (an
in-memory overlay), because a patch set often changes a signature in one file
and its callers in another: calls are bound against the patched definitions,
compared with upstream's own definitions in OLD and NEW, and with upstream's
own call sites in NEW.

Nothing is written anywhere: the sources are read in place (git objects,
wheel members), the patches are applied in memory.
"""

from __future__ import annotations

from patchaudit.analysis.upstream import Relocation, first_change
from patchaudit.config.registry import codes_with_role
from patchaudit.config.settings import Settings
from patchaudit.engine.sources import EngineError, EngineSource, open_engine
from patchaudit.model.findings import FileError, Finding, Target
from patchaudit.pipeline.bump_audit import BumpAudit
from patchaudit.pipeline.bump_engines import PairEngines, PatchPair
from patchaudit.pipeline.bump_report import BumpReport, HunkRow, Side
from patchaudit.units.engines import EngineContext

__all__ = ["BumpAudit", "BumpError", "BumpReport", "HunkRow", "Relocation", "Side", "open_pair", "run_bump"]


class BumpError(Exception):
    """A bad engine spec, an unreadable engine source, bad options (exit code 2)."""


# --------------------------------------------------------------------------
# the run


def _validate_options(settings: Settings) -> None:
    """The options of the engine-pair rules, checked before anything is opened."""
    from patchaudit.rules.pa204_call_signature_drift import CallSignatureDrift

    where = f"{settings.config_path}: " if settings.config_path else ""
    try:
        CallSignatureDrift.check_options(settings.options_for(CallSignatureDrift.code))
    except ValueError as exc:
        raise BumpError(f"{where}{exc}") from None


def _monkeypatch_findings(py_files: list[str], audit: BumpAudit, report: BumpReport) -> list[Finding]:
    """Issue 9's runtime monkey-patch audit, when that module is there."""
    if not py_files:
        return []
    try:
        from patchaudit.pipeline.bump_monkeypatch import audit_bump
    except ImportError:
        return []
    old_ctx = EngineContext(audit.old, audit.strip or 0, "", audit.old_index)
    new_ctx = EngineContext(audit.new, audit.strip or 0, "", audit.new_index)
    try:
        return list(audit_bump(py_files, old_ctx, new_ctx, audit.settings))
    except Exception as exc:  # their bug must not hide the rest of the report
        report.errors.append(FileError(py_files[0], f"monkey-patch audit crashed: {exc!r}"))
        return []


def _locate(findings: list[Finding], rows: list[HunkRow]) -> None:
    """Findings at a hunk's @@ line (PA201-PA203, PA208) get the hunk's engine place."""
    at = {(r.patch, r.patch_line): r for r in rows}
    sections = {(r.patch, r.section_line): r for r in rows if r.moved_to}
    for f in findings:
        if f.target is not None:
            continue
        row = at.get((f.path, f.line))
        if row is None:
            moved = sections.get((f.path, f.line))
            if moved is not None and moved.moved_to:  # a file NEW no longer has: where its code went
                f.target = Target(moved.moved_to, None, None)
            continue
        side = row.new if row.new is not None and row.new.status not in ("missing-file",) else (row.moved or row.old)
        if row.moved is not None and row.new is not None and row.new.status == "failed":
            side = row.moved  # a re-export shim: the hunk's code is where it moved
        if side is None:
            continue
        path = row.moved_to if side is row.moved and row.moved_to else side.path
        f.target = Target(path or row.target, side.source_line or side.line, side.symbol or row.symbol)


def _applies(side: Side | None) -> str:
    if side is None:
        return "not tried"
    if side.status == "failed":
        near = f", nearest match at line {side.nearest[0]}" if side.nearest else ""
        return f"does not apply there either{near}"
    return {"clean": "applies there cleanly", "already-applied": "is already applied there"}.get(
        side.status, f"applies there with {side.label()}"
    )


def _name_destinations(findings: list[Finding], rows: list[HunkRow]) -> None:
    """A finding that a hunk (or a file) does not apply (the rule whose role is "hunk-failed"),
    where upstream moved the code, says where it is now and how the hunk applies there."""
    failed = codes_with_role("hunk-failed")
    by_hunk = {(r.patch, r.patch_line): r for r in rows if r.moved_to}
    by_section: dict[tuple[str, int | None], list[HunkRow]] = {}
    for r in rows:
        if r.moved_to:
            by_section.setdefault((r.patch, r.section_line), []).append(r)
    for f in findings:
        if f.code not in failed:
            continue
        row = by_hunk.get((f.path, f.line))
        if row is not None and row.new is not None and row.new.status == "failed":
            sym = f" (`{row.moved_symbol}`)" if row.moved_symbol else ""
            f.message += f"; upstream moved its code to {row.moved_to}{sym}: the hunk {_applies(row.moved)}"
            continue
        moved = by_section.get((f.path, f.line))
        if moved:
            parts = [
                f"hunk #{r.hunk} to {r.moved_to}"
                + (f" `{r.moved_symbol}`" if r.moved_symbol else "")
                + f" ({_applies(r.moved).replace(' there', '')})"
                for r in moved
            ]
            f.message += "; upstream moved its code: " + "; ".join(parts)


def _reword_incomplete(findings: list[Finding], new_name: str) -> None:
    """Fragment units say "give --engine to confirm"; under bump the engine is there, the
    hunk just does not apply to it."""
    from patchaudit.units import INCOMPLETE_NOTE

    note = f" ({INCOMPLETE_NOTE})"
    for f in findings:
        if note in f.message:
            f.message = f.message.replace(
                note,
                f" (the call continues past a hunk that does not apply to "
                f"{new_name}: judged from the lines the patch shows)",
            )


def _moved_sides(sec, orec, reloc: Relocation, audit: BumpAudit, only: set[int] | None) -> dict[int, tuple]:
    """Hunk header line -> (NEW file, NEW symbol, Side) for the hunks of a file whose code
    moved: each hunk goes where its OLD symbol went and is applied there (`only`: the
    hunks to place, None for all)."""
    from patchaudit.engine.definitions import index_module
    from patchaudit.patching.apply import apply_hunks, split_lines

    old_by = {h.patch_line: h for h in orec.hunks} if orec is not None else {}
    groups: dict[str, list] = {}
    dest: dict[int, tuple[str, str | None]] = {}
    for h in sec.hunks:
        if only is not None and h.header_line not in only:
            continue
        oh = old_by.get(h.header_line)
        mv = reloc.destination(oh.symbol if oh is not None else None)
        path = mv.path if mv is not None else reloc.new_path
        if path is None:
            continue
        dest[h.header_line] = (path, mv.new if mv is not None else None)
        groups.setdefault(path, []).append(h)
    out: dict[int, tuple] = {}
    for path, hunks in groups.items():
        text = audit.new.read_text(path) or ""
        lines, eol = split_lines(text)
        try:
            applied = apply_hunks(lines, [h.to_spec() for h in hunks], ends_with_newline=eol)
        except ValueError:
            continue
        ix = audit.new_index.module_by_path(path) or index_module(path, text)
        for h, r in zip(hunks, applied.hunks):
            at = first_change(h, r.source_line or h.source_start)
            side = Side(r.status, path, r.offset, r.fuzz, r.line, r.source_line, ix.symbol_at(at), r.nearest)
            out[h.header_line] = (path, dest[h.header_line][1], side)
    return out


def _hunk_rows(pair: PatchPair, audit: BumpAudit) -> list[HunkRow]:
    old_res, new_res = pair.old_result, pair.new_result
    old_by = {h.patch_line: h for h in old_res.hunks} if old_res is not None else {}
    new_by = {h.patch_line: h for h in new_res.hunks}
    rows: list[HunkRow] = []
    for rec in new_res.sections:
        sec = rec.section
        moved: dict[int, tuple] = {}
        orec = next(
            (r for r in (old_res.sections if old_res else []) if r.section.header_line == sec.header_line), None
        )
        if sec.hunks and orec is not None and orec.engine_path and orec.original_text is not None:
            reloc = audit.relocation(orec.engine_path)
            if reloc is not None and (rec.missing or reloc.shim):
                # a file NEW lacks: every hunk; a re-export shim: the hunks that fail on it
                failed = None if rec.missing else {h.patch_line for h in rec.hunks if h.status == "failed"}
                moved = _moved_sides(sec, orec, reloc, audit, failed)
        for h in sec.hunks:
            o, n = old_by.get(h.header_line), new_by.get(h.header_line)
            to, to_symbol, side = moved.get(h.header_line, (None, None, None))
            rows.append(
                HunkRow(
                    pair.patch.path,
                    h.header_line,
                    h.index + 1,
                    sec.path,
                    Side.of(o) if o else None,
                    Side.of(n) if n else None,
                    to,
                    sec.header_line,
                    side,
                    (h.header_line in pair.changed_hunks) if pair.changes_computed else None,
                    to_symbol,
                )
            )
    return rows


def open_pair(engine: str, old_spec: str, new_spec: str) -> tuple[EngineSource, EngineSource]:
    try:
        old = open_engine(old_spec, name=engine)
    except EngineError as exc:
        raise BumpError(f"--from: {exc}") from None
    try:
        new = open_engine(new_spec, name=engine)
    except EngineError as exc:
        old.close()
        raise BumpError(f"--to: {exc}") from None
    return old, new


def run_bump(
    paths: list[str], engine: str, old_spec: str, new_spec: str, settings: Settings, strip: int | None = None
) -> BumpReport:
    """Audit the patches (and monkey-patching .py files) under `paths` for the bump OLD -> NEW
    (every file read once: files/reader.py `reading_once`)."""
    from patchaudit.files.reader import reading_once

    with reading_once():
        return _bump(paths, engine, old_spec, new_spec, settings, strip)


def _bump(
    paths: list[str], engine: str, old_spec: str, new_spec: str, settings: Settings, strip: int | None
) -> BumpReport:
    from patchaudit.inputs.discover import PATCH, PYTHON, discover
    from patchaudit.inputs.patches import read_patch
    from patchaudit.pipeline.analyse import analyse_file
    from patchaudit.pipeline.context import load_tokenizer
    from patchaudit.pipeline.results import RunError
    from patchaudit.pipeline.run_rules import resolve_rules

    _validate_options(settings)
    try:
        rules = resolve_rules(settings)
        tokenizer = load_tokenizer(settings)
    except RunError as exc:
        raise BumpError(str(exc)) from None
    files, errors = discover(paths, settings.exclude)
    old, new = open_pair(engine, old_spec, new_spec)
    try:
        audit = BumpAudit(engine, old, new, strip, settings)
        report = BumpReport(
            engine,
            old.label,
            new.label,
            audit.old_name,
            audit.new_name,
            errors=list(getattr(settings, "problems", ())) + list(errors),
            files=len(files),
            old_kind=old.kind,
            new_kind=new.kind,
        )
        try:
            # NEW with every patch applied, in the order given: what the patched engine defines
            for src in files:
                if src.kind != PATCH:
                    continue
                try:  # the one guarded reader: a FIFO named x.patch is never opened
                    from patchaudit.files.reader import read_bytes

                    data = read_bytes(src.path, settings.max_file_size)
                except OSError:
                    continue  # analyse_file reports it
                audit.add_to_overlay(read_patch(src.path, data))
            engines = PairEngines(audit)
            py_files: list[str] = []
            for src in files:
                if src.kind == PATCH:
                    report.patches.append(src.path)
                elif src.kind == PYTHON:
                    py_files.append(src.path)
                fr = analyse_file(src, settings, rules, engines if src.kind == PATCH else None, tokenizer)
                report.findings.extend(fr.findings)
                report.errors.extend(fr.errors)
                report.parsed += fr.parsed
            selected = {r.code for r in rules}
            report.findings += [f for f in _monkeypatch_findings(py_files, audit, report) if f.code in selected]
            for path in report.patches:
                pair = audit.pairs.get(path)
                if pair is None:
                    continue
                try:
                    report.hunks.extend(_hunk_rows(pair, audit))
                except EngineError:
                    raise
                except Exception as exc:  # one patch's bug never hides the others
                    report.errors.append(FileError(path, f"internal error building the hunk table: {exc!r}"))
            report.relocations = audit.relocations()
        except EngineError as exc:
            raise BumpError(str(exc)) from None
        _locate(report.findings, report.hunks)
        _name_destinations(report.findings, report.hunks)
        _reword_incomplete(report.findings, audit.new_name)
        report.findings.sort(key=Finding.sort_key)
        return report
    finally:
        old.close()
        new.close()
