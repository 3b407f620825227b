"""Shared pieces of the exact-mode rules (PA201, PA202, PA208, PA302): example trees."""

from __future__ import annotations

MODULE = """\
import time


class Processor:
    def load(self, prompt):
        start = time.perf_counter()
        ids = self.tokenize(prompt)
        out = self.process(ids)
        return out

    def tokenize(self, prompt):
        return list(prompt)

    def process(self, ids):
        return ids
"""


def engine_tree(content: str = MODULE) -> dict[str, str]:
    return {"python/sglang/__init__.py": "", "python/sglang/srt/__init__.py": "", "python/sglang/srt/proc.py": content}


def patch_for(hunk: str) -> str:
    return "--- a/python/sglang/srt/proc.py\n+++ b/python/sglang/srt/proc.py\n" + hunk


CLEAN_HUNK = """\
@@ -5,7 +5,7 @@ class Processor:
     def load(self, prompt):
         start = time.perf_counter()
         ids = self.tokenize(prompt)
-        out = self.process(ids)
+        out = self.process(list(ids))
         return out
 
     def tokenize(self, prompt):
"""
