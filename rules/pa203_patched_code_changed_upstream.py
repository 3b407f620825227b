from __future__ import annotations

from typing import Any

from patchaudit.analysis.upstream import HunkChange, MissingFile
from patchaudit.lint.rule import PATCH, Example, Rule
from patchaudit.model.findings import Severity

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

#: upstream commits named in a message, at most
MAX_COMMITS = 3


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
    it (THUDM/slime#2388).
    """

    code = "PA203"
    roles = frozenset({"changed-upstream"})
    name = "patched-code-changed-upstream"
    severity = Severity.WARNING
    kinds = frozenset({PATCH})
    needs = frozenset({"engine-pair"})

    VALID = [
        Example(PATCH_TEXT, kind="patch", engine_old=_tree(), engine=_tree(), title="the same engine version"),
        Example(
            PATCH_TEXT,
            kind="patch",
            engine_old=_tree(),
            engine=_tree(MODULE.replace("return list(prompt)", "return [c for c in prompt]")),
            title="another function changed",
        ),
    ]
    INVALID = [
        Example(
            PATCH_TEXT,
            kind="patch",
            engine_old=_tree(),
            engine=_tree(MODULE.replace("start = time.perf_counter()", "start = time.monotonic()")),
            line=3,
            contains="`Processor.load` changed upstream",
            title="applies cleanly, function changed",
        ),
        Example(
            PATCH_TEXT,
            kind="patch",
            engine_old=_tree(),
            engine=_tree(MODULE.replace("ids = self.normalise(ids)", "ids = self.normalise(ids, strict=True)")),
            line=3,
            contains="it does not apply",
            title="the hunk's own lines changed",
        ),
        Example(
            PATCH_TEXT,
            kind="patch",
            engine_old=_tree(),
            engine=_tree(
                MODULE.replace("class Processor:", "class TextProcessor:"), path="python/sglang/srt/processing.py"
            ),
            line=1,
            contains="moved to python/sglang/srt/processing.py",
            title="the file moved",
        ),
    ]

    def check_patch(self, unit) -> None:
        pair = getattr(self.context.engine, "pair", None)
        if pair is None:
            return
        audit = pair.audit  # patchaudit.pipeline.bump_audit.BumpAudit
        for change in pair.upstream_changes():
            if isinstance(change, MissingFile):
                reloc, new = change.relocation, audit.new_name
                msg = reloc.describe(new) if reloc else f"{change.old_path} does not exist in {new}"
                message = msg + "; port its hunks there"
            else:
                message = self.hunk_message(audit, change)
            self.report_at(change.line, 0, change.line, 0, message, severity=Severity.WARNING)

    @staticmethod
    def hunk_message(audit, c: HunkChange) -> str:
        """The finding's message for a hunk whose engine code changed upstream."""
        new_path = c.new_path
        how = {
            "clean": "it still applies cleanly",
            "offset": f"it still applies (offset {c.offset:+d})",
            "fuzz": f"it applies only with fuzz {c.fuzz}",
            "failed": "it does not apply",
            "already-applied": "upstream already contains the change",
            "missing-file": f"{new_path} is where its code went" if new_path else "the file is gone",
        }.get(c.status, c.status)
        parts: list[str] = []
        for sym in c.symbols:
            if sym.new_qualname is None:
                f = audit.elsewhere(sym.qualname)
                there = f" (now `{f.qualname}` at {f.where})" if f is not None else ""
                parts.append(f"`{sym.qualname}` no longer exists in {new_path or audit.new_name}{there}")
                continue
            renamed = f" (now `{sym.new_qualname}` in {new_path})" if sym.renamed else ""
            parts.append(f"`{sym.qualname}`{renamed} changed upstream (+{sym.added}/-{sym.removed} lines)")
        if c.lines_changed is not None:
            parts.append(f"the {c.lines_changed} engine lines this hunk patches changed upstream")
        commits = ""
        for s, e in c.ranges:
            commits = _commits_text(audit.line_commits(new_path, s, e))
            if commits:
                break
        todo = {
            "failed": "port it to the new code",
            "fuzz": "check where it lands and refresh it",
            "already-applied": "drop it if upstream's change does the same",
            "missing-file": "port it there",
        }.get(c.status, "review it against the new code")
        return (
            f"hunk #{c.number}: {'; '.join(parts)} between {audit.old_name} and {audit.new_name}; "
            f"{how}: {todo}{commits}"
        )


def _commits_text(commits: list[dict[str, Any]]) -> str:
    """The commits named at the end of a message ("" when there are none)."""
    if not commits:
        return ""
    shown = ", ".join(f'{c["sha"][:10]} "{c["summary"]}"' for c in commits[:MAX_COMMITS])
    more = f" and {len(commits) - MAX_COMMITS} more" if len(commits) > MAX_COMMITS else ""
    return f"; upstream commit{'s' if len(commits) != 1 else ''}: {shown}{more}"
