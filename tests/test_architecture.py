"""The layer order of docs/architecture.md, the size limits, and private names.

Each check runs on the real tree, and once on a small tree built here that breaks
it (a test of the test): an import against the order inside a function, one under
TYPE_CHECKING, a cycle, an oversized function, a private name imported."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import architecture as A


def test_every_module_has_a_layer():
    for module in A.module_files():
        A.layer_of(module)   # KeyError names a module no layer holds


def test_no_import_against_the_layer_order():
    assert A.layer_violations(A.all_edges()) == []


def test_no_import_cycle_between_modules():
    assert A.cycles(A.all_edges()) == []


def test_no_private_name_crosses_a_module():
    assert A.private_imports() == []


def test_modules_and_functions_within_the_size_limits():
    assert A.size_violations() == []


def test_docs_list_every_layer():
    text = (A.REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    for name, prefixes in A.LAYERS:
        for prefix in prefixes:
            assert f"`{prefix}`" in text, f"docs/architecture.md does not name the {name} layer's {prefix}"


# ---------------------------------------------------------------------------
# the tests of the tests: a tree that breaks each rule


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    for pkg in ("patchaudit", "rules"):
        (tmp_path / pkg).mkdir(exist_ok=True)
        (tmp_path / pkg / "__init__.py").touch()
    return tmp_path


BAD = {
    "patchaudit/model/__init__.py": "",
    "patchaudit/model/findings.py": """
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from patchaudit.pipeline.runner import analyse_file
        def late():
            from patchaudit.cli import main
            import importlib
            importlib.import_module("patchaudit.reporters.text")
        """,
    "patchaudit/pipeline/__init__.py": "",
    "patchaudit/pipeline/runner.py": "from patchaudit.pipeline import cache\nfrom patchaudit.model.findings import _x\n",
    "patchaudit/pipeline/cache.py": "from patchaudit.pipeline import runner\nrunner._hidden\n",
    "patchaudit/cli.py": "",
    "patchaudit/reporters/__init__.py": "",
    "patchaudit/reporters/text.py": "def f():\n" + "    x = 1\n" * 80,
}


def test_the_layer_test_sees_imports_in_functions_type_checking_and_import_module(tmp_path):
    root = _tree(tmp_path, BAD)
    found = A.layer_violations(A.all_edges(root))
    assert any("findings:4 (model) imports patchaudit.pipeline.runner" in f for f in found), found
    assert any("findings:6 (model) imports patchaudit.cli" in f for f in found), found
    assert any("findings:8 (model) imports patchaudit.reporters.text" in f for f in found), found


def test_the_layer_test_fails_on_an_added_edge():
    real = A.all_edges()
    edges = real + [A.Edge("patchaudit.model.findings", "patchaudit.commands.check", 1)]
    assert [v for v in A.layer_violations(edges) if v not in A.layer_violations(real)] == [
        "patchaudit.model.findings:1 (model) imports patchaudit.commands.check (commands), a higher layer"]


def test_the_cycle_test_finds_a_cycle(tmp_path):
    root = _tree(tmp_path, BAD)
    assert any({"patchaudit.pipeline.cache", "patchaudit.pipeline.runner"} <= set(c)
               for c in A.cycles(A.all_edges(root)))
    edges = A.all_edges() + [A.Edge("patchaudit.model", "patchaudit.model.findings", 1),
                             A.Edge("patchaudit.model.findings", "patchaudit.model", 1)]
    assert any({"patchaudit.model", "patchaudit.model.findings"} <= set(c) for c in A.cycles(edges))


def test_the_private_name_test_finds_both_spellings(tmp_path):
    root = _tree(tmp_path, BAD)
    found = A.private_imports(root)
    assert "patchaudit.pipeline.runner:2 imports the private name _x from patchaudit.model.findings" in found
    assert "patchaudit.pipeline.cache:2 uses the private name runner._hidden" in found


def test_the_size_test_counts_functions_and_modules(tmp_path):
    root = _tree(tmp_path, BAD)
    assert A.size_violations(root) == ["patchaudit/reporters/text.py:1 f: 81 lines (limit 80)"]
    (root / "patchaudit" / "big.py").write_text("x = 1\n" * 601)
    assert "patchaudit/big.py: 601 lines (limit 600)" in A.size_violations(root)


def test_a_rule_file_counts_code_not_its_docs_and_examples(tmp_path):
    doc = '"""' + "docs\n" * 700 + '"""\n'
    root = _tree(tmp_path, {"rules/pa999_x.py": doc + "x = 1\n"})
    assert A.size_violations(root) == []
    (root / "patchaudit" / "not_a_rule.py").write_text(doc)
    assert A.size_violations(root) == ["patchaudit/not_a_rule.py: 701 lines (limit 600)"]


@pytest.mark.parametrize("module", ["patchaudit.model.findings", "patchaudit.rules.pa101_x", "patchaudit.cli"])
def test_layer_of_known_modules(module):
    assert A.layer_of(module) is not None
