"""The dataflow layer reads `ast` but reports libcst's positions: `Positions` (columns in
characters from `ast`'s UTF-8 byte offsets) and the nodes `ast` lacks (`ArgNode` for libcst's
`Arg`, `Element` for `DictElement`) give the ranges libcst's PositionProvider gives, which is
the oracle here.  The code is written by the test: non-ASCII before and inside nodes, tabs,
multi-line calls and dicts, `*args`/`**kwargs`, `**other` in a dict."""

from __future__ import annotations

import ast
import textwrap

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from patchaudit.analysis.flow_nodes import NodeCache, Positions

CODES = [
    'x = f("héllo", ids=y)  # ça\n',
    'payload = {"texte": "déjà vu", "input_ids": ids, **extra, "image_data": [img]}\n',
    's = "日本語"; r = g(a, *rest, k="ü", **kw)\n',
    "def f():\n\tif x:\n\t\treturn h('ß', z=[1, 2])\n",
    'call(\n    "€uro",\n    key={\n        "ключ": value,\n        **more,\n    },\n)\n',
    'v = obj.method("🙂" + t)[0].attr\n',
]


def _libcst_ranges(code: str) -> dict[str, set[tuple[int, int, int, int]]]:
    wrapper = MetadataWrapper(cst.parse_module(code))
    pos = wrapper.resolve(PositionProvider)
    out: dict[str, set[tuple[int, int, int, int]]] = {"call": set(), "arg": set(), "element": set()}
    kinds = {cst.Call: "call", cst.Arg: "arg", cst.DictElement: "element", cst.StarredDictElement: "element"}
    for node, r in pos.items():
        kind = kinds.get(type(node))
        if kind is not None:
            out[kind].add((r.start.line, r.start.column, r.end.line, r.end.column))
    return out


def _ast_ranges(code: str) -> dict[str, set[tuple[int, int, int, int]]]:
    positions = Positions(code)
    nodes = NodeCache(positions)
    out: dict[str, set[tuple[int, int, int, int]]] = {"call": set(), "arg": set(), "element": set()}
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call):
            out["call"].add(positions.range(node))
            out["arg"].update(positions.range(a) for a in nodes.args(node))
        elif isinstance(node, ast.Dict):
            out["element"].update(positions.range(e) for e in nodes.elements(node))
    return out


@pytest.mark.parametrize("code", CODES)
def test_ranges_are_libcsts(code):
    assert _ast_ranges(code) == _libcst_ranges(code)


@pytest.mark.parametrize("code", CODES)
def test_snippets_are_the_source_of_the_node(code):
    positions = Positions(code)
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call):
            assert positions.segment(node) == ast.get_source_segment(code, node)


def test_an_ascii_line_maps_no_column():
    positions = Positions(textwrap.dedent('a = "é"\nb = f(x)\n'))
    assert positions.column(2, 4) == 4
    assert positions._bytes.keys() == {2}  # the ASCII line was looked at, the other never
