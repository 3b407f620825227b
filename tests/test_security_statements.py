"""SECURITY.md's table "What it reads, imports and writes" names, for each statement, the
tests that hold it: every statement names some, every named test exists, and every test
of the files written for these statements is named there (so a statement and its
evidence cannot drift apart)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: the test files written for these statements: each of their tests is named in the table
COVERED = ("test_security_writes.py", "test_security_imports.py", "test_security_tempdirs.py", "test_security_fixtext.py")
_NODE = re.compile(r"`(tests/test_\w+\.py)::(test_\w+)`")


def _table() -> list[tuple[str, list[tuple[str, str]]]]:
    text = (REPO / "SECURITY.md").read_text(encoding="utf-8")
    section = text.split("## What it reads, imports and writes", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and re.fullmatch(r"[RIWT]\d+", cells[0]):
            rows.append((cells[0], _NODE.findall(cells[2])))
    return rows


def _tests(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}


def test_every_statement_names_tests_that_exist():
    rows = _table()
    assert len(rows) >= 15
    for key, nodes in rows:
        assert nodes, f"SECURITY.md statement {key} names no test"
        for file, name in nodes:
            assert name in _tests(REPO / file), f"SECURITY.md statement {key}: {file}::{name} does not exist"


def test_every_test_of_the_statements_files_is_named():
    named = {(file, name) for _, nodes in _table() for file, name in nodes}
    for file in COVERED:
        for name in sorted(_tests(REPO / "tests" / file)):
            assert (f"tests/{file}", name) in named, f"tests/{file}::{name} is named by no statement of SECURITY.md"
