"""Statement pruning for local rules (patchaudit/units/prune.py, `Rule.local`).

- the findings (and errors) of the local rules are the same with pruning and
  without it, on every example of every local rule and on the whole corpus
  (tests/ with its hostile corpus, examples/, the package's sources), with
  pruning forced on every unit it can apply to (`MIN_SAVING = 0`);
- `prune` on tricky texts: the result parses with libcst, has the same lines
  (kept lines verbatim, the others empty with their own line ending), and the
  kept nodes have libcst's positions of the full text; every statement holding
  a needle is kept;
- the same, property-based, on generated programs (hypothesis profile of
  tests/conftest.py), and on a sample of the corpus's own sources.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import libcst as cst
import pytest
from hypothesis import given
from hypothesis import strategies as st
from libcst.metadata import MetadataWrapper, PositionProvider

import patchaudit.units.prune as pruning
from patchaudit.config.settings import Settings
from patchaudit.inputs.discover import PYTHON, SourceFile
from patchaudit.config.registry import all_rules
from patchaudit.pipeline.analyse import analyse_file
from patchaudit.pipeline.runner import run_check
from patchaudit.testing import all_examples, run_example
from patchaudit.units import PythonUnit
from patchaudit.units.prune import prune, split_lines

REPO = Path(__file__).resolve().parent.parent
CORPUS = [p for p in (REPO / "tests", REPO / "examples", REPO / "patchaudit", REPO / "rules") if p.exists()]
LOCAL = sorted(code for code, r in all_rules().items() if r.local)
EXAMPLES = [e for e in all_examples() if e[0].local]


@pytest.fixture
def always_prune(monkeypatch):
    """Prune every unit pruning applies to, however little it removes, and count
    the units actually pruned."""
    monkeypatch.setattr(pruning, "MIN_SAVING", 0.0)
    pruned: list[bool] = []
    real = pruning.prune

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        pruned.append(out is not None)
        return out

    monkeypatch.setattr(pruning, "prune", spy)
    return pruned


@pytest.fixture
def no_minimum(monkeypatch):
    """Prune however little pruning removes."""
    monkeypatch.setattr(pruning, "MIN_SAVING", 0.0)


def _key(f) -> str:
    d = f.to_json()
    d["context"] = list(f.context)
    return json.dumps(d, sort_keys=True)


# --------------------------------------------------------------------------
# findings: with and without pruning


def test_local_rules():
    assert "PA101" in LOCAL
    # PA104 matches the *value* of string literals (implicit concatenation,
    # escapes): a statement can set the guard without holding the needle
    assert "PA104" not in LOCAL


def test_pa104_would_lose_a_finding_if_local(tmp_path, monkeypatch, no_minimum):
    rule = all_rules()["PA104"]
    path = tmp_path / "env_setup.py"
    path.write_text('"""Turns SGLANG_MM_AVOID_RETOKENIZE off."""\nimport os\n\n\ndef helper():\n    return 1\n\n\n'
                    'def disable():\n    os.environ["SGLANG_MM_AVOID_" "RETOKENIZE"] = "0"\n')
    settings = Settings(select=["PA104"], cache=False, jobs=1)
    assert [f.line for f in analyse_file(SourceFile(str(path), PYTHON), settings, [rule]).findings] == [10]
    monkeypatch.setattr(rule, "local", True)
    assert analyse_file(SourceFile(str(path), PYTHON), settings, [rule]).findings == []


@pytest.mark.parametrize("rule,invalid,ex", [e[:3] for e in EXAMPLES], ids=[e[3] for e in EXAMPLES])
def test_examples_same_with_pruning(rule, invalid, ex, tmp_path, always_prune, monkeypatch):
    work = tmp_path / "w"      # the same folder for both runs: messages may name it
    on, _, on_errors = run_example(rule, ex, work)
    shutil.rmtree(work)
    monkeypatch.setattr(pruning, "ENABLED", False)
    off, _, off_errors = run_example(rule, ex, work)
    assert [_key(f) for f in on] == [_key(f) for f in off]
    assert [str(e) for e in on_errors] == [str(e) for e in off_errors]


def test_examples_were_pruned(tmp_path, always_prune):
    """Python files, fragments and exact-mode units of the examples went through pruning."""
    for k, (rule, _, ex, _) in enumerate(EXAMPLES):
        run_example(rule, ex, tmp_path / str(k))
    assert sum(always_prune) >= len(EXAMPLES) // 2


def test_corpus_same_with_pruning(always_prune, monkeypatch):
    settings = dict(select=LOCAL, cache=False, jobs=1)
    paths = [str(p) for p in CORPUS]
    on = run_check(paths, Settings(**settings))
    assert sum(always_prune) > 20          # the corpus really was pruned
    monkeypatch.setattr(pruning, "ENABLED", False)
    off = run_check(paths, Settings(**settings))
    assert on.files == off.files > 50
    assert on.parsed == off.parsed
    assert [_key(f) for f in on.findings] == [_key(f) for f in off.findings]
    assert [str(e) for e in on.errors] == [str(e) for e in off.errors]


LOADER_MODULE = '''\
"""A module with calls of legacy_load_mm_data at every depth."""
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from base import Base  # legacy_load_mm_data is imported nowhere


def helper(x):
    return x


class Outer(Base):
    """Docstring."""

    limit = 3

    @staticmethod
    def unrelated(a, b):
        return a + b

    class Inner:
        def run(self, text):
            out = self.legacy_load_mm_data(prompt=text)
            return out

    async def process(
        self,
        text,
        ids,
    ):
        if text:
            base = await self.legacy_load_mm_data(prompt=text, input_ids=ids)
        other = await super().legacy_load_mm_data(text, self.mm_tokens); x = 1
        # legacy_load_mm_data in a comment between statements
        return base, other, x


def free(prompt):
    s = "legacy_load_mm_data(prompt) in a string"
    return legacy_load_mm_data(prompt=prompt)


def last():
    return helper(1)
'''


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_reports_positions_and_symbols_same_with_pruning(tmp_path, monkeypatch, newline):
    rule = all_rules()["PA101"]
    path = tmp_path / "mod.py"
    path.write_bytes(LOADER_MODULE.replace("\n", newline).encode())
    settings = Settings(select=["PA101"], cache=False, jobs=1)
    on = analyse_file(SourceFile(str(path), PYTHON), settings, [rule])
    monkeypatch.setattr(pruning, "ENABLED", False)
    off = analyse_file(SourceFile(str(path), PYTHON), settings, [rule])
    assert on.parsed == off.parsed == 1
    assert [(f.line, f.column) for f in off.findings] == [(23, 19), (33, 23), (40, 12)]
    assert [_key(f) for f in on.findings] == [_key(f) for f in off.findings]
    # symbol_at answers from the stored (pruned) module as from the full one
    text = LOADER_MODULE.replace("\n", newline)
    pruned_text = prune(text, ["legacy_load_mm_data"])
    assert pruned_text is not None and pruned_text != text
    full_unit, pruned_unit = PythonUnit(path="m.py", text=text), PythonUnit(path="m.py", text=text)
    full_unit.parse()
    pruned_unit._module = cst.parse_module(pruned_text)
    kept = [i for i, line in enumerate(split_lines(pruned_text), 1) if line.strip()]
    assert len(kept) > 10
    for line in kept:
        assert pruned_unit.symbol_at(line) == full_unit.symbol_at(line), line


def test_runner_stores_the_pruned_module(tmp_path):
    from patchaudit.pipeline.results import FileResult
    from patchaudit.pipeline.run_rules import run_python_rules

    unit = PythonUnit(path="m.py", text=LOADER_MODULE)
    run_python_rules(unit, [all_rules()["PA101"]], Settings(), FileResult("m.py"))
    code = unit.parse().code
    assert code != LOADER_MODULE and len(code.splitlines()) == len(LOADER_MODULE.splitlines())
    assert "def unrelated" not in code and "def last" not in code and "class Inner" in code
    # a rule that is not local runs too: the full text
    text = LOADER_MODULE + 'os.environ["SGLANG_MM_AVOID_RETOKENIZE"] = "1"\n'
    unit = PythonUnit(path="m.py", text=text)
    run_python_rules(unit, [all_rules()["PA101"], all_rules()["PA104"]], Settings(), FileResult("m.py"))
    assert unit.parse().code == text
    # ... unless it cannot fire on the text (its pre-filter): then only the local rule runs
    unit = PythonUnit(path="m.py", text=LOADER_MODULE)
    run_python_rules(unit, [all_rules()["PA101"], all_rules()["PA104"]], Settings(), FileResult("m.py"))
    assert unit.parse().code != LOADER_MODULE


# --------------------------------------------------------------------------
# prune itself

#: nodes whose range pruning never changes when they are kept (a class/def's
#: range ends with its body, which pruning shortens: compared by start and name)
_KINDS = (cst.BaseExpression, cst.BaseSmallStatement, cst.SimpleStatementLine, cst.BaseCompoundStatement,
          cst.Arg, cst.Param, cst.Decorator)


def _nodes(text: str, needle: str = "NEEDLE"):
    """(module, Counter of node keys, Counter of the positions of names and strings
    holding `needle`) of libcst's parse of `text`."""
    module = cst.parse_module(text)
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    out: Counter = Counter()
    needles: Counter = Counter()
    for node, r in positions.items():
        start, end = (r.start.line, r.start.column), (r.end.line, r.end.column)
        if isinstance(node, (cst.ClassDef, cst.FunctionDef)):
            out[(type(node).__name__, start, node.name.value)] += 1
        elif isinstance(node, _KINDS):
            out[(type(node).__name__, start, end)] += 1
        if isinstance(node, (cst.Name, cst.SimpleString)) and needle in node.value:
            needles[(start, end)] += 1
    return module, out, needles


def _line_breaks(text: str) -> list[str]:
    return re.findall(r"\r\n|\r|\n", text)


def check_pruned(text: str, needles=("NEEDLE",)) -> str:
    """prune(text) is a text of the same lines, libcst parses it, and its nodes are
    at their places in `text`; every code occurrence of the needle is kept."""
    out = prune(text, needles)
    assert out is not None
    assert _line_breaks(out) == _line_breaks(text)
    for old, new in zip(split_lines(text), split_lines(out)):
        assert new == old or new == old[len(old.rstrip("\r\n")):], (old, new)
    full, full_nodes, full_needles = _nodes(text)
    module, nodes, kept_needles = _nodes(out)
    if full.code == text:    # libcst drops a form feed before a statement at column 0
        # ... and the last line ending of a file with "\r" newlines
        assert module.code == out or out.endswith("\r") and module.code == out[:-1]
    assert not nodes - full_nodes, "a kept node moved"
    assert kept_needles == full_needles, "a needle in code was pruned"
    return out


def _kept(out: str) -> list[str]:
    return [line.strip() for line in split_lines(out) if line.strip()]


def test_prune_descends_into_classes_and_defs(no_minimum):
    text = (
        '"""Module docstring."""\n'
        "import os\n"
        "\n"
        "@decorate(\n"
        "    arg=1,\n"
        ")\n"
        "class A(\n"
        "    Base,\n"
        "):\n"
        "    '''Doc.'''\n"
        "    # a comment before the first method\n"
        "    x = 1\n"
        "\n"
        "    class Nested:\n"
        "        y = 2\n"
        "\n"
        "        def f(self):\n"
        "            return NEEDLE(self)\n"
        "\n"
        "    def g(self):\n"
        "        return 2\n"
        "\n"
        "z = 3\n"
    )
    assert _kept(check_pruned(text)) == ["@decorate(", "arg=1,", ")", "class A(", "Base,", "):", "class Nested:",
                                         "def f(self):", "return NEEDLE(self)"]


def test_prune_keeps_compound_statements_whole(no_minimum):
    text = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from a import NEEDLE\n"
        "    from b import other\n"
        "else:\n"
        "    pass\n"
        "for i in range(3):\n"
        "    print(i)\n"
        "try:\n"
        "    run()\n"
        "except E:\n"
        "    NEEDLE()\n"
        "finally:\n"
        "    done()\n"
        "while False:\n"
        "    pass\n"
    )
    kept = _kept(check_pruned(text))
    assert kept == ["if TYPE_CHECKING:", "from a import NEEDLE", "from b import other", "else:", "pass",
                    "try:", "run()", "except E:", "NEEDLE()", "finally:", "done()"]


def test_prune_keeps_a_definition_whole_when_its_header_holds_the_needle(no_minimum):
    text = (
        "x = 0\n"
        "class NEEDLE(Base):\n"
        "    a = 1\n"
        "    def f(self):\n"
        "        return 1\n"
        "@NEEDLE\n"
        "def g():\n"
        "    return 2\n"
        "def h(a=NEEDLE):\n"
        "    return 3\n"
        "y = 1\n"
    )
    kept = _kept(check_pruned(text))
    assert kept == ["class NEEDLE(Base):", "a = 1", "def f(self):", "return 1", "@NEEDLE", "def g():",
                    "return 2", "def h(a=NEEDLE):", "return 3"]


def test_prune_logical_lines(no_minimum):
    text = (
        "a = 1; NEEDLE()\n"
        "b = 2\n"
        "c = 3 \\\n"
        "; d = NEEDLE\n"
        "e = (4 +\n"
        "     5); f = NEEDLE\n"
        "g = 6; h = 7  # NEEDLE in the comment of a statement line\n"
        "i = 8 + \\\n"
        "    NEEDLE\n"
        "j = 9\n"
        "é = 'ü'; k = NEEDLE\n"
        "class K: m = 1; n = NEEDLE\n"
        "def one_line(): return NEEDLE\n"
        "def continued(): \\\n"
        "    return NEEDLE\n"
        "l = 10\n"
    )
    kept = _kept(check_pruned(text))
    assert "b = 2" not in kept and "j = 9" not in kept and "l = 10" not in kept
    for line in ("a = 1; NEEDLE()", "c = 3 \\", "; d = NEEDLE", "e = (4 +", "5); f = NEEDLE",
                 "g = 6; h = 7  # NEEDLE in the comment of a statement line", "i = 8 + \\", "NEEDLE",
                 "é = 'ü'; k = NEEDLE", "class K: m = 1; n = NEEDLE", "def one_line(): return NEEDLE",
                 "def continued(): \\", "return NEEDLE"):
        assert line in kept, line


def test_prune_strings_and_docstrings(no_minimum):
    text = (
        'x = """first\n'
        "NEEDLE inside a multi-line string\n"
        'last"""\n'
        "y = '''other\n"
        "string'''\n"
        "def f():\n"
        '    """Docstring that names NEEDLE."""\n'
        "    return 1\n"
        "def g():\n"
        '    """Docstring\n'
        "    over lines.\n"
        '    """\n'
        "    return 'NEEDLE'\n"
        "def h():\n"
        "    return 2\n"
    )
    kept = _kept(check_pruned(text))
    assert kept == ['x = """first', "NEEDLE inside a multi-line string", 'last"""', "def f():",
                    '"""Docstring that names NEEDLE."""', "def g():", "return 'NEEDLE'"]


def test_prune_comments(no_minimum):
    # a comment inside a statement's lines keeps the statement; in a body between
    # statements it keeps the definition whole (no body statement holds it)
    text = (
        "def f():\n"
        "    a = 1\n"
        "    # NEEDLE in a comment of the body\n"
        "    return a\n"
        "x = [\n"
        "    1,  # NEEDLE inside brackets\n"
        "]\n"
        "def g():\n"
        "    return 2\n"
    )
    kept = _kept(check_pruned(text))
    assert kept == ["def f():", "a = 1", "# NEEDLE in a comment of the body", "return a", "x = [",
                    "1,  # NEEDLE inside brackets", "]"]
    # a comment outside every statement keeps nothing
    assert prune("x = 1\n# NEEDLE\ny = 2\n", ["NEEDLE"]) is None


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_prune_other_newlines(no_minimum, newline):
    text = ("x = 1\n"
            "class A:\n"
            "    def f(self):\n"
            "        pass\n"
            "    def g(self):\n"
            "        return NEEDLE(\n"
            "            1)\n"
            "s = '''a\n"
            "b'''\n").replace("\n", newline)
    out = check_pruned(text)
    assert out.split(newline) == ["", "class A:", "", "", "    def g(self):", "        return NEEDLE(",
                                  "            1)", "", "", ""]


def test_prune_form_feeds(no_minimum):
    text = ("x = 1\n"
            "\x0c\n"
            "\x0cclass A:\n"
            "    y = 2\n"
            "\x0c\n"
            "    def f(self):\n"
            "        return NEEDLE\n"
            "\x0cz = 3\n")
    kept = _kept(check_pruned(text))
    assert kept == ["class A:", "def f(self):", "return NEEDLE"]


def test_prune_async_and_decorated_methods(no_minimum):
    text = ("class P(Base):\n"
            "    @property\n"
            "    def a(self):\n"
            "        return 1\n"
            "\n"
            "    @decorator(\n"
            "        1,\n"
            "    )\n"
            "    async def b(\n"
            "        self,\n"
            "    ) -> None:  # comment on the header\n"
            "        x = 1\n"
            "        await self.NEEDLE(x)\n"
            "        async with c:\n"
            "            pass\n")
    kept = _kept(check_pruned(text))
    assert kept == ["class P(Base):", "@decorator(", "1,", ")", "async def b(", "self,",
                    ") -> None:  # comment on the header", "await self.NEEDLE(x)"]


def test_prune_returns_none():
    text = "def f():\n    return NEEDLE\n" + "x = 1\n"
    assert prune(text, ["NEEDLE"]) is None                     # removes less than a quarter
    assert prune(text + "y = 2\n" * 20, ["NEEDLE"]) is not None
    assert prune(text, []) is None and prune(text, [""]) is None
    assert prune("x = 1\n" * 20, ["NEEDLE"]) is None           # no needle
    assert prune("def f(:\n    NEEDLE\n" + "x = 1\n" * 20, ["NEEDLE"]) is None   # SyntaxError
    assert prune("NEEDLE = 1\x00\n" + "x = 1\n" * 20, ["NEEDLE"]) is None       # NUL: ValueError
    deep = "x = " + "(" * 300 + "NEEDLE" + ")" * 300 + "\n" + "y = 1\n" * 20
    assert prune(deep, ["NEEDLE"]) is None                     # too deep for ast


def test_prune_uses_a_given_tree(no_minimum):
    text = "x = 1\ndef f():\n    return NEEDLE\n"
    assert prune(text, ["NEEDLE"], tree=ast.parse(text)) == prune(text, ["NEEDLE"]) == \
        "\ndef f():\n    return NEEDLE\n"


# --------------------------------------------------------------------------
# property: generated programs


def _render(item, indent: int) -> list[str]:
    kind, payload = item
    pad = " " * indent
    if kind == "lines":
        return [pad + l if l else l for l in payload]
    header, body, tail = payload
    out = [pad + l for l in header]
    for part in body:
        out += _render(part, indent + 4)
    for extra_header, extra_body in tail:
        out.append(pad + extra_header)
        for part in extra_body:
            out += _render(part, indent + 4)
    return out


SIMPLE = [
    ["x = 1"], ["call(a, b)"], ["NEEDLE(x)"], ["out = self.NEEDLE(p=1)"], ["v = 'has NEEDLE inside'"],
    ["t = (1,", "     2)"], ['s = """a', "NEEDLE b", 'c"""'], ["a = 1; NEEDLE()"], ["b = 2 + \\", "    3"],
    ["c = 3 \\", "; d = NEEDLE"], ["pass"], ['"""docstring"""'], ["y = 1  # NEEDLE in a trailing comment"],
    ["é = 'ü'; w = NEEDLE"], ["return NEEDLE"], ["z = [", "    NEEDLE,", "]"], ["k = 1;"],
]
COMMENTS = [["# NEEDLE in a comment"], ["# plain comment"], [""]]
HEADERS = [
    ["class C(Base):"], ["@dec", "class C:"], ["class C(", "    Base,", "):"], ["class NEEDLE:"],
    ["def f(self):"], ["async def f(self, a=NEEDLE):"], ["@decorator(1)", "@other", "def f(", "    self,", ") -> int:"],
    ["def f(): \\"], ["if TYPE_CHECKING:"], ["for i in range(3):"], ["with ctx() as c:"], ["while cond:"],
]
TAILS = {"if TYPE_CHECKING:": ["else:"], "for i in range(3):": ["else:"]}
ONE_LINE = [["def g(): return NEEDLE"], ["class D: x = 1; y = NEEDLE"], ["if a: pass"]]


def _items(depth: int):
    simple = st.sampled_from(SIMPLE).map(lambda l: ("lines", l))
    comment = st.sampled_from(COMMENTS).map(lambda l: ("lines", l))
    one_line = st.sampled_from(ONE_LINE).map(lambda l: ("lines", l))
    if depth == 0:
        return st.one_of(simple, one_line)
    inner = _items(depth - 1)

    def body():
        return st.tuples(st.lists(comment, max_size=1), st.lists(inner, min_size=1, max_size=3)).map(
            lambda t: t[0] + t[1])

    def compound(header):
        if header == ["def f(): \\"]:     # a body on the header's logical line: one simple statement
            return st.sampled_from([["    return 1"], ["    x = NEEDLE"]]).map(
                lambda b: ("lines", header + b))
        tails = TAILS.get(header[-1], [])
        return st.tuples(body(), st.lists(body(), max_size=len(tails))).map(
            lambda t: ("compound", (header, t[0], list(zip(tails, t[1])))))

    compounds = st.sampled_from(HEADERS).flatmap(compound)
    return st.one_of(simple, one_line, compounds, compounds)


PROGRAMS = st.tuples(
    st.lists(st.one_of(_items(2), st.sampled_from(COMMENTS + [["\x0c"]]).map(lambda l: ("lines", l))),
             min_size=1, max_size=8),
    st.sampled_from(["\n", "\r\n", "\r"]),
    st.booleans(),
)


@given(PROGRAMS)
def test_prune_property(program):
    items, newline, final = program
    lines = [l for item in items for l in _render(item, 0)]
    text = newline.join(lines) + (newline if final else "")
    tree = ast.parse(text)           # the generator writes valid Python (and libcst parses it)
    physical = split_lines(text)
    holds = any("NEEDLE" in line for s in tree.body
                for line in physical[min([s.lineno] + [d.lineno for d in getattr(s, "decorator_list", ())]) - 1:
                                     s.end_lineno])
    old = pruning.MIN_SAVING
    pruning.MIN_SAVING = 0.0      # (hypothesis runs the test many times per fixture: no monkeypatch)
    try:
        if holds:
            check_pruned(text)
        else:
            assert prune(text, ["NEEDLE"]) is None
    finally:
        pruning.MIN_SAVING = old


# --------------------------------------------------------------------------
# the corpus's own sources, with a needle of each


def _corpus_sources():
    files = sorted(p for root in CORPUS for p in root.rglob("*.py"))
    return [p for p in files if p.stat().st_size < 30_000][::4]


@pytest.mark.parametrize("path", _corpus_sources(), ids=lambda p: str(p.relative_to(REPO)))
def test_prune_corpus_sources(path, no_minimum):
    try:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
    except (UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
        pytest.skip("ast cannot parse it")
    # a name used deep in the file: the callee of its last call
    names = [n.func.attr if isinstance(n.func, ast.Attribute) else n.func.id for n in ast.walk(tree)
             if isinstance(n, ast.Call) and isinstance(n.func, (ast.Attribute, ast.Name))]
    if not names:
        pytest.skip("no call")
    out = prune(text, [names[-1]])
    if out is None:
        return
    assert _line_breaks(out) == _line_breaks(text)
    full, full_nodes, full_needles = _nodes(text, names[-1])
    module, nodes, kept_needles = _nodes(out, names[-1])
    assert module.code == out
    assert not nodes - full_nodes, "a kept node moved"
    assert kept_needles == full_needles, "a needle in code was pruned"
