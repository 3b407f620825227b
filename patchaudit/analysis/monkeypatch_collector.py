"""Monkey-patch recognition with libcst (ScopeProvider, QualifiedNameProvider):
one pass over a module records the patch sites with their gates, and
`finish()` turns them into `MonkeyPatch` records.

Imports libcst: `patchaudit.analysis.monkeypatch.collector_class` imports this
module only for a file that can match, so a text-only run never loads libcst."""

from __future__ import annotations

from typing import Iterable

import libcst as cst
from libcst.metadata import PositionProvider, QualifiedNameProvider, QualifiedNameSource, ScopeProvider

from patchaudit.analysis.monkeypatch_gates import Gate
from patchaudit.analysis.monkeypatch_names import EngineNames, code_of
from patchaudit.analysis.monkeypatch_records import POSITIONAL, TRANSPARENT_DECORATORS, MonkeyPatch, Replacement
from patchaudit.engine.definitions import Param
from patchaudit.engine.versions import path_version_tag
from patchaudit.inputs.cst import string_literal
from patchaudit.inputs.testfiles import is_test_file

#: callables of unittest.mock (and the `mock` backport) that install a patch
_MOCK_PATCH = {"unittest.mock.patch", "mock.patch"}
_MOCK_OBJECT = {"unittest.mock.patch.object", "mock.patch.object"}
_MOCK_MULTIPLE = {"unittest.mock.patch.multiple", "mock.patch.multiple"}
#: keyword arguments of patch() that are not the replacement
_PATCH_KWARGS = {"spec", "create", "spec_set", "autospec", "new_callable", "new", "target", "attribute"}


class Collector(EngineNames):
    """One pass over a module: records patch sites with their gates, and what
    names are bound to; `finish()` turns the sites into MonkeyPatch records."""

    METADATA_DEPENDENCIES = (PositionProvider, ScopeProvider, QualifiedNameProvider)

    def __init__(self, path: str, packages: Iterable[str], include_tests: bool = False):
        super().__init__(packages)
        self.path = path
        self.in_tests = is_test_file(path)
        #: a test file's assignments are stubs of the engine, not patches of it (unless asked)
        self.skip_all = self.in_tests and not include_tests
        self.tag = path_version_tag(path, self.packages)
        self.gates: list[Gate] = []
        self.handlers: list[set[str]] = []
        self.funcs: list[str] = []
        self.sites: list[dict] = []
        self.patches: list[MonkeyPatch] = []
        self.probed: set[str] = set()  # attribute names the file tests for
        self.imported: set[str] = set()  # engine modules named by an import statement

    # ----- context stacks --------------------------------------------------
    def visit_FunctionDef(self, node) -> None:
        self.funcs.append(node.name.value)

    def leave_FunctionDef(self, original_node) -> None:
        self.funcs.pop()

    def visit_ClassDef(self, node) -> None:
        self.funcs.append(node.name.value)

    def leave_ClassDef(self, original_node) -> None:
        self.funcs.pop()

    def visit_If_body(self, node) -> None:
        self.gates.append(Gate(self.compile_cond(node.test), True, code_of(node.test)))

    def leave_If_body(self, node) -> None:
        self.gates.pop()

    def visit_If_orelse(self, node) -> None:
        self.gates.append(Gate(self.compile_cond(node.test), False, code_of(node.test)))

    def leave_If_orelse(self, node) -> None:
        self.gates.pop()

    def visit_ExceptHandler(self, node) -> None:
        names: set[str] = set()
        t = node.type
        elems = t.elements if isinstance(t, cst.Tuple) else ([] if t is None else [t])
        for e in elems:
            v = e.value if isinstance(e, cst.Element) else e
            if isinstance(v, (cst.Name, cst.Attribute)):
                names.add(code_of(v).rsplit(".", 1)[-1])
        if t is None:
            names.add("BaseException")
        self.handlers.append(names)

    def leave_ExceptHandler(self, original_node) -> None:
        self.handlers.pop()

    def visit_Import(self, node) -> None:
        for alias in node.names:
            name = code_of(alias.name)
            if self.is_engine(name):
                self.imported.add(name)

    def visit_ImportFrom(self, node) -> None:
        if node.relative or node.module is None:
            return
        name = code_of(node.module)
        if self.is_engine(name):
            self.imported.add(name)

    def visit_For(self, node) -> None:
        self.bind_for(node.target, node)

    # ----- sites -----------------------------------------------------------
    def _site(self, form: str, anchor, targets: Iterable[str], value, stmt, *, create: bool = False, row=None) -> None:
        targets = tuple(sorted(set(targets)))
        if not targets or self.skip_all:
            return
        self.sites.append(
            dict(
                form=form,
                anchor=anchor,
                targets=targets,
                value=value,
                stmt=stmt,
                gates=tuple(self.gates),
                handlers=[set(h) for h in self.handlers],
                function=".".join(self.funcs) or None,
                create=create,
                row=row,
            )
        )

    def visit_Assign(self, node) -> None:
        for t in node.targets:
            self.bind(t.target, node.value)
        for t in node.targets:
            self._assign_site(t.target, node.value, node)

    def visit_AnnAssign(self, node) -> None:
        if node.value is not None:
            self.bind(node.target, node.value)
            self._assign_site(node.target, node.value, node)

    def _assign_site(self, target, value, stmt) -> None:
        if isinstance(target, cst.Attribute):
            refs = self.refs(target)
            if refs:
                self._site("assign", target, refs, value, stmt)
        elif isinstance(target, cst.Subscript):
            # mod.__dict__["name"] = f, vars(mod)["name"] = f, sys.modules["m"].__dict__["name"] = f
            owners = self.namespace_of(target.value)
            if owners and len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index):
                names = self.strings(target.slice[0].slice.value)
                if names:
                    self._site("__dict__", target, [f"{o}.{n}" for o in owners for n in names], value, stmt)
        elif (
            isinstance(target, (cst.Tuple, cst.List))
            and isinstance(value, (cst.Tuple, cst.List))
            and len(target.elements) == len(value.elements)
        ):
            for t, v in zip(target.elements, value.elements):
                self._assign_site(t.value, v.value, stmt)

    def visit_Call(self, node) -> None:
        callee = self.callee(node)
        if not callee:
            return
        if callee & {"builtins.hasattr", "builtins.getattr"} and len(node.args) >= 2:
            probed = string_literal(node.args[1].value)
            if probed and ("builtins.hasattr" in callee or len(node.args) == 3):
                self.probed.add(probed)  # hasattr(X, "f"), getattr(X, "f", default)
        if "builtins.setattr" in callee:
            self._setattr(node)
        elif callee & (_MOCK_PATCH | _MOCK_OBJECT | _MOCK_MULTIPLE):
            if self.in_tests:
                return
            self._mock(node, callee)

    def _setattr(self, node) -> None:
        args = node.args
        if len(args) < 3 or any(a.star or a.keyword for a in args[:3]):
            return
        owners = self.refs(args[0].value)
        if not owners:
            return
        loop, vloop = self.loop_of(args[1].value), self.loop_of(args[2].value)
        if loop and vloop and loop[0] is vloop[0] and self.strings(args[1].value) is not None:
            # for name, fn in TABLE: setattr(X, name, fn): one patch per row
            self._table_sites("setattr", loop, vloop, owners)
            return
        names = self.strings(args[1].value)
        if names is None:
            return
        self._site("setattr", node, [f"{o}.{n}" for o in owners for n in names], args[2].value, node)

    def _table_sites(self, form, loop, vloop, owners=None) -> None:
        names = self.loop_rows(*loop)
        values = self.loop_rows(*vloop)
        if names is None or values is None or len(names) != len(values):
            return
        for n_node, v_node in zip(names, values):
            s = string_literal(n_node)
            if s is None:
                continue
            targets = [f"{o}.{s}" for o in owners] if owners is not None else ([s] if self.is_engine(s) else [])
            self._site(form, n_node, targets, v_node, n_node, row=True)

    def _mock(self, node, callee) -> None:
        pos = [a for a in node.args if a.keyword is None and not a.star]
        kw = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
        create = isinstance(kw.get("create"), cst.Name) and kw["create"].value == "True"
        if callee & _MOCK_PATCH:
            target = pos[0].value if pos else kw.get("target")
            new = pos[1].value if len(pos) > 1 else kw.get("new")
            if target is None:
                return
            loop = self.loop_of(target)
            vloop = self.loop_of(new) if new is not None else None
            if loop and vloop and loop[0] is vloop[0]:
                # for target, new in TABLE: patch(target, new): one patch per row
                self._table_sites("mock.patch", loop, vloop)
                return
            names = self.strings(target)
            if names is None:
                return
            self._site("mock.patch", node, [n for n in names if self.is_engine(n)], new, node, create=create)
        elif callee & _MOCK_OBJECT:
            obj = pos[0].value if pos else kw.get("target")
            attr = pos[1].value if len(pos) > 1 else kw.get("attribute")
            new = pos[2].value if len(pos) > 2 else kw.get("new")
            if obj is None or attr is None:
                return
            owners: frozenset[str] | set[str] = self.refs(obj)
            names = self.strings(attr)
            if owners and names:
                self._site(
                    "mock.patch.object", node, [f"{o}.{n}" for o in owners for n in names], new, node, create=create
                )
        else:
            target = pos[0].value if pos else kw.get("target")
            if target is None:
                return
            owners = set(self.refs(target))
            names = self.strings(target)
            if names:
                owners |= {n for n in names if self.is_engine(n)}
            if not owners:
                return
            for a in node.args:
                if a.keyword is not None and a.keyword.value not in _PATCH_KWARGS:
                    self._site(
                        "mock.patch.multiple",
                        a.keyword,
                        [f"{o}.{a.keyword.value}" for o in owners],
                        a.value,
                        node,
                        create=create,
                    )

    # ----- turning sites into patches --------------------------------------
    def leave_Module(self, original_node) -> None:
        self.finish()  # metadata is only there during the traversal

    def finish(self) -> list[MonkeyPatch]:
        out: list[MonkeyPatch] = []
        for s in self.sites:
            mp = self._patch(s)
            if mp is not None:
                out.append(mp)
        self.patches = out
        return out

    def _patch(self, s: dict) -> MonkeyPatch | None:
        targets = s["targets"]
        value = s["value"]
        tset = set(targets)
        if (
            value is not None
            and isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript))
            and self.refs(value) & tset
            and not isinstance(value, cst.Call)
            and not self._defined_here(value)
        ):
            return None  # `X.f = orig` restores the original: not a patch of its own
        try:
            pos = self.get_metadata(PositionProvider, s["anchor"])
        except Exception:
            return None
        how = "replaced"
        if value is None:
            how = "mocked"
        elif self._wraps(value, tset):
            how = "wrapped"
        if s["create"] or self._is_shim(s, tset):
            how = "added"
        elif (
            isinstance(value, (cst.Name, cst.Integer, cst.Float, cst.SimpleString))
            and (not isinstance(value, cst.Name) or value.value in ("True", "False", "None"))
            and targets[0].rsplit(".", 1)[-1] in self.probed
        ):
            how = "added"  # a marker the fork sets and tests for (`X._patched = True`)
        rep = self.replacement(value) if value is not None else None
        code = code_of(s["stmt"]).strip().splitlines()
        return MonkeyPatch(
            self.path,
            pos.start.line,
            pos.start.column,
            pos.end.line,
            pos.end.column,
            tuple(targets),
            s["form"],
            how,
            rep,
            s["function"],
            s["gates"],
            self.tag,
            code[0] if code else "",
            tuple(sorted(m for m in self.imported if any(t == m or t.startswith(m + ".") for t in targets))),
        )

    def _defined_here(self, value) -> bool:
        """A name also bound by a `def` or `class` of this file (`try: from X import f /
        except ImportError: def f(...)`, then `X.f = f`): a backport, not the original."""
        if not isinstance(value, cst.Name):
            return False
        assigns = self.assignments(value) or []
        return any(isinstance(getattr(a, "node", None), (cst.FunctionDef, cst.ClassDef)) for a in assigns)

    def _is_shim(self, s: dict, tset: set[str]) -> bool:
        """A backport: set only when the engine lacks it (`except ImportError:`,
        `if not hasattr(X, "f"):`)."""
        if any(h & {"ImportError", "ModuleNotFoundError", "AttributeError"} for h in s["handlers"]):
            return True
        for g in s["gates"]:
            text = g.text.strip()
            if not text.replace(" ", "").startswith(("hasattr(", "nothasattr(")):
                continue
            negated = text.startswith("not")
            # the body of `if not hasattr(...)`, or the else-branch of `if hasattr(...)`
            if g.polarity == negated:
                return True
        return False

    def _wraps(self, value, tset: set[str], depth: int = 0) -> bool:
        """The replacement keeps and calls the original."""
        if depth > 3:
            return False
        for node in _walk(value, skip_defs=False):
            if isinstance(node, (cst.Name, cst.Attribute)) and node is not value and self.refs(node) & tset:
                return True
            if isinstance(node, cst.Call) and self.refs(node) & tset:
                return True
        if isinstance(value, cst.Call):
            for a in value.args:
                if self.refs(a.value) & tset:
                    return True
        if isinstance(value, cst.Name):
            fn = self._def_of(value)
            if fn is not None:
                return self._wraps(fn, tset, depth + 1)
        return False

    def _def_of(self, name_node):
        assigns = self.assignments(name_node)
        if not assigns or len(assigns) != 1:
            return None
        node = getattr(assigns[0], "node", None)
        if isinstance(node, (cst.FunctionDef, cst.Lambda)):
            return node
        bound = self.bound.get(node)
        if bound is not None and bound[0] == "value" and isinstance(bound[1], cst.Lambda):
            return bound[1]
        return None

    # ----- the replacement's signature -------------------------------------
    def replacement(self, value, depth: int = 0) -> Replacement:
        name = code_of(value)
        if len(name) > 60:
            name = name[:57] + "..."
        line = None
        try:
            line = self.get_metadata(PositionProvider, value).start.line
        except Exception:
            pass
        rep = Replacement(name=name, line=line)
        if depth > 4:
            return rep
        if isinstance(value, cst.Lambda):
            rep.params, rep.is_async, rep.binding = _cst_params(value.params), False, "function"
            return rep
        if isinstance(value, cst.FunctionDef):
            return self._from_def(value, rep)
        if isinstance(value, cst.Name):
            return self._name_replacement(value, rep, name, depth)
        if isinstance(value, cst.Attribute):
            return self._attribute_replacement(value, rep)
        if isinstance(value, cst.Call):
            return self._call_replacement(value, rep, name, depth)
        return rep

    def _name_replacement(self, value, rep: Replacement, name: str, depth: int) -> Replacement:
        assigns = self.assignments(value)
        engine = {q for q in self.qnames(value) if self.is_engine(q)}
        if engine:
            rep.engine_ref = sorted(engine)[0]
            return rep
        if not assigns or len(assigns) != 1:
            rep.note = "defined more than once" if assigns else "not defined in this file"
            return rep
        node = getattr(assigns[0], "node", None)
        if isinstance(node, cst.FunctionDef):
            return self._from_def(node, rep)
        bound = self.bound.get(node)
        if bound is not None and bound[0] == "value":
            inner = self.replacement(bound[1], depth + 1)
            inner.name = name
            return inner
        kind = type(assigns[0]).__name__
        if kind == "ImportAssignment":
            refs = {
                q.name
                for q in self.get_metadata(QualifiedNameProvider, value, set())
                if q.source == QualifiedNameSource.IMPORT
            }
            if len(refs) == 1:
                rep.fork_ref = next(iter(refs))
        rep.note = (
            "imported from another module"
            if kind == "ImportAssignment"
            else "a builtin"
            if kind == "BuiltinAssignment"
            else "not a function of this file"
        )
        return rep

    def _attribute_replacement(self, value, rep: Replacement) -> Replacement:
        engine = {q for q in self.qnames(value) if self.is_engine(q)} or set(self.refs(value))
        if engine:
            rep.engine_ref = sorted(engine)[0]
            return rep
        # LocalClass.method
        if isinstance(value.value, cst.Name):
            assigns = self.assignments(value.value)
            if assigns and len(assigns) == 1 and isinstance(getattr(assigns[0], "node", None), cst.ClassDef):
                cls = assigns[0].node
                for stmt in cls.body.body:
                    if isinstance(stmt, cst.FunctionDef) and stmt.name.value == value.attr.value:
                        got = self._from_def(stmt, rep)
                        if got.binding == "static":
                            got.binding = "function"
                        return got
        refs = {
            q.name
            for q in self.get_metadata(QualifiedNameProvider, value, set())
            if q.source == QualifiedNameSource.IMPORT
        }
        if len(refs) == 1:
            rep.fork_ref = next(iter(refs))  # ForkClass.method imported from the fork
        return rep

    def _call_replacement(self, value, rep: Replacement, name: str, depth: int) -> Replacement:
        callee = self.callee(value)
        args = value.args
        if callee & {"functools.partial"} and args and not args[0].keyword and not args[0].star:
            base = self.replacement(args[0].value, depth + 1)
            rep.line = base.line or rep.line
            if base.params is None:
                rep.note = base.note
                return rep
            params = _apply_partial(base.params, args[1:])
            if params is not None:
                rep.params, rep.is_async, rep.binding = params, base.is_async, "unbound"
            return rep
        if callee & {"builtins.staticmethod", "builtins.classmethod"} and len(args) == 1:
            base = self.replacement(args[0].value, depth + 1)
            if base.params is not None:
                rep.params, rep.is_async = base.params, base.is_async
                rep.binding = "static" if "builtins.staticmethod" in callee else "class"
            rep.line = base.line or rep.line
            return rep
        # a local factory that returns a nested function: wrap(orig) -> inner
        if isinstance(value.func, cst.Name):
            fn = self._def_of(value.func)
            if isinstance(fn, cst.FunctionDef):
                inner = _returned_def(fn)
                if inner is not None:
                    got = self._from_def(inner, rep)
                    got.name = name
                    return got
        rep.note = "built by a call"
        return rep

    def _from_def(self, fn, rep: Replacement) -> Replacement:
        try:
            rep.line = self.get_metadata(PositionProvider, fn).start.line
        except Exception:
            pass
        binding = "function"
        for d in fn.decorators:
            dname = code_of(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator)
            qn = self.callee(d.decorator) if isinstance(d.decorator, cst.Call) else self.qnames(d.decorator)
            if dname in ("staticmethod",):
                binding = "static"
            elif dname in ("classmethod",):
                binding = "class"
            elif dname in TRANSPARENT_DECORATORS or qn & TRANSPARENT_DECORATORS:
                continue
            else:
                rep.note = f"decorated with @{dname}"
                return rep
        rep.params = _cst_params(fn.params)
        rep.is_async = fn.asynchronous is not None
        rep.binding = binding
        return rep


def _walk(node, skip_defs: bool = True):
    """Every node under `node` (pre-order)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if skip_defs and n is not node and isinstance(n, (cst.FunctionDef, cst.ClassDef)):
            continue
        stack.extend(reversed(list(n.children)))


def _returned_def(fn):
    """The nested function a factory returns (`def wrap(orig): def inner(...): ...; return inner`)."""
    if not isinstance(fn.body, cst.IndentedBlock):
        return None
    defs = {}
    for stmt in fn.body.body:
        if isinstance(stmt, cst.FunctionDef):
            defs[stmt.name.value] = stmt
    returned = set()
    for n in _walk(fn.body, skip_defs=True):
        if isinstance(n, cst.Return) and n.value is not None:
            returned.add(n.value.value if isinstance(n.value, cst.Name) else None)
    if len(returned) == 1:
        name = next(iter(returned))
        return defs.get(name) if name else None
    return None


def _cst_params(params) -> list[Param]:
    out: list[Param] = []
    for p in params.posonly_params:
        out.append(Param(p.name.value, "positional_only", p.default is not None))
    for p in params.params:
        out.append(Param(p.name.value, "positional", p.default is not None))
    if isinstance(params.star_arg, cst.Param):
        out.append(Param(params.star_arg.name.value, "vararg", False))
    for p in params.kwonly_params:
        out.append(Param(p.name.value, "keyword_only", p.default is not None))
    if params.star_kwarg is not None:
        out.append(Param(params.star_kwarg.name.value, "varkw", False))
    return out


def _apply_partial(params: list[Param], args) -> list[Param] | None:
    """The parameters left after `functools.partial(f, *args, **kwargs)`."""
    ps = list(params)
    n_pos = 0
    for a in args:
        if a.star:
            return None
        if a.keyword is None:
            n_pos += 1
    out: list[Param] = []
    k = 0
    for p in ps:
        if p.kind in POSITIONAL and k < n_pos:
            k += 1
            continue
        out.append(p)
    bound_kw = {a.keyword.value for a in args if a.keyword is not None}
    final = []
    for p in out:
        if p.name in bound_kw and p.kind in ("positional", "keyword_only"):
            final.append(Param(p.name, "keyword_only", True))
        else:
            final.append(p)
    # keyword-only after positional ones keep order: python moves bound names to keyword-only
    pos = [p for p in final if p.kind in POSITIONAL]
    rest = [p for p in final if p.kind not in POSITIONAL]
    var = [p for p in rest if p.kind == "vararg"]
    kwo = [p for p in rest if p.kind == "keyword_only"]
    varkw = [p for p in rest if p.kind == "varkw"]
    return pos + var + kwo + varkw
