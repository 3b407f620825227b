"""Engine symbols: definitions, signatures, imports and class hierarchies.

Exact mode, `bump` and the monkey-patch audit ask questions about the engine
as a whole ("what does `self.legacy_load_mm_data` resolve to from this class",
"which parameters does it take", "who calls it upstream").  Answering them
means reading many engine files that no rule runs on, so they are indexed with
the stdlib `ast` (about ten times faster than libcst, and only definitions and
calls are needed: no formatting, no metadata), lazily, one module at a time,
and cached per engine source.

What one module defines (`ModuleIndex`, `FuncInfo`, `ClassInfo`, `Param`,
`index_module`, `parse_python`) is patchaudit/engine/definitions.py; this module
holds the engine-wide lookups (`EngineIndex`) and the calls: what a callee
resolves to, and upstream's own call sites.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from patchaudit.engine.definitions import ClassInfo, FuncInfo, ModuleIndex, Param
from patchaudit.engine.shared import shared_index
from patchaudit.inputs import astnames, pyast


class EngineIndex:
    """Lazy, cached symbol lookups in one engine source."""

    def __init__(self, engine):
        self.engine = engine
        self._modules: dict[str, ModuleIndex] = {}
        self._texts: dict[str, str] | None = None  # every .py file's text (see py_texts)
        self._needles: dict[str, list[str]] = {}  # needle -> .py files containing it
        self._named: dict[str, list[FuncInfo]] = {}  # functions_named memo

    def module_by_path(self, path: str) -> ModuleIndex | None:
        if path not in self._modules:
            text = self.engine.read_text(path)
            if text is None:
                return None
            # the same text met through another view (OLD/NEW/patched, another patch's
            # context) is parsed once (engine/shared.py)
            self._modules[path] = shared_index(path, text, self.engine.module_name(path))
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

    def find_method(
        self, mod: ModuleIndex, cls: ClassInfo, name: str, skip_self: bool = False, _seen: set | None = None
    ) -> tuple[ModuleIndex, FuncInfo] | None:
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
        """Every definition of `name` in the engine (a text pre-filter, then ast; memoised)."""
        if name in self._named:
            return list(self._named[name])
        out = []
        for path in self.files_containing(f"def {name}("):
            mod = self.module_by_path(path)
            if mod is None:
                continue
            for f in mod.functions.values():
                if f.name == name:
                    out.append(f)
            for c in mod.classes.values():
                if name in c.methods:
                    out.append(c.methods[name])
        self._named[name] = out
        return list(out)

    def py_texts(self) -> dict[str, str]:
        """The text of every .py file of the engine, read once and kept (engine-wide searches)."""
        if self._texts is None:
            texts = {}
            for path in self.engine.files():
                if path.endswith(".py"):
                    text = self.engine.read_text(path)
                    if text:
                        texts[path] = text
            self._texts = texts
        return self._texts

    def files_containing(self, needle: str) -> list[str]:
        """The .py files whose text contains `needle` (memoised per needle)."""
        if needle not in self._needles:
            self._needles[needle] = [p for p, t in self.py_texts().items() if needle in t]
        return self._needles[needle]


# --------------------------------------------------------------------------
# calls: what a callee expression resolves to, and upstream's own call sites
# (bump's call-signature drift, PA204).  Callees are written as dotted strings
# so the same resolver serves ast (engine files) and libcst (patched code):
# "f", "mod.f", "Class.meth", "self.meth", "cls.meth", "super().meth".


@dataclass(frozen=True)
class CallShape:
    """The arguments a call passes, as far as they can be known statically."""

    positional: int  # plain positional arguments
    keywords: tuple[str, ...]  # keyword names, in order
    star_args: bool = False  # a `*args` argument
    star_kwargs: bool = False  # a `**kwargs` argument

    def passes(self, params: list[Param], name: str) -> bool | None:
        """Does the call pass parameter `name` of `params`?  None when `*`/`**` make it unknowable."""
        if name in self.keywords:
            return True
        k = 0
        for p in params:
            if p.kind not in ("positional_only", "positional"):
                break
            if p.name == name:
                if self.positional > k:
                    return True
                return None if self.star_args or self.star_kwargs else False
            k += 1
        return None if self.star_kwargs else False


@dataclass(frozen=True)
class Callee:
    """A call's engine definition and how it is reached."""

    func: FuncInfo
    how: str  # function | method | constructor | unbound (Class.meth(obj, ...))

    def params(self) -> list[Param]:
        """The parameters the call's arguments bind to."""
        f = self.func
        if self.how == "unbound" and not (f.is_static or f.is_classmethod):
            return list(f.params)  # self is passed explicitly
        return f.bound_params()


@dataclass(frozen=True)
class CallSite:
    path: str
    line: int
    symbol: str | None  # the enclosing def/class ("Class.method")
    shape: CallShape

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def ast_callee(func: ast.AST) -> str | None:
    """`self.a(...)` -> "self.a", `super().f(...)` -> "super().f", `m.C(...)` -> "m.C"."""
    return astnames.dotted(func, astnames.SUPER)


def ast_call_shape(call: ast.Call) -> CallShape:
    pos = sum(1 for a in call.args if not isinstance(a, ast.Starred))
    star = any(isinstance(a, ast.Starred) for a in call.args)
    kws = tuple(k.arg for k in call.keywords if k.arg is not None)
    return CallShape(pos, kws, star, any(k.arg is None for k in call.keywords))


def _method_of(
    index: "EngineIndex", mod: ModuleIndex, cls: ClassInfo, name: str, how: str, skip_self: bool = False
) -> Callee | None:
    if name == "__init__" and how == "constructor":
        # only an __init__ the class writes itself: dataclasses, NamedTuples and
        # pydantic models generate theirs from fields this index does not read
        f = cls.methods.get("__init__")
        return Callee(f, "constructor") if f is not None else None
    found = index.find_method(mod, cls, name, skip_self=skip_self)
    return Callee(found[1], how) if found else None


def resolve_callee(index: "EngineIndex", mod: ModuleIndex, callee: str, class_q: str | None) -> Callee | None:
    """The definition `callee`, written in `mod` (inside class `class_q`), calls; None when unsure.

    Resolves through the module's imports and the class hierarchy only: a call
    on an object whose type is unknown (`obj.meth()`) is never guessed."""
    parts = callee.split(".")
    name = parts[-1]
    if callee.startswith("super()."):
        cls = mod.find_class(class_q) if class_q else None
        return _method_of(index, mod, cls, name, "method", skip_self=True) if cls and len(parts) == 2 else None
    if len(parts) == 2 and parts[0] in ("self", "cls"):
        cls = mod.find_class(class_q) if class_q else None
        return _method_of(index, mod, cls, name, "method") if cls else None
    if len(parts) == 1:
        if name in mod.functions:
            return Callee(mod.functions[name], "function")
        if name in mod.classes:
            return _method_of(index, mod, mod.classes[name], "__init__", "constructor")
        if name in mod.imports:
            return _resolve_dotted(index, mod.imports[name])
        return None
    head = parts[0]
    if head in ("self", "cls") or "()" in head:
        return None
    if len(parts) == 2 and head in mod.classes and head not in mod.imports:
        return _method_of(index, mod, mod.classes[head], name, "unbound")
    if head in mod.imports:
        return _resolve_dotted(index, ".".join([mod.imports[head]] + parts[1:]))
    return None


def _resolve_dotted(index: "EngineIndex", dotted: str) -> Callee | None:
    got = index.resolve(dotted)
    if got is None:
        return None
    gmod, kind, q = got
    if kind == "class":
        return _method_of(index, gmod, gmod.classes[q], "__init__", "constructor")
    if kind != "function":
        return None
    f = index.function(gmod, q)
    if f is None:
        return None
    return Callee(f, "unbound" if f.is_method else "function")


def _same(a: FuncInfo, b: FuncInfo) -> bool:
    return a.path == b.path and a.qualname == b.qualname


def _needles(func: FuncInfo) -> tuple[str, list[str]]:
    """(a cheap first filter, then any-of needles) for files that can call `func`."""
    if func.name == "__init__" and func.is_method:
        cls = func.qualname.rsplit(".", 2)[-2]
        return f"{cls}(", [f"{cls}("]
    if func.is_method:
        n = func.name
        return f"{n}(", [f"self.{n}(", f"cls.{n}(", f"super().{n}(", f".{n}("]
    return f"{func.name}(", [f"{func.name}("]


def call_sites(index: "EngineIndex", func: FuncInfo) -> list[CallSite]:
    """Upstream's own calls of `func` in this engine, resolved as `resolve_callee` does (memoised)."""
    memo = index.__dict__.setdefault("_call_sites", {})
    key = (func.path, func.qualname)
    if key in memo:
        return memo[key]
    first, anyof = _needles(func)
    ctor = func.name == "__init__"
    target_name = func.qualname.rsplit(".", 2)[-2] if ctor else func.name
    out: list[CallSite] = []
    texts = index.py_texts()
    for path in index.files_containing(first):
        text = texts.get(path, "")
        if not any(n in text for n in anyof):
            continue
        mod = index.module_by_path(path)
        if mod is None or mod.tree is None:
            continue
        for call, class_q, symbol in calls_by_name(mod).get(target_name, ()):
            callee = ast_callee(call.func)
            if callee is None:
                continue
            got = resolve_callee(index, mod, callee, class_q)
            if got is not None and _same(got.func, func) and (got.how == "constructor") == ctor:
                out.append(CallSite(path, call.lineno, symbol, ast_call_shape(call)))
    memo[key] = out
    return out


def calls_in(tree: ast.AST):
    """(Call node, enclosing class qualname, enclosing symbol) for every call of a module."""
    stack: list[tuple[ast.AST, str | None, str | None]] = [(tree, None, None)]
    while stack:
        node, cls, sym = stack.pop()
        for child in pyast.children(node):
            c_cls, c_sym = cls, sym
            if isinstance(child, ast.ClassDef):
                c_cls = f"{cls}.{child.name}" if cls else child.name
                c_sym = f"{sym}.{child.name}" if sym else child.name
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                c_sym = f"{sym}.{child.name}" if sym else child.name
            elif isinstance(child, ast.Call):
                yield child, cls, sym
            stack.append((child, c_cls, c_sym))


def calls_by_name(mod: ModuleIndex) -> dict[str, list[tuple[ast.Call, str | None, str | None]]]:
    """The calls of a module by the last name of their callee (`self.a.f(...)` under "f"):
    (Call node, enclosing class qualname, enclosing symbol), in `calls_in`'s order.
    Computed once per module index (indexes are shared: engine/shared.py), so finding
    the call sites of many functions walks each module once, not once per function."""
    got = mod.__dict__.get("_calls_by_name")
    if got is not None:
        return got
    out: dict[str, list[tuple[ast.Call, str | None, str | None]]] = {}
    if mod.tree is not None:
        for call, cls, sym in calls_in(mod.tree):
            callee = ast_callee(call.func)
            if callee is not None:
                out.setdefault(callee.rsplit(".", 1)[-1], []).append((call, cls, sym))
    mod.__dict__["_calls_by_name"] = out
    return out


def name_call_sites(index: "EngineIndex", name: str) -> list[CallSite]:
    """Every call of a method or function called `name` in this engine, whatever its receiver
    (`obj.name(...)`, `self.x.name(...)`, `name(...)`): the calls that may reach a definition
    of that name when the receiver's type is not known statically (memoised)."""
    memo = index.__dict__.setdefault("_name_call_sites", {})
    if name in memo:
        return memo[name]
    out: list[CallSite] = []
    for path in index.files_containing(f"{name}("):
        mod = index.module_by_path(path)
        if mod is None or mod.tree is None:
            continue
        for call, _cls, symbol in calls_by_name(mod).get(name, ()):
            out.append(CallSite(path, call.lineno, symbol, ast_call_shape(call)))
    out.sort(key=lambda s: (s.path, s.line))
    memo[name] = out
    return out
