from __future__ import annotations

from patchaudit.lint.rule import PATCH, Example, Rule
from patchaudit.model.findings import Severity

from ._exact import CLEAN_HUNK, MODULE, engine_tree, patch_for


class HunkAlreadyApplied(Rule):
    """
    Flags hunks whose change the engine source already contains.

    ## What it does
    In exact mode, a hunk that does not apply forward but whose result is
    already in the engine file (GNU patch's "Reversed (or previously applied)
    patch detected") is reported as information: upstream merged the change,
    and the hunk can be dropped from the patch set.

    ## Why is this bad?
    It is not a bug, it is dead weight: an already-applied hunk makes `patch`
    ask "Assume -R?" (and with `-R` or `-t` it *reverts* the upstream fix), or
    fails a `patch -N` step.  Dropping it keeps the patch set small and honest.

    ## Example
    A hunk adding `input_ids=input_ids` to a call that upstream already
    passes it.

    ## Use instead
    Remove the hunk from the patch.

    ## Incident
    Upstream fixes such as sgl-project/sglang#26555 make the corresponding
    downstream hunks redundant at the next engine bump.
    """

    code = "PA208"
    name = "hunk-already-applied"
    severity = Severity.INFO
    kinds = frozenset({PATCH})
    needs = frozenset({"engine"})

    VALID = [Example(patch_for(CLEAN_HUNK), kind="patch", engine=engine_tree())]
    INVALID = [
        Example(
            patch_for(CLEAN_HUNK),
            kind="patch",
            engine=engine_tree(MODULE.replace("out = self.process(ids)", "out = self.process(list(ids))")),
            line=3,
            contains="already applied",
        ),
    ]

    def check_patch(self, unit) -> None:
        result = unit.engine
        if result is None:
            return
        for h in result.hunks:
            if h.status != "already-applied":
                continue
            sym = f" in {h.symbol}" if h.symbol else ""
            line = h.source_line or h.line
            at = f":{line}" if line else ""
            self.report_at(
                h.patch_line,
                0,
                h.patch_line,
                0,
                f"hunk #{h.index + 1} is already applied in {result.engine_label} "
                f"({h.engine_path}{at}{sym}): it can be dropped",
            )
