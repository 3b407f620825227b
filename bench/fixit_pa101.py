"""PA101 as a Fixit 2 lint rule, for the benchmark (bench/run.py).

The same judgement as patchaudit's PA101 without an engine: a call of
`legacy_load_mm_data` (any receiver) that passes no `input_ids=` keyword, no
`**kwargs` and no `*args`, and fewer than nine positional arguments.
"""

import libcst as cst
from fixit import Invalid, LintRule, Valid

LOADER = "legacy_load_mm_data"
INPUT_IDS_POSITION = 8


def _callee(func: cst.BaseExpression):
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return None


class LegacyLoaderDropsInputIds(LintRule):
    MESSAGE = "PA101 `legacy_load_mm_data` called without `input_ids=`"
    VALID = [
        Valid("out = await self.legacy_load_mm_data(prompt=t, input_ids=ids)"),
        Valid("out = await self.legacy_load_mm_data(**kw)"),
        Valid("out = await self.load_mm_data(prompt=t)"),
    ]
    INVALID = [
        Invalid("out = await self.legacy_load_mm_data(prompt=t, image_data=imgs)"),
        Invalid("out = legacy_load_mm_data(prompt=t)"),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if _callee(node.func) != LOADER:
            return
        for arg in node.args:
            if arg.star in ("*", "**"):
                return
            if arg.keyword is not None and arg.keyword.value == "input_ids":
                return
        if len([a for a in node.args if a.keyword is None]) > INPUT_IDS_POSITION:
            return
        self.report(node, self.MESSAGE)
