"""The dataflow layer's nodes and positions on the standard library's `ast`.

The interpreter (patchaudit/analysis/dataflow.py) reads `ast` trees, which parse about 12x
faster than libcst's; its findings are reported as libcst would have placed them:

- `Positions`: a node's line and columns in *characters* (libcst's), from `ast`'s
  `col_offset`, which counts UTF-8 bytes.  A line's byte -> character map is computed only
  for a line that is asked about and holds a non-ASCII character, and kept; snippets of the
  source (`segment`) are cut the same way.
- `ArgNode`: one argument of a call as written (libcst's `Arg`): `ast` keeps positional
  arguments and keywords apart, and a positional argument has no node of its own.  `value` is
  its expression, `keyword` its keyword (or None), `star` "", "*" or "**"; the range is the
  argument's (`key=value`, `*args`, `**kwargs`, the expression).
- `Element`: one entry of a dict literal (libcst's `DictElement`/`StarredDictElement`):
  `key` (None for `**other`) and `value`, its range from the key (or `**`) to the value.

`call_args` and `dict_elements` make them once per node (`NodeCache`), so that their
identity is stable across the interpreter's passes.
"""

from __future__ import annotations

import ast
import re
from typing import Any

_NEWLINE = re.compile(r"\r\n|\r|\n")


class Positions:
    """Lines and character columns of the nodes of one parsed text."""

    def __init__(self, text: str):
        self.text = text
        self._ascii = text.isascii()
        self._lines: list[str] | None = None
        self._bytes: dict[int, bytes] = {}

    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = _NEWLINE.split(self.text)
        return self._lines

    def _line_bytes(self, line: int) -> bytes:
        got = self._bytes.get(line)
        if got is None:
            lines = self.lines()
            text = lines[line - 1] if 0 < line <= len(lines) else ""
            got = self._bytes[line] = text.encode("utf-8", "surrogatepass")
        return got

    def column(self, line: int, offset: int) -> int:
        """The character column of byte `offset` of `line` (1-based)."""
        if self._ascii or offset == 0:
            return offset
        raw = self._line_bytes(line)
        if raw.isascii():
            return offset
        return len(raw[:offset].decode("utf-8", "surrogatepass"))

    def line(self, node: Any) -> int:
        return node.lineno

    def start(self, node: Any) -> tuple[int, int]:
        return (node.lineno, self.column(node.lineno, node.col_offset))

    def end(self, node: Any) -> tuple[int, int]:
        return (node.end_lineno, self.column(node.end_lineno, node.end_col_offset))

    def range(self, node: Any) -> tuple[int, int, int, int]:
        """(line, column, end line, end column): libcst's PositionProvider range of the node."""
        return self.start(node) + self.end(node)

    def segment(self, node: Any) -> str:
        """The node's source text."""
        first, last = node.lineno, node.end_lineno
        if first == last:
            return self._line_bytes(first)[node.col_offset : node.end_col_offset].decode("utf-8", "surrogatepass")
        parts = [self._line_bytes(first)[node.col_offset :]]
        parts += [self._line_bytes(n) for n in range(first + 1, last)]
        parts.append(self._line_bytes(last)[: node.end_col_offset])
        return "\n".join(p.decode("utf-8", "surrogatepass") for p in parts)


class _Span:
    __slots__ = ("lineno", "col_offset", "end_lineno", "end_col_offset")

    def __init__(self, start: Any, end: Any):
        self.lineno = start.lineno
        self.col_offset = start.col_offset
        self.end_lineno = end.end_lineno
        self.end_col_offset = end.end_col_offset


class ArgNode(_Span):
    """One argument of a call as written (see the module docstring)."""

    __slots__ = ("value", "keyword", "star")

    def __init__(self, node: Any):
        super().__init__(node, node)
        if isinstance(node, ast.keyword):
            self.value = node.value
            self.keyword = node.arg
            self.star = "" if node.arg is not None else "**"
        elif isinstance(node, ast.Starred):
            self.value = node.value
            self.keyword = None
            self.star = "*"
        else:
            self.value = node
            self.keyword = None
            self.star = ""


class Element(_Span):
    """One entry of a dict literal (see the module docstring)."""

    __slots__ = ("key", "value")

    def __init__(self, key: Any, value: Any, start: Any):
        super().__init__(start, value)
        self.key = key
        self.value = value


class _StarStart:
    """Where `**other` in a dict starts: the `**` two characters before its expression on its line."""

    __slots__ = ("lineno", "col_offset")

    def __init__(self, lineno: int, col_offset: int):
        self.lineno = lineno
        self.col_offset = col_offset


def ordered_args(call: ast.Call) -> list[ArgNode]:
    """The arguments of `call` in source order."""
    nodes: list[Any] = list(call.args) + list(call.keywords)
    if call.keywords and call.args:
        nodes.sort(key=lambda n: (n.lineno, n.col_offset))
    return [ArgNode(n) for n in nodes]


def elements(node: ast.Dict, positions: Positions) -> list[Element]:
    out = []
    for k, v in zip(node.keys, node.values):
        if k is not None:
            out.append(Element(k, v, k))
        else:
            out.append(Element(None, v, _star_start(v, positions)))
    return out


def _star_start(value: Any, positions: Positions) -> Any:
    """The `**` before `value` (whitespace may separate them)."""
    line, col = value.lineno, value.col_offset
    raw = positions._line_bytes(line)[:col].rstrip()
    if raw.endswith(b"**"):
        return _StarStart(line, len(raw) - 2)
    return value


class NodeCache:
    """`ArgNode`s and `Element`s made once per node of the tree."""

    def __init__(self, positions: Positions):
        self.positions = positions
        self._args: dict[int, list[ArgNode]] = {}
        self._elements: dict[int, list[Element]] = {}

    def args(self, call: ast.Call) -> list[ArgNode]:
        got = self._args.get(id(call))
        if got is None:
            got = self._args[id(call)] = ordered_args(call)
        return got

    def elements(self, node: ast.Dict) -> list[Element]:
        got = self._elements.get(id(node))
        if got is None:
            got = self._elements[id(node)] = elements(node, self.positions)
        return got
