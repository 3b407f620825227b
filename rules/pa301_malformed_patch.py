from __future__ import annotations

from patchaudit.lint.rule import PATCH, Example, Rule
from patchaudit.model.findings import Severity

GOOD = """\
--- a/python/sglang/srt/x.py
+++ b/python/sglang/srt/x.py
@@ -1,3 +1,3 @@
 a = 1
-b = 2
+b = 3
 c = 4
"""


class MalformedPatch(Rule):
    """
    Flags a patch file that does not parse, or whose hunk line counts are wrong.

    ## What it does
    Reads every `.patch`/`.diff` file line by line and checks what a diff
    reader would silently accept: files with no diff at all (garbage, an empty
    file), hunks cut short by the end of the file, hunks whose `@@ -a,b +c,d @@`
    counts do not match their lines (in either direction), lines that look like
    hunk content outside any hunk, hunks without a file header, hunks out of
    order, malformed `@@` headers, non-UTF-8 or NUL bytes.  Each problem is
    reported at the patch line where it is found.

    ## Why is this bad?
    Tools disagree on broken patches: unidiff returns an empty patch set for
    garbage and drops lines after a finished hunk without a word, GNU patch
    stops at a short hunk or applies what it understood, `git apply` refuses the
    whole file.  A patch set that "applies" in one tool may lose a hunk in
    another, and the engine the training run uses is not the one that was
    reviewed.

    ## Example
    ```diff
    @@ -1,3 +1,3 @@
     a = 1
    -b = 2
    +b = 3
    ```
    (the header announces 3 lines on each side; the file ends after 2.)

    ## Use instead
    Regenerate the patch with `git diff`/`git format-patch`, or fix the counts
    of the `@@` header by hand (`rediff` from patchutils does it).

    ## Incident
    Hand-edited patch sets (slime's `docker/patch/*/sglang.patch` is over a
    thousand lines) are regenerated and edited at every engine bump; a hunk
    whose counts were not updated is silently cut by some readers.
    """

    code = "PA301"
    roles = frozenset({"breaks-patch"})
    name = "malformed-patch"
    severity = Severity.ERROR
    kinds = frozenset({PATCH})

    VALID = [
        Example(GOOD, kind="patch"),
        Example(
            "Description: keep ids\nUpstream-Status: Inappropriate\n\n" + GOOD,
            kind="patch",
            title="DEP-3 header before the diff",
        ),
        Example(GOOD.replace("\n", "\r\n"), kind="patch", title="CRLF line endings"),
        Example(
            """\
            diff --git a/old.py b/new.py
            similarity index 100%
            rename from old.py
            rename to new.py
            """,
            kind="patch",
            title="rename only",
        ),
        Example(
            """\
            diff --git a/logo.png b/logo.png
            index 1111111..2222222 100644
            Binary files a/logo.png and b/logo.png differ
            """,
            kind="patch",
            title="binary diff",
        ),
        Example(GOOD + "-- \n2.40.0\n", kind="patch", title="git format-patch signature"),
    ]
    INVALID = [
        Example("this is not a diff at all\n", kind="patch", line=1, contains="no diff found"),
        Example("", kind="patch", contains="empty patch"),
        Example(
            GOOD.replace("@@ -1,3 +1,3 @@", "@@ -1,4 +1,4 @@"),
            kind="patch",
            line=3,
            contains="truncated",
            title="counts larger than the hunk",
        ),
        Example(
            GOOD.replace("@@ -1,3 +1,3 @@", "@@ -1,2 +1,2 @@"),
            kind="patch",
            line=7,
            contains="count",
            title="counts smaller than the hunk",
        ),
        Example(
            GOOD.replace("@@ -1,3 +1,3 @@", "@@ -1,3 +1,3"), kind="patch", line=3, contains="malformed hunk header"
        ),
        Example("@@ -1,1 +1,1 @@\n-a\n+b\n", kind="patch", line=1, contains="without a file header"),
    ]

    def check_patch(self, unit) -> None:
        from patchaudit.inputs.patches import validate_with_unidiff

        patch = unit.patch
        problems = list(unit.problems)
        if not problems:
            # unidiff is the reference reader: a section it cannot read is malformed too
            problems = validate_with_unidiff(patch)
        for p in problems:
            self.report_at(p.line, 0, p.line, 0, p.message)
