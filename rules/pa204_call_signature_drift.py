from __future__ import annotations

import libcst as cst

from patchaudit.pipeline.bump import PA204_OPTIONS
from patchaudit.model.findings import Severity
from patchaudit.lint.rule import PYTHON, Example, Rule

from ._seed import BASE_WITH_PARAM as BASE_V2
from ._seed import BASE_WITHOUT_PARAM as BASE_V1
from ._seed import EXACT_PATCH as SEED_PATCH
from ._seed import engine_tree as _mm_engine

PROC = """\
class Processor:
    def load(self, prompt):
        ids = self.tokenize(prompt)
        out = self.process(ids)
        return out

    def tokenize(self, prompt, add_special=True):
        return list(prompt)

    def process(self, ids, max_len=None):
        return ids
"""


def _proc_engine(content: str = PROC) -> dict[str, str]:
    return {"python/sglang/__init__.py": "", "python/sglang/srt/__init__.py": "",
            "python/sglang/srt/proc.py": content}


def _proc_patch(new_line: str) -> str:
    return ("--- a/python/sglang/srt/proc.py\n+++ b/python/sglang/srt/proc.py\n"
            "@@ -1,5 +1,5 @@\n"
            " class Processor:\n"
            "     def load(self, prompt):\n"
            "         ids = self.tokenize(prompt)\n"
            "-        out = self.process(ids)\n"
            f"+        {new_line}\n"
            "         return out\n")


class CallSignatureDrift(Rule):
    """
    Flags calls in patched code that no longer fit the new engine version's signatures.

    ## What it does
    Runs under `patchaudit bump` (it needs the OLD and the NEW engine version).
    Every call a patch adds, or that sits in code a hunk touches, is resolved
    to its engine definition through the module's imports and the class
    hierarchy (`self.m()`, `super().m()`, `Class.m()`, imported functions and
    classes with their own `__init__`; a call on an object of unknown type is
    never guessed), in NEW with all patches of the set applied, and checked:

    - a keyword the definition does not take, with "removed or renamed between
      OLD and NEW" when OLD took it;
    - a required parameter the call does not pass (noting when it is new);
    - too many positional arguments, an argument given twice;
    - a positional argument that binds to another parameter in NEW than in OLD;
    - a parameter upstream's own call sites pass in NEW (all of them by
      default: option `upstream-share`, with at least `min-upstream-calls`
      sites; call sites in tests are left out unless `include-tests`) while
      this call leaves it out: an error when the parameter is new in NEW, a
      warning when it existed but upstream only started passing it.  The
      message names the parameter, how many upstream call sites pass it and
      one of them.

    A hunk that fails on NEW is checked all the same (its added lines, parsed
    on their own): the maintainer will port it.

    ## Why is this bad?
    A patch that calls an engine function keeps applying and importing when
    upstream adds a parameter with a default, and silently gets the default.
    When upstream's own callers all pass the new parameter, the default is
    the "off" switch of whatever upstream added it for.

    ## Example
    At NEW, `legacy_load_mm_data` gained `input_ids=None` and `load_mm_data`
    forwards `input_ids=input_ids`; a patch still calls
    ```python
    base_output = await self.legacy_load_mm_data(prompt=input_text, image_data=image_data)
    ```

    ## Use instead
    ```python
    base_output = await self.load_mm_data(prompt=input_text, image_data=image_data)
    ```
    or pass the new parameter the way upstream's call sites do.

    ## Incident
    SGLang added `input_ids` to `legacy_load_mm_data` (sgl-project/sglang#26555);
    slime's Qwen-VL patch called it without the argument and silently dropped
    the caller's token ids at every multimodal request (seed report 002).
    """

    code = "PA204"
    name = "call-signature-drift"
    severity = Severity.ERROR
    kinds = frozenset({PYTHON})
    needs = frozenset({"engine-pair"})
    options = dict(PA204_OPTIONS)

    VALID = [
        Example(SEED_PATCH, kind="patch", engine_old=_mm_engine(BASE_V1), engine=_mm_engine(BASE_V1),
                title="the seed patch, OLD = NEW = v1"),
        Example(SEED_PATCH.replace("             prompt=input_text,\n",
                                   "             prompt=input_text,\n+            input_ids=input_text,\n")
                .replace("@@ -3,7 +3,7 @@", "@@ -3,7 +3,8 @@"),
                kind="patch", engine_old=_mm_engine(BASE_V1), engine=_mm_engine(BASE_V2),
                title="the seed patch passing input_ids"),
        Example(_proc_patch("out = self.process(ids, max_len=8)"), kind="patch",
                engine_old=_proc_engine(), engine=_proc_engine(), title="signature unchanged"),
        Example(_proc_patch("out = self.process(ids, **extra)"), kind="patch", engine_old=_proc_engine(),
                engine=_proc_engine(PROC.replace("max_len=None", "max_length=None")),
                title="** may carry anything"),
        Example(_proc_patch("out = helper.process(ids, max_len=8)"), kind="patch", engine_old=_proc_engine(),
                engine=_proc_engine(PROC.replace("max_len=None", "max_length=None")),
                title="an object of unknown type is not guessed"),
    ]
    INVALID = [
        Example(SEED_PATCH, kind="patch", engine_old=_mm_engine(BASE_V1), engine=_mm_engine(BASE_V2),
                line=8, contains="`input_ids` is new in", title="the seed: input_ids new in NEW"),
        Example(_proc_patch("out = self.process(ids, max_len=8)"), kind="patch", engine_old=_proc_engine(),
                engine=_proc_engine(PROC.replace("max_len=None", "max_length=None")), line=8,
                contains="renamed to `max_length`", title="a keyword renamed upstream"),
        Example(_proc_patch("out = self.process(ids)"), kind="patch", engine_old=_proc_engine(),
                engine=_proc_engine(PROC.replace("max_len=None", "max_len=None, *, mode")
                                    .replace("out = self.process(ids)", "out = self.process(ids, mode=1)")),
                count=1, contains="requires", title="a new required parameter"),
        Example(_proc_patch("out = self.process(self.tokenize(prompt, False))"), kind="patch",
                engine_old=_proc_engine(),
                engine=_proc_engine(PROC.replace("prompt, add_special=True", "prompt, truncate=False, "
                                                                              "add_special=True")),
                line=8, contains="positional argument 2", title="a parameter inserted before a positional one"),
    ]

    def visit_Module(self, node: cst.Module) -> None:
        pair = getattr(getattr(self.unit, "engine", None), "pair", None)
        if pair is None:
            return
        for line, col, end_line, end_col, callee, shape, class_q, complete in pair.audit.calls_to_check(self.unit):
            for message, severity in pair.audit.check_call(self.unit, callee, shape, class_q, complete):
                self.report_at(line, col, end_line, end_col, message, severity=severity)
