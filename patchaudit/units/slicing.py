"""Exact mode's slice: the patched file reduced to what the patch changed, and what that needs.

A patched engine file is often thousands of lines long (SGLang's `scheduler.py`:
190 kB) while the patch changes a few methods, and libcst with the rules' metadata
costs about a second per 50 kB.  The rules report only on lines the patch added or
changed (`Unit.judged`), so exact mode hands them the patched file *sliced*: every
definition that cannot take part in a finding on a changed line has its lines
emptied, the others are copied verbatim, and every line keeps its number and every
kept node its column (as statement pruning does, patchaudit/units/prune.py), so
positions, line maps, traces and `symbol_at` are those of the whole file.

Only the rules that declare it (`sliceable = True` on the rule class, read by
pipeline/run_rules.py) see the slice; the others (the dataflow rules, whose flows
run through callers, callees and the attributes of a class) see the whole file.  A
rule may be sliceable only if its judgement of a node on a changed line depends on
nothing but what the slice keeps:

- the frame: every module-level statement that is not a `def`/`class` (imports,
  constants, `if`/`try` blocks whole, definitions inside them included), and, of
  each class that is kept, its header lines (decorators, `class` line) and its
  statements that are not a `def`/`class`;
- every function or method whose lines (decorators included) hold a changed line
  (nested definitions stay with the definition around them);
- then, until nothing changes, every definition (function, method or class) whose
  name a kept definition uses: as an identifier or as an attribute name
  (`f(...)`, `self.f(...)`, `obj.f`, `callback=f`, a decorator, a base class), and
  every function that declares `global` a name a kept one uses;
- a kept class keeps its constructor-like methods (`__init__`, `__new__`,
  `__post_init__`, `__call__`, `__init_subclass__`) and at least one statement (a
  body is never empty), and the classes around it.

So the names a kept statement reads resolve as they do in the whole file, to the
same definitions; what is emptied is code no kept statement names.  The engine
(`EngineContext.unit_module`) still sees the whole patched file: the sliced unit
shares the whole file's module index.

`changed_slice` returns None ("analyse the whole file") when the slice would keep
more than `MAX_SHARE` of the text (nothing to gain), or when the sliced text does
not parse again (a safety net).  Findings with and without slicing are compared
on generated engines and patches (tests/test_exact_speed_invariants.py);
`ENABLED = False` switches it off.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Iterable, cast

from patchaudit.inputs.pyast import walk
from patchaudit.units.prune import emptied, split_lines

#: exact mode slices patched files only while this is True (tests switch it off to compare)
ENABLED = True
#: slice only when at most this share of the text's characters is kept
MAX_SHARE = 0.8
#: slices made (tests count them: no timings)
STATS = {"sliced": 0}
#: methods a class keeps whenever it is kept or named (construction runs them)
CONSTRUCTORS = frozenset({"__init__", "__new__", "__post_init__", "__call__", "__init_subclass__"})

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass
class _Piece:
    """A function or method definition the slice keeps or empties as a whole."""

    node: ast.AST
    name: str
    lo: int
    hi: int
    owner: "_Class | None"
    names: set[str] = field(default_factory=set)  # identifiers and attribute names it uses
    rebinds: set[str] = field(default_factory=set)  # module names it declares `global`
    kept: bool = False


@dataclass
class _Class:
    node: ast.ClassDef
    name: str
    head: tuple[int, int]  # decorators to the line before the body
    frame: list[tuple[int, int]]  # its statements that are no def/class
    pieces: list[_Piece] = field(default_factory=list)
    inner: list["_Class"] = field(default_factory=list)
    owner: "_Class | None" = None
    names: set[str] = field(default_factory=set)  # used by its header and frame
    kept: bool = False


def _span(node: ast.AST) -> tuple[int, int]:
    lo = cast(int, getattr(node, "lineno", 1))
    for d in getattr(node, "decorator_list", ()):
        lo = min(lo, d.lineno)
    return lo, cast(int, getattr(node, "end_lineno", lo))


def _uses(nodes: Iterable[ast.AST], names: set[str], rebinds: set[str] | None = None) -> None:
    """The identifiers and attribute names `nodes` use (into `names`), and the names they
    declare `global` (into `rebinds`)."""
    for top in nodes:
        for n in walk(top):  # no context or operator leaves: they name nothing
            if isinstance(n, ast.Name):
                names.add(n.id)
            elif isinstance(n, ast.Attribute):
                names.add(n.attr)
            elif isinstance(n, (*_FUNCS, ast.ClassDef)):
                names.add(n.name)
            elif isinstance(n, ast.alias):
                names.add((n.asname or n.name).split(".")[0])
            elif isinstance(n, ast.Global) and rebinds is not None:
                rebinds.update(n.names)


class _Slicer:
    def __init__(self, tree: ast.Module):
        self.pieces: list[_Piece] = []
        self.classes: list[_Class] = []
        self.frame: list[tuple[int, int]] = []
        for stmt in tree.body:
            if isinstance(stmt, _FUNCS):
                self.pieces.append(self._piece(stmt, None))
            elif isinstance(stmt, ast.ClassDef):
                self._class(stmt, None)
            else:
                self.frame.append(_span(stmt))

    def _piece(self, node, owner: _Class | None) -> _Piece:
        lo, hi = _span(node)
        p = _Piece(node, node.name, lo, hi, owner)
        _uses([node], p.names, p.rebinds)
        return p

    def _class(self, node: ast.ClassDef, owner: _Class | None) -> _Class:
        lo, _ = _span(node)
        body_lo = _span(node.body[0])[0]
        cls = _Class(node, node.name, (lo, max(lo, body_lo - 1)), [], owner=owner)
        self.classes.append(cls)
        header: list[ast.AST] = list(node.decorator_list) + list(node.bases) + list(node.keywords)
        for stmt in node.body:
            if isinstance(stmt, _FUNCS):
                p = self._piece(stmt, cls)
                cls.pieces.append(p)
                self.pieces.append(p)
            elif isinstance(stmt, ast.ClassDef):
                cls.inner.append(self._class(stmt, cls))
            else:
                cls.frame.append(_span(stmt))
                header.append(stmt)
        _uses(header, cls.names)
        return cls

    # ----- the closure ------------------------------------------------------------
    def close(self, changed: list[int]) -> None:
        """Keep the definitions holding a changed line, then every definition a kept one
        names, until nothing changes."""
        import bisect

        def touched(lo: int, hi: int) -> bool:
            k = bisect.bisect_left(changed, lo)
            return k < len(changed) and changed[k] <= hi

        for p in self.pieces:
            p.kept = touched(p.lo, p.hi)
        for c in self.classes:  # a changed line in a class's header or frame
            if any(touched(lo, hi) for lo, hi in [c.head, *c.frame]):
                self._keep_class(c)
        while True:
            names: set[str] = set()
            for p in self.pieces:
                if p.kept:
                    names |= p.names
            for c in self.classes:
                if c.kept:
                    names |= c.names
            grew = False
            for c in self.classes:
                if not c.kept and c.name in names:
                    self._keep_class(c)
                    grew = True
            for p in self.pieces:
                if not p.kept and (p.name in names or p.rebinds & names):
                    p.kept = grew = True
                if p.kept and p.owner is not None and not p.owner.kept:
                    self._keep_class(p.owner)
                    grew = True
            if not grew:
                return

    def _keep_class(self, c: _Class) -> None:
        while c is not None and not c.kept:
            c.kept = True
            for p in c.pieces:
                if p.name in CONSTRUCTORS:
                    p.kept = True
            c = c.owner  # type: ignore[assignment]

    # ----- the text ---------------------------------------------------------------
    def keep_lines(self, n: int) -> bytearray:
        keep = bytearray(n + 2)

        def mark(lo: int, hi: int) -> None:
            keep[lo : hi + 1] = b"\x01" * (hi - lo + 1)

        for lo, hi in self.frame:
            mark(lo, hi)
        for p in self.pieces:
            if p.kept:
                mark(p.lo, p.hi)
        for c in self.classes:
            if not c.kept:
                continue
            mark(*c.head)
            for lo, hi in c.frame:
                mark(lo, hi)
            body = [p.kept for p in c.pieces] + [i.kept for i in c.inner]
            if not c.frame and not any(body):
                first = c.node.body[0]
                mark(*_span(first))  # never an empty class body
                for p in c.pieces:
                    if p.node is first:
                        p.kept = True
                for i in c.inner:
                    if i.node is first:
                        self._keep_all(i)
                        self._mark_class(i, mark)
        return keep

    def _keep_all(self, c: _Class) -> None:
        c.kept = True
        for p in c.pieces:
            p.kept = True
        for i in c.inner:
            self._keep_all(i)

    def _mark_class(self, c: _Class, mark) -> None:
        mark(*_span(c.node))


def changed_slice(text: str, tree: ast.Module | None, changed: Iterable[int]) -> str | None:
    """`text` with every definition that cannot matter to a finding on the `changed` lines
    emptied (see the module docstring), or None: keep the whole text."""
    if not ENABLED or tree is None or not text:
        return None
    lines = split_lines(text)
    order = sorted(set(changed))
    if not order:
        return None
    try:
        slicer = _Slicer(tree)
        slicer.close(order)
        keep = slicer.keep_lines(len(lines))
    except RecursionError:
        return None
    sliced = emptied(text, lines, keep, MAX_SHARE)
    if sliced is None:
        return None
    STATS["sliced"] += 1
    return sliced
