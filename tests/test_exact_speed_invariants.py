"""Exact mode and bump made cheaper (issue 21) without changing what they find.

- the slice of a patched file (units/slicing.py): same lines, kept lines verbatim,
  the changed definitions and everything they name kept, the rest emptied;
- the rules that declare `sliceable` find the same on the slice as on the whole file;
- module indexes shared by content (engine/shared.py): an engine file that is the
  same in OLD and NEW is parsed once, and `bump` reports the same with the store
  off, and with NEW patched once or twice.
Counted by hooks, never timed.
"""

from __future__ import annotations

import ast
import json
import os
import sys
from pathlib import Path

import pytest

from patchaudit.cli import main
from patchaudit.config.registry import rule_index
from patchaudit.config.settings import Settings
from patchaudit.engine import shared
from patchaudit.files import observe
from patchaudit.pipeline.bump import run_bump
from patchaudit.pipeline.bump_engines import PatchPair
from patchaudit.testing import cli_runner
from patchaudit.units import slicing

SCHEDULER = """\
class Scheduler:
    def __init__(self, args):
        self.args = args

    def handle(self, req, priority=0):
        return req
"""

PAD = "".join(f"\n\ndef helper_{i}(x):\n    y = x + {i}\n    return [y for _ in range(3)]\n" for i in range(40))

UTILS = (
    "import os\n\nfrom sglang.srt.managers.scheduler import Scheduler\n\n\n"
    "def _replacement(self, request, extra):\n    return request\n"
    + PAD
    + "\n\ndef install():\n    return os.getpid()\n"
)


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content)
    return root


def engine_files(utils: str = UTILS, scheduler: str = SCHEDULER) -> dict[str, str]:
    return {
        "python/sglang/__init__.py": "",
        "python/sglang/srt/__init__.py": "",
        "python/sglang/srt/managers/__init__.py": "",
        "python/sglang/srt/managers/scheduler.py": scheduler,
        "python/sglang/srt/utils.py": utils,
    }


def monkeypatching_patch(utils: str = UTILS) -> str:
    n = utils.splitlines().index("def install():") + 1
    return (
        "--- a/python/sglang/srt/utils.py\n+++ b/python/sglang/srt/utils.py\n"
        f"@@ -{n},2 +{n},4 @@\n"
        " def install():\n"
        "+    Scheduler.handle = _replacement\n"
        "+    Scheduler.no_such_method = _replacement\n"
        "     return os.getpid()\n"
    )


# --------------------------------------------------------------------------
# the slice


def test_slice_keeps_changed_and_named_definitions_with_their_lines():
    text = (
        "import os\n"
        "LIMIT = 3\n\n\n"
        "def used(x):\n    return x + LIMIT\n\n\n"
        "def unused(x):\n    return x * 2\n\n\n"
        "class Box:\n"
        "    size = 1\n\n"
        "    def __init__(self):\n        self.v = 0\n\n"
        "    def grow(self):\n        return used(self.v)\n\n"
        "    def shrink(self):\n        return os.sep\n"
    )
    lines = text.splitlines(keepends=True)
    changed = [lines.index("        return used(self.v)\n") + 1]
    old_share = slicing.MAX_SHARE
    try:
        slicing.MAX_SHARE = 1.0
        sliced = slicing.changed_slice(text, ast.parse(text), changed)
    finally:
        slicing.MAX_SHARE = old_share
    assert sliced is not None
    out = sliced.splitlines(keepends=True)
    assert len(out) == len(lines)
    for k, (a, b) in enumerate(zip(lines, out), 1):
        assert b in (a, "\n"), k  # every line verbatim or emptied, none moved
    kept = "".join(out)
    assert "def grow" in kept and "def used" in kept  # changed, and named by it
    assert "def __init__" in kept and "size = 1" in kept and "LIMIT = 3" in kept  # constructor, frame
    assert "def unused" not in kept and "def shrink" not in kept  # named by nothing kept
    ast.parse(sliced)


def test_slice_gives_up_when_it_would_keep_most_of_the_text():
    text = "def a():\n    return 1\n\n\ndef b():\n    return a()\n"
    assert slicing.changed_slice(text, ast.parse(text), [6]) is None  # b names a: all kept


def test_a_class_kept_for_its_name_keeps_a_body():
    text = "class Empty:\n    def m(self):\n        return 1\n" + PAD + "\n\ndef f():\n    return Empty()\n"
    n = len(text.splitlines())
    sliced = slicing.changed_slice(text, ast.parse(text), [n])
    assert sliced is not None and "class Empty:" in sliced
    ast.parse(sliced)


# --------------------------------------------------------------------------
# sliceable rules find the same on the slice


def _check(tmp: Path, engine: Path, patch: str) -> list:
    (tmp / "fix.patch").write_text(patch)
    old = os.getcwd()
    os.chdir(tmp)
    try:
        res = cli_runner().invoke(
            main,
            ["check", "--format", "json", "--no-cache", "--jobs", "1", "--engine", f"sglang={engine}", "fix.patch"],
            catch_exceptions=False,
        )
    finally:
        os.chdir(old)
    assert "Traceback" not in res.stderr, res.stderr
    return json.loads(res.stdout or "[]")


@pytest.fixture()
def sliceable_monkeypatch_rules(monkeypatch):
    index = rule_index()
    for code in ("PA206", "PA207"):
        monkeypatch.setattr(index[code].load(), "sliceable", True, raising=False)


def test_sliceable_rules_find_the_same_on_the_slice(tmp_path, sliceable_monkeypatch_rules, monkeypatch):
    engine = write(tmp_path / "engine", engine_files())
    before = slicing.STATS["sliced"]
    with_slice = _check(tmp_path, engine, monkeypatching_patch())
    assert slicing.STATS["sliced"] > before  # the slice was made and used
    monkeypatch.setattr(slicing, "ENABLED", False)
    without = _check(tmp_path, engine, monkeypatching_patch())
    assert with_slice == without
    # the replacement is defined outside the changed function: kept because it is named
    assert sorted(f["code"] for f in with_slice) == ["PA206", "PA207"]
    assert any("`_replacement` (line 6)" in f["message"] for f in with_slice)


# --------------------------------------------------------------------------
# bump: indexes shared by content, NEW patched once

CHANGED = SCHEDULER.replace("def handle(self, req, priority=0):", "def handle(self, req, priority=0, *, flag=False):")


def _bump(tmp: Path) -> dict:
    old = write(tmp / "old", engine_files())
    new = write(tmp / "new", engine_files(scheduler=CHANGED))
    patches = tmp / "patches"
    patches.mkdir(exist_ok=True)
    (patches / "0001.patch").write_text(monkeypatching_patch())
    report = run_bump([str(patches)], "sglang", str(old), str(new), Settings(cache=False, jobs=1))
    return report.to_json()


def test_an_engine_file_unchanged_between_versions_is_parsed_once(tmp_path):
    shared.clear()
    _bump(tmp_path)
    # utils.py is the same in OLD and NEW: one parse for OLD, NEW and the pre-image
    assert shared.INDEXED["python/sglang/srt/utils.py"] <= 2  # the original, and the patched text
    assert shared.STATS["shared"] > 0


def test_bump_reports_the_same_without_the_shared_store_and_patching_new_twice(tmp_path, monkeypatch):
    shared.clear()
    first = _bump(tmp_path / "a")
    monkeypatch.setattr(shared, "ENABLED", False)  # nothing is shared: every view parses
    monkeypatch.setattr(PatchPair, "offer_new_result", lambda self, patch, ctx, result: None)
    shared.clear()
    second = _bump(tmp_path / "b")

    def norm(report: dict) -> str:
        for f in report["findings"]:
            f.pop("fingerprint", None)  # hashes the file's path, which differs
        return json.dumps(report, sort_keys=True).replace(str(tmp_path / "a"), "T").replace(str(tmp_path / "b"), "T")

    assert norm(first) == norm(second)
    assert first["findings"]  # PA206/PA207 at least: the comparison compares something


# --------------------------------------------------------------------------
# the result cache in exact mode


def _wheel(tmp: Path, files: dict[str, str]) -> Path:
    import zipfile

    whl = tmp / "sglang-1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        for rel, content in files.items():
            z.writestr(rel.removeprefix("python/"), content)
        z.writestr("sglang-1.0.dist-info/METADATA", "Name: sglang\nVersion: 1.0\n")
        z.writestr("sglang-1.0.dist-info/RECORD", "")
    return whl


def _run(tmp: Path, engine: Path, jobs: int = 1, cache: bool = True):
    from patchaudit.config.settings import EngineSpec
    from patchaudit.pipeline.runner import run_check

    settings = Settings(
        cache=cache, cache_dir=str(tmp / "cache"), jobs=jobs, engines=[EngineSpec("sglang", str(engine))]
    )
    res = run_check([str(tmp / "fix.patch")], settings)
    return res.cached, [f.to_json() for f in res.findings], res.hunks


def test_exact_mode_results_are_cached_for_an_archive_engine(tmp_path, monkeypatch):
    (tmp_path / "fix.patch").write_text(monkeypatching_patch())
    whl = _wheel(tmp_path, engine_files())
    # the analysis read the wheel, written a moment ago: within the racy window its result
    # is not kept (files/observe.py); past it, it is
    assert [_run(tmp_path, whl)[0] for _ in range(2)] == [0, 0]
    monkeypatch.setattr(observe, "RACY_NS", 0)
    cold = _run(tmp_path, whl)
    warm = _run(tmp_path, whl)
    assert (cold[0], warm[0]) == (0, 1)
    assert cold[1:] == warm[1:] and cold[1]  # the same findings and hunks, from the cache
    # another engine's content (the target now exists): not the cached result
    whl.unlink()
    scheduler = SCHEDULER + "\n    def no_such_method(self, request, extra):\n        return request\n"
    _wheel(tmp_path, engine_files(scheduler=scheduler))
    changed = _run(tmp_path, whl)
    assert changed[0] == 0 and "PA206" not in {f["code"] for f in changed[1]}


def test_a_directory_engine_is_not_cached(tmp_path):
    (tmp_path / "fix.patch").write_text(monkeypatching_patch())
    engine = write(tmp_path / "engine", engine_files())
    assert _run(tmp_path, engine)[0] == 0
    assert _run(tmp_path, engine)[0] == 0  # its files may change outside the cache's view


def test_findings_identical_with_and_without_cache_and_jobs(tmp_path, monkeypatch):
    monkeypatch.setattr(observe, "RACY_NS", 0)  # the wheel was written a moment ago
    (tmp_path / "fix.patch").write_text(monkeypatching_patch())
    whl = _wheel(tmp_path, engine_files())
    cold = _run(tmp_path, whl)
    warm = _run(tmp_path, whl, jobs=2)
    uncached = _run(tmp_path, whl, jobs=2, cache=False)
    assert (cold[0], warm[0], uncached[0]) == (0, 1, 0)
    assert cold[1:] == warm[1:] == uncached[1:]


# --------------------------------------------------------------------------
# PA206/PA207 skip a patched file whose judged lines hold no site


def _unit_gate_off(monkeypatch) -> None:
    index = rule_index()
    for code in ("PA206", "PA207"):
        monkeypatch.setattr(index[code].load(), "can_match_unit", classmethod(lambda cls, unit, settings=None: True))


def _visits(monkeypatch) -> list:
    """The units the monkey-patch rules were run on (their `visit_Module` calls)."""
    cls = rule_index()["PA206"].load()
    MonkeypatchRule = next(c for c in cls.__mro__ if c.__name__ == "MonkeypatchRule")
    calls: list = []
    real = MonkeypatchRule.visit_Module

    def visit_Module(self, node):  # (named so: libcst's visitor table goes by the name)
        calls.append(1)
        return real(self, node)

    monkeypatch.setattr(MonkeypatchRule, "visit_Module", visit_Module)
    return calls


# a module-level site: the slice keeps it (the frame), the patch does not touch it
PATCHED_UTILS = UTILS + "\n\nScheduler.handle = _replacement\n"
DECORATED = "from unittest import mock\n" + UTILS


def _helper_patch(utils: str) -> str:
    """A patch that changes a helper, not the lines of the file's monkey-patch."""
    lines = utils.splitlines()
    n = lines.index("def helper_3(x):") + 1
    return (
        "--- a/python/sglang/srt/utils.py\n+++ b/python/sglang/srt/utils.py\n"
        f"@@ -{n},3 +{n},3 @@\n"
        " def helper_3(x):\n"
        "-    y = x + 3\n"
        "+    y = x + 30\n"
        "     return [y for _ in range(3)]\n"
    )


def _decorator_patch(utils: str) -> str:
    """A patch that adds only a decorator, over a function it does not change."""
    n = utils.splitlines().index("def install():") + 1
    return (
        "--- a/python/sglang/srt/utils.py\n+++ b/python/sglang/srt/utils.py\n"
        f"@@ -{n - 1},3 +{n - 1},4 @@\n"
        " \n"
        '+@mock.patch("sglang.srt.managers.scheduler.Scheduler.no_such_method")\n'
        " def install():\n"
        "     return os.getpid()\n"
    )


@pytest.mark.parametrize(
    "name, utils, patch, codes, runs",
    [
        ("sites on the added lines", UTILS, monkeypatching_patch(), ["PA206", "PA207"], True),
        ("a site the patch does not touch", PATCHED_UTILS, _helper_patch(PATCHED_UTILS), [], False),
        ("a decorator added over an unchanged function", DECORATED, _decorator_patch(DECORATED), ["PA206"], True),
    ],
    ids=["added", "untouched", "decorator"],
)
def test_the_monkeypatch_rules_skip_units_without_a_site_on_their_judged_lines(
    tmp_path, monkeypatch, name, utils, patch, codes, runs
):
    engine = write(tmp_path / "engine", engine_files(utils=utils))
    visits = _visits(monkeypatch)
    gated = _check(tmp_path, engine, patch)
    assert sorted(f["code"] for f in gated) == codes, name
    assert bool(visits) is runs, name  # the rules ran only where a site is on a judged line
    _unit_gate_off(monkeypatch)
    visits.clear()
    assert _check(tmp_path, engine, patch) == gated, name
    assert visits  # without the gate they run on every unit that names the engine


def test_a_rule_that_reads_no_tree_costs_no_libcst_parse(tmp_path, monkeypatch):
    """PA204 judges a patched file from the engine's `ast` index (`reads_tree = False`):
    bump runs it on every patched engine file without libcst parsing one, and it still
    reports what its examples say."""
    import libcst

    from patchaudit.testing import check_example, run_example

    rule = rule_index()["PA204"].load()
    assert rule.reads_tree is False
    parses = []
    real = libcst.parse_module
    monkeypatch.setattr(libcst, "parse_module", lambda *a, **k: parses.append(1) or real(*a, **k))
    for i, ex in enumerate(rule.INVALID):
        check_example(rule, True, ex, tmp_path / f"invalid{i}")
    assert not parses
    # the finding's symbol in the engine file comes from `ast` as it did from libcst
    mine, _, _ = run_example(rule, rule.INVALID[0], tmp_path / "symbol")
    assert mine and all(f.target is not None and f.target.symbol for f in mine)


def test_the_patched_file_is_parsed_once_however_small_the_ast_cache(tmp_path, monkeypatch):
    """Exact mode builds every unit of a patch before the rules run on the first; the
    patched file's `ast` tree is handed back to pyast's cache then (`pyast.remember`), so
    the pre-filters do not parse it again, even with a cache that keeps a single text."""
    import ast as stdlib_ast

    from patchaudit.inputs import pyast

    # a decode and an encode: the dataflow rules' `ast` gates read the whole patched file
    utils = UTILS + "\n\ndef roundtrip(tokenizer, ids):\n    return tokenizer.encode(tokenizer.decode(ids))\n"
    engine = write(tmp_path / "engine", engine_files(utils))
    patch = monkeypatching_patch(utils)
    patched = utils.replace(
        "def install():\n",
        "def install():\n    Scheduler.handle = _replacement\n    Scheduler.no_such_method = _replacement\n",
    )
    parsed: list[str] = []
    real = stdlib_ast.parse
    monkeypatch.setattr(pyast, "_CACHE_SIZE", 1)
    monkeypatch.setattr(pyast, "_CACHE_CHARS", 0)
    monkeypatch.setattr(pyast, "_CACHE", {})
    monkeypatch.setattr(pyast, "_CACHED_CHARS", [0])
    shared.clear()

    def counting(src, *a, **k):
        if src == patched:
            parsed.append(src)
        return real(src, *a, **k)

    monkeypatch.setattr(stdlib_ast, "parse", counting)
    found = _check(tmp_path, engine, patch)
    assert sorted(f["code"] for f in found) == ["PA206", "PA207"]
    assert len(parsed) == 1, f"the patched file was parsed {len(parsed)} times"


def test_no_slice_for_rules_whose_pre_filter_refuses_the_file(tmp_path, sliceable_monkeypatch_rules):
    """A patched file with no monkey-patch site on the patch's lines: PA206/PA207's
    pre-filter refuses the whole file, so it refuses its slice, which is not made."""
    engine = write(tmp_path / "engine", engine_files())
    n = UTILS.splitlines().index("def install():") + 1
    patch = (
        "--- a/python/sglang/srt/utils.py\n+++ b/python/sglang/srt/utils.py\n"
        f"@@ -{n},2 +{n},2 @@\n"
        " def install():\n"
        "-    return os.getpid()\n"
        "+    return os.getppid()\n"
    )
    before = slicing.STATS["sliced"]
    assert _check(tmp_path, engine, patch) == []
    assert slicing.STATS["sliced"] == before
    assert _check(tmp_path, engine, monkeypatching_patch())  # the sites' patch still finds
    assert slicing.STATS["sliced"] > before


# --------------------------------------------------------------------------
# the scan's pool in exact mode


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the pool forks on Linux only")
def test_exact_mode_patches_weigh_what_they_patch_and_go_largest_first(tmp_path, monkeypatch):
    """A patch checked against an engine costs the engine files it patches: its bytes count
    EXACT_PATCH_WEIGHT times toward the pool's threshold, the patches are taken largest
    first and each waits for an idle worker; the findings are those of one job."""
    from patchaudit.config.settings import EngineSpec
    from patchaudit.pipeline import parallel, triage
    from patchaudit.pipeline.runner import run_check

    engine = write(tmp_path / "engine", engine_files())
    patches = tmp_path / "patches"
    patches.mkdir()
    small = monkeypatching_patch()
    (patches / "a-small.patch").write_text(small)
    (patches / "b-large.patch").write_text(
        small.replace("Scheduler.no_such_method", "Scheduler.also_missing") + "\n" * 400
    )
    total = sum(p.stat().st_size for p in patches.iterdir())
    # unweighted, the patches are too little for a pool; weighted, enough
    monkeypatch.setattr(parallel, "POOL_MIN_BYTES", 2 * total)
    order: list[str] = []
    take = parallel._Scan.take
    monkeypatch.setattr(parallel._Scan, "take", lambda self, i, src: order.append(src.path) or take(self, i, src))

    def run(jobs: int):
        order.clear()
        settings = Settings(cache=False, jobs=jobs, engines=[EngineSpec("sglang", str(engine))])
        res = run_check([str(patches)], settings)
        return sorted(json.dumps(f.to_json(), sort_keys=True) for f in res.findings), list(order)

    one, _ = run(1)
    assert not parallel.LAST_SCAN["pool"]
    two, taken = run(2)
    assert parallel.LAST_SCAN["pool"] and parallel.LAST_SCAN["heavy"] == 2
    assert [os.path.basename(p) for p in taken] == ["b-large.patch", "a-small.patch"]
    assert two == one and len(one) >= 2
    monkeypatch.setattr(triage, "EXACT_PATCH_WEIGHT", 1)
    run(2)
    assert not parallel.LAST_SCAN["pool"]


def test_a_task_that_waits_for_an_idle_worker():
    """`Pool.submit(task, alone=True)`: the task goes only to a worker with nothing in
    flight; the others fill the workers up to WINDOW as before."""
    from collections import deque
    from types import SimpleNamespace

    from patchaudit.pipeline import pool as poolmod

    p = object.__new__(poolmod.Pool)
    p.queue, p.alone = deque(), set()
    p.workers = [SimpleNamespace(inflight=[], ready=False) for _ in range(2)]
    p._write = lambda w, task: None
    big1, big2, big3, light = ("big1",), ("big2",), ("big3",), ("light",)
    for t in (big1, big2, big3):
        p.submit(t, alone=True)
    assert [w.inflight for w in p.workers] == [[big1], [big2]] and list(p.queue) == [big3]
    p.workers[1].inflight.clear()  # big2 is done
    p._dispatch()
    assert p.workers[1].inflight == [big3] and not p.queue
    p.submit(light)
    assert len(p.workers[0].inflight) + len(p.workers[1].inflight) == 3  # beside a long one
