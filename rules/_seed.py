"""The seed incident (report 002) as example material shared by rules and tests.

The Qwen-VL hunk of slime's sglang.patch, and a small engine tree in two
versions: v1, whose `legacy_load_mm_data` has no `input_ids` parameter, and v2,
which added it and whose `load_mm_data` forwards it (sgl-project/sglang#26555).
"""

from __future__ import annotations

SEED_HUNK = """\
diff --git a/python/sglang/srt/multimodal/processors/qwen_vl.py b/python/sglang/srt/multimodal/processors/qwen_vl.py
index b8774ebade56891fe0aef2f54aa26e39b0c63b23..fa01537b2010c6ee002de514281c0d36a2c3bad2 100644
--- a/python/sglang/srt/multimodal/processors/qwen_vl.py
+++ b/python/sglang/srt/multimodal/processors/qwen_vl.py
@@ -678,7 +678,7 @@ class QwenVLImageProcessor(SGLangBaseProcessor):
         **kwargs,
     ):
         entry_time = time.perf_counter()
-        base_output = await self.load_mm_data(
+        base_output = await self.legacy_load_mm_data(
             prompt=input_text,
             image_data=image_data,
             video_data=request_obj.video_data,
"""

BASE_WITH_PARAM = """\
class BaseMultimodalProcessor:
    async def load_mm_data(self, prompt, multimodal_tokens, image_data=None):
        input_ids = prompt if isinstance(prompt, list) else None
        return await self.legacy_load_mm_data(
            prompt=prompt, multimodal_tokens=multimodal_tokens, image_data=image_data, input_ids=input_ids
        )

    async def legacy_load_mm_data(self, prompt, multimodal_tokens, image_data=None, input_ids=None):
        return prompt
"""

BASE_WITHOUT_PARAM = """\
class BaseMultimodalProcessor:
    async def load_mm_data(self, prompt, multimodal_tokens, image_data=None):
        return await self.legacy_load_mm_data(prompt=prompt, multimodal_tokens=multimodal_tokens, image_data=image_data)

    async def legacy_load_mm_data(self, prompt, multimodal_tokens, image_data=None):
        return prompt
"""

QWEN = """\
from sglang.srt.multimodal.processors.base_processor import BaseMultimodalProcessor as SGLangBaseProcessor


class QwenVLImageProcessor(SGLangBaseProcessor):
    async def process_mm_data_async(self, image_data, input_text, request_obj, **kwargs):
        base_output = await self.load_mm_data(
            prompt=input_text,
            image_data=image_data,
            multimodal_tokens=self.mm_tokens,
        )
        return base_output
"""

EXACT_PATCH = """\
--- a/python/sglang/srt/multimodal/processors/qwen_vl.py
+++ b/python/sglang/srt/multimodal/processors/qwen_vl.py
@@ -3,7 +3,7 @@
 
 class QwenVLImageProcessor(SGLangBaseProcessor):
     async def process_mm_data_async(self, image_data, input_text, request_obj, **kwargs):
-        base_output = await self.load_mm_data(
+        base_output = await self.legacy_load_mm_data(
             prompt=input_text,
             image_data=image_data,
             multimodal_tokens=self.mm_tokens,
"""


def engine_tree(base: str) -> dict[str, str]:
    return {
        "python/sglang/__init__.py": "",
        "python/sglang/srt/__init__.py": "",
        "python/sglang/srt/multimodal/__init__.py": "",
        "python/sglang/srt/multimodal/processors/__init__.py": "",
        "python/sglang/srt/multimodal/processors/base_processor.py": base,
        "python/sglang/srt/multimodal/processors/qwen_vl.py": QWEN,
    }
