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


# ---------------------------------------------------------------------------
# the "may not" column: each check passes on the real tree and fails on a temporary
# copy of it with one violation planted


def test_no_finding_or_report_built_below_the_driver():
    assert A.finding_builders() == []


def test_analysis_does_no_io():
    assert A.analysis_io() == []


def test_no_rule_code_literal_outside_the_rule_pack():
    assert A.rule_code_literals() == []


def _copy(tmp_path: Path) -> Path:
    import shutil

    for top in ("patchaudit", "rules"):
        shutil.copytree(A.REPO / top, tmp_path / top, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def _plant(root: Path, rel: str, code: str) -> None:
    path = root / rel
    path.write_text(path.read_text(encoding="utf-8") + "\n\n" + textwrap.dedent(code), encoding="utf-8")


@pytest.mark.parametrize(
    "rel, code, expect",
    [
        ("patchaudit/units/fragments.py",
         "def planted(rep):\n    from patchaudit.model.findings import Finding\n    return Finding(code='X')\n",
         "patchaudit.units.fragments:"),
        ("patchaudit/analysis/names.py",
         "def planted():\n    from patchaudit.model import findings\n    return findings.Report(1, 0, 1, 0, 'm')\n",
         "builds a Report"),
    ],
)
def test_the_builder_check_finds_a_finding_built_below_the_driver(tmp_path, rel, code, expect):
    root = _copy(tmp_path)
    assert A.finding_builders(root) == []
    _plant(root, rel, code)
    assert any(expect in v for v in A.finding_builders(root))


@pytest.mark.parametrize(
    "code, expect",
    [
        ("def planted(p):\n    from patchaudit.files.reader import read_text\n    return read_text(p, 1)\n",
         "imports patchaudit.files"),
        ("def planted(p):\n    with open(p) as f:\n        return f.read()\n", "calls open"),
        ("import os\n\ndef planted(p):\n    return os.path.exists(p)\n", "calls os.path.exists"),
        ("import subprocess\n", "imports subprocess"),
        ("from pathlib import Path\n", "imports pathlib"),
    ],
)
def test_the_io_check_finds_io_in_analysis(tmp_path, code, expect):
    root = _copy(tmp_path)
    assert A.analysis_io(root) == []
    _plant(root, "patchaudit/analysis/names.py", code)
    assert any(expect in v for v in A.analysis_io(root)), A.analysis_io(root)


@pytest.mark.parametrize(
    "rel, code",
    [
        ("patchaudit/pipeline/fix.py", "BREAKING = ('PA201',)\n"),
        ("patchaudit/reporters/text.py", "def planted(f):\n    return f.code == 'PA203'\n"),
        ("patchaudit/commands/check.py", "NOTE = f'see {1} PA105'\n"),
    ],
)
def test_the_code_check_finds_a_rule_code_outside_the_pack(tmp_path, rel, code):
    root = _copy(tmp_path)
    assert A.rule_code_literals(root) == []
    _plant(root, rel, code)
    found = A.rule_code_literals(root)
    assert len(found) == 1 and "names the rule code PA" in found[0]


def test_the_code_check_leaves_docstrings_and_the_rule_pack_alone(tmp_path):
    root = _copy(tmp_path)
    _plant(root, "patchaudit/pipeline/fix.py", 'def planted():\n    """PA201 is the rule\'s code: docs."""\n')
    _plant(root, "rules/pa201_hunk_does_not_apply.py", "ALSO = 'PA201'\n")
    assert A.rule_code_literals(root) == []
