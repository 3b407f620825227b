"""Module-level constants of a Python source file, evaluated from its AST.

The rule registry (patchaudit/config/registry.py) reads each rule's code, kinds,
needs and `requires` from the rule pack's source without importing it: the
values are literals, module constants, `frozenset({...})`, f-strings of known
values, or names imported from another module the registry can read.  Anything
else is `Unknown`, and the registry then imports the module instead.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Mapping, Protocol, cast


class ImportResolver(Protocol):
    """What resolves a name a module imports (the registry's index of the pack's sources)."""

    def imported(self, importer: str, module: str | None, level: int, name: str) -> Any: ...


class Unknown(Exception):
    """A value the static reader cannot know for certain."""


@dataclass(frozen=True)
class ImportRef:
    module: str | None
    level: int
    name: str


MISSING = object()


_BUILTIN_CALLS = {"frozenset": frozenset, "set": set, "tuple": tuple, "list": list}


class ModuleReader:
    """Module-level constants of one source file, evaluated from its AST."""

    def __init__(self, index: ImportResolver, modname: str, tree: ast.Module):
        self.index = index
        self.modname = modname
        self.tree = tree
        self.env: dict[str, Any] = {}
        self.unknown: set[str] = set()
        self._done = False
        #: the rule classes of the module, read by the registry (`_rule_classes`) on
        #: first use; None while being read, or when they cannot be read for certain
        self.classes: dict[str, Any] | None = None
        self.classes_read = False

    def evaluate_globals(self) -> None:
        if self._done:
            return
        self._done = True
        for stmt in self.tree.body:
            if isinstance(stmt, ast.ImportFrom):
                for alias in stmt.names:  # resolved when used: most imports never are
                    name = alias.asname or alias.name
                    self.env[name] = ImportRef(stmt.module, stmt.level, alias.name)
                    self.unknown.discard(name)
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    self._forget(alias.asname or alias.name.partition(".")[0])
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                value = stmt.value
                if value is None:
                    continue
                if len(targets) == 1 and isinstance(targets[0], ast.Name):
                    try:
                        self.env[targets[0].id] = self.eval(value, self.env)
                        self.unknown.discard(targets[0].id)
                    except Unknown:
                        self._forget(targets[0].id)
                elif (
                    len(targets) == 1
                    and isinstance(targets[0], ast.Tuple)
                    and isinstance(value, ast.Tuple)
                    and len(targets[0].elts) == len(value.elts)
                    and all(isinstance(t, ast.Name) for t in targets[0].elts)
                    and not any(isinstance(v, ast.Starred) for v in value.elts)
                ):
                    # A, B = "a", "b": evaluated on the environment before the statement
                    values = []
                    for v in value.elts:
                        try:
                            values.append((True, self.eval(v, self.env)))
                        except Unknown:
                            values.append((False, None))
                    names = [cast(ast.Name, t).id for t in targets[0].elts]  # all Names (checked above)
                    for name, (ok, v) in zip(names, values):
                        if ok:
                            self.env[name] = v
                            self.unknown.discard(name)
                        else:
                            self._forget(name)
                else:
                    for t in targets:
                        for n in ast.walk(t):
                            if isinstance(n, ast.Name):
                                self._forget(n.id)
            else:
                # any other binding at module level (def, class, for, with, if, augmented
                # assignment...) makes the names it binds unknown
                for name in bound_names(stmt):
                    self._forget(name)

    def _forget(self, name: str) -> None:
        self.env.pop(name, None)
        self.unknown.add(name)

    def lookup(self, name: str, default: Any = None) -> Any:
        """A module-level value; an imported name is resolved on first use."""
        if name not in self.env:
            return default
        value = self.env[name]
        if isinstance(value, ImportRef):
            try:
                value = self.index.imported(self.modname, value.module, value.level, value.name)
            except Unknown:
                self._forget(name)
                return default
            self.env[name] = value
        return value

    def eval(self, node: ast.AST, env: Mapping[str, Any]) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = []
            for elt in node.elts:
                if isinstance(elt, ast.Starred):
                    items.extend(self.eval(elt.value, env))
                else:
                    items.append(self.eval(elt, env))
            return {ast.Tuple: tuple, ast.List: list, ast.Set: set}[type(node)](items)
        if isinstance(node, ast.Name):
            if node.id in env:
                value = env[node.id] if env is not self.env else self.lookup(node.id, MISSING)
                if value is not MISSING:
                    return value
            raise Unknown(node.id)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _BUILTIN_CALLS
            and node.func.id not in env
            and node.func.id not in self.unknown
            and not node.keywords
            and len(node.args) <= 1
        ):
            fn = _BUILTIN_CALLS[node.func.id]
            return fn(self.eval(node.args[0], env)) if node.args else fn()
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.BitOr)):
            left, right = self.eval(node.left, env), self.eval(node.right, env)
            try:
                return left + right if isinstance(node.op, ast.Add) else left | right
            except TypeError:
                raise Unknown("operator") from None
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    parts.append(str(v.value))
                elif isinstance(v, ast.FormattedValue) and v.conversion == -1 and v.format_spec is None:
                    value = self.eval(v.value, env)
                    if not isinstance(value, (str, int)):
                        raise Unknown("f-string")
                    parts.append(str(value))
                else:
                    raise Unknown("f-string")
            return "".join(parts)
        raise Unknown(type(node).__name__)


def bound_names(stmt: ast.stmt) -> set[str]:
    out: set[str] = set()
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        out.add(stmt.name)
        return out
    for n in ast.walk(stmt):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).partition(".")[0] for a in n.names)
    return out
