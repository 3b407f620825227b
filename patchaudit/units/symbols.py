"""Engine symbols: definitions, signatures, imports and class hierarchies.

Exact mode, `bump` and the monkey-patch audit ask questions about the engine
as a whole ("what does `self.legacy_load_mm_data` resolve to from this class",
"which parameters does it take", "who calls it upstream").  Answering them
means reading many engine files that no rule runs on, so they are indexed with
the stdlib `ast` (about ten times faster than libcst, and only definitions and
calls are needed: no formatting, no metadata), lazily, one module at a time,
and cached per engine source.
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass, field
from typing import Iterator


@dataclass(frozen=True)
class Param:
    name: str
    kind: str            # positional_only | positional | vararg | keyword_only | varkw
    has_default: bool


@dataclass
class FuncInfo:
    name: str
    qualname: str                 # Class.method or function
    path: str                     # engine-relative path
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
                    return 10 ** 6  # keyword-only: never reached positionally
                continue
            if p.name == name:
                return k
            k += 1
        for p in self.bound_params():
            if p.name == name:
                return 10 ** 6
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
    bases: list[str]              # dotted expressions as written
    methods: dict[str, FuncInfo] = field(default_factory=dict)
    attributes: set[str] = field(default_factory=set)   # class-level assignments


@dataclass
class ModuleIndex:
    path: str
    module: str | None
    classes: dict[str, ClassInfo] = field(default_factory=dict)       # by qualname
    functions: dict[str, FuncInfo] = field(default_factory=dict)     # top-level
    imports: dict[str, str] = field(default_factory=dict)            # local name -> dotted target
    assigned: set[str] = field(default_factory=set)                  # top-level names assigned
    tree: ast.Module | None = None
    error: str | None = None

    def symbol_at(self, line: int) -> str | None:
        """The innermost class/function enclosing `line` ("Class.method")."""
        if self.tree is None:
            return None
        best: str | None = None

        def walk(node, prefix):
            nonlocal best
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    start = min([child.lineno] + [d.lineno for d in child.decorator_list])
                    end = getattr(child, "end_lineno", child.lineno)
                    if start <= line <= end:
                        name = f"{prefix}.{child.name}" if prefix else child.name
                        best = name
                        walk(child, name)
                        return
                elif hasattr(child, "body") or isinstance(child, (ast.If, ast.Try, ast.With)):
                    walk(child, prefix)

        walk(self.tree, "")
        return best

    def find_class(self, name: str) -> ClassInfo | None:
        return self.classes.get(name) or next(
            (c for q, c in self.classes.items() if q.rsplit(".", 1)[-1] == name), None)


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


def dotted_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr}" if base else None
    if isinstance(node, ast.Subscript):  # Generic[T] bases
        return dotted_name(node.value)
    if isinstance(node, ast.Call):
        return dotted_name(node.func)
    return None


def _decorators(node) -> list[str]:
    out = []
    for d in node.decorator_list:
        name = dotted_name(d)
        if name:
            out.append(name.rsplit(".", 1)[-1] if name.endswith(("staticmethod", "classmethod")) else name)
    return out


def parse_python(text: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def index_module(path: str, text: str, module: str | None = None) -> ModuleIndex:
    idx = ModuleIndex(path=path, module=module)
    tree = parse_python(text)
    if tree is None:
        idx.error = "does not parse"
        return idx
    idx.tree = tree
    package = module.rsplit(".", 1)[0] if module and not path.endswith("__init__.py") else module

    def func(node, prefix: str) -> FuncInfo:
        q = f"{prefix}.{node.name}" if prefix else node.name
        return FuncInfo(node.name, q, path, node.lineno, getattr(node, "end_lineno", node.lineno),
                        _params(node.args), isinstance(node, ast.AsyncFunctionDef), _decorators(node), module)

    def visit_class(node: ast.ClassDef, prefix: str) -> None:
        q = f"{prefix}.{node.name}" if prefix else node.name
        ci = ClassInfo(node.name, q, path, node.lineno, getattr(node, "end_lineno", node.lineno),
                       [b for b in (dotted_name(x) for x in node.bases) if b])
        idx.classes[q] = ci
        for stmt in _flat(node.body):
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

    for stmt in _flat(tree.body):
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


def _flat(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements of a body, looking into if/try blocks (version-dependent definitions)."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            yield from _flat(stmt.body)
            yield from _flat(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            yield from _flat(stmt.body)
            for h in stmt.handlers:
                yield from _flat(h.body)
            yield from _flat(stmt.orelse)
            yield from _flat(stmt.finalbody)
        else:
            yield stmt


class EngineIndex:
    """Lazy, cached symbol lookups in one engine source."""

    def __init__(self, engine):
        self.engine = engine
        self._modules: dict[str, ModuleIndex] = {}

    def module_by_path(self, path: str) -> ModuleIndex | None:
        if path not in self._modules:
            text = self.engine.read_text(path)
            if text is None:
                return None
            self._modules[path] = index_module(path, text, self.engine.module_name(path))
        return self._modules[path]

    def module(self, dotted: str) -> ModuleIndex | None:
        path = self.engine.module_path(dotted)
        return self.module_by_path(path) if path else None

    def resolve(self, dotted: str, depth: int = 0) -> tuple[ModuleIndex, str, str] | None:
        """`pkg.mod.Class.meth` -> (module index, "class"|"function"|"module"|"attribute", qualname)."""
        if depth > 8:
            return None
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            mod = self.module(".".join(parts[:cut]))
            if mod is None:
                continue
            rest = parts[cut:]
            if not rest:
                return mod, "module", ""
            return self._in_module(mod, rest, depth)
        return None

    def _in_module(self, mod: ModuleIndex, rest: list[str], depth: int):
        head = rest[0]
        if head in mod.classes:
            q = head
            for name in rest[1:]:
                nq = f"{q}.{name}"
                if nq in mod.classes:
                    q = nq
                    continue
                cls = mod.classes[q]
                if name in cls.methods and nq == f"{q}.{rest[-1]}":
                    return mod, "function", cls.methods[name].qualname
                found = self.find_method(mod, cls, name)
                if found is not None and name == rest[-1]:
                    fmod, finfo = found
                    return fmod, "function", finfo.qualname
                if name in cls.attributes and name == rest[-1]:
                    return mod, "attribute", nq
                return None
            return mod, "class", q
        if head in mod.functions and len(rest) == 1:
            return mod, "function", head
        if head in mod.imports:
            return self.resolve(".".join([mod.imports[head]] + rest[1:]), depth + 1)
        if head in mod.assigned and len(rest) == 1:
            return mod, "attribute", head
        # a submodule not imported by name: pkg.sub
        if mod.path.endswith("__init__.py") and mod.module:
            sub = self.resolve(f"{mod.module}.{'.'.join(rest)}", depth + 1) if depth < 8 else None
            if sub and sub[0] is not mod:
                return sub
        return None

    def function(self, mod: ModuleIndex, qualname: str) -> FuncInfo | None:
        if "." in qualname:
            cls_q, name = qualname.rsplit(".", 1)
            cls = mod.classes.get(cls_q)
            if cls:
                return cls.methods.get(name)
            return None
        return mod.functions.get(qualname)

    def resolve_class(self, mod: ModuleIndex, expr: str, depth: int = 0) -> tuple[ModuleIndex, ClassInfo] | None:
        """A base-class expression as written in `mod` -> its definition."""
        if depth > 8:
            return None
        head, _, rest = expr.partition(".")
        if not rest and expr in mod.classes:
            return mod, mod.classes[expr]
        if head in mod.imports:
            target = mod.imports[head] + ("." + rest if rest else "")
            got = self.resolve(target)
            if got and got[1] == "class":
                return got[0], got[0].classes[got[2]]
        return None

    def find_method(self, mod: ModuleIndex, cls: ClassInfo, name: str,
                    skip_self: bool = False, _seen: set | None = None) -> tuple[ModuleIndex, FuncInfo] | None:
        """Method lookup through the class hierarchy (depth-first, left to right)."""
        seen = _seen if _seen is not None else set()
        key = (mod.path, cls.qualname)
        if key in seen:
            return None
        seen.add(key)
        if not skip_self and name in cls.methods:
            return mod, cls.methods[name]
        for base in cls.bases:
            got = self.resolve_class(mod, base)
            if got is None:
                continue
            found = self.find_method(got[0], got[1], name, False, seen)
            if found:
                return found
        return None

    def functions_named(self, name: str) -> list[FuncInfo]:
        """Every definition of `name` in the engine (a text pre-filter, then ast)."""
        needle = f"def {name}("
        out = []
        for path in self.engine.files():
            if not path.endswith(".py"):
                continue
            text = self.engine.read_text(path)
            if not text or needle not in text:
                continue
            mod = self.module_by_path(path)
            if mod is None:
                continue
            for f in mod.functions.values():
                if f.name == name:
                    out.append(f)
            for c in mod.classes.values():
                if name in c.methods:
                    out.append(c.methods[name])
        return out
