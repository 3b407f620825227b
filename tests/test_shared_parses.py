"""What the whole-repository pre-pass parses, the scan does not parse again: the gate's
`ast` facts (analysis/gate.py `_pin`, `pinned`, `adopt`), the `ast` tree the dataflow
rules read (inputs/pyast.py), and the gate's walk (inputs/pyast.py `walk`); and the
dataflow rules parse nothing with libcst.  Each test counts parses; the findings are the
same either way.  Every tree here is written by the test."""

from __future__ import annotations

import ast
import collections
import pickle
import textwrap
from pathlib import Path

import pytest

from patchaudit.analysis import gate
from patchaudit.config.settings import Settings
from patchaudit.inputs import pyast
from patchaudit.pipeline import repo_entries as entries
from patchaudit.pipeline.runner import run_check
from patchaudit.testing import all_examples

REPO = Path(__file__).resolve().parent.parent

# a dataset module both dataflow rules read: PA102 summarises it (its return carries
# processor ids), PA103 runs on it (it decodes the ids and encodes the text again)
DATASET = """\
def prompt_ids(processor, row):
    return processor(text=row["text"], images=row["images"])["input_ids"][0].tolist()


def reencoded(tokenizer, ids):
    text = tokenizer.decode(ids)
    return tokenizer.encode(text)
"""

ROLLOUT = """\
from rl.dataset import prompt_ids


async def generate(url, processor, row):
    ids = prompt_ids(processor, row)
    payload = {"input_ids": ids, "image_data": row["images"]}
    return await post(url, payload)
"""


def _tree(root: Path) -> None:
    files = {
        "pyproject.toml": "[project]\nname = 'rl'\n",
        "rl/__init__.py": "",
        "rl/dataset.py": DATASET,
        "rl/rollout.py": ROLLOUT,
    }
    for rel, code in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(code), encoding="utf-8")


def _keys(findings) -> list:
    return [(f.code, f.path, f.line, f.message, [(s.path, s.line) for s in f.trace]) for f in findings]


def _run() -> list:
    for memo in (gate._CACHE, gate._FUNCTIONS, gate._TREES):
        memo.clear()  # as in a repository of more files than these few-text memos hold
    res = run_check(["rl"], Settings(select=["PA102", "PA103"], cache=False, jobs=1))
    assert not res.errors
    assert sorted(f.code for f in res.findings) == ["PA102", "PA103"], [f.to_json() for f in res.findings]
    return _keys(res.findings)


def _count(monkeypatch, module, name: str) -> collections.Counter:
    """Calls of `module.name`, by the first line of the text parsed."""
    seen: collections.Counter = collections.Counter()
    real = getattr(module, name)

    def counting(text, *a, **k):
        seen[text.split("\n", 1)[0]] += 1
        return real(text, *a, **k)

    monkeypatch.setattr(module, name, counting)
    return seen


def test_the_scan_reuses_the_gate_facts_of_the_prepass(tmp_path, monkeypatch):
    _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(gate, "_CACHE_SIZE", 1)  # the pre-pass gates the rollout after it
    parses = _count(monkeypatch, pyast, "parse_uncached")
    shared = _run()
    dataset = DATASET.split("\n", 1)[0]
    assert parses[dataset] == 1  # gated by the pre-pass; its tree serves PA102's and PA103's interpreter
    parses.clear()
    monkeypatch.setattr(gate, "PIN_CHARS", 0)
    monkeypatch.setattr(pyast, "_CACHE_SIZE", 0)
    monkeypatch.setattr(pyast, "_CACHE_CHARS", 0)
    pyast._CACHE.clear()
    assert _run() == shared
    assert parses[dataset] > 1  # without the kept facts and trees the scan parses it again


def test_the_dataflow_rules_parse_nothing_with_libcst(tmp_path, monkeypatch):
    import libcst

    _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    parses = _count(monkeypatch, libcst, "parse_module")
    _run()
    assert not parses  # the interpreter reads `ast` (analysis/flow_nodes.py maps its columns)


def test_a_run_starts_without_the_last_runs_facts(tmp_path, monkeypatch):
    import patchaudit.pipeline.parallel as parallel

    _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    gate.adopt("stale = 1\n", None)
    at_scan: list = []
    real_scan = parallel.scan  # the runner imports it when it runs

    def scanning(*a, **k):
        at_scan.append(("stale = 1\n" in gate._PINNED, bool(gate._PINNED)))
        return real_scan(*a, **k)

    monkeypatch.setattr(parallel, "scan", scanning)
    _run()
    assert at_scan == [(False, True)]  # the last run's gone, this run's kept for its scan
    assert not gate._PINNED  # and what it kept is dropped after its scan


def test_a_workers_facts_are_the_facts_here():
    """The pre-pass's gate workers send their facts back pickled: without the text and
    the annotations' nodes, with the annotations' parts already read."""
    text = textwrap.dedent(
        """\
        import a.b as c
        def f(proc: "AutoProcessor | None", *, tok: Tokenizer[int] = None) -> int:
            x = proc(text=tok.decode(ids))["input_ids"]
            return obj.m(key="a.b")
        """
    )
    here = gate.Facts(text, ast.parse(text))
    back = pickle.loads(pickle.dumps(gate.Facts(text, ast.parse(text))))
    assert back.text == "" and back._annotations == []
    back.text = text  # as `adopt` sets it
    assert back.names == here.names and back.strings == here.strings
    assert [(c.name, c.receiver, c.dotted) for c in back.calls] == [(c.name, c.receiver, c.dotted) for c in here.calls]
    assert back.annotation_parts() == here.annotation_parts() and "AutoProcessor" in here.annotation_parts()


def test_the_prepass_gates_in_workers_and_the_findings_stay(tmp_path, monkeypatch):
    _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    one = _run()
    adopted = []
    real = gate.adopt

    def adopting(text, got):
        adopted.append(got)
        real(text, got)

    monkeypatch.setattr(gate, "adopt", adopting)
    monkeypatch.setattr(entries, "GATE_MIN_BYTES", 0)
    two = run_check(["rl"], Settings(select=["PA102", "PA103"], cache=False, jobs=2, jobs_forced=True))
    assert not two.errors and _keys(two.findings) == one
    assert any(f is not None and "processor" in f.names for f in adopted)  # the workers' facts came back


_LEAVES = (ast.expr_context, ast.operator, ast.unaryop, ast.boolop, ast.cmpop)


def _texts() -> list[str]:
    out = [p.read_text(encoding="utf-8") for p in sorted((REPO / "patchaudit").rglob("*.py"))]
    for _, _, ex, _ in all_examples():
        out.append(textwrap.dedent(ex.code) if isinstance(ex.code, str) else "")
    return [t for t in out if t]


@pytest.mark.parametrize("chunk", range(4))
def test_walk_is_ast_walk_without_the_leaves(chunk):
    """The same nodes in the same order as `ast.walk`, less the context and operator
    leaves (which no pre-filter looks at)."""
    texts = _texts()[chunk::4]
    assert texts
    for text in texts:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        want = [n for n in ast.walk(tree) if not isinstance(n, _LEAVES)]
        assert list(pyast.walk(tree)) == want


@pytest.mark.parametrize("chunk", range(2))
def test_children_are_iter_child_nodes_without_the_leaves(chunk):
    """`pyast.children` gives `ast.iter_child_nodes` in its order, less the leaves, so
    `symbols.calls_in` (which walks with it) yields the calls in the order it always did."""
    from patchaudit.engine.symbols import calls_in

    for text in _texts()[chunk::2]:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        calls = []
        for node in ast.walk(tree):
            want = [n for n in ast.iter_child_nodes(node) if not isinstance(n, _LEAVES)]
            assert pyast.children(node) == want
            calls += [n for n in want if isinstance(n, ast.Call)]
        assert sorted(map(id, (c for c, _, _ in calls_in(tree)))) == sorted(map(id, calls))
