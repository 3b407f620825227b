from __future__ import annotations

import libcst as cst
from libcst.metadata import PositionProvider

from patchaudit.analysis.names import callee_name, has_star_kwargs, keyword, positional
from patchaudit.lint.rule import PYTHON, Example, Rule
from patchaudit.model.findings import Severity

from ._seed import BASE_WITH_PARAM, BASE_WITHOUT_PARAM, EXACT_PATCH, SEED_HUNK
from ._seed import engine_tree as _engine

LOADER = "legacy_load_mm_data"
#: in SGLang 0.5.15 `input_ids` is the 9th parameter after `self`
INPUT_IDS_POSITION = 8


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
    preservation SGLang added in sgl-project/sglang#26555 (seed report 002).
    """

    code = "PA101"
    name = "legacy-loader-drops-input-ids"
    severity = Severity.ERROR
    kinds = frozenset({PYTHON})
    requires = ((LOADER,),)
    #: a call and the names of the classes around it (`Rule.local`)
    local = True
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
        Example("out = legacy_load_mm_data(prompt=text)\n", line=1, title="bare name"),
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
                )
                return
            if len(positional(node)) > index:
                return
            self.report(
                node,
                f"`{LOADER}` called without `input_ids=` (certain: `{definition.qualname}` at "
                f"{definition.where} takes `input_ids`): the caller's token ids are decoded and "
                f"re-tokenized; pass `input_ids=` or call `load_mm_data`",
            )
            return
        if len(positional(node)) > INPUT_IDS_POSITION:
            return
        self.report(
            node,
            f"`{LOADER}` called without `input_ids=`: a list[int] prompt is decoded and "
            f"re-tokenized and the caller's token ids are lost; pass `input_ids=` or call "
            f"`load_mm_data`",
        )
