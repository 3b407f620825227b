from __future__ import annotations

from patchaudit.lint.rule import PATCH, Example, Rule
from patchaudit.model.findings import Severity

from ._exact import CLEAN_HUNK, engine_tree, patch_for


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
    name = "hunk-applies-with-fuzz"
    severity = Severity.WARNING
    kinds = frozenset({PATCH})
    needs = frozenset({"engine"})

    VALID = [Example(patch_for(CLEAN_HUNK), kind="patch", engine=engine_tree())]
    INVALID = [
        Example(
            patch_for(CLEAN_HUNK.replace("     def tokenize(self, prompt):\n", "     def tokenize(self, text):\n")),
            kind="patch",
            engine=engine_tree(),
            line=3,
            contains="fuzz 1",
            title="last context line changed upstream",
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
            )
