from __future__ import annotations

from patchaudit.lint.rule import PATCH, Example, Rule
from patchaudit.model.findings import Severity

from ._exact import CLEAN_HUNK, engine_tree, patch_for


class HunkDoesNotApply(Rule):
    """
    Flags hunks that do not apply to the given engine source.

    ## What it does
    In exact mode (`--engine`), applies every hunk in memory, as the build's
    command would (GNU `patch`: same search for the position, same fuzz; a
    recipe's `git apply`: no fuzz, and the whole patch or nothing), and reports
    each hunk that cannot be placed, with the nearest place it almost matched.
    Under `git apply` the first such hunk says that the build stops there;
    under `git apply --3way` a hunk the merge cannot take is a conflict.  A file
    section whose target the engine does not have gets one finding for the
    section (wrong engine version, wrong strip level, or the file moved); a target
    that kind of source cannot hold (`sgl-kernel/`, `test/` beside the package, in a
    wheel, which holds only the installed packages) is not reported: the run notes
    it once per patch ("not in this engine source").
    The rules still judge a failed hunk's added lines in fragment mode.

    ## Why is this bad?
    A hunk that does not apply is either dropped (`patch` writes a `.rej` file
    that nobody reads in a Docker build that ignores the exit code) or fails
    the image build at the worst moment: the engine bump.  Knowing which hunks
    fail, and where they almost fit, is the first thing a maintainer porting
    a patch set needs.

    ## Example
    A hunk whose context lines no longer exist in the engine version.

    ## Use instead
    Port the hunk to the new engine source and regenerate the patch with
    `git diff`.

    ## Incident
    Every engine bump of an RL framework that carries a patch set (slime's
    `docker/patch/<version>/sglang.patch`) goes through this.
    """

    code = "PA201"
    roles = frozenset({"breaks-patch", "hunk-status", "hunk-failed"})
    name = "hunk-does-not-apply"
    severity = Severity.ERROR
    kinds = frozenset({PATCH})
    needs = frozenset({"engine"})

    VALID = [
        Example(patch_for(CLEAN_HUNK), kind="patch", engine=engine_tree()),
        Example(
            patch_for(CLEAN_HUNK.replace("@@ -5,7 +5,7 @@", "@@ -25,7 +25,7 @@")),
            kind="patch",
            engine=engine_tree(),
            title="applies at an offset: not a failure",
        ),
    ]
    INVALID = [
        Example(
            patch_for(
                CLEAN_HUNK.replace(
                    "         ids = self.tokenize(prompt)\n", "         ids = self.tokenize_v2(prompt)\n"
                )
                .replace("         return out\n", "         return out or []\n")
                .replace("     def load(self, prompt):\n", "     def load(self, prompt, extra):\n")
            ),
            kind="patch",
            engine=engine_tree(),
            line=3,
            contains="nearest",
            title="context changed upstream",
        ),
        Example(
            patch_for(CLEAN_HUNK).replace("srt/proc.py", "srt/moved.py"),
            kind="patch",
            engine=engine_tree(),
            line=1,
            contains="does not exist",
            title="the file is not in the engine",
        ),
    ]

    def check_patch(self, unit) -> None:
        result = unit.engine
        if result is None:
            return
        stop = result.stopped_at
        for rec in result.sections:
            if rec.missing:
                sec = rec.section
                stops = stop is not None and stop in rec.hunks
                # the path as the patch writes it; the engine path it was looked up as beside it
                looked = f" (looked up as {rec.engine_path})" if rec.engine_path and rec.engine_path != sec.path else ""
                self.report_at(
                    sec.header_line,
                    0,
                    sec.header_line,
                    0,
                    f"{sec.path} does not exist in {result.engine_label}{looked} "
                    f"(strip level {result.strip}): wrong engine version or strip level, or the file "
                    f"moved; its {len(sec.hunks)} hunk(s) were checked without the engine" + _stops(result, stops),
                )
                continue
            for h in rec.hunks:
                if h.status != "failed":
                    continue
                where = ""
                if h.nearest:
                    line, matching, total = h.nearest
                    where = f"; nearest match at line {line} ({matching} of {total} lines match)"
                sym = f" in {h.symbol}" if h.symbol else ""
                what = "does not apply to"
                if h.action == "conflict":
                    what, where = (
                        "is a conflict with --3way in",
                        "; the merge with the index line's blob leaves conflict markers",
                    )
                self.report_at(
                    h.patch_line,
                    0,
                    h.patch_line,
                    0,
                    f"hunk #{h.index + 1} {what} {h.engine_path}{sym} ({result.engine_label}){where}"
                    + _stops(result, h is stop),
                )


def _stops(result, here: bool) -> str:
    """What the build does at the hunk where its all-or-nothing command (git apply) stops."""
    if not here:
        return ""
    tool = "git am" if result.applier.tool == "git-am" else "git apply"
    return f"; {tool} stops here: nothing of this patch is applied and the build stops at this patch"
