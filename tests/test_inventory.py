"""`patchaudit inventory`: the fork's whole patch surface (issue 9)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from patchaudit.testing import invoke_in

from test_monkeypatch import FORK, FORK_TARGETS, SCHEDULER_V1, sglang_tree, vllm_tree, write_tree

PATCH = """\
--- a/python/sglang/srt/managers/scheduler.py
+++ b/python/sglang/srt/managers/scheduler.py
@@ -14,3 +14,4 @@ class Scheduler:
     def handle(self, req):
+        req = dict(req)
         return req
 
@@ -25,3 +26,4 @@ class Sampler(nn.Module):
 class Sampler(nn.Module):
     def forward(self, logits):
+        logits = logits.float()
         return logits
"""


def run(args, cwd):
    return invoke_in(cwd, args)


def fork_repo(tmp_path: Path, fork: str = FORK) -> Path:
    write_tree(tmp_path / "repo", {"fork/patches.py": fork, "patches/sglang.patch": PATCH,
                                   "fork/unrelated.py": "import os\nos.environ['X'] = '1'\n"})
    return tmp_path / "repo"


def inventory(cwd: Path, *args: str) -> tuple[int, dict]:
    res = run(["inventory", "--format", "json", *args], cwd)
    return res.exit_code, json.loads(res.stdout)


def test_without_engine_every_site_is_listed(tmp_path):
    repo = fork_repo(tmp_path)
    code, data = inventory(repo, ".")
    assert code == 0 and data["engines"] == []
    mps = {(r["symbol"], r["how"], r["detail"].split(" ")[0]) for r in data["rows"] if r["source"] == "monkey-patch"}
    assert mps == FORK_TARGETS
    hunks = [(r["symbol"], r["line"]) for r in data["rows"] if r["source"] == "hunk"]
    # without an engine the symbol is the @@ header's hint
    assert hunks == [("sglang.srt.managers.scheduler.Sampler", 8), ("sglang.srt.managers.scheduler.Scheduler", 3)]
    assert all(r["exists"] == "-" and r["engine"] is None for r in data["rows"])
    assert data["summary"]["symbols"] == 10 and data["summary"]["files"] == 3


def test_with_engines_every_symbol_is_looked_up(tmp_path):
    repo = fork_repo(tmp_path)
    sgl = write_tree(tmp_path / "sgl", sglang_tree("0.5.9"))
    vll = write_tree(tmp_path / "vll", vllm_tree())
    code, data = inventory(repo, "--engine", f"sglang={sgl}", "--engine", f"vllm={vll}", ".")
    assert code == 0
    assert data["engines"][0].startswith("sglang 0.5.9 (") and data["engines"][1].startswith("vllm 0.11.0 (")
    rows = {(r["symbol"], r["source"]): r for r in data["rows"]}
    assert len(rows) == len(FORK_TARGETS) + 2
    assert all(r["exists"] == "yes" for r in rows.values()), [r for r in rows.values() if r["exists"] != "yes"]
    hunk = rows[("sglang.srt.managers.scheduler.Scheduler.handle", "hunk")]
    assert hunk["detail"] == "#1 clean" and hunk["definition"] == "sglang/srt/managers/scheduler.py:14"
    assert rows[("sglang.srt.managers.scheduler.Sampler.forward", "hunk")]["detail"] == "#2 clean"
    fwd = rows[("vllm.model_executor.models.qwen2.Qwen2Model.forward", "monkey-patch")]
    assert fwd["engine"].startswith("vllm 0.11.0") and fwd["definition"] == "vllm/model_executor/models/qwen2.py:2"
    wrapped = rows[("sglang.srt.managers.scheduler.Scheduler.process_input_requests", "monkey-patch")]
    assert wrapped["how"] == "wrapped" and wrapped["path"] == "fork/patches.py" and wrapped["line"] == 38


def test_missing_symbols_and_engines_are_said(tmp_path):
    repo = fork_repo(tmp_path)
    (repo / "patches" / "gone.patch").write_text(
        "--- a/python/sglang/srt/managers/gone.py\n+++ b/python/sglang/srt/managers/gone.py\n"
        "@@ -1,2 +1,3 @@\n def f():\n+    pass\n     return 1\n")
    renamed = SCHEDULER_V1.replace("    def handle(self, req):\n        return req\n",
                                   "    def handle_req(self, request):\n        return request\n")
    sgl = write_tree(tmp_path / "sgl", sglang_tree("0.5.10", scheduler=renamed))
    code, data = inventory(repo, "--engine", f"sglang={sgl}", ".")
    assert code == 0
    rows = {(r["symbol"], r["source"]): r for r in data["rows"]}
    mp_row = rows[("sglang.srt.managers.scheduler.Scheduler.handle", "monkey-patch")]
    assert mp_row["exists"] == "no" and "renamed to handle_req?" in mp_row["note"]
    # the hunk still applies, by ignoring its context (fuzz): its symbol is the engine's
    hunk = next(r for r in data["rows"] if r["path"] == "patches/sglang.patch" and r["line"] == 3)
    assert hunk["symbol"] == "sglang.srt.managers.scheduler.Scheduler.handle_req"
    assert hunk["detail"] == "#1 fuzz 2" and hunk["exists"] == "yes"
    gone = next(r for r in data["rows"] if r["path"] == "patches/gone.patch")
    assert gone["symbol"] == "sglang.srt.managers.gone" and gone["exists"] == "no"
    assert "does not exist in this engine" in gone["note"]
    vrow = rows[("vllm.model_executor.models.qwen2.Qwen2Model.forward", "monkey-patch")]
    assert vrow["exists"] == "not checked" and "no engine given for `vllm`" in vrow["note"]
    assert data["summary"]["exists"]["no"] == 2     # the renamed handle, the missing file


def test_gated_patches_and_text_and_markdown(tmp_path):
    fork = textwrap.dedent("""\
        import sglang
        from sglang.srt.managers.scheduler import Scheduler

        if sglang.__version__ >= "0.6":
            Scheduler.process_batch = lambda self, batch: batch
        Scheduler.handle = lambda self, req: req
        """)
    repo = fork_repo(tmp_path, fork)
    sgl = write_tree(tmp_path / "sgl", sglang_tree("0.5.9"))
    code, data = inventory(repo, "--engine", f"sglang={sgl}", "fork")
    rows = {r["symbol"]: r for r in data["rows"]}
    gated = rows["sglang.srt.managers.scheduler.Scheduler.process_batch"]
    assert gated["exists"] == "gated off" and 'sglang.__version__ >= "0.6"' in gated["note"]
    res = run(["inventory", "--engine", f"sglang={sgl}", "fork"], repo)
    assert res.exit_code == 0
    lines = res.stdout.splitlines()
    i = lines.index("sglang.srt.managers.scheduler.Scheduler.handle")
    assert lines[i + 1].split() == ["replaced", "fork/patches.py:6", "(assign)"]
    assert "sglang 0.5.9" in lines[i + 2] and "yes at sglang/srt/managers/scheduler.py:14" in lines[i + 2]
    assert "2 engine symbols touched at 2 sites" in res.stdout
    res = run(["inventory", "--format", "markdown", "--engine", f"sglang={sgl}", "fork"], repo)
    md = res.stdout.splitlines()
    assert "| Symbol | How | Where | Exists | Engine definition | Note |" in md
    assert any(l.startswith("| `sglang.srt.managers.scheduler.Scheduler.handle` | replaced (assign) | "
                            "`fork/patches.py:6` | yes | `sglang/srt/managers/scheduler.py:14` |") for l in md)


def test_output_file_errors_and_empty(tmp_path):
    repo = fork_repo(tmp_path)
    res = run(["inventory", "--output", "inv.md", "--format", "markdown", "."], repo)
    assert res.exit_code == 0 and res.stdout == ""
    assert "## Patch surface" in (repo / "inv.md").read_text()
    res = run(["inventory", "fork/unrelated.py"], repo)
    assert res.exit_code == 0 and "No engine symbol is patched." in res.stdout
    res = run(["inventory", "missing.py", "fork"], repo)
    assert res.exit_code == 2 and "missing.py: error: no such file or directory" in res.stderr
    res = run(["inventory", "--engine", f"sglang={tmp_path / 'nope'}", "fork"], repo)
    assert res.exit_code == 2 and "error" in res.stderr
