from __future__ import annotations

from patchaudit.lint.rule import PATCH, Example, Rule
from patchaudit.model.findings import Fix, Severity
from patchaudit.patching.patchedit import drop_hunk, hunk_at

from ._exact import CLEAN_HUNK, MODULE, engine_tree, patch_for

#: a second file section of the fix example, which still applies
OTHER_SECTION = """\
--- a/python/sglang/srt/other.py
+++ b/python/sglang/srt/other.py
@@ -1,3 +1,3 @@
 a = 1
-b = 2
+b = 20
 c = 3
"""


class HunkAlreadyApplied(Rule):
    """
    Flags hunks whose change the engine source already contains.

    ## What it does
    In exact mode, a hunk that does not apply forward but whose result is
    already in the engine file, exactly (GNU patch's "Reversed (or previously
    applied) patch detected"; a match with fuzz is no evidence) is reported:
    upstream merged the change, and the hunk can be dropped from the patch set.
    The message says what the build's command does with it: `git apply` fails
    the whole patch, GNU `patch` skips the file (with `-t` it reverts the
    upstream change; a later hunk it applies a second time).  When a recipe
    names a command that breaks the build or its result there, it is an error.

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
    roles = frozenset({"hunk-status", "already-applied"})
    name = "hunk-already-applied"
    severity = Severity.INFO
    kinds = frozenset({PATCH})
    needs = frozenset({"engine"})
    #: drops the hunk (`already_applied_fix`); unsafe when the engine holds it only with fuzz
    fix = "safe"

    VALID = [Example(patch_for(CLEAN_HUNK), kind="patch", engine=engine_tree())]
    INVALID = [
        Example(
            patch_for(CLEAN_HUNK),
            kind="patch",
            engine=engine_tree(MODULE.replace("out = self.process(ids)", "out = self.process(list(ids))")),
            line=3,
            contains="already applied",
        ),
        Example(
            patch_for(CLEAN_HUNK) + OTHER_SECTION,
            kind="patch",
            engine={
                **engine_tree(MODULE.replace("out = self.process(ids)", "out = self.process(list(ids))")),
                "python/sglang/srt/other.py": "a = 1\nb = 2\nc = 3\n",
            },
            line=3,
            contains="already applied",
            title="the hunk is dropped, and its file section with it",
            expected_fix=OTHER_SECTION,
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
            tail, severity = build_outcome(result, h)
            self.report_at(
                h.patch_line,
                0,
                h.patch_line,
                0,
                f"hunk #{h.index + 1} is already applied in {result.engine_label} ({h.engine_path}{at}{sym}){tail}",
                fix=already_applied_fix(unit, h),
                severity=severity,
            )


# ----- what the build's command does with it (issue 17; patching/build.py) -----------

#: an already-applied hunk's action: what the command does, and whether that breaks the
#: build or its result (then, when a recipe names the command, the finding is an error)
_ACTIONS = {
    "git-fails": ("{cmd} fails on it: nothing of this patch is applied and the build stops at this patch", True),
    "merged": ("{cmd} merges it with the change already there, once", False),
    "gnu-skips": (
        "{cmd} reports a reversed (previously applied) patch on the file's first hunk and, with no "
        "terminal to answer or with -N, skips every hunk of {file} and exits 1",
        True,
    ),
    "gnu-reverts": ("{cmd} assumes -R: it reverses the hunk and undoes the upstream change", True),
    "gnu-fails": ("{cmd} checks only a file's first hunk for a reversed patch: this one FAILS and patch exits 1", True),
    "gnu-duplicates": (
        "{cmd} checks only a file's first hunk for a reversed patch: this one is applied again "
        "(with offset or fuzz) and the change lands twice, duplicating the code",
        True,
    ),
}


def build_outcome(result, record) -> tuple[str, Severity | None]:
    """(message tail, severity or None for the rule's) for an already-applied hunk."""
    from patchaudit.patching.appliers import is_default

    does, harmful = _ACTIONS.get(record.action, ("", False))
    if not does:
        return ": it can be dropped", None
    if is_default(result.applier):  # no recipe names the command: GNU patch's defaults, said as such
        return f": it can be dropped (plain {does.format(cmd='`patch`', file=record.engine_path)})", None
    text = does.format(cmd=f"`{result.applier.describe()}`", file=record.engine_path)
    return f": {text}; drop the hunk", Severity.ERROR if harmful else None


# ----- the fix (issue 20; docs/fixes.md) --------------------------------------------


def already_applied_fix(unit, record) -> Fix | None:
    """Drop the hunk the engine already contains: safe when the engine holds its new side
    exactly (the file the hunk means to produce is the engine's already; what the build's
    command does with the hunk instead, fail, revert or apply it twice, is what the finding
    says), unsafe when the engine holds it only with fuzz."""
    patch = getattr(unit, "patch", None)
    if patch is None:
        return None
    hunk = hunk_at(patch, record.patch_line)
    if hunk is None:
        return None
    return Fix(
        f"drop hunk #{record.index + 1}: {record.engine} already contains it",
        (drop_hunk(patch, hunk),),
        safe=record.fuzz == 0,
    )
