from __future__ import annotations

import libcst as cst
from libcst.metadata import PositionProvider

from patchaudit.analysis.names import callee_name, has_star_kwargs, keyword, positional
from patchaudit.lint.fixes import insert_after, make_fix, replace_span, unit_line_text
from patchaudit.lint.rule import PYTHON, Example, Rule
from patchaudit.model.findings import Fix, Severity
from patchaudit.patching.patchedit import revert_pair

from ._seed import BASE_WITH_PARAM, BASE_WITHOUT_PARAM, EXACT_PATCH, SEED_HUNK
from ._seed import engine_tree as _engine

LOADER = "legacy_load_mm_data"
#: in SGLang 0.5.15 `input_ids` is the 9th parameter after `self`
INPUT_IDS_POSITION = 8
#: the fix examples: an engine file whose caller has `input_ids`, a patch calling the legacy loader there
QWEN_IDS = """\
from sglang.srt.multimodal.processors.base_processor import BaseMultimodalProcessor as SGLangBaseProcessor


class QwenVLImageProcessor(SGLangBaseProcessor):
    async def process_mm_data_async(self, image_data, input_text, input_ids, **kwargs):
        out = await self.load_mm_data(input_text, self.mm_tokens, image_data)
        return out
"""
EXACT_ADD_PATCH = """\
--- a/python/sglang/srt/multimodal/processors/qwen_vl.py
+++ b/python/sglang/srt/multimodal/processors/qwen_vl.py
@@ -5,3 +5,4 @@ class QwenVLImageProcessor(SGLangBaseProcessor):
     async def process_mm_data_async(self, image_data, input_text, input_ids, **kwargs):
-        out = await self.load_mm_data(input_text, self.mm_tokens, image_data)
+        out = await self.legacy_load_mm_data(input_text, self.mm_tokens)
+        out = out or {}
         return out
"""
#: and a second file section, which stays when the Qwen-VL one is reverted away
OTHER_SECTION = """\
diff --git a/python/sglang/srt/other.py b/python/sglang/srt/other.py
--- a/python/sglang/srt/other.py
+++ b/python/sglang/srt/other.py
@@ -1,2 +1,2 @@
 a = 1
-b = 2
+b = 3
"""


class LegacyLoaderDropsInputIds(Rule):
    """
    Flags calls of `legacy_load_mm_data` that do not pass `input_ids=`.

    ## What it does
    Finds every call of SGLang's `legacy_load_mm_data` (awaited or not, through
    `self.`, `super().`, another object or a bare name) that passes no
    `input_ids` argument, in Python files and in the lines a patch adds.

    With an engine source (`--engine`), the callee is resolved through the class
    hierarchy: if the engine's `legacy_load_mm_data` has an `input_ids`
    parameter the finding is certain; if it has none, the finding says that this
    engine version itself re-tokenizes id prompts.  Without an engine, a call
    whose arguments run past the hunk is reported with a note to confirm it.

    ## Why is this bad?
    `load_mm_data()` saves a `list[int]` prompt as `input_ids` before decoding it
    to text, and forwards it to `legacy_load_mm_data(input_ids=input_ids)`.  A
    direct call without `input_ids` leaves that side channel `None`: the prompt
    is decoded, the HF processor re-tokenizes the text, and SGLang's protection
    against re-tokenization (`SGLANG_MM_AVOID_RETOKENIZE`) can never run.
    Non-canonical ids (`[" tr", "uly"]`) come back merged (`[" truly"]`), so the
    trainer and the engine no longer see the same tokens.  Nothing fails.

    ## Example
    ```python
    base_output = await self.legacy_load_mm_data(
        prompt=input_text,
        image_data=image_data,
    )
    ```

    ## Use instead
    ```python
    base_output = await self.load_mm_data(prompt=input_text, image_data=image_data)
    # or, when the legacy loader is really needed:
    base_output = await self.legacy_load_mm_data(
        prompt=input_text, image_data=image_data, input_ids=input_ids
    )
    ```

    ## Incident
    slime's `docker/patch/latest/sglang.patch` rewrote Qwen-VL's
    `load_mm_data(` into `legacy_load_mm_data(` and so bypassed the token-id
    preservation SGLang added in sgl-project/sglang#26555 (reported in THUDM/slime#2388,
    fixed by THUDM/slime#2389).
    """

    code = "PA101"
    roles = frozenset({"port-check"})
    name = "legacy-loader-drops-input-ids"
    severity = Severity.ERROR
    kinds = frozenset({PYTHON})
    requires = ((LOADER,),)
    #: a call and the names of the classes around it (`Rule.local`); the fix also reads the
    #: parameters of the function around it (its header)
    local = True
    #: revert a patch's `load_mm_data(` -> `legacy_load_mm_data(` (safe), or add
    #: `input_ids=input_ids` (safe when the engine's loader takes it, else unsafe): `loader_fix`
    fix = "safe"
    METADATA_DEPENDENCIES = (PositionProvider,)

    VALID = [
        Example(
            "base_output = await self.legacy_load_mm_data(prompt=text, image_data=imgs, input_ids=input_ids)\n",
            title="passes input_ids",
        ),
        Example(
            "out = self.legacy_load_mm_data(prompt, tokens, imgs, None, None, True, True, None, ids)\n",
            title="passes input_ids positionally",
        ),
        Example("out = await self.legacy_load_mm_data(**loader_kwargs)\n", title="** may carry input_ids"),
        Example("base_output = await self.load_mm_data(prompt=text, image_data=imgs)\n", title="the safe loader"),
        Example(
            "async def legacy_load_mm_data(self, prompt, input_ids=None):\n    return prompt\n",
            title="the definition is not a call",
        ),
        Example(
            SEED_HUNK.replace(
                "             prompt=input_text,\n",
                "             prompt=input_text,\n+            input_ids=input_ids,\n",
            ).replace("@@ -678,7 +678,7 @@", "@@ -678,7 +678,8 @@"),
            kind="patch",
            title="the seed hunk with input_ids added",
        ),
        Example(
            """\
            --- a/python/sglang/srt/x.py
            +++ b/python/sglang/srt/x.py
            @@ -1,3 +1,3 @@
             out = self.legacy_load_mm_data(prompt=text)
            -log(out)
            +logger.info(out)
             return out
            """,
            kind="patch",
            title="an old call in the context lines is not judged",
        ),
        Example(
            EXACT_PATCH.replace(
                "+        base_output = await self.legacy_load_mm_data(\n",
                "+        base_output = await self.legacy_load_mm_data(input_ids=input_text,\n",
            ),
            kind="patch",
            engine=_engine(BASE_WITH_PARAM),
            title="exact mode, input_ids passed",
        ),
    ]
    INVALID = [
        Example(
            SEED_HUNK,
            kind="patch",
            line=10,
            contains="continues past the hunk",
            title="the seed hunk (slime sglang.patch)",
        ),
        Example(
            "base_output = await self.legacy_load_mm_data(prompt=text, image_data=imgs)\n", line=1, title="awaited call"
        ),
        Example("base_output = self.legacy_load_mm_data(prompt=text, image_data=imgs)\n", line=1, title="plain call"),
        Example(
            """\
            class P(Base):
                async def f(self, text):
                    return await super().legacy_load_mm_data(text, self.mm_tokens)
            """,
            line=3,
            title="super() call",
        ),
        Example("out = legacy_load_mm_data(prompt=text)\n", line=1, title="bare name", expected_fix=None),
        Example(
            SEED_HUNK + OTHER_SECTION,
            kind="patch",
            line=10,
            title="fix: the patch's rename is reverted (its hunk and file section go)",
            expected_fix=OTHER_SECTION,
            unsafe_fixes=False,
        ),
        Example(
            "async def f(self, text, input_ids):\n    return await self.legacy_load_mm_data(prompt=text)\n",
            line=2,
            title="fix (unsafe: no engine): input_ids in scope is passed",
            expected_fix="async def f(self, text, input_ids):\n"
            "    return await self.legacy_load_mm_data(prompt=text, input_ids=input_ids)\n",
        ),
        Example(
            """\
            async def f(self, text, input_ids):
                out = await self.legacy_load_mm_data(
                    prompt=text,
                )
            """,
            line=2,
            title="fix: a multi-line call gets a line",
            expected_fix="""\
            async def f(self, text, input_ids):
                out = await self.legacy_load_mm_data(
                    prompt=text,
                    input_ids=input_ids,
                )
            """,
        ),
        Example(
            EXACT_ADD_PATCH,
            kind="patch",
            engine={**_engine(BASE_WITH_PARAM), "python/sglang/srt/multimodal/processors/qwen_vl.py": QWEN_IDS},
            line=6,
            contains="certain",
            title="fix (safe: the engine's loader takes input_ids): exact mode, input_ids passed",
            expected_fix=EXACT_ADD_PATCH.replace("self.mm_tokens)\n+", "self.mm_tokens, input_ids=input_ids)\n+"),
            unsafe_fixes=False,
        ),
        Example(
            "async def f(self, text):\n    return await self.legacy_load_mm_data(prompt=text)\n",
            line=2,
            title="no fix: no input_ids in scope",
            expected_fix="async def f(self, text):\n    return await self.legacy_load_mm_data(prompt=text)\n",
        ),
        Example(
            EXACT_PATCH,
            kind="patch",
            engine=_engine(BASE_WITH_PARAM),
            line=8,
            contains="certain",
            title="exact mode: the engine's loader takes input_ids",
        ),
        Example(
            EXACT_PATCH,
            kind="patch",
            engine=_engine(BASE_WITHOUT_PARAM),
            line=8,
            contains="re-tokenizes",
            title="exact mode: this engine version has no input_ids parameter",
        ),
    ]

    def __init__(self, unit=None, context=None):
        super().__init__(unit, context)
        self._classes: list[str] = []
        self._params: list[set[str]] = []  # the parameters of the functions around (the fix)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._params.append(param_names(node))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._params.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._classes.append(node.name.value)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._classes.pop()

    def visit_Call(self, node: cst.Call) -> None:
        if callee_name(node.func) != LOADER:
            return
        if keyword(node, "input_ids") is not None or has_star_kwargs(node):
            return
        if any(a.star == "*" for a in node.args):
            return  # *args may reach the parameter
        engine = getattr(self.unit, "engine", None)
        definition = None
        if engine is not None:
            definition = engine.resolve_call(self.unit, node, self._classes[-1] if self._classes else None)
        if definition is not None:
            index = definition.param_index("input_ids")
            if index is None:
                self.report(
                    node,
                    f"`{LOADER}` of this engine version ({definition.where}) has no `input_ids` "
                    f"parameter: the engine itself re-tokenizes id prompts; use an engine version "
                    f"whose `{LOADER}` takes `input_ids` (sgl-project/sglang#26555) or call "
                    f"`load_mm_data`",
                    severity=Severity.WARNING,
                    fix=loader_fix(self, node, engine_takes=False),
                )
                return
            if len(positional(node)) > index:
                return
            self.report(
                node,
                f"`{LOADER}` called without `input_ids=` (certain: `{definition.qualname}` at "
                f"{definition.where} takes `input_ids`): the caller's token ids are decoded and "
                f"re-tokenized; pass `input_ids=` or call `load_mm_data`",
                fix=loader_fix(self, node, engine_takes=True),
            )
            return
        if len(positional(node)) > INPUT_IDS_POSITION:
            return
        self.report(
            node,
            f"`{LOADER}` called without `input_ids=`: a list[int] prompt is decoded and "
            f"re-tokenized and the caller's token ids are lost; pass `input_ids=` or call "
            f"`load_mm_data`",
            fix=loader_fix(self, node, engine_takes=None),
        )


# ----- the fix (issue 20; docs/fixes.md) --------------------------------------------


def param_names(node: cst.FunctionDef) -> set[str]:
    p = node.params
    names = {x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)}
    return names


def loader_fix(rule: LegacyLoaderDropsInputIds, node: cst.Call, engine_takes: bool | None) -> Fix | None:
    """In a patch that renamed `load_mm_data(` into `legacy_load_mm_data(` on this line:
    revert it (safe).  Else, when `input_ids` is a parameter of the function around the
    call: add `input_ids=input_ids` (safe if the engine's loader takes it, unsafe without
    an engine, no fix when the engine's loader has no such parameter)."""
    pos = rule.get_metadata(PositionProvider, node.func)
    return revert_rename_fix(rule.unit, pos.end.line) or add_input_ids_fix(rule, node, engine_takes)


def revert_rename_fix(unit, line: int) -> Fix | None:
    """Revert the `-`/`+` pair of a patch hunk whose `+` line (unit line `line`) is its `-`
    line with `load_mm_data(` renamed `legacy_load_mm_data(`, and nothing else changed."""
    patch = getattr(unit, "patch", None)
    if patch is None or unit.lines_map is None:
        return None
    info = unit.info(line)
    hunk = (unit.hunk_of or {}).get(line, unit.hunk) if info is not None else None
    if info is None or hunk is None:
        return None
    plus = next((l for l in hunk.lines if l.patch_line == info.line and l.kind == "+"), None)
    if plus is None or plus.text.count(LOADER + "(") != 1:
        return None
    before = plus.text.replace(LOADER + "(", "load_mm_data(")
    for minus in (l for l in hunk.lines if l.kind == "-" and l.text == before):
        edit = revert_pair(patch, hunk, minus.patch_line, plus.patch_line)
        if edit is not None:
            return make_fix(f"revert the patch's `load_mm_data(` -> `{LOADER}(`", [edit])
    return None


def add_input_ids_fix(rule: LegacyLoaderDropsInputIds, node: cst.Call, engine_takes: bool | None) -> Fix | None:
    """Add `input_ids=input_ids` as the call's last argument, in the call's own style."""
    if engine_takes is False or not rule._params or "input_ids" not in rule._params[-1]:
        return None
    unit = rule.unit
    pos = rule.get_metadata(PositionProvider, node)
    if unit.is_incomplete(pos.end.line, pos.end.column):
        return None
    arg = "input_ids=input_ids"
    if not node.args:
        edit = replace_span(unit, pos.end.line, pos.end.column - 1, pos.end.column - 1, arg)
    elif not isinstance(node.args[-1].comma, cst.Comma):
        end = rule.get_metadata(PositionProvider, node.args[-1].value).end
        edit = replace_span(unit, end.line, end.column, end.column, ", " + arg)
    else:
        last = node.args[-1]
        comma_node = last.comma
        assert isinstance(comma_node, cst.Comma)  # checked above
        comma = rule.get_metadata(PositionProvider, comma_node).end
        text = unit_line_text(unit, comma.line) or ""
        if comma.line < pos.end.line and not text[comma.column :].strip():
            start = rule.get_metadata(PositionProvider, last).start
            first = unit_line_text(unit, start.line) or ""
            indent = first[: len(first) - len(first.lstrip())]
            edit = insert_after(unit, comma.line, indent + arg + ",")
        else:
            edit = replace_span(unit, comma.line, comma.column, comma.column, " " + arg)
    return make_fix("pass `input_ids=input_ids`", [edit], safe=engine_takes is True)
