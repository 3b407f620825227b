from __future__ import annotations

from patchaudit.model.findings import Severity
from patchaudit.lint.rule import PATCH, Example, Rule

MODULE = """\
import time


class Processor:
    def load(self, prompt):
        start = time.perf_counter()
        ids = self.tokenize(prompt)
        ids = self.normalise(ids)
        out = self.process(ids)
        self.log(start)
        return out

    def tokenize(self, prompt):
        return list(prompt)

    def process(self, ids):
        return ids
"""

PATCH_TEXT = """\
--- a/python/sglang/srt/proc.py
+++ b/python/sglang/srt/proc.py
@@ -7,6 +7,6 @@ class Processor:
         ids = self.tokenize(prompt)
         ids = self.normalise(ids)
-        out = self.process(ids)
+        out = self.process(list(ids))
         self.log(start)
         return out
 
"""


def _tree(content: str = MODULE, path: str = "python/sglang/srt/proc.py") -> dict[str, str]:
    return {"python/sglang/__init__.py": "", "python/sglang/srt/__init__.py": "", path: content}


class PatchedCodeChangedUpstream(Rule):
    """
    Flags hunks whose engine code changed between the old and the new engine version.

    ## What it does
    Runs under `patchaudit bump`.  For every hunk, finds the engine functions
    whose lines it changes in OLD (the innermost `def` around each removed
    line or insertion point) and compares each with the same function in NEW.
    A function that changed, or no longer exists, is reported at the hunk
    with the number of lines that differ, how the hunk applies to NEW, and,
    when OLD and NEW are two revisions of one git repository, the upstream
    commits that changed those lines (`git log -L`).  Code outside any
    function (module or class level) is reported when the hunk's own lines
    changed (it applies to NEW only with fuzz, or not at all).

    A patched file that NEW no longer has is reported at its file header with
    the file its definitions moved to (most of its functions and methods
    defined again there, classes matched by their methods, so a renamed class
    is named too), or as removed.

    ## Why is this bad?
    A hunk that still applies cleanly is the dangerous case: nothing fails,
    yet the function around it may now rely on something the patch bypasses
    or duplicates.  Only a reviewer who reads the upstream change can tell,
    and this rule tells them which hunks need it.

    ## Example
    A hunk in `Processor.load` that applies cleanly to NEW, where upstream
    changed another line of `load`.

    ## Use instead
    Read the upstream change (the commits named), port or drop the hunk, and
    regenerate the patch against NEW.

    ## Incident
    SGLang's `load_mm_data` gained token-id preservation (sgl-project/sglang#26555)
    while slime's Qwen-VL hunk next to it kept applying cleanly and bypassed
    it (seed report 002).
    """

    code = "PA203"
    name = "patched-code-changed-upstream"
    severity = Severity.WARNING
    kinds = frozenset({PATCH})
    needs = frozenset({"engine-pair"})

    VALID = [
        Example(PATCH_TEXT, kind="patch", engine_old=_tree(), engine=_tree(), title="the same engine version"),
        Example(PATCH_TEXT, kind="patch", engine_old=_tree(),
                engine=_tree(MODULE.replace("return list(prompt)", "return [c for c in prompt]")),
                title="another function changed"),
    ]
    INVALID = [
        Example(PATCH_TEXT, kind="patch", engine_old=_tree(),
                engine=_tree(MODULE.replace("start = time.perf_counter()", "start = time.monotonic()")),
                line=3, contains="`Processor.load` changed upstream", title="applies cleanly, function changed"),
        Example(PATCH_TEXT, kind="patch", engine_old=_tree(),
                engine=_tree(MODULE.replace("ids = self.normalise(ids)", "ids = self.normalise(ids, strict=True)")),
                line=3, contains="it does not apply", title="the hunk's own lines changed"),
        Example(PATCH_TEXT, kind="patch", engine_old=_tree(),
                engine=_tree(MODULE.replace("class Processor:", "class TextProcessor:"),
                             path="python/sglang/srt/processing.py"),
                line=1, contains="moved to python/sglang/srt/processing.py", title="the file moved"),
    ]

    def check_patch(self, unit) -> None:
        pair = getattr(self.context.engine, "pair", None)
        if pair is None:
            return
        for line, message, severity in pair.upstream_changes():
            self.report_at(line, 0, line, 0, message, severity=severity)
