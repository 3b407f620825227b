"""The whole-repository dataflow (analysis/repo_index.py, analysis/repo_summaries.py,
pipeline/repo_index.py) beyond PA102's multi-module examples: the index's resolution,
traces across files in every format, the pre-pass cache and a pre-commit run on one
file.  Every tree here is written by the test."""

from __future__ import annotations

import ast
import json
import os
import textwrap
from pathlib import Path

from patchaudit.analysis.repo_index import RepoIndex, module_facts
from patchaudit.config.settings import Settings
from patchaudit.pipeline import repo_entries as entries
from patchaudit.pipeline import repo_index as prepass
from patchaudit.pipeline.runner import run_check
from patchaudit.reporters import render


def _index(files: dict[str, str]) -> RepoIndex:
    index = RepoIndex()
    for rel, code in files.items():
        index.add("/r/" + rel, rel, module_facts(ast.parse(textwrap.dedent(code))))
    return index


def test_index_resolves_absolute_relative_and_aliased_imports():
    index = _index(
        {
            "pkg/__init__.py": "from .impl import helper\n",
            "pkg/impl.py": "def helper(x):\n    return x\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/mod.py": "from ..impl import helper as h\nfrom .. import impl\nimport pkg.impl as pi\n",
            "src/other/deep.py": "class Base:\n    def m(self):\n        return 1\n",
            "app.py": "from other.deep import Base\nfrom pkg import helper\n\nclass Child(Base):\n    pass\n",
        }
    )
    mod = "/r/pkg/sub/mod.py"
    assert index.resolve(mod, "h") == ("/r/pkg/impl.py", "helper")
    assert index.resolve(mod, "impl.helper") == ("/r/pkg/impl.py", "helper")
    assert index.resolve(mod, "pi.helper") == ("/r/pkg/impl.py", "helper")
    # `from pkg import helper`: re-exported by the package's __init__
    assert index.resolve("/r/app.py", "helper") == ("/r/pkg/impl.py", "helper")
    # an absolute import names `src/other/deep.py` by its tail; the method through the base
    assert index.mro(("/r/app.py", "Child")) == [("/r/app.py", "Child"), ("/r/src/other/deep.py", "Base")]
    assert index.method(("/r/app.py", "Child"), "m") == ("/r/src/other/deep.py", "Base.m")
    assert index.method(("/r/app.py", "Child"), "missing") is None
    assert index.resolve("/r/app.py", "unknown_name") is None


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, code in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(code), encoding="utf-8")


DATASET_EXPANDED = """\
def prompt_ids(processor, row):
    return processor(text=row["text"], images=row["images"])["input_ids"][0].tolist()
"""

DATASET_CLEAN = """\
def prompt_ids(processor, row):
    return processor.tokenizer.encode(row["text"])
"""

ROLLOUT = """\
from rl.dataset import prompt_ids


async def generate(url, processor, row):
    ids = prompt_ids(processor, row)
    payload = {"input_ids": ids, "image_data": row["images"]}
    return await post(url, payload)
"""


def _tree(root: Path, dataset: str) -> None:
    _write(
        root,
        {
            "pyproject.toml": "[project]\nname = 'rl'\n",
            "rl/__init__.py": "",
            "rl/dataset.py": dataset,
            "rl/rollout.py": ROLLOUT,
        },
    )


def test_whole_repository_false_analyses_each_module_on_its_own(tmp_path, monkeypatch):
    _tree(tmp_path, DATASET_EXPANDED)
    monkeypatch.chdir(tmp_path)
    assert len(run_check(["rl"], Settings(select=["PA102"], cache=False, jobs=1)).findings) == 1
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'rl'\n\n[tool.patchaudit]\nwhole-repository = false\n")
    from patchaudit.config.settings import load_pyproject

    settings = load_pyproject(tmp_path / "pyproject.toml")
    assert settings.whole_repository is False
    settings.cache, settings.jobs, settings.select = False, 1, ["PA102"]
    assert run_check(["rl"], settings).findings == []  # the flow crosses modules: not followed


def test_trace_crosses_files_in_text_json_and_sarif(tmp_path, monkeypatch):
    _tree(tmp_path, DATASET_EXPANDED)
    monkeypatch.chdir(tmp_path)
    res = run_check(["rl"], Settings(select=["PA102"], cache=False, jobs=1))
    assert not res.errors
    (f,) = res.findings
    assert f.path == os.path.join("rl", "rollout.py") and f.line == 6
    files = [s.path for s in f.trace]
    assert files[0] == os.path.join("rl", "dataset.py") and files[-1] == f.path
    assert any("returned by `prompt_ids()`" in s.note for s in f.trace)
    text = render("text", res)
    assert "rl/dataset.py:2: multimodal processor output" in text.replace(os.sep, "/")
    doc = json.loads(render("json", res))
    trace = doc["findings"][0]["trace"] if "findings" in doc else doc[0]["trace"]
    assert {Path(s["path"]).name for s in trace} == {"dataset.py", "rollout.py"}
    sarif = json.loads(render("sarif", res))
    steps = sarif["runs"][0]["results"][0]["codeFlows"][0]["threadFlows"][0]["locations"]
    uris = [s["location"]["physicalLocation"]["artifactLocation"]["uri"] for s in steps]
    assert uris[0] == "rl/dataset.py" and uris[-1] == "rl/rollout.py"


def test_cache_follows_a_change_in_another_module(tmp_path, monkeypatch):
    """rollout.py never changes; its finding comes and goes with dataset.py, with the cache on,
    and a warm run summarises nothing."""
    _tree(tmp_path, DATASET_CLEAN)
    monkeypatch.chdir(tmp_path)
    settings = dict(select=["PA102"], cache=True, jobs=1, cache_dir=str(tmp_path / ".cache"))
    calls: list[str] = []
    real = prepass._summarise

    def counting(rule, key, e, view, s):
        calls.append(Path(key).name)
        return real(rule, key, e, view, s)

    monkeypatch.setattr(prepass, "_summarise", counting)
    cold = run_check(["rl"], Settings(**settings))
    assert cold.findings == [] and not cold.errors, cold.errors
    calls.clear()
    warm = run_check(["rl"], Settings(**settings))
    assert warm.findings == [] and calls == [] and warm.cached == warm.files
    (tmp_path / "rl" / "dataset.py").write_text(DATASET_EXPANDED + "\n", encoding="utf-8")
    after = run_check(["rl"], Settings(**settings))
    assert [Path(f.path).name for f in after.findings] == ["rollout.py"]
    assert "dataset.py" in calls
    (tmp_path / "rl" / "dataset.py").write_text(DATASET_CLEAN, encoding="utf-8")
    assert run_check(["rl"], Settings(**settings)).findings == []


def test_one_file_as_pre_commit_sees_the_project(tmp_path, monkeypatch):
    """A hook passes the changed file alone: the project root (pyproject.toml) is indexed."""
    _tree(tmp_path, DATASET_EXPANDED)
    monkeypatch.chdir(tmp_path / "rl")
    res = run_check(["rollout.py"], Settings(select=["PA102"], cache=False, jobs=1))
    assert [(f.path, f.line) for f in res.findings] == [("rollout.py", 6)]
    assert res.files == 1


def test_findings_same_with_one_and_two_jobs(tmp_path, monkeypatch):
    _tree(tmp_path, DATASET_EXPANDED)
    monkeypatch.chdir(tmp_path)
    one = run_check(["rl"], Settings(select=["PA102"], cache=False, jobs=1))
    two = run_check(["rl"], Settings(select=["PA102"], cache=False, jobs=2))
    assert [f.to_json() for f in one.findings] == [f.to_json() for f in two.findings]


def _wide_tree(root: Path) -> None:
    """Levels of several modules: three datasets (level 0), two rollouts that import them
    (level 1), a driver that sends what a rollout's helper returns (level 2)."""
    files = {"pyproject.toml": "[project]\nname = 'rl'\n", "rl/__init__.py": ""}
    for i in range(3):
        files[f"rl/data{i}.py"] = DATASET_EXPANDED.replace("prompt_ids", f"prompt_ids{i}")
    files["rl/rollout_a.py"] = ROLLOUT.replace("rl.dataset import prompt_ids", "rl.data0 import prompt_ids0").replace(
        "ids = prompt_ids(", "ids = prompt_ids0("
    )
    files["rl/rollout_b.py"] = """\
        from rl.data1 import prompt_ids1
        from rl.data2 import prompt_ids2


        def build(processor, row):
            return prompt_ids1(processor, row)


        async def generate(url, processor, row):
            return await post(url, {"input_ids": prompt_ids2(processor, row), "image_data": row["images"]})
        """
    files["rl/driver.py"] = """\
        from rl.rollout_b import build


        async def run(url, processor, row):
            return await post(url, {"input_ids": build(processor, row), "image_data": row["images"]})
        """
    _write(root, files)


def test_levels_in_workers_give_the_findings_of_one_job(tmp_path, monkeypatch):
    _wide_tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    one = run_check(["rl"], Settings(select=["PA102"], cache=False, jobs=1))
    assert not one.errors and len(one.findings) == 3, [f.to_json() for f in one.findings]
    pids = tmp_path / "pids"
    real = prepass._summarise

    def recording(rule, key, e, view, s):  # forked workers inherit the patch
        with open(pids, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        return real(rule, key, e, view, s)

    gates = tmp_path / "gates"
    real_gate = entries.gated

    def gating(rule, g, s):
        with open(gates, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        return real_gate(rule, g, s)

    monkeypatch.setattr(prepass, "LEVEL_MIN_BYTES", 0)
    monkeypatch.setattr(entries, "GATE_MIN_BYTES", 0)
    monkeypatch.setattr(prepass, "_summarise", recording)
    monkeypatch.setattr(entries, "gated", gating)
    two = run_check(["rl"], Settings(select=["PA102"], cache=False, jobs=2, jobs_forced=True))  # even on one CPU
    assert [f.to_json() for f in one.findings] == [f.to_json() for f in two.findings]
    ran = [int(p) for p in pids.read_text().split()]
    assert len(ran) == 5 and os.getpid() not in ran  # every module summarised in a worker
    gated = [int(p) for p in gates.read_text().split()]
    assert len(gated) == 6 and os.getpid() not in gated  # and gated in one


def test_a_level_worker_that_dies_is_done_here(tmp_path, monkeypatch):
    _wide_tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    one = run_check(["rl"], Settings(select=["PA102"], cache=False, jobs=1))
    real = prepass._summarise
    here = os.getpid()

    def dying(rule, key, e, view, s):
        if key.endswith("data1.py") and os.getpid() != here:
            os._exit(3)  # a worker killed mid-module (out of memory, a signal)
        return real(rule, key, e, view, s)

    monkeypatch.setattr(prepass, "LEVEL_MIN_BYTES", 0)
    monkeypatch.setattr(prepass, "_summarise", dying)
    two = run_check(["rl"], Settings(select=["PA102"], cache=False, jobs=2, jobs_forced=True))  # even on one CPU
    assert [f.to_json() for f in one.findings] == [f.to_json() for f in two.findings]
    assert not two.errors
