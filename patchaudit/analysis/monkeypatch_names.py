"""Resolving libcst expressions of a module to engine names: through imports
(aliases included), names bound to an engine object, `importlib.import_module`,
`sys.modules[...]`, `getattr(X, "...")`, literal tables iterated by `for`; and
compiling the conditions around a patch to version gates.

Imports libcst: import it only for files that can match (`collect`)."""

from __future__ import annotations

from typing import Any, Iterable

import libcst as cst
from libcst.metadata import QualifiedNameProvider, QualifiedNameSource, ScopeProvider

from patchaudit.analysis.monkeypatch_gates import UNKNOWN, Cond
from patchaudit.inputs.cst import string_literal


def code_of(node) -> str:
    try:
        return cst.Module([]).code_for_node(node)
    except Exception:  # pragma: no cover
        return "?"


class EngineNames(cst.CSTVisitor):
    """What the names of a module are bound to, and the engine dotted names its
    expressions denote (a base of the `Collector`, which records the bindings
    while it visits)."""

    def __init__(self, packages: Iterable[str]):
        super().__init__()
        self.packages = tuple(packages)
        self.bound: dict[Any, tuple] = {}  # Name target node -> ("value", node) | ("for", For, index)
        self._ref_cache: dict[int, frozenset[str]] = {}

    # ----- metadata helpers ----------------------------------------------
    def qnames(self, node) -> set[str]:
        try:
            names = self.get_metadata(QualifiedNameProvider, node, set())
        except Exception:
            return set()
        return {q.name for q in names if q.source == QualifiedNameSource.IMPORT}

    def callee(self, call) -> set[str]:
        try:
            names = self.get_metadata(QualifiedNameProvider, call.func, set())
        except Exception:
            return set()
        return {q.name for q in names}

    def is_engine(self, dotted: str) -> bool:
        return dotted.split(".", 1)[0] in self.packages

    def assignments(self, name_node):
        try:
            scope = self.get_metadata(ScopeProvider, name_node, None)
        except Exception:
            return None
        if scope is None:
            return None
        try:
            return list(scope[name_node.value])
        except Exception:
            return None

    # ----- resolving expressions to engine names -------------------------
    def refs(self, node, depth: int = 0) -> frozenset[str]:
        """Engine dotted names an expression denotes (empty when none)."""
        key = id(node)
        if key in self._ref_cache:
            return self._ref_cache[key]
        self._ref_cache[key] = frozenset()  # cycle guard
        out = frozenset(self._refs(node, depth))
        self._ref_cache[key] = out
        return out

    def _refs(self, node, depth: int) -> set[str]:
        if depth > 6:
            return set()
        if isinstance(node, (cst.Name, cst.Attribute)):
            direct = {q for q in self.qnames(node) if self.is_engine(q)}
            if direct:
                return direct
        if isinstance(node, cst.Attribute):
            return {f"{b}.{node.attr.value}" for b in self.refs(node.value, depth + 1)}
        if isinstance(node, cst.Name):
            assigns = self.assignments(node)
            if not assigns:
                return set()
            out: set[str] = set()
            for a in assigns:
                bound = self.bound.get(getattr(a, "node", None))
                if bound is None or bound[0] != "value":
                    continue
                out |= self.refs(bound[1], depth + 1)
            return out
        if isinstance(node, cst.Call):
            callee = self.callee(node)
            args = [a for a in node.args if a.star == ""]
            if callee & {"importlib.import_module", "builtins.__import__"} and args:
                s = string_literal(args[0].value)
                if s and self.is_engine(s) and "builtins.__import__" not in callee:
                    return {s}
            if "builtins.getattr" in callee and len(args) >= 2:
                attr = string_literal(args[1].value)
                if attr:
                    return {f"{b}.{attr}" for b in self.refs(args[0].value, depth + 1)}
            return set()
        if isinstance(node, cst.Subscript):
            # sys.modules["sglang.srt.x"]
            if {q for q in self.qnames(node.value)} & {"sys.modules"} and len(node.slice) == 1:
                sl = node.slice[0].slice
                if isinstance(sl, cst.Index):
                    s = string_literal(sl.value)
                    if s and self.is_engine(s):
                        return {s}
        return set()

    def namespace_of(self, node) -> frozenset[str]:
        """The engine objects whose namespace dict an expression is: `X.__dict__`, `vars(X)`."""
        if isinstance(node, cst.Attribute) and node.attr.value == "__dict__":
            return self.refs(node.value)
        if isinstance(node, cst.Call) and "builtins.vars" in self.callee(node) and len(node.args) == 1:
            return self.refs(node.args[0].value)
        return frozenset()

    def strings(self, node, depth: int = 0) -> list[str] | None:
        """The string value(s) of an expression: a literal, or a name bound to one."""
        s = string_literal(node)
        if s is not None:
            return [s]
        if isinstance(node, cst.Name) and depth < 4:
            assigns = self.assignments(node)
            if not assigns or len(assigns) != 1:
                return None
            bound = self.bound.get(getattr(assigns[0], "node", None))
            if bound is None:
                return None
            if bound[0] == "value":
                return self.strings(bound[1], depth + 1)
            if bound[0] == "for":
                rows = self.loop_rows(bound[1], bound[2])
                if rows is None:
                    return None
                vals = [string_literal(r) for r in rows]
                return None if any(v is None for v in vals) else vals  # type: ignore[return-value]
        return None

    def loop_rows(self, for_node, index: tuple[int, ...]):
        """The elements a `for` target (at tuple `index`) takes over a literal table."""
        it = for_node.iter
        if isinstance(it, cst.Name):
            assigns = self.assignments(it)
            if not assigns or len(assigns) != 1:
                return None
            bound = self.bound.get(getattr(assigns[0], "node", None))
            if bound is None or bound[0] != "value":
                return None
            it = bound[1]
        if not isinstance(it, (cst.List, cst.Tuple, cst.Set)):
            return None
        rows = []
        for el in it.elements:
            v = el.value
            for k in index:
                if not isinstance(v, (cst.Tuple, cst.List)) or k >= len(v.elements):
                    return None
                v = v.elements[k].value
            rows.append(v)
        return rows

    def loop_of(self, node):
        """(For node, index) when `node` is a Name bound by a `for` target."""
        if not isinstance(node, cst.Name):
            return None
        assigns = self.assignments(node)
        if not assigns or len(assigns) != 1:
            return None
        bound = self.bound.get(getattr(assigns[0], "node", None))
        if bound is None or bound[0] != "for":
            return None
        return bound[1], bound[2]

    # ----- bindings ------------------------------------------------------
    def bind(self, target, value) -> None:
        if isinstance(target, cst.Name):
            self.bound[target] = ("value", value)
        elif (
            isinstance(target, (cst.Tuple, cst.List))
            and isinstance(value, (cst.Tuple, cst.List))
            and len(target.elements) == len(value.elements)
        ):
            for t, v in zip(target.elements, value.elements):
                self.bind(t.value, v.value)

    def bind_for(self, target, for_node, index: tuple[int, ...] = ()) -> None:
        if isinstance(target, cst.Name):
            self.bound[target] = ("for", for_node, index)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for k, t in enumerate(target.elements):
                self.bind_for(t.value, for_node, index + (k,))

    # ----- conditions ------------------------------------------------------
    def compile_cond(self, node, depth: int = 0) -> Cond:
        if depth > 6:
            return UNKNOWN
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
            return Cond("not", (self.compile_cond(node.expression, depth + 1),))
        if isinstance(node, cst.BooleanOperation):
            op = "and" if isinstance(node.operator, cst.And) else "or"
            return Cond(op, (self.compile_cond(node.left, depth + 1), self.compile_cond(node.right, depth + 1)))
        if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
            comp = node.comparisons[0]
            ops = {
                cst.LessThan: "<",
                cst.LessThanEqual: "<=",
                cst.GreaterThan: ">",
                cst.GreaterThanEqual: ">=",
                cst.Equal: "==",
                cst.NotEqual: "!=",
                cst.In: "in",
                cst.NotIn: "not in",
            }
            cmp_op = ops.get(type(comp.operator))
            if cmp_op is None:
                return UNKNOWN
            return Cond(
                "cmp",
                (cmp_op, self.compile_value(node.left, depth + 1), self.compile_value(comp.comparator, depth + 1)),
            )
        if isinstance(node, cst.Call) and "builtins.hasattr" in self.callee(node) and len(node.args) == 2:
            attr = string_literal(node.args[1].value)
            owners = self.refs(node.args[0].value)
            if attr and len(owners) == 1:
                return Cond("has", (f"{next(iter(owners))}.{attr}",))
        if isinstance(node, cst.Name):
            bound = self.single_value(node)
            if bound is not None:
                return self.compile_cond(bound, depth + 1)
        return UNKNOWN

    def single_value(self, name_node):
        assigns = self.assignments(name_node)
        if not assigns or len(assigns) != 1:
            return None
        bound = self.bound.get(getattr(assigns[0], "node", None))
        if bound is None or bound[0] != "value":
            return None
        return bound[1]

    def compile_value(self, node, depth: int = 0) -> Cond:
        if depth > 8:
            return UNKNOWN
        s = string_literal(node)
        if s is not None:
            return Cond("lit", (s,))
        if isinstance(node, (cst.Tuple, cst.List)):
            vals = []
            for el in node.elements:
                v = string_literal(el.value)
                if v is None:
                    return UNKNOWN
                vals.append(v)
            return Cond("lit", (tuple(vals),))
        if isinstance(node, cst.Attribute):
            if node.attr.value == "__version__":
                for r in self.refs(node.value) or {q for q in self.qnames(node.value)}:
                    top = r.split(".", 1)[0]
                    if top in self.packages:
                        return Cond("ver", (top,))
                return UNKNOWN
            if node.attr.value in ("base_version", "public"):
                return Cond("base", (self.compile_value(node.value, depth + 1),))
        if isinstance(node, cst.Name):
            for q in self.qnames(node):
                if q.endswith(".__version__") and self.is_engine(q):
                    return Cond("ver", (q.split(".", 1)[0],))  # from sglang import __version__
        if isinstance(node, cst.Call) and len(node.args) == 1 and not node.args[0].keyword:
            callee = self.callee(node)
            if callee & {"importlib.metadata.version", "importlib_metadata.version"}:
                dist = string_literal(node.args[0].value)
                if dist:
                    pkg = dist.replace("-", "_").split(".", 1)[0]
                    return Cond("ver", (pkg,)) if pkg in self.packages else UNKNOWN
            last = {c.rsplit(".", 1)[-1] for c in callee} | (
                {node.func.attr.value}
                if isinstance(node.func, cst.Attribute)
                else {node.func.value}
                if isinstance(node.func, cst.Name)
                else set()
            )
            if last & {"parse", "Version", "parse_version", "LooseVersion", "StrictVersion"}:
                return Cond("parse", (self.compile_value(node.args[0].value, depth + 1),))
        if isinstance(node, cst.Name):
            bound = self.single_value(node)
            if bound is not None:
                return self.compile_value(bound, depth + 1)
        return UNKNOWN
