"""The repository index: modules, their imports, classes and functions, read with `ast`.

Pure (no I/O): the pipeline (patchaudit/pipeline/repo_index.py) reads the files and
hands their texts here.  `module_facts(text)` reads what one module defines and
imports (top-level statements only, plus the methods of its classes); `RepoIndex`
joins the modules of a repository and answers what the dataflow layer asks
across modules (patchaudit/analysis/repo_summaries.py):

- which module a dotted module name means: a module is known by its path under
  the indexed root (`pkg/sub/mod.py` -> `pkg.sub.mod`, `pkg/__init__.py` ->
  `pkg`), and an absolute import names it by its *tail*: `import pkg.sub.mod`
  finds `src/pkg/sub/mod.py` (the longest tail that names exactly one module);
- what a name of a module is bound to by its imports: `import a.b as c`,
  `from a.b import f as g`, relative imports (`from . import x`,
  `from ..pkg.mod import f as g`, resolved against the module's package);
- a class's bases across modules (through the imports of the module that
  defines it) and its method resolution order, depth first (`mro`);
- where a method is defined, through that order (`method`).

A symbol is `(module path, qualified name)`: `("pkg/mod.py", "Cls.method")`.
Only names bound by `def`, `class` and imports at the top of a module are
known: a name bound by an assignment (`f = make()`), a star import or
`importlib` is not followed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from patchaudit.engine.definitions import flat_statements

Symbol = tuple[str, str]


@dataclass
class ModuleFacts:
    """What one module defines and imports (its top-level statements)."""

    #: local name -> (dotted target module, name in it or None for the module itself, level)
    imports: dict[str, tuple[str, str | None, int]] = field(default_factory=dict)
    #: class name -> its bases as written (dotted)
    classes: dict[str, list[str]] = field(default_factory=dict)
    #: class name -> its method names
    methods: dict[str, set[str]] = field(default_factory=dict)
    functions: set[str] = field(default_factory=set)


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    if isinstance(node, ast.Subscript):  # Generic[T], Base[int]
        return _dotted(node.value)
    return None


def module_facts(tree: ast.Module) -> ModuleFacts:
    """The facts of one parsed module (see `ModuleFacts`)."""
    out = ModuleFacts()
    for stmt in flat_statements(tree.body):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.functions.add(stmt.name)
        elif isinstance(stmt, ast.ClassDef):
            out.classes[stmt.name] = [b for b in (_dotted(x) for x in stmt.bases) if b]
            out.methods[stmt.name] = {
                s.name for s in stmt.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
            }
        elif isinstance(stmt, ast.Import):
            for a in stmt.names:
                if a.asname:
                    out.imports[a.asname] = (a.name, None, 0)
                else:  # `import a.b` binds `a`
                    top = a.name.split(".")[0]
                    out.imports[top] = (top, None, 0)
        elif isinstance(stmt, ast.ImportFrom):
            mod = stmt.module or ""
            for a in stmt.names:
                if a.name == "*":
                    continue
                out.imports[a.asname or a.name] = (mod, a.name, stmt.level)
    return out


def module_name(relpath: str) -> str:
    """`pkg/sub/mod.py` -> `pkg.sub.mod`; `pkg/__init__.py` -> `pkg`."""
    parts = relpath.replace("\\", "/").split("/")
    if parts and parts[-1].endswith(".py"):
        parts[-1] = parts[-1][:-3]
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(p for p in parts if p)


class RepoIndex:
    """The modules of a repository (see the module docstring)."""

    def __init__(self) -> None:
        self.facts: dict[str, ModuleFacts] = {}  # path -> facts
        self.names: dict[str, str] = {}  # path -> dotted module name
        self.packages: set[str] = set()  # paths of __init__.py files
        self._by_tail: dict[str, set[str]] = {}
        self._mros: dict[Symbol, list[Symbol]] = {}
        self._tops: set[str] | None = None
        #: top-level names of every module of the repository (indexed or not)
        self.first_party: set[str] = set()

    def add(self, path: str, relpath: str, facts: ModuleFacts) -> None:
        name = module_name(relpath)
        self.facts[path] = facts
        self.names[path] = name
        if relpath.replace("\\", "/").endswith("__init__.py"):
            self.packages.add(path)
        parts = name.split(".") if name else []
        for i in range(len(parts)):
            self._by_tail.setdefault(".".join(parts[i:]), set()).add(path)
        self._mros.clear()
        self._tops = None

    # ----- modules --------------------------------------------------------------
    def module(self, dotted: str, importer: str | None = None, level: int = 0) -> str | None:
        """The path of the module `dotted` names (relative to `importer` when `level`)."""
        if level:
            if importer is None or importer not in self.names:
                return None
            base = self.names[importer].split(".") if self.names[importer] else []
            if importer not in self.packages:
                base = base[:-1]
            if level > 1:
                base = base[: len(base) - (level - 1)] if level - 1 <= len(base) else []
            dotted = ".".join([*base, *([dotted] if dotted else [])])
            exact = [p for p, n in self.names.items() if n == dotted]
            if len(exact) == 1:
                return exact[0]
        got = self._by_tail.get(dotted)
        if got is not None and len(got) == 1:
            return next(iter(got))
        if got:  # several modules end so: the one whose full name it is, else none
            exact = [p for p in got if self.names[p] == dotted]
            return exact[0] if len(exact) == 1 else None
        return None

    def resolve(self, path: str, dotted: str) -> Symbol | None:
        """What `dotted` (a name or `a.b.c`) means in module `path`: a function or class
        defined in a module of the index, `(module path, qualified name)`."""
        facts = self.facts.get(path)
        if facts is None:
            return None
        head, _, rest = dotted.partition(".")
        if head in facts.functions or head in facts.classes:
            return (path, dotted)
        imp = facts.imports.get(head)
        if imp is None:
            return None
        mod, name, level = imp
        if name is None:  # `import a.b` / `import a.b as c`: a module, then names in it
            parts = rest.split(".") if rest else []
            target = mod if head == mod.split(".")[0] and mod == head else mod
            # `import a` binds a; `a.b.f` -> the longest module prefix that exists
            for k in range(len(parts), 0, -1):
                cand = ".".join([target, *parts[: k - 1]]) if k > 1 else target
                m = self.module(cand)
                if m is not None:
                    return self._in_module(m, ".".join(parts[k - 1 :]))
            return None
        m = self.module(mod, path, level) if (mod or level) else None
        if m is not None:
            target_name = f"{name}.{rest}" if rest else name
            got = self._in_module(m, target_name)
            if got is not None:
                return got
        # `from pkg import mod`: a submodule
        sub = self.module(f"{mod}.{name}" if mod else name, path, level)
        if sub is not None and rest:
            return self._in_module(sub, rest)
        return None

    def _in_module(self, path: str, qualname: str, depth: int = 0) -> Symbol | None:
        """`qualname` in module `path`, following a re-export (`from .impl import f` in
        an `__init__.py`) a few times."""
        if not qualname or depth > 4:
            return None
        facts = self.facts[path]
        head = qualname.split(".")[0]
        if head in facts.functions or head in facts.classes:
            return (path, qualname)
        if head in facts.imports:
            return self.resolve(path, qualname) if depth < 4 else None
        return None

    def imported(self, path: str) -> set[str]:
        """The dotted names of the first-party modules `path` imports (relative imports
        made absolute; first-party: the top package of some indexed module)."""
        facts = self.facts.get(path)
        if facts is None:
            return set()
        if self._tops is None:
            self._tops = {n.split(".")[0] for n in self.names.values() if n} | self.first_party
        tops = self._tops
        base = self.names.get(path, "").split(".")
        if path not in self.packages:
            base = base[:-1]
        out: set[str] = set()
        for mod, _name, level in facts.imports.values():
            if level:
                head = base[: len(base) - (level - 1)] if level - 1 <= len(base) else []
                mod = ".".join([*head, *([mod] if mod else [])])
            if mod and mod.split(".")[0] in tops:
                out.add(mod)
        return out

    def linked(self, a: str, b: str) -> bool:
        """Whether two modules can share objects: one imports the other, or both import a
        common first-party module (the one defining the sample type, say)."""
        if a == b:
            return True
        ia, ib = self.imported(a), self.imported(b)
        na, nb = self.names.get(a), self.names.get(b)
        return bool(ia & ib) or (nb is not None and nb in ia) or (na is not None and na in ib)

    # ----- classes ----------------------------------------------------------------
    def mro(self, cls: Symbol) -> list[Symbol]:
        """`cls` and its bases known to the index, depth first, each once."""
        got = self._mros.get(cls)
        if got is not None:
            return got
        out: list[Symbol] = []
        todo = [cls]
        while todo and len(out) < 64:
            c = todo.pop(0)
            if c in out:
                continue
            path, name = c
            facts = self.facts.get(path)
            if facts is None or name not in facts.classes:
                continue
            out.append(c)
            for base in facts.classes[name]:
                b = self.resolve(path, base)
                if b is not None:
                    todo.append(b)
        self._mros[cls] = out
        return out

    def method(self, cls: Symbol, name: str) -> Symbol | None:
        """Where `name` is defined for instances of `cls` (its own class or a base)."""
        for path, cname in self.mro(cls):
            if name in self.facts[path].methods.get(cname, ()):
                return (path, f"{cname}.{name}")
        return None
