"""Issue 19's bump cases: relocation by symbol (a module split across files, renamed classes and
definitions, re-export shims), hunks re-applied where their code went, PA204 on a patched
definition NEW's callers can no longer call, and reports ordered for review.  The engine versions
are small directory trees written here; the patches are unified diffs of them."""

from __future__ import annotations

from pathlib import Path

from patchaudit.analysis.relocation import NameIndex, NewEngine, relocate_definitions
from patchaudit.config.settings import Settings
from patchaudit.engine.definitions import index_module
from patchaudit.inputs import source_lines
from patchaudit.model.findings import Finding, Severity
from patchaudit.pipeline.bump import BumpReport, HunkRow, Side, run_bump

INIT = {"python/sglang/__init__.py": "", "python/sglang/srt/__init__.py": ""}

MIXIN = """\
class OutputMixin:
    def process_batch_result(self, batch):
        out = []
        for req in batch:
            out.append(req)
        return out

    def maybe_collect_experts(self, req):
        experts = req.experts
        if experts is None:
            return None
        return list(experts)

    def stream_output(self, reqs):
        for r in reqs:
            self.send(r)
        return len(reqs)
"""

BATCH = """\
class BatchResultProcessor:
    def __init__(self, scheduler):
        self.scheduler = scheduler

    def process_batch_result(self, batch):
        out = []
        for req in batch:
            out.append(req)
        return out

    def _maybe_collect_experts(self, req):
        experts = req.experts
        if experts is None:
            return None
        return list(experts)
"""

STREAMER = """\
import logging


class OutputStreamer:
    def stream_output(self, reqs):
        for r in reqs:
            self.send(r)
        return len(reqs)
"""

SPLIT_PATCH = """\
--- a/python/sglang/srt/managers/mixin.py
+++ b/python/sglang/srt/managers/mixin.py
@@ -9,4 +9,5 @@ class OutputMixin:
         experts = req.experts
         if experts is None:
             return None
+        experts = [e for e in experts if e >= 0]
         return list(experts)
@@ -14,4 +15,5 @@ class OutputMixin:
     def stream_output(self, reqs):
         for r in reqs:
+            r.finish()
             self.send(r)
         return len(reqs)
"""


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in {**INIT, **files}.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


def _bump(tmp_path: Path, old: dict, new: dict, patch: str, **kw) -> BumpReport:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "p.patch").write_text(patch, encoding="utf-8")
    o, n = _write(tmp_path / "old", old), _write(tmp_path / "new", new)
    return run_bump([str(tmp_path / "p.patch")], "sglang", str(o), str(n), Settings(**kw))


def test_relocation_places_each_definition_of_a_split_module():
    old = index_module("m.py", MIXIN, "m")
    texts = {"c/batch.py": BATCH, "c/streamer.py": STREAMER, "c/other.py": "def unrelated():\n    return 1\n"}
    mods = {p: index_module(p, t) for p, t in texts.items()}
    engine = NewEngine(NameIndex.of(texts), mods.get, lambda p: source_lines(texts[p]))
    moves = relocate_definitions(old, source_lines(MIXIN), engine)
    got = {q: (m.path, m.new, m.how) for q, m in moves.items()}
    assert got["OutputMixin.process_batch_result"] == (
        "c/batch.py",
        "BatchResultProcessor.process_batch_result",
        "same name",
    )
    assert got["OutputMixin.maybe_collect_experts"] == (
        "c/batch.py",
        "BatchResultProcessor._maybe_collect_experts",
        "renamed",
    )
    assert got["OutputMixin.stream_output"] == ("c/streamer.py", "OutputStreamer.stream_output", "same name")
    assert got["OutputMixin"][:2] == ("c/batch.py", "BatchResultProcessor")


def test_a_definition_renamed_entirely_is_matched_by_its_body():
    old_text = (
        "class Stats:\n    def compute_total(self, rows):\n"
        + "".join(f"        x{k} = rows[{k}] * {k}\n" for k in range(6))
        + "        return x0 + x5\n"
    )
    new_text = old_text.replace("class Stats:", "class StatsCollector:").replace("compute_total", "total_of")
    texts = {"n.py": new_text}
    mods = {"n.py": index_module("n.py", new_text)}
    engine = NewEngine(NameIndex.of(texts), mods.get, lambda p: source_lines(texts[p]))
    moves = relocate_definitions(index_module("o.py", old_text), source_lines(old_text), engine, ["n.py"])
    assert (moves["Stats.compute_total"].new, moves["Stats.compute_total"].how) == ("StatsCollector.total_of", "body")


def test_split_module_hunks_go_where_their_code_went(tmp_path):
    report = _bump(
        tmp_path,
        {"python/sglang/srt/managers/mixin.py": MIXIN},
        {
            "python/sglang/srt/managers/components/batch.py": BATCH,
            "python/sglang/srt/managers/components/streamer.py": STREAMER,
        },
        SPLIT_PATCH,
    )
    (reloc,) = report.relocations
    assert reloc.new_path == "python/sglang/srt/managers/components/batch.py"
    assert reloc.others == [("python/sglang/srt/managers/components/streamer.py", 1)]
    assert "split across 2 files" in reloc.describe("new")
    first, second = report.hunks
    assert (first.moved_to, first.moved_symbol) == (
        "python/sglang/srt/managers/components/batch.py",
        "BatchResultProcessor._maybe_collect_experts",
    )
    assert (second.moved_to, second.moved_symbol) == (
        "python/sglang/srt/managers/components/streamer.py",
        "OutputStreamer.stream_output",
    )
    assert first.moved.status == "offset" and second.moved.status == "offset"  # re-applied there
    (pa201,) = [f for f in report.findings if f.code == "PA201"]
    assert "upstream moved its code: hunk #1 to python/sglang/srt/managers/components/batch.py" in pa201.message
    assert (
        "hunk #2 to python/sglang/srt/managers/components/streamer.py `OutputStreamer.stream_output`" in pa201.message
    )


INDEXER = """\
class Indexer:
    def forward(self, x):
        y = x + 1
        z = y * 2
        return z
"""

SHIM_PATCH = """\
--- a/python/sglang/srt/nsa/indexer.py
+++ b/python/sglang/srt/nsa/indexer.py
@@ -1,5 +1,6 @@
 class Indexer:
     def forward(self, x):
         y = x + 1
+        y = y.clamp(0)
         z = y * 2
         return z
"""


def test_a_re_export_shim_points_the_hunk_at_the_module_it_re_exports(tmp_path):
    new = {
        "python/sglang/srt/nsa/__init__.py": "",
        "python/sglang/srt/dsa/__init__.py": "",
        "python/sglang/srt/nsa/indexer.py": "# deprecated\nfrom sglang.srt.dsa.indexer import *  # noqa\n",
        "python/sglang/srt/dsa/indexer.py": "import math\n\n\n" + INDEXER,
    }
    old = {"python/sglang/srt/nsa/__init__.py": "", "python/sglang/srt/nsa/indexer.py": INDEXER}
    report = _bump(tmp_path, old, new, SHIM_PATCH)
    (row,) = report.hunks
    assert row.new.status == "failed"
    assert (row.moved_to, row.moved_symbol, row.moved.status) == (
        "python/sglang/srt/dsa/indexer.py",
        "Indexer.forward",
        "offset",
    )
    (pa201,) = [f for f in report.findings if f.code == "PA201"]
    assert (
        "upstream moved its code to python/sglang/srt/dsa/indexer.py (`Indexer.forward`): the hunk applies "
        "there with offset +3"
    ) in pa201.message
    assert report.relocations[0].shim == ["sglang.srt.dsa.indexer"]


POOL_OLD = """\
class KVCache:
    def get_cpu_copy(self, indices):
        return indices


class NSAPool(KVCache):
    def other(self):
        return 1
"""

POOL_NEW = """\
class KVCache:
    def get_cpu_copy(self, indices, mamba_indices=None):
        return indices


class NSAPool(KVCache):
    def get_cpu_copy(self, indices, mamba_indices=None):
        return super().get_cpu_copy(indices, mamba_indices=mamba_indices)

    def other(self):
        return 1
"""

ALLOC_OLD = """\
class Allocator:
    def __init__(self, kvcache):
        self._kvcache = kvcache

    def backup(self, indices):
        return self._kvcache.get_cpu_copy(indices)
"""

ALLOC_NEW = ALLOC_OLD.replace("def backup(self, indices):", "def backup(self, indices, mamba_indices=None):").replace(
    "get_cpu_copy(indices)", "get_cpu_copy(indices, mamba_indices=mamba_indices)"
)

POOL_PATCH = """\
--- a/python/sglang/srt/mem/pool.py
+++ b/python/sglang/srt/mem/pool.py
@@ -6,3 +6,6 @@ class KVCache:
 class NSAPool(KVCache):
     def other(self):
         return 1
+
+    def get_cpu_copy(self, indices):
+        return super().get_cpu_copy(indices)
"""


def test_pa204_a_patched_definition_new_callers_cannot_call_is_an_error(tmp_path):
    files_old = {"python/sglang/srt/mem/pool.py": POOL_OLD, "python/sglang/srt/mem/alloc.py": ALLOC_OLD}
    files_new = {"python/sglang/srt/mem/pool.py": POOL_NEW, "python/sglang/srt/mem/alloc.py": ALLOC_NEW}
    report = _bump(tmp_path, files_old, files_new, POOL_PATCH, select=["PA204"])
    pa204 = [f for f in report.findings if f.code == "PA204"]
    assert len(pa204) == 1, [x.message for x in pa204]
    f = pa204[0]
    assert f.severity is Severity.ERROR and f.line == 8
    assert "`NSAPool.get_cpu_copy(self, indices)` as the patch defines it replaces" in f.message
    assert "`mamba_indices=` at python/sglang/srt/mem/alloc.py:6 in Allocator.backup" in f.message
    assert "TypeError" in f.message and "accept `mamba_indices`" in f.message
    # the super() call inside it that leaves out mamba_indices is not a second (warning) finding
    assert not [x for x in report.findings if "leaves out" in x.message]
    # OLD = NEW: the callers pass nothing new, nothing to report
    same = _bump(tmp_path / "same", files_old, files_old, POOL_PATCH, select=["PA204"])
    assert not [x for x in same.findings if x.code == "PA204"]


# --------------------------------------------------------------------------
# the reports


def _finding(code, sev, line, msg="m", path="p.patch"):
    return Finding(code, code.lower(), sev, msg, path, line, context=["@@ -1 +1 @@", "-a", "+b"])


def test_reports_put_errors_first_and_fold_pa203_into_the_hunks_finding():
    from patchaudit.reporters.bump import render_text
    from patchaudit.reporters.markdown import render

    findings = [
        _finding("PA203", Severity.WARNING, 3, "changed upstream here"),
        _finding("PA202", Severity.WARNING, 3, "fuzz 2"),
        _finding("PA203", Severity.WARNING, 9, "only upstream"),
        _finding("PA201", Severity.ERROR, 20, "does not apply"),
    ]
    report = BumpReport(
        "sglang",
        "a.whl",
        "b.whl",
        "sglang 1",
        "sglang 2",
        findings=findings,
        patches=["p.patch"],
        files=1,
        old_kind="wheel",
        new_kind="wheel",
    )
    text = render_text(report)
    assert text.index("PA201") < text.index("PA202") < text.index("only upstream")
    assert "    also PA203: changed upstream here" in text and "Upstream commits are not named" in text
    assert "1 PA203 folded" in text
    md = render(report)
    assert md.index("#### :x: Errors (1)") < md.index("##### PA202") < md.index("##### PA203")
    assert "  - also **PA203**: changed upstream here" in md
    assert "> Upstream commits are not named: the engine sources are wheels" in md
    git = BumpReport("sglang", "r@v1", "r@v2", "v1", "v2", findings=findings, files=1, old_kind="git", new_kind="git")
    assert "Upstream commits are not named" not in render(git)


def test_markdown_keeps_every_error_and_cuts_the_largest_warning_group_first():
    from patchaudit.reporters.markdown import LIMIT, render

    errors = [_finding("PA201", Severity.ERROR, k, f"error {k} " + "e" * 300) for k in range(60)]
    big = [_finding("PA203", Severity.WARNING, 1000 + k, f"w{k} " + "w" * 300) for k in range(400)]
    small = [_finding("PA202", Severity.WARNING, 5000 + k, f"f{k} " + "f" * 300) for k in range(10)]
    rows = [HunkRow("p.patch", k, 1, "x.py", Side("clean", "x.py"), Side("failed", "x.py")) for k in range(300)]
    report = BumpReport(
        "sglang", "a", "b", "1", "2", findings=errors + big + small, hunks=rows, patches=["p.patch"], files=1
    )
    md = render(report)
    assert LIMIT - 3000 < len(md) <= LIMIT  # the limit is filled, not halved
    assert all(f"error {k} " in md for k in range(60))  # every error
    assert all(f"f{k} " in md for k in range(10))  # the small group whole
    shown_big = sum(1 for k in range(400) if f"w{k} " in md)
    assert 0 < shown_big < 400 and f"{400 - shown_big} of 410 warnings and infos not shown" in md
    assert "##### PA203 patched-code-changed-upstream (400, " in md
