"""The quick pass of the dataflow gate (patchaudit/analysis/gate.py) is a superset of the
`ast` facts it spares: every call name, every receiver and every word the `ast` facts hold
of a text, the quick pass finds in it too (else a rule would reject, without a parse, a
file its `ast` gate keeps).  Checked on every rule example and on the whole corpus, and on
the shapes the text reading must get right.  The regular expressions of the pre-filters
run in linear time on comment runs (a hostile file must not stall the scan)."""

from __future__ import annotations

import ast
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from patchaudit.analysis import gate
from patchaudit.analysis.gate import UNKNOWN, call_receivers, called_names, quick_text
from patchaudit.config.registry import all_rules
from patchaudit.testing import all_examples

REPO = Path(__file__).resolve().parent.parent
CORPUS = [p for p in (REPO / "tests", REPO / "examples", REPO / "patchaudit", REPO / "rules") if p.exists()]


def _texts() -> list[tuple[str, str]]:
    out = []
    for root in CORPUS:
        for p in sorted(root.rglob("*.py")):
            try:
                out.append((str(p), p.read_text(encoding="utf-8")))
            except (UnicodeDecodeError, OSError):
                continue
    for _rule, _invalid, ex, name in all_examples():
        if ex.kind != "python":
            continue
        out.append((name, textwrap.dedent(ex.code)))
        for fname, code in (ex.files or {}).items():
            if fname.endswith(".py"):
                out.append((f"{name}:{fname}", textwrap.dedent(code)))
    return out


TEXTS = _texts()


def _superset_errors(text: str) -> list[str]:
    tree = gate.parse(text)
    if tree is None:
        return []
    facts = gate.Facts(text, tree)
    q = quick_text(text)
    errors = []
    for c in facts.calls:
        if c.name and c.name not in called_names(q, [c.name]):
            errors.append(f"call {c.name!r} not seen")
        if c.name and c.receiver is not None:
            got = call_receivers(q, [c.name])
            if c.receiver not in got and UNKNOWN not in got:
                errors.append(f"receiver {c.receiver!r} of .{c.name}() not seen (saw {sorted(map(str, got))})")
            if c.receiver not in called_names(q, [c.receiver], receivers=True):
                errors.append(f"receiver {c.receiver!r} not seen as one")
    for name in facts.names:
        if name not in q:
            errors.append(f"name {name!r} not in the text")
    return errors


def test_corpus_is_large():
    assert len(TEXTS) > 300


@pytest.mark.parametrize("chunk", range(4))
def test_quick_pass_is_a_superset_on_the_corpus(chunk):
    bad = {}
    for name, text in TEXTS[chunk::4]:
        errors = _superset_errors(text)
        if errors:
            bad[name] = errors[:3]
    assert not bad


@pytest.mark.parametrize(
    "code,method,want",
    [
        ("x = self.tok.decode(a)", "decode", {"tok"}),
        ('y = "ab".decode()', "decode", {None}),
        ("z = tokenizer(x).decode(y)", "decode", {"tokenizer"}),
        ("w = f(a)[0].decode()", "decode", {None}),
        ("if (q).decode():\n    pass", "decode", {UNKNOWN}),   # a keyword before the parenthesis
        ("v = (a\n     .decode(x))", "decode", {UNKNOWN}),      # a line break: a comment may stand there
        ("v = (a  # note\n     .decode(x))", "decode", {UNKNOWN}),
        ("u = tok.decode  (x)", "decode", {"tok"}),
        ("u = f(tok.decode  # why\n    (ids))", "decode", {"tok"}),
        ("u = (tok.  # why\n    decode(ids))", "decode", {"tok"}),
        ("u = tok.\\\n decode(x)", "decode", {"tok"}),
        ("u = tok.decoder(x)", "decode", set()),
        ("u = g()(x).decode(y)", "decode", {UNKNOWN}),
    ],
)
def test_call_receivers(code, method, want):
    assert call_receivers(code, [method]) == want
    tree = ast.parse(code)
    ast_receivers = {c.receiver for c in gate.Facts(code, tree).calls if c.name == method}
    assert ast_receivers <= want or UNKNOWN in want


def test_called_names():
    code = "a = get_tokenizer(x)\nb = self.my_tokenizer_x (a)\nc = tokenizer\nd = tokenizer.encode(a)\n"
    assert called_names(code, ["tokenizer"]) == {"get_tokenizer", "my_tokenizer_x"}
    assert called_names(code, ["tokenizer"], receivers=True) == {"get_tokenizer", "my_tokenizer_x", "tokenizer"}


def test_non_ascii_identifiers_are_read_as_ast_reads_them():
    code = "ｔｏｋｅｎｉｚｅｒ.decode(x)\n"  # fullwidth: ast names it "tokenizer"
    assert {c.receiver for c in gate.Facts(code, ast.parse(code)).calls} == {"tokenizer"}
    assert call_receivers(quick_text(code), ["decode"]) == {"tokenizer"}


@pytest.fixture
def deadline():
    """A hang becomes a failure (a bound on backtracking, not a speed measurement)."""

    def boom(*_):
        raise TimeoutError("the pattern backtracks without bound")

    if sys.platform == "win32":  # pragma: no cover
        pytest.skip("SIGALRM")
    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_prefilter_patterns_do_not_backtrack_on_comment_runs(deadline):
    """A run of `#` after a `(` or a callee once made the PA103 pre-filter's patterns try
    every way to cut it into comments (exponential in the run's length)."""
    rule = all_rules()["PA103"]
    hostile = "x = f(" + "#" * 60 + "\ny = decode " + "#" * 60 + "\n"
    text = "tokens\n" + hostile + "from tokenizer import decode\n"
    assert rule.can_match(text) in (True, False)
    mod = sys.modules[rule.__module__]
    names = ("tokens", "response_ids")
    assert mod.has_field(names, hostile + ".tokens") is True
    assert mod.has_field(names, hostile) is False
    assert mod.has_call(("decode",), hostile) is False
    from patchaudit.analysis.turn_syntax import calls_one_of

    assert calls_one_of(hostile, ["decode"]) is False
    assert calls_one_of(hostile + "decode  # why\n (x)", ["decode"]) is True


@pytest.mark.parametrize(
    "code,want",
    [
        ("s.tokens", True),
        ("x['tokens']", True),
        ("f(a, tokens=b)", True),
        ("f(a,\n  # the ids\n  tokens=b)", True),
        ("tokens = b", False),
        ("f(number_of_tokens=3)", False),
        ("f(a, tokens == b)", False),
        ("# f(a, tokens=b) in a comment line\n", True),
    ],
)
def test_has_field_is_the_field_pattern(code, want):
    mod = sys.modules[all_rules()["PA103"].__module__]
    names = ("tokens", "response_ids")
    assert (mod._field_re(names).search(code) is not None) == want
    assert mod.has_field(names, code) == want
