"""A Python rule that reads no libcst tree (`Rule.reads_tree = False`, PA204) runs from
`check_python` on a unit libcst never parses, and otherwise as the others do: not on a
text that does not parse (the error is the file's, as for every rule), on a text only
libcst reads (a byte order mark), and a crash is the rule's own error."""

from __future__ import annotations

from patchaudit.config.settings import Settings
from patchaudit.lint.rule import Rule
from patchaudit.pipeline import run_rules
from patchaudit.pipeline.results import FileResult
from patchaudit.units import PythonUnit

CALLS: list[str] = []


class Treeless(Rule):
    code = "PA999"
    name = "treeless-test-rule"
    reads_tree = False

    def check_python(self) -> None:
        CALLS.append(self.unit.text)
        if "boom" in self.unit.text:
            raise RuntimeError("boom")
        self.report_at(1, 0, 1, 1, "seen")


def _run(text: str, monkeypatch) -> tuple[list, FileResult]:
    import libcst

    parses: list[int] = []
    real = libcst.parse_module
    monkeypatch.setattr(libcst, "parse_module", lambda *a, **k: parses.append(1) or real(*a, **k))
    CALLS.clear()
    result = FileResult("m.py")
    unit = PythonUnit(path="m.py", text=text)
    found = run_rules.run_python_rules(unit, [Treeless], Settings(cache=False), result)
    return found + [("parses", len(parses))], result


def test_runs_without_a_libcst_parse(monkeypatch):
    found, result = _run("x = 1\n", monkeypatch)
    assert [f.code for f in found[:-1]] == ["PA999"] and found[-1] == ("parses", 0)
    assert CALLS == ["x = 1\n"] and not result.errors


def test_not_on_a_text_that_does_not_parse(monkeypatch):
    found, result = _run("def f(:\n", monkeypatch)
    assert found[:-1] == [] and CALLS == []
    assert [e.message for e in result.errors] and "cannot parse Python" in result.errors[0].message


def test_on_a_text_only_libcst_reads(monkeypatch):
    found, result = _run("\ufeffx = 1\n", monkeypatch)
    assert [f.code for f in found[:-1]] == ["PA999"] and found[-1] == ("parses", 1)
    assert not result.errors


def test_a_crash_is_the_rules_error(monkeypatch):
    found, result = _run("boom = 1\n", monkeypatch)
    assert found[:-1] == []
    assert ["rule PA999 crashed" in e.message for e in result.errors] == [True]
