from __future__ import annotations

from patchaudit.lint.fixes import make_fix
from patchaudit.lint.rule import PATCH, Example, Rule
from patchaudit.model.findings import Fix, Severity
from patchaudit.patching.apply import split_lines
from patchaudit.patching.patchedit import hunk_at, refresh_hunk, renumber_hunk

from ._exact import CLEAN_HUNK, MODULE, engine_tree, patch_for


class HunkAppliesWithFuzz(Rule):
    """
    Flags hunks that apply only by ignoring context lines (fuzz).

    ## What it does
    In exact mode, reports every hunk that GNU `patch` would place only with
    fuzz 1 or 2, that is after ignoring one or two context lines at each end
    of the hunk.  A hunk that applies at an offset (shifted lines, exact
    context) is not a finding; the offset is shown in the report.

    ## Why is this bad?
    Fuzz means the code around the change is no longer what the patch author
    saw.  The hunk may land in the wrong function, or in the right place whose
    meaning has changed; GNU patch and `quilt push` accept fuzz 2 silently, so
    nothing in the build says so.

    ## Example
    A hunk whose first and last context lines were edited upstream.

    ## Use instead
    Refresh the patch against the engine version (`quilt refresh`, or
    regenerate it with `git diff`) and review the change in its new context.

    ## Incident
    GNU patch's default `--fuzz 2` is why patch sets drift unnoticed from one
    engine version to the next.
    """

    code = "PA202"
    roles = frozenset({"breaks-patch", "hunk-status"})
    name = "hunk-applies-with-fuzz"
    severity = Severity.WARNING
    kinds = frozenset({PATCH})
    needs = frozenset({"engine"})
    #: refreshes the hunk from the engine (`refresh_fix`): what the build gets is unchanged
    fix = "safe"

    VALID = [Example(patch_for(CLEAN_HUNK), kind="patch", engine=engine_tree())]
    INVALID = [
        Example(
            patch_for(CLEAN_HUNK.replace("     def tokenize(self, prompt):\n", "     def tokenize(self, text):\n")),
            kind="patch",
            engine=engine_tree(),
            line=3,
            contains="fuzz 1",
            title="last context line changed upstream",
            expected_fix=patch_for(CLEAN_HUNK),
        ),
        Example(
            patch_for(CLEAN_HUNK.replace("     def tokenize(self, prompt):\n", "     def tokenize(self, text):\n")),
            kind="patch",
            engine=engine_tree("# one\n# two\n# three\n" + MODULE),
            line=3,
            contains="fuzz 1",
            title="fuzz and offset: context and line numbers refreshed",
            expected_fix=patch_for(CLEAN_HUNK.replace("@@ -5,7 +5,7 @@", "@@ -8,7 +8,7 @@")),
        ),
    ]

    def check_patch(self, unit) -> None:
        result = unit.engine
        if result is None:
            return
        for h in result.hunks:
            if h.status != "fuzz":
                continue
            sym = f" in {h.symbol}" if h.symbol else ""
            self.report_at(
                h.patch_line,
                0,
                h.patch_line,
                0,
                f"hunk #{h.index + 1} applies to {h.engine_path}{sym} only with fuzz {h.fuzz} "
                f"(ignoring {h.fuzz} context line(s) at each end) at line {h.source_line or h.line}: "
                f"it may land in the wrong place; refresh the patch",
                fix=refresh_fix(unit, h),
            )


# ----- the fix (issue 20; docs/fixes.md) --------------------------------------------


def refresh_fix(unit, record) -> Fix | None:
    """Refresh the file section of the fuzzed hunk from the engine file it applied to
    (`quilt refresh`): its fuzzed hunks get the engine's context lines and line numbers,
    its other hunks the engine's line numbers (offset, already applied: where the applier
    found them; failed: where it looked), so that the section's hunks stay in order.  Every
    fuzzed hunk of the section reports this same fix (applied once).  Safe: GNU patch
    writes the engine's context lines, never the patch's, so what the build gets from
    this engine is byte-identical; `git apply` then accepts the refreshed hunks."""
    result = getattr(unit, "engine", None)
    patch = getattr(unit, "patch", None)
    sec = next((s for s in result.sections if record in s.hunks), None) if result is not None else None
    if sec is None or patch is None or sec.original_text is None:
        return None
    lines, eol = split_lines(sec.original_text)
    edits = []
    for r, start in section_starts(patch, sec.hunks):
        hunk = hunk_at(patch, r.patch_line)
        if hunk is None or start is None:
            if r is record:
                return None
            continue
        edit = refresh_hunk(patch, hunk, lines, start, eol) if r.status == "fuzz" else None
        if edit is None:
            edit = renumber_hunk(patch, hunk, start)
        if edit is None and r is record:
            return None
        if edit is not None:
            edits.append(edit)
    return make_fix(f"refresh the hunks of {record.engine_path or record.section_path} from {record.engine}", edits)


def section_starts(patch, records) -> list:
    """(record, its new old-side start or None to leave it) for the hunks of one section:
    where the applier placed it (offset, fuzz, already applied); for a failed hunk its own
    start, or where the applier looked, whichever keeps the section's hunks in order (a
    hunk upstream moved past its neighbours cannot be renumbered: None)."""
    placed = {r.patch_line: r.source_line for r in records if r.status in ("offset", "fuzz", "already-applied")}
    lengths = {h.header_line: (h.source_start, h.source_length) for _, h in patch.iter_hunks()}
    out = []
    prev_end = 0
    for k, r in enumerate(records):
        own_start, length = lengths.get(r.patch_line, (None, 0))
        if r.patch_line in placed:
            start = placed[r.patch_line]
        elif r.status == "failed":
            nxt = next((placed[x.patch_line] for x in records[k + 1 :] if x.patch_line in placed), None)
            fits = [c for c in (own_start, r.source_line) if c is not None and c >= prev_end]
            fits = [c for c in fits if nxt is None or c + length <= nxt]
            start = fits[0] if fits else None
        else:
            start = own_start
        if start is not None and start < prev_end:
            start = None
        out.append((r, start if r.status != "clean" or start != own_start else None))
        if start is not None:
            prev_end = start + length
        elif own_start is not None:
            prev_end = max(prev_end, own_start + length)
    return out
