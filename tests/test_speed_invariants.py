"""What the speed work must never change: the findings.

- the pre-filter (rule index + `requires`/`can_match`) never drops a file that
  would have produced a finding: every rule example and the whole corpus
  (tests/, examples/, the package's own sources) give the same findings with
  the pre-filter and without it;
- the static rule index says what the real rule classes say;
- findings are identical with and without the cache, with 1 and N jobs (the
  process pool forced on), in the same order;
- a warm re-run parses nothing, and a run that parses nothing imports no libcst;
- lazy positions and the module-only visit give libcst's own results.

No timing here: speed is shown by bench/run.py.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from patchaudit.pipeline import parallel, pool
from patchaudit.config.settings import Settings
from patchaudit.config.registry import all_rules, select_rules
from patchaudit.config.registry import RuleMeta, build_index, select_codes
from patchaudit.pipeline.runner import run_check
from patchaudit.testing import all_examples, run_example

REPO = Path(__file__).resolve().parent.parent
CORPUS = [p for p in (REPO / "tests", REPO / "examples", REPO / "patchaudit", REPO / "rules") if p.exists()]
EXAMPLES = all_examples()


def _key(f) -> str:
    d = f.to_json()
    d["context"] = list(f.context)
    return json.dumps(d, sort_keys=True)


def _keys(findings) -> list[str]:
    return [_key(f) for f in findings]


def _errors(errors) -> list[str]:
    return [str(e) for e in errors]


@pytest.fixture
def no_prefilter(monkeypatch):
    """Every rule 'can match' everything: the reference the pre-filter must equal."""

    def disable():
        monkeypatch.setattr(parallel.Triage, "heavy", lambda self, kind, data: True)
        monkeypatch.setattr(parallel.Triage, "runnable", lambda self, meta: True)   # every selected class
        monkeypatch.setattr(parallel.Triage, "candidates", lambda self, kind, data: [
            m for m in self.by_kind["python" if kind == "python" else "text"]])     # no byte filter
        for rule in all_rules().values():
            monkeypatch.setattr(rule, "can_match", classmethod(lambda cls, text, settings=None: True))

    return disable


# --------------------------------------------------------------------------
# the rule index


def _fields(meta: RuleMeta) -> dict:
    return {f.name: getattr(meta, f.name) for f in dataclasses.fields(meta)
            if f.name not in ("static", "requires_bytes")}


def test_static_index_is_the_real_classes():
    static = build_index()
    real = {code: RuleMeta.from_class(cls) for code, cls in all_rules().items()}
    assert set(static) == set(real)
    for code in real:
        assert _fields(static[code]) == _fields(real[code]), code


def test_every_rule_is_read_without_import():
    """A rule whose metadata the reader cannot see is imported at every run (and
    libcst with it): write its class attributes as literals or module constants."""
    dynamic = [m.code for m in build_index().values() if not m.static]
    assert not dynamic, f"rules read by importing them: {dynamic}"


def test_index_reads_a_pack_without_libcst():
    code = ("import sys; from patchaudit.config.registry import build_index; idx = build_index(); "
            "assert idx; print('libcst' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("select,ignore,extend", [
    (None, (), ()), (["ALL"], (), ()), (["PA1"], (), ()), (["PA"], ["PA10"], ()), (["PA101"], (), ["PA001"]),
    (None, ["PA3"], ["PA001"]), ([" pa104 "], (), ()),
])
def test_selection_is_the_same_on_the_index(select, ignore, extend):
    classes = [r.code for r in select_rules(select, ignore, extend)]
    assert select_codes(build_index(), select, ignore, extend) == classes


def test_unknown_code_is_a_key_error():
    with pytest.raises(KeyError):
        select_codes(build_index(), ["PA999"])


# --------------------------------------------------------------------------
# pre-filter soundness


def _corpus_texts():
    from patchaudit.inputs.discover import discover

    files, _ = discover([str(p) for p in CORPUS])
    out = []
    for f in files:
        data = Path(f.path).read_bytes()
        out.append((f, data))
    for _, _, ex, _ in EXAMPLES:
        out.append((None, ex.source.encode("utf-8", "surrogateescape")))
    return out


def test_byte_filter_is_the_class_filter():
    """`requires` on raw bytes decides as the class's can_match on the text; for a
    rule with its own can_match, `requires` over-approximates it (default settings)."""
    index = build_index()
    settings = Settings()
    texts = _corpus_texts()
    assert len(texts) > 50
    for code, rule in all_rules().items():
        meta = index[code]
        assert meta.byte_filter, code
        for _, data in texts:
            try:
                text = data.decode("utf-8-sig")
            except UnicodeDecodeError:
                continue
            if meta.custom_filter:
                if rule.can_match(text, settings):
                    assert meta.can_match_bytes(data), (code, text[:200])
            else:
                assert meta.can_match_bytes(data) == rule.can_match(text, settings), (code, text[:200])
                joined = "\n".join(text.splitlines())
                assert meta.can_match_bytes(data) == rule.can_match(joined), code


@pytest.mark.parametrize("rule,invalid,ex", [e[:3] for e in EXAMPLES], ids=[e[3] for e in EXAMPLES])
def test_prefilter_keeps_every_example_finding(rule, invalid, ex, tmp_path, no_prefilter):
    work = tmp_path / "w"     # the same folder for both runs: messages may name it
    with_filter, _, _ = run_example(rule, ex, work)
    shutil.rmtree(work)
    no_prefilter()
    without, _, _ = run_example(rule, ex, work)
    assert _keys(with_filter) == _keys(without)


def test_prefilter_keeps_every_corpus_finding(no_prefilter):
    settings = dict(select=["ALL"], cache=False, jobs=1)
    paths = [str(p) for p in CORPUS]
    on = run_check(paths, Settings(**settings))
    no_prefilter()
    off = run_check(paths, Settings(**settings))
    assert on.files == off.files > 50
    assert off.parsed > on.parsed            # the reference really parsed more
    assert _keys(on.findings) == _keys(off.findings)
    assert on.findings, "the corpus should hold findings (rule examples in the sources)"


def test_light_files_import_no_rule(tmp_path):
    """A tree where no selected rule can fire: nothing parsed, no rule module imported."""
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "run.sh").write_text("echo hi\n")
    code = textwrap.dedent(f"""
        import sys
        from patchaudit.config.settings import Settings
        from patchaudit.pipeline.runner import run_check
        r = run_check([{str(tmp_path)!r}], Settings(cache=False))
        assert r.files == 2 and r.parsed == 0 and not r.findings, r
        print(sorted(m for m in sys.modules if m == "libcst" or m.startswith("patchaudit.rules.")))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------
# cache and jobs

POSITIVE = """\
import os


class P:
    async def f(self, text, imgs):
        out = await self.legacy_load_mm_data(prompt=text, image_data=imgs)
        return out
"""


def _tree(root: Path) -> Path:
    """A tree with findings of several rules, clean files, a patch and errors."""
    for sub in ("tests", "examples"):
        if (REPO / sub).exists():
            shutil.copytree(REPO / sub, root / sub, ignore=shutil.ignore_patterns("__pycache__", "*.json"))
    gen = root / "gen"
    gen.mkdir()
    for i in range(12):
        (gen / f"m{i:02}.py").write_text(POSITIVE.replace("text", f"text{i}") + "\n" * i)
        (gen / f"clean{i:02}.py").write_text(f"value = {i}\n")
    (gen / "launch.sh").write_text("export SGLANG_MM_AVOID_RETOKENIZE=0\n")
    (gen / "bad.py").write_bytes(b"x = '\xff'\n")
    (gen / "broken.py").write_text("def f(:\n    legacy_load_mm_data()\n")
    (gen / "suppressed.py").write_text("out = legacy_load_mm_data(prompt=t)  # patchaudit: ignore[PA101]\n")
    return root


@pytest.fixture(autouse=True)
def _fixed_code(monkeypatch, request):
    """The code stamp of the cache key stats patchaudit's own sources; a shared
    working tree edited while the tests run must not make a warm run cold."""
    if "code_stamp" not in request.node.name:
        import patchaudit.pipeline.cache

        stamp = patchaudit.pipeline.cache.code_stamp()
        monkeypatch.setattr(patchaudit.pipeline.cache, "code_stamp", lambda: stamp)


def _run(root: Path, monkeypatch, **kw):
    monkeypatch.chdir(root)
    return run_check(["."], Settings(select=["ALL"], **kw))


def _same(a, b) -> None:
    assert _keys(a.findings) == _keys(b.findings)
    assert _errors(a.errors) == _errors(b.errors)
    assert a.files == b.files


def test_findings_same_with_cache_and_jobs(tmp_path, monkeypatch):
    root = _tree(tmp_path / "tree")
    monkeypatch.setattr(parallel, "POOL_MIN_BYTES", 0)   # the pool for any two heavy files
    serial = _run(root, monkeypatch, jobs=1, cache=False)
    assert not parallel.LAST_SCAN["pool"]
    assert serial.findings and serial.errors and serial.parsed > 10
    pooled = _run(root, monkeypatch, jobs=2, cache=False)
    assert parallel.LAST_SCAN["pool"]
    _same(serial, pooled)
    assert pooled.parsed == serial.parsed
    assert not (root / ".patchaudit_cache").exists()      # --no-cache writes nothing

    cold = _run(root, monkeypatch, jobs=2, cache=True)
    _same(serial, cold)
    assert cold.cached == 0 and cold.parsed == serial.parsed
    warm = _run(root, monkeypatch, jobs=2, cache=True)
    _same(serial, warm)
    assert warm.parsed == 0 and warm.cached == warm.files
    warm1 = _run(root, monkeypatch, jobs=1, cache=True)
    _same(serial, warm1)
    assert warm1.parsed == 0

    gi = root / ".patchaudit_cache" / ".gitignore"
    assert gi.read_text().strip().endswith("*")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the pool forks on Linux only")
def test_eager_pool_for_cold_large_scans(tmp_path, monkeypatch):
    """A cold scan of many files forks its workers at its first heavy file: same findings;
    a warm one does not; one with no heavy file starts no worker."""
    root = _tree(tmp_path / "tree")
    serial = _run(root, monkeypatch, jobs=1, cache=False)
    monkeypatch.setattr(parallel, "EAGER_MIN_FILES", 2)
    eager = _run(root, monkeypatch, jobs=2, cache=True)
    assert parallel.LAST_SCAN["eager"] and parallel.LAST_SCAN["heavy"]
    _same(serial, eager)
    warm = _run(root, monkeypatch, jobs=2, cache=True)
    assert not parallel.LAST_SCAN["eager"] and not parallel.LAST_SCAN["pool"]
    _same(serial, warm)
    # nothing heavy (no file holds a rule's string): no worker is started
    plain = tmp_path / "plain"
    plain.mkdir()
    for k in range(3):
        (plain / f"m{k}.py").write_text(f"x = {k}\n")
    monkeypatch.chdir(plain)
    idle = run_check(["."], Settings(select=["ALL"], jobs=2, cache=False))
    assert not parallel.LAST_SCAN["pool"] and not parallel.LAST_SCAN["heavy"]
    assert idle.files == 3 and not idle.findings and not idle.errors


def _dying_worker(i, src, data):   # a worker process that crashes hard (a segfault, OOM kill)
    os._exit(3)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the pool forks on Linux only")
def test_dead_workers_cost_their_files_only(tmp_path, monkeypatch):
    """A worker that dies (a segfault, an OOM kill) costs the file it was on: that file is
    reported, never run again here (it could kill this process too), and a new worker goes
    on.  Workers that die on every file, none finishing one, are given up after
    MAX_DEATHS_WITHOUT_PROGRESS files: the rest runs here with the same findings.
    (tests/test_security_budgets.py kills a worker on one file only.)"""
    root = _tree(tmp_path / "tree")
    serial = _run(root, monkeypatch, jobs=1, cache=False)
    monkeypatch.setattr(parallel, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "_worker_run", _dying_worker)
    pooled = _run(root, monkeypatch, jobs=2, cache=False)
    assert parallel.LAST_SCAN["pool"]
    lost = {e.path for e in pooled.errors if "worker process" in e.message}
    assert len(lost) == pool.MAX_DEATHS_WITHOUT_PROGRESS == parallel.LAST_SCAN["lost"]
    assert _keys(pooled.findings) == _keys([f for f in serial.findings if f.path not in lost])
    assert _errors(e for e in pooled.errors if e.path not in lost) == \
        _errors(e for e in serial.errors if e.path not in lost)


def test_changed_file_is_analysed_again(tmp_path, monkeypatch):
    root = _tree(tmp_path / "tree")
    first = _run(root, monkeypatch, jobs=1, cache=True)
    target = root / "gen" / "m03.py"
    target.write_text(target.read_text().replace("image_data=imgs", "image_data=imgs, input_ids=ids"))
    second = _run(root, monkeypatch, jobs=1, cache=True)
    assert second.parsed == 1 and second.cached == second.files - 1
    assert len(second.findings) == len(first.findings) - 1
    fresh = _run(root, monkeypatch, jobs=1, cache=False)
    _same(fresh, second)


def test_settings_and_rules_key_the_cache(tmp_path, monkeypatch):
    root = _tree(tmp_path / "tree")
    _run(root, monkeypatch, jobs=1, cache=True)
    monkeypatch.chdir(root)
    only = run_check(["."], Settings(select=["PA101"], jobs=1, cache=True))
    assert only.cached == 0 and {f.code for f in only.findings} == {"PA101"}
    ignored = run_check(["."], Settings(select=["ALL"], per_file_ignores={"gen/*": ["PA101"]}, jobs=1,
                                        cache=True))
    assert ignored.cached == 0
    assert not any(f.code == "PA101" and f.path.startswith("gen") for f in ignored.findings)


def test_code_stamp_keys_the_cache(tmp_path, monkeypatch):
    import patchaudit.pipeline.cache

    root = _tree(tmp_path / "tree")
    monkeypatch.setattr(patchaudit.pipeline.cache, "code_stamp", lambda: ("rules", 1))
    _run(root, monkeypatch, jobs=1, cache=True)
    assert _run(root, monkeypatch, jobs=1, cache=True).parsed == 0
    monkeypatch.setattr(patchaudit.pipeline.cache, "code_stamp", lambda: ("rules", 2))   # a rule was edited
    again = _run(root, monkeypatch, jobs=1, cache=True)
    assert again.cached == 0 and again.parsed > 0


def test_unreadable_cache_is_a_cold_cache(tmp_path, monkeypatch):
    root = _tree(tmp_path / "tree")
    first = _run(root, monkeypatch, jobs=1, cache=True)
    for store in (root / ".patchaudit_cache").rglob("*.pickle"):
        store.write_bytes(b"not a pickle")
    again = _run(root, monkeypatch, jobs=1, cache=True)
    _same(first, again)
    assert again.cached == 0
    third = _run(root, monkeypatch, jobs=1, cache=True)
    assert third.cached == third.files


def test_cache_keeps_few_stores_and_the_rule_index(tmp_path, monkeypatch):
    import patchaudit.pipeline.cache

    (tmp_path / "a.py").write_text(POSITIVE)
    import patchaudit.config.registry

    monkeypatch.setattr(patchaudit.pipeline.cache, "MAX_STORES", 2)
    monkeypatch.setattr(patchaudit.config.registry, "_INDEX", None)   # read and store the index again
    monkeypatch.chdir(tmp_path)
    for select in (["PA101"], ["PA104"], ["PA1"], ["ALL"]):
        run_check(["a.py"], Settings(select=select, jobs=1))
    folder = [p for p in (tmp_path / ".patchaudit_cache").iterdir() if p.is_dir()][0]
    stores = [p for p in folder.iterdir() if p.is_dir()]
    assert len(stores) == 2
    assert (folder / "rule-index.pickle").exists()
    again = run_check(["a.py"], Settings(select=["ALL"], jobs=1))
    assert again.cached == 1


def test_one_file_run_touches_one_shard_and_concurrent_runs_merge(tmp_path, monkeypatch):
    """A pre-commit run over one file of a tree reads and rewrites only that file's shard
    of the store; two runs that wrote the same shard meanwhile keep both results."""
    import patchaudit.pipeline.cache as pc

    root = _tree(tmp_path / "tree")
    whole = _run(root, monkeypatch, jobs=1, cache=True)
    # every store of the cache (the per-file results, the whole-repository summaries)
    stores = [p for p in (root / ".patchaudit_cache").rglob("*") if p.is_dir() and len(p.name) == 32]

    def shards():
        return {(st.name, p.name): p.stat().st_mtime_ns for st in stores for p in st.glob("*.pickle")}

    before = shards()
    assert len(before) > 4

    target = root / "gen" / "m03.py"
    target.write_text(target.read_text() + "# edited\n")
    loaded = []
    real_read = pc.ResultCache._read
    monkeypatch.setattr(
        pc.ResultCache, "_read", lambda self, n: loaded.append((self.store.name, n)) or real_read(self, n)
    )
    one = run_check(["gen/m03.py"], Settings(select=["ALL"], jobs=1))
    assert one.parsed == 1 and len(set(loaded)) == 1
    after = shards()
    assert sorted(k for k in after if after[k] != before.get(k)) == [(loaded[0][0], f"{loaded[0][1]:02x}.pickle")]
    again = _run(root, monkeypatch, jobs=1, cache=True)
    assert again.parsed == 0 and again.cached == again.files
    _same(whole, again)

    # two runs of the same key, each writing a different file of the same shard
    a = pc.ResultCache(tmp_path / "c", "k" * 32)
    b = pc.ResultCache(tmp_path / "c", "k" * 32)
    x = "x.py"
    y = next(f"y{i}.py" for i in range(1000) if a._shard(f"y{i}.py", "python") == a._shard(x, "python"))
    a.get(x, "python", b"1")
    b.get(y, "python", b"2")
    a.put(x, "python", b"1", "rx")
    b.put(y, "python", b"2", "ry")
    a.save()
    b.save()
    c = pc.ResultCache(tmp_path / "c", "k" * 32)
    assert not c.cold() and c.get(x, "python", b"1") == "rx" and c.get(y, "python", b"2") == "ry"


def test_cache_dir_from_config(tmp_path, monkeypatch):
    root = _tree(tmp_path / "tree")
    cfg = root / "pyproject.toml"
    cfg.write_text("[tool.patchaudit]\ncache-dir = 'build/pa-cache'\n")
    monkeypatch.chdir(root)
    from patchaudit.config.settings import load_pyproject

    settings = load_pyproject(cfg)
    run_check(["gen"], settings)
    assert (root / "build" / "pa-cache" / ".gitignore").exists()
    assert not (root / ".patchaudit_cache").exists()


def test_warm_cli_run_imports_no_libcst(tmp_path):
    root = _tree(tmp_path / "tree")
    cmd = [sys.executable, "-m", "patchaudit", "check", "--select", "ALL", "gen"]
    cold = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    assert cold.returncode == 2, cold.stderr    # findings, and two files that cannot be read
    code = textwrap.dedent("""
        import sys
        from patchaudit.cli import main
        try:
            main(["check", "--select", "ALL", "gen"])
        except SystemExit as exc:
            code = exc.code
        sys.stderr.write("EXIT %s LIBCST %s\\n" % (code, "libcst" in sys.modules))
    """)
    warm = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert "EXIT 2 LIBCST False" in warm.stderr, warm.stderr
    assert "gen/bad.py:1: error: not valid UTF-8" in warm.stderr   # errors come from the cache too
    assert warm.stdout == cold.stdout


# --------------------------------------------------------------------------
# libcst work: lazy positions, module-only visits


def test_lazy_positions_are_libcsts():
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    from patchaudit.analysis.lazy_metadata import metadata_wrapper

    src = (REPO / "patchaudit" / "pipeline" / "parallel.py").read_text()
    module = cst.parse_module(src)
    eager = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    lazy_wrapper = metadata_wrapper(module)
    lazy = lazy_wrapper.resolve_many([PositionProvider])[PositionProvider]
    assert not lazy_wrapper.positions_computed()
    nodes = list(eager)
    assert len(nodes) > 1000
    assert all(lazy[n] == eager[n] for n in nodes)
    assert lazy_wrapper.positions_computed()


def test_statement_positions_are_libcsts():
    """A single lookup (a rule reporting one node) resolves one pruned statement:
    its answer is libcst's position for the whole module, for nodes at every depth."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    from patchaudit.analysis.lazy_metadata import metadata_wrapper

    checked = fast = 0
    sources = sorted((REPO / "patchaudit").rglob("*.py")) + sorted((REPO / "rules").glob("*.py"))
    for path in sources[::4]:
        module = cst.parse_module(path.read_text(encoding="utf-8"))
        eager = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        items = list(eager.items())
        for node, expected in items[:: max(1, len(items) // 25)]:
            wrapper = metadata_wrapper(module)
            got = wrapper.resolve_many([PositionProvider])[PositionProvider][node]
            assert got == expected, (path.name, type(node).__name__)
            checked += 1
            fast += not wrapper.positions_computed()
    assert checked > 200 and fast > checked // 4   # most lookups never position the whole file


def test_statement_positions_of_a_trace_are_libcsts():
    """Many lookups in one module (a dataflow trace: nodes of one function, then of
    another) are answered from the two functions positioned first, and are libcst's."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    from patchaudit.analysis.lazy_metadata import metadata_wrapper

    for name in ("parallel.py", "repo_index.py"):
        module = cst.parse_module((REPO / "patchaudit" / "pipeline" / name).read_text(encoding="utf-8"))
        eager = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        fns = [n for n in eager if isinstance(n, cst.FunctionDef)]
        wrapper = metadata_wrapper(module)
        lazy = wrapper.resolve_many([PositionProvider])[PositionProvider]
        looked = 0
        for fn in fns[1:3]:
            lo, hi = eager[fn].start.line, eager[fn].end.line
            inner = [
                n
                for n, r in eager.items()
                if isinstance(n, (cst.BaseExpression, cst.BaseSmallStatement)) and lo < r.start.line <= r.end.line <= hi
            ]
            assert len(inner) > 20
            for node in inner[::5]:
                assert lazy[node] == eager[node], (name, type(node).__name__)
                looked += 1
        assert not wrapper.positions_computed()  # two functions: never the whole module
        # a piece per function (and a statement whose text held the node's first line)
        assert looked >= 10 and len(lazy._statements.done) <= 4


def test_module_only_visit_is_a_full_visit(monkeypatch):
    import patchaudit.analysis.lazy_metadata as lm

    paths = [str(p) for p in CORPUS]
    fast = run_check(paths, Settings(select=["ALL"], cache=False, jobs=1))
    monkeypatch.setattr(lm, "_MODULE_ONLY", frozenset())
    full = run_check(paths, Settings(select=["ALL"], cache=False, jobs=1))
    assert _keys(fast.findings) == _keys(full.findings)
    assert _errors(fast.errors) == _errors(full.errors)


def test_rule_index_is_kept_per_user_and_renewed_when_stale(tmp_path, monkeypatch):
    """A tree never checked before reads the rule index from the user's cache folder
    (it depends on the rule sources only); a stale or corrupt copy is rebuilt and rewritten."""
    import patchaudit.config.registry as ri

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    user = ri.user_cache_dir()
    assert user is not None and user.startswith(str(tmp_path / "xdg"))
    monkeypatch.setattr(ri, "_INDEX", None)
    first = ri.rule_index(str(tmp_path / "tree1"))
    assert (tmp_path / "tree1" / "rule-index.pickle").exists()
    assert os.path.exists(os.path.join(user, "rule-index.pickle"))

    built = []
    monkeypatch.setattr(ri, "build_index", lambda: built.append(1) or {})
    monkeypatch.setattr(ri, "_INDEX", None)
    assert ri.rule_index(str(tmp_path / "tree2")) == first    # from the user's folder, not rebuilt
    assert not built and (tmp_path / "tree2" / "rule-index.pickle").exists()

    with open(os.path.join(user, "rule-index.pickle"), "wb") as fh:   # stale
        pickle.dump(((0, 0), {}), fh)
    (tmp_path / "tree3").mkdir()
    (tmp_path / "tree3" / "rule-index.pickle").write_bytes(b"garbage")
    monkeypatch.setattr(ri, "_INDEX", None)
    assert ri.rule_index(str(tmp_path / "tree3")) == {} and built == [1]
    from patchaudit.files.usercache import unseal

    with open(os.path.join(user, "rule-index.pickle"), "rb") as fh:
        assert pickle.loads(unseal(fh.read()))[0] != (0, 0)           # rewritten, sealed


def test_rule_visitors_are_libcsts():
    """Rule.get_visitors reads each class's visitor methods once; the set is what libcst's
    own BatchableCSTVisitor.get_visitors finds on an instance, for every rule."""
    from libcst import BatchableCSTVisitor

    for code, rule in all_rules().items():
        inst = rule(None, None)
        assert set(inst.get_visitors()) == set(BatchableCSTVisitor.get_visitors(inst)), code


def test_pre_parse_with_ast_is_silent_and_shared():
    """The rules' second pre-filter and statement pruning share one `ast.parse` per text,
    and its warnings (an invalid escape is a SyntaxWarning since Python 3.12) never reach
    the user."""
    import warnings

    from patchaudit.rules.pa103_decode_retokenize import DecodeRetokenize
    from patchaudit.inputs import pyast

    text = 'P = "\\d+"\ntext = tok.decode(ids)\nids = tok.encode(text)\n'
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert DecodeRetokenize.can_match(text)
        assert pyast.parse(text) is pyast.parse(text)
    assert pyast.parse("def f(:\n") is None


def test_console_script_exits_hard_but_lets_profilers_write(tmp_path):
    """`python -m patchaudit` ends with a hard exit once its output is flushed: exit codes
    and output are those of `main`; under a profiler it exits the normal way, so the
    profile is written."""
    (tmp_path / "a.py").write_text(POSITIVE)
    (tmp_path / "ok.py").write_text("x = 1\n")
    cmd = [sys.executable, "-m", "patchaudit", "check", "--no-cache"]
    dirty = subprocess.run(cmd + ["a.py"], cwd=tmp_path, capture_output=True, text=True)
    assert dirty.returncode == 1 and "PA101" in dirty.stdout
    clean = subprocess.run(cmd + ["ok.py"], cwd=tmp_path, capture_output=True, text=True)
    assert clean.returncode == 0
    missing = subprocess.run(cmd + ["nope.py"], cwd=tmp_path, capture_output=True, text=True)
    assert missing.returncode == 2 and "nope.py" in missing.stderr
    prof = tmp_path / "out.prof"
    subprocess.run([sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "patchaudit", "check",
                    "--no-cache", "ok.py"], cwd=tmp_path, capture_output=True, check=True)
    assert prof.stat().st_size > 0


def test_cache_works_without_a_home(tmp_path):
    """No writable home: the key that seals the cache lives in a private folder of the
    temporary directory, and a second run is still served from the cache."""
    (tmp_path / "a.py").write_text(POSITIVE)
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "HOME")}
    env.update(HOME=str(tmp_path / "no-such-home"), TMPDIR=str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    (tmp_path / "no-such-home").write_text("a file where the home folder should be")
    code = ("from patchaudit.config.settings import Settings\nfrom patchaudit.pipeline.runner import run_check\n"
            "r = run_check(['a.py'], Settings(select=['PA101'], jobs=1))\nprint(r.cached, len(r.findings))")
    runs = [subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                           text=True, check=True).stdout.split() for _ in range(2)]
    assert runs == [["0", "1"], ["1", "1"]]
    assert list((tmp_path / "tmp").glob("patchaudit-*/cache-key"))


# --------------------------------------------------------------------------
# the whole-repository pre-pass (pipeline/repo_index.py): its gate skips no module it needs

REPO_EXAMPLES = [e for e in EXAMPLES if e[0].repository and e[2].files]


@pytest.mark.parametrize("rule,invalid,ex", [e[:3] for e in REPO_EXAMPLES], ids=[e[3] for e in REPO_EXAMPLES])
def test_repository_gate_keeps_every_cross_module_finding(rule, invalid, ex, tmp_path, no_prefilter, monkeypatch):
    """The multi-module examples with the pre-pass's export gate and the per-file pre-filter
    (widened by the repository's words) on, and with both off (every module indexed and
    summarised, every file analysed): the same findings."""
    work = tmp_path / "w"
    with_gate, _, errors = run_example(rule, ex, work)
    assert not errors
    shutil.rmtree(work)
    no_prefilter()
    monkeypatch.setattr(rule, "export_requires", classmethod(lambda cls, options: ()))
    monkeypatch.setattr(rule, "exports", classmethod(lambda cls, text, settings=None: True))
    monkeypatch.setattr(rule, "seed", classmethod(lambda cls, text, settings=None: None))
    without, _, _ = run_example(rule, ex, work)
    assert _keys(with_gate) == _keys(without)
