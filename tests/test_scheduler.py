"""The default number of jobs follows the CPUs no other task wants when the run starts (read
once, before the pre-pass forks); a number that was asked for (`--jobs`, `jobs =` in the
configuration) is kept.  No timing: what the scheduler decides is read from `parallel.LAST_SCAN`."""

from __future__ import annotations

import json
import sys

import pytest

from patchaudit.config.settings import Settings
from patchaudit.pipeline import parallel
from patchaudit.pipeline.runner import run_check

LINUX = sys.platform.startswith("linux")

POSITIVE = """\
async def process(self, image_data, input_text, request_obj):
    base_output = await self.legacy_load_mm_data(
        prompt=input_text, image_data=image_data, multimodal_tokens=self.mm_tokens
    )
    return base_output
"""


def _tree(root, n=6):
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text("[tool.patchaudit]\n")
    for i in range(n):
        (root / f"m{i}.py").write_text(POSITIVE + f"# {i}\n" + "x = 1\n" * 200)
    return root


def _scan(root, monkeypatch, idle, **settings):
    monkeypatch.chdir(root)
    monkeypatch.setattr(parallel, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "default_jobs", lambda: 2)
    monkeypatch.setattr(parallel, "idle_cpus", lambda: idle)
    res = run_check(["."], Settings(select=["PA101"], cache=False, **settings))
    return [json.dumps(f.to_json(), sort_keys=True) for f in res.findings], dict(parallel.LAST_SCAN)


@pytest.mark.skipif(not LINUX, reason="the pool forks on Linux only")
def test_default_jobs_follow_the_idle_cpus(tmp_path, monkeypatch):
    root = _tree(tmp_path / "t")
    busy, scan_busy = _scan(root, monkeypatch, idle=1.0)       # another task on one of two cores
    assert scan_busy["jobs"] == 1 and not scan_busy["pool"]
    free, scan_free = _scan(root, monkeypatch, idle=2.0)       # both free
    assert scan_free["jobs"] == 2 and scan_free["pool"]
    unknown, scan_unknown = _scan(root, monkeypatch, idle=None)  # the platform does not say
    assert scan_unknown["jobs"] == 2 and scan_unknown["pool"]
    assert busy == free == unknown and len(busy) == 6


@pytest.mark.skipif(not LINUX, reason="the pool forks on Linux only")
def test_asked_jobs_are_kept(tmp_path, monkeypatch):
    root = _tree(tmp_path / "t")
    _, scan = _scan(root, monkeypatch, idle=0.0, jobs=2)
    assert scan["jobs"] == 2 and scan["pool"]


@pytest.mark.skipif(not LINUX, reason="the pool forks on Linux only")
def test_a_small_cold_scan_with_nothing_to_parse_forks_nothing(tmp_path, monkeypatch):
    """Below EAGER_MIN_FILES the pool waits for heavy work, which PA101 finds none of."""
    root = tmp_path / "t"
    root.mkdir()
    (root / "pyproject.toml").write_text("[tool.patchaudit]\n")
    for i in range(parallel.EAGER_MIN_FILES - 20):
        (root / f"m{i}.py").write_text(f"x = {i}\n")
    monkeypatch.chdir(root)
    monkeypatch.setattr(parallel, "default_jobs", lambda: 2)
    monkeypatch.setattr(parallel, "idle_cpus", lambda: 2.0)
    run_check(["."], Settings(select=["PA101"], cache=False))
    assert parallel.LAST_SCAN["jobs"] == 2
    assert not parallel.LAST_SCAN["eager"] and not parallel.LAST_SCAN["pool"]


@pytest.mark.skipif(not LINUX, reason="/proc/loadavg")
def test_idle_cpus_reads_the_kernel():
    import os

    got = parallel.idle_cpus()
    assert got is not None and 0.0 <= got <= len(os.sched_getaffinity(0))


def test_idle_cpus_takes_the_fewest_runnable_of_its_readings(monkeypatch):
    """A momentary task (one reading in three) does not take a CPU away; one runnable in
    every reading does."""
    monkeypatch.setattr(parallel, "default_jobs", lambda: 2)
    monkeypatch.setattr(parallel, "IDLE_GAP", 0.0)
    for readings, idle in (([2, 1, 2], 2.0), ([2, 2, 2], 1.0), ([1, 1, 1], 2.0), ([3, 3, 5], 0.0)):
        it = iter(readings)
        monkeypatch.setattr(parallel, "_runnable_tasks", lambda: next(it))
        assert parallel.idle_cpus() == idle, readings
    monkeypatch.setattr(parallel, "_runnable_tasks", lambda: None)
    assert parallel.idle_cpus() is None


@pytest.mark.skipif(not LINUX, reason="the pool forks on Linux only")
def test_the_run_decides_its_jobs_once_before_the_pre_pass(tmp_path, monkeypatch):
    """The whole-repository pre-pass and the scan use the number read when the run starts:
    a reading taken after the pre-pass's workers (here: no CPU idle any more) is not asked."""
    root = _tree(tmp_path / "t")
    (root / "ds.py").write_text(
        "def build(processor, image, prompt):\n"
        "    return processor(text=prompt, images=image)['input_ids']\n"
    )
    (root / "send.py").write_text(
        "import requests\nfrom ds import build\n\n"
        "def send(processor, image, prompt):\n"
        "    ids = build(processor, image, prompt)\n"
        "    return requests.post('http://e/generate', json={'input_ids': ids, 'image_data': image})\n"
    )
    readings = iter([2.0, 0.0, 0.0, 0.0])
    asked = []
    monkeypatch.chdir(root)
    monkeypatch.setattr(parallel, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "default_jobs", lambda: 2)
    monkeypatch.setattr(parallel, "idle_cpus", lambda: asked.append(1) or next(readings))
    res = run_check(["."], Settings(select=["PA101", "PA102"], cache=False))
    assert len(asked) == 1
    assert parallel.LAST_SCAN["jobs"] == 2 and parallel.LAST_SCAN["pool"]
    assert {f.code for f in res.findings} == {"PA101", "PA102"}, res.findings
