from __future__ import annotations

from patchaudit.engine.definitions import parse_python
from patchaudit.inputs.pyast import over_limit
from patchaudit.lint.rule import PATCH, Example, Rule
from patchaudit.model.findings import Severity

from ._exact import CLEAN_HUNK, engine_tree, patch_for


class PatchedPythonSyntaxError(Rule):
    """
    Flags Python that a patch produces and that does not parse.

    ## What it does
    In exact mode, parses the whole patched engine file and reports a syntax
    error at the patch line that produced it (when the engine file parsed
    before the patch).  Without an engine, a file the patch creates is
    complete in the patch and is parsed as well.

    ## Why is this bad?
    A patch applied in a Docker build is usually only imported when the
    server starts, on the GPU node, hours into the pipeline.  A hunk that
    applies with fuzz into the wrong block, or a hand edit that broke the
    indentation, turns into an `IndentationError` there.

    ## Example
    A hunk adding a line with a wrong indentation.

    ## Use instead
    Fix the hunk; run `python -m py_compile` on the patched tree in CI.

    ## Incident
    Hand-maintained engine patch sets are edited at every engine bump; broken
    indentation is the classic result.
    """

    code = "PA302"
    roles = frozenset({"breaks-patch"})
    name = "patched-python-syntax-error"
    severity = Severity.ERROR
    kinds = frozenset({PATCH})

    VALID = [
        Example(patch_for(CLEAN_HUNK), kind="patch", engine=engine_tree()),
        Example(
            "--- /dev/null\n+++ b/python/sglang/srt/new.py\n@@ -0,0 +1,2 @@\n+def f(x):\n+    return x\n",
            kind="patch",
            title="a new file that parses",
        ),
    ]
    INVALID = [
        Example(
            patch_for(
                CLEAN_HUNK.replace(
                    "+        out = self.process(list(ids))\n", "+        out = self.process(list(ids)\n"
                )
            ),
            kind="patch",
            engine=engine_tree(),
            contains="does not parse",
        ),
        Example(
            "--- /dev/null\n+++ b/python/sglang/srt/new.py\n@@ -0,0 +1,2 @@\n+def f(x):\n+return x\n",
            kind="patch",
            line=5,
            contains="does not parse",
            title="a new file, no engine needed",
        ),
    ]

    def check_patch(self, unit) -> None:
        result = unit.engine
        if result is not None:
            for rec in result.sections:
                if rec.syntax_error is None:
                    continue
                line, patch_line, msg = rec.syntax_error
                where = patch_line or rec.section.header_line
                self.report_at(
                    where,
                    0,
                    where,
                    0,
                    f"the patched {rec.engine_path} does not parse: {msg} (line {line} of the patched file)",
                )
            return
        for sec in unit.patch.sections:
            if not (sec.is_python and sec.is_new and sec.source_path is None and sec.hunks):
                continue
            post = [l for h in sec.hunks for l in h.post_image]
            text = "\n".join(l.text for l in post) + "\n"
            if over_limit(text) is not None:
                continue  # over max-parse-size: never parsed (compile() would parse it whole)
            if parse_python(text) is not None:
                continue
            try:
                compile(text, sec.path, "exec", flags=0x400, dont_inherit=True)
                line, msg = 1, "does not parse"
            except SyntaxError as exc:
                line, msg = exc.lineno or 1, exc.msg
            except (ValueError, RecursionError, MemoryError) as exc:
                line, msg = 1, str(exc)
            pl = post[min(max(line, 1), len(post)) - 1].patch_line
            self.report_at(pl, 0, pl, 0, f"{sec.path}, created by this patch, does not parse: {msg} (line {line})")
