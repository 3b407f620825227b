"""What one Python module defines: classes, functions, parameters, imports, definition spans.

The per-module half of the engine symbol index (patchaudit/engine/symbols.py
holds the engine-wide half: lookups across modules and upstream's call sites).
A module is read with the stdlib `ast` (about ten times faster than libcst, and
only definitions are needed: no formatting, no metadata) into a `ModuleIndex`.
"""

from __future__ import annotations

import ast
import bisect
from dataclasses import dataclass, field
from typing import Iterator

from patchaudit.inputs.astnames import THROUGH, dotted


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # positional_only | positional | vararg | keyword_only | varkw
    has_default: bool


@dataclass
class FuncInfo:
    name: str
    qualname: str  # Class.method or function
    path: str  # engine-relative path
    line: int
    end_line: int
    params: list[Param]
    is_async: bool
    decorators: list[str] = field(default_factory=list)
    module: str | None = None

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def is_method(self) -> bool:
        return "." in self.qualname

    @property
    def is_static(self) -> bool:
        return "staticmethod" in self.decorators

    @property
    def is_classmethod(self) -> bool:
        return "classmethod" in self.decorators

    def bound_params(self) -> list[Param]:
        """Parameters as a caller sees them (without self/cls for methods)."""
        ps = list(self.params)
        if self.is_method and not self.is_static and ps and ps[0].kind in ("positional_only", "positional"):
            ps = ps[1:]
        return ps

    def param_index(self, name: str) -> int | None:
        """Position of `name` among the positional parameters a caller passes, or None."""
        k = 0
        for p in self.bound_params():
            if p.kind not in ("positional_only", "positional"):
                if p.name == name:
                    return 10**6  # keyword-only: never reached positionally
                continue
            if p.name == name:
                return k
            k += 1
        for p in self.bound_params():
            if p.name == name:
                return 10**6
        return None

    def accepts_any_keyword(self) -> bool:
        return any(p.kind == "varkw" for p in self.params)

    def accepts_any_positional(self) -> bool:
        return any(p.kind == "vararg" for p in self.params)

    def signature(self) -> str:
        out = []
        for p in self.params:
            s = {"vararg": "*", "varkw": "**"}.get(p.kind, "") + p.name
            if p.has_default:
                s += "=..."
            out.append(s)
        return f"{'async ' if self.is_async else ''}def {self.name}({', '.join(out)})"


@dataclass
class ClassInfo:
    name: str
    qualname: str
    path: str
    line: int
    end_line: int
    bases: list[str]  # dotted expressions as written
    methods: dict[str, FuncInfo] = field(default_factory=dict)
    attributes: set[str] = field(default_factory=set)  # class-level assignments


@dataclass
class ModuleIndex:
    path: str
    module: str | None
    classes: dict[str, ClassInfo] = field(default_factory=dict)  # by qualname
    functions: dict[str, FuncInfo] = field(default_factory=dict)  # top-level
    imports: dict[str, str] = field(default_factory=dict)  # local name -> dotted target
    assigned: set[str] = field(default_factory=set)  # top-level names assigned
    tree: ast.Module | None = None
    error: str | None = None
    _spans: tuple[list[int], list[tuple[int, int, str, int]]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def symbol_at(self, line: int) -> str | None:
        """The innermost class/function enclosing `line` ("Class.method").

        The spans of every definition are gathered once per module (sorted by
        first line, each with its parent) and each lookup is a bisection plus a
        walk up the parents: a patch of thousands of hunks against a module of
        100k statements costs milliseconds, not one walk of the module per hunk."""
        if self.tree is None:
            return None
        spans = self._spans
        if spans is None:
            spans = self._spans = definition_spans(self.tree)
        i = bisect.bisect_right(spans[0], line) - 1
        while i >= 0:
            start, end, name, parent = spans[1][i]
            if start <= line <= end:
                return name
            i = parent
        return None

    def find_class(self, name: str) -> ClassInfo | None:
        return self.classes.get(name) or next(
            (c for q, c in self.classes.items() if q.rsplit(".", 1)[-1] == name), None
        )


def definition_spans(tree: ast.AST, decorators: bool = True) -> tuple[list[int], list[tuple[int, int, str, int]]]:
    """(starts, [(start, end, qualified name, index of the enclosing span or -1)]),
    sorted by start: every class and function, from its decorators (or, without
    `decorators`, from its `def`/`class` line, as libcst's positions give a finding's
    symbol: units/__init__.py), found through compound statements (`if`, `try`,
    `with`, `match`, ...) as well.  Definitions nest or are disjoint, so the innermost
    one around a line is the last span starting at or before it, or one of that
    span's parents."""
    found: list[tuple[int, int, str, int]] = []

    def walk(node: ast.AST, prefix: str, parent: int) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                start = min([child.lineno] + ([d.lineno for d in child.decorator_list] if decorators else []))
                end = getattr(child, "end_lineno", None) or child.lineno
                name = f"{prefix}.{child.name}" if prefix else child.name
                found.append((start, end, name, parent))
                walk(child, name, len(found) - 1)
            elif hasattr(child, "body") or isinstance(child, ast.Match):  # a match holds `cases`
                walk(child, prefix, parent)

    walk(tree, "", -1)
    order = sorted(range(len(found)), key=lambda k: (found[k][0], -found[k][1]))
    where = {old: new for new, old in enumerate(order)}
    spans = [(s, e, n, where[p] if p >= 0 else -1) for s, e, n, p in (found[k] for k in order)]
    return [s[0] for s in spans], spans


def _params(args: ast.arguments) -> list[Param]:
    out: list[Param] = []
    pos = list(args.posonlyargs) + list(args.args)
    n_def = len(args.defaults)
    for i, a in enumerate(pos):
        kind = "positional_only" if i < len(args.posonlyargs) else "positional"
        out.append(Param(a.arg, kind, i >= len(pos) - n_def))
    if args.vararg:
        out.append(Param(args.vararg.arg, "vararg", False))
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        out.append(Param(a.arg, "keyword_only", d is not None))
    if args.kwarg:
        out.append(Param(args.kwarg.arg, "varkw", False))
    return out


def _decorators(node) -> list[str]:
    out = []
    for d in node.decorator_list:
        name = dotted(d, THROUGH)
        if name:
            out.append(name.rsplit(".", 1)[-1] if name.endswith(("staticmethod", "classmethod")) else name)
    return out


def parse_python(text: str) -> ast.Module | None:
    """`ast.parse(text)`, or None when it does not parse or is over the parse budget
    (`max-parse-size`, patchaudit/inputs/pyast.py): a huge engine file is not indexed."""
    from patchaudit.inputs import pyast

    return pyast.parse(text)  # shared with the pre-filters that read the same text


def index_module(path: str, text: str, module: str | None = None, tree: ast.Module | None = None) -> ModuleIndex:
    """Index `text`; `tree`, when the caller has parsed it already, saves a second parse."""
    idx = ModuleIndex(path=path, module=module)
    if tree is None:
        tree = parse_python(text)
    if tree is None:
        idx.error = "does not parse"
        return idx
    idx.tree = tree
    package = module.rsplit(".", 1)[0] if module and not path.endswith("__init__.py") else module

    def func(node, prefix: str) -> FuncInfo:
        q = f"{prefix}.{node.name}" if prefix else node.name
        return FuncInfo(
            node.name,
            q,
            path,
            node.lineno,
            getattr(node, "end_lineno", node.lineno),
            _params(node.args),
            isinstance(node, ast.AsyncFunctionDef),
            _decorators(node),
            module,
        )

    def visit_class(node: ast.ClassDef, prefix: str) -> None:
        q = f"{prefix}.{node.name}" if prefix else node.name
        ci = ClassInfo(
            node.name,
            q,
            path,
            node.lineno,
            getattr(node, "end_lineno", node.lineno),
            [b for b in (dotted(x, THROUGH) for x in node.bases) if b],
        )
        idx.classes[q] = ci
        for stmt in flat_statements(node.body):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                # a later definition (e.g. a property setter) wins, as at run time
                ci.methods[stmt.name] = func(stmt, q)
            elif isinstance(stmt, ast.ClassDef):
                visit_class(stmt, q)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        ci.attributes.add(t.id)

    for stmt in flat_statements(tree.body):
        if isinstance(stmt, ast.ClassDef):
            visit_class(stmt, "")
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            idx.functions[stmt.name] = func(stmt, "")
        elif isinstance(stmt, ast.Import):
            for a in stmt.names:
                if a.asname:
                    idx.imports[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    idx.imports[top] = top
        elif isinstance(stmt, ast.ImportFrom):
            base = stmt.module or ""
            if stmt.level:
                parts = (package or "").split(".")
                keep = parts[: len(parts) - (stmt.level - 1)] if stmt.level > 1 else parts
                base = ".".join([p for p in keep if p] + ([stmt.module] if stmt.module else []))
            for a in stmt.names:
                if a.name == "*":
                    continue
                idx.imports[a.asname or a.name] = f"{base}.{a.name}" if base else a.name
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    idx.assigned.add(t.id)
    return idx


def flat_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements of a body, looking into if/try blocks (version-dependent definitions)."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            yield from flat_statements(stmt.body)
            yield from flat_statements(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            yield from flat_statements(stmt.body)
            for h in stmt.handlers:
                yield from flat_statements(h.body)
            yield from flat_statements(stmt.orelse)
            yield from flat_statements(stmt.finalbody)
        else:
            yield stmt
