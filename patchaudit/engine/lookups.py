"""Engine lookups: where a dotted name is defined in an engine source (module,
class, base classes, re-exports, star imports), or why it is missing, or why
that cannot be known statically; and the source text of a definition."""

from __future__ import annotations

import ast
import difflib
import textwrap
from dataclasses import dataclass

from patchaudit.engine.definitions import ClassInfo, FuncInfo, ModuleIndex
from patchaudit.engine.versions import cache_on, package_dirs, top_packages
from patchaudit.inputs import source_lines

#: base classes whose attributes are not engine attributes (lookups through them are unknown
#: unless they are known to add nothing)
_TRIVIAL_BASES = {"object", "ABC", "abc.ABC", "Generic", "typing.Generic", "Protocol", "typing.Protocol"}
#: class decorators that add no attribute a monkey-patch could target
_HARMLESS_CLASS_DECORATORS = {
    "dataclass",
    "dataclasses.dataclass",
    "final",
    "typing.final",
    "total_ordering",
    "functools.total_ordering",
    "unique",
    "enum.unique",
}


# --------------------------------------------------------------------------
# engine lookups


@dataclass
class Lookup:
    state: str  # found | missing | unknown
    kind: str = ""  # module | class | function | attribute
    path: str | None = None  # engine file of the definition
    line: int | None = None
    end_line: int | None = None
    qualname: str | None = None
    func: FuncInfo | None = None
    module: ModuleIndex | None = None
    reason: str = ""
    suggestions: tuple[str, ...] = ()
    owner_is_class: bool = False

    @property
    def where(self) -> str:
        if self.path is None:
            return "?"
        return f"{self.path}:{self.line}" if self.line else self.path


def _unknown(reason: str) -> Lookup:
    return Lookup("unknown", reason=reason)


def lookup(ctx, dotted: str, depth: int = 0) -> Lookup:
    """Where `dotted` is defined in the engine of `ctx` (an EngineContext), or
    why it is missing, or why that cannot be known statically."""
    if depth > 8:
        return _unknown("too many re-exports")
    index = ctx.index
    source = ctx.source
    parts = dotted.split(".")
    if parts[0] not in top_packages(source):
        return _unknown(f"`{parts[0]}` is not in this engine")
    for cut in range(len(parts), 0, -1):
        modname = ".".join(parts[:cut])
        mod = index.module(modname)
        if mod is None:
            continue
        rest = parts[cut:]
        if not rest:
            return Lookup("found", "module", mod.path, 1, None, modname, module=mod)
        return _in_module(ctx, mod, rest, depth)
    # no module at all: the deepest package directory that exists
    dirs = package_dirs(source)
    for cut in range(len(parts) - 1, 0, -1):
        pkg = ".".join(parts[:cut])
        if pkg in dirs:
            names = sorted(
                {d.split(".")[cut] for d in dirs if d.startswith(pkg + ".") and d.count(".") == cut}
                | _modules_in(source, pkg)
            )
            return Lookup(
                "missing",
                reason=f"module `{pkg}.{parts[cut]}` does not exist",
                suggestions=tuple(difflib.get_close_matches(parts[cut], names, n=2)),
            )
    return Lookup("missing", reason=f"module `{dotted}` does not exist")


def _modules_in(source, pkg: str) -> set[str]:
    out = set()
    prefix = pkg.replace(".", "/") + "/"
    for root in source.package_roots() or [""]:
        for f in source.files():
            if f.startswith(root + prefix) and f.endswith(".py"):
                rest = f[len(root + prefix) :]
                if "/" not in rest:
                    out.add(rest[:-3])
    return out


def _module_facts(mod: ModuleIndex) -> tuple[set[str], bool, list[str]]:
    """(names bound at module level in any way, has a module __getattr__ or
    globals() writes, star-import sources)."""
    cached = getattr(mod, "_pa_facts", None)
    if cached is not None:
        return cached
    names: set[str] = set()
    dynamic = False
    stars: list[str] = []
    tree = mod.tree
    if tree is not None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                names.update(node.names)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("globals", "exec"):
                dynamic = True
        for stmt in _module_level(tree.body):
            for node in (
                ast.walk(stmt) if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else ()
            ):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    names.add(node.id)
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(stmt.name)
                if stmt.name == "__getattr__":
                    dynamic = True
            if isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names):
                base = stmt.module or ""
                if stmt.level:
                    package = (
                        mod.module.rsplit(".", 1)[0]
                        if mod.module and not mod.path.endswith("__init__.py")
                        else (mod.module or "")
                    )
                    p = package.split(".")
                    keep = p[: len(p) - (stmt.level - 1)] if stmt.level > 1 else p
                    base = ".".join([x for x in keep if x] + ([stmt.module] if stmt.module else []))
                stars.append(base)
    return cache_on(mod, "_pa_facts", (names, dynamic, stars))


def _module_level(body):
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            for attr in ("body", "orelse", "finalbody"):
                yield from _module_level(getattr(stmt, attr, []) or [])
            for h in getattr(stmt, "handlers", []) or []:
                yield from _module_level(h.body)


def _in_module(ctx, mod: ModuleIndex, rest: list[str], depth: int) -> Lookup:
    if mod.tree is None:
        return _unknown(f"{mod.path} does not parse")
    head = rest[0]
    modname = mod.module or mod.path
    if head in mod.classes:
        return _in_class(ctx, mod, mod.classes[head], rest[1:], depth)
    if head in mod.functions:
        f = mod.functions[head]
        if len(rest) == 1:
            return Lookup("found", "function", mod.path, f.line, f.end_line, f.qualname, f, mod)
        return _unknown(f"an attribute of the function `{head}`")
    if head in mod.imports:
        target = mod.imports[head]
        if target.split(".", 1)[0] not in top_packages(ctx.source):
            return _unknown(f"`{head}` comes from `{target}`, outside the engine")
        got = lookup(ctx, ".".join([target] + rest[1:]), depth + 1)
        return got
    names, dynamic, stars = _module_facts(mod)
    if head in names:
        if len(rest) == 1:
            line = _assign_line(mod, head)
            return Lookup("found", "attribute", mod.path, line, line, head, module=mod)
        return _unknown(f"an attribute of the object `{head}`")
    # a submodule of a package that its __init__ does not import
    if mod.path.endswith("__init__.py") and mod.module:
        sub = (
            lookup(ctx, f"{mod.module}.{'.'.join(rest)}", depth + 1)
            if ctx.index.module(f"{mod.module}.{head}") is not None
            else None
        )
        if sub is not None:
            return sub
    for star in stars:
        if star.split(".", 1)[0] not in top_packages(ctx.source) or ctx.index.module(star) is None:
            return _unknown(f"{mod.path} star-imports `{star}`")
        got = lookup(ctx, ".".join([star] + rest), depth + 1)
        if got.state != "missing":
            return got
    if dynamic:
        return _unknown(f"{mod.path} defines names dynamically")
    cands = sorted(set(mod.classes) | set(mod.functions) | set(mod.imports) | names)
    reason = f"`{modname}` has no `{head}`"
    if mod.path.endswith("__init__.py"):
        reason = f"module `{modname}.{head}` does not exist and `{modname}` defines no `{head}`"
        cands += sorted(_modules_in(ctx.source, modname))
    return Lookup(
        "missing",
        reason=reason,
        path=mod.path,
        suggestions=tuple(difflib.get_close_matches(head, cands, n=2)),
        module=mod,
    )


def _assign_line(mod: ModuleIndex, name: str) -> int | None:
    for stmt in _module_level(mod.tree.body if mod.tree else []):
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name) and n.id == name:
                        return stmt.lineno
    return None


def _class_node(mod: ModuleIndex, cls: ClassInfo):
    nodes = getattr(mod, "_pa_class_nodes", None)
    if nodes is None:
        nodes = cache_on(mod, "_pa_class_nodes", {})
        for node in ast.walk(mod.tree) if mod.tree else ():
            if isinstance(node, ast.ClassDef):
                nodes[(node.lineno, node.name)] = node
    return nodes.get((cls.line, cls.name))


def _instance_attributes(mod: ModuleIndex, cls: ClassInfo) -> set[str]:
    node = _class_node(mod, cls)
    out: set[str] = set()
    if node is None:
        return out
    for n in ast.walk(node):
        if (
            isinstance(n, ast.Attribute)
            and isinstance(n.ctx, ast.Store)
            and isinstance(n.value, ast.Name)
            and n.value.id in ("self", "cls")
        ):
            out.add(n.attr)
        elif isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in n.targets):
            for el in ast.walk(n.value):
                if isinstance(el, ast.Constant) and isinstance(el.value, str):
                    out.add(el.value)
    return out


def _attribute_lines(mod: ModuleIndex, cls: ClassInfo, name: str) -> tuple[int, int] | None:
    """Where a class attribute is assigned: in the class body, else the first
    `self.name = ...` of its methods."""
    node = _class_node(mod, cls)
    if node is None:
        return None
    for stmt in _module_level(node.body):
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return stmt.lineno, getattr(stmt, "end_lineno", stmt.lineno) or stmt.lineno
    for n in ast.walk(node):
        if isinstance(n, (ast.Assign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                if (
                    isinstance(t, ast.Attribute)
                    and t.attr == name
                    and isinstance(t.value, ast.Name)
                    and t.value.id in ("self", "cls")
                ):
                    return n.lineno, getattr(n, "end_lineno", n.lineno) or n.lineno
    return None


_TORCH_MODULE = {"torch.nn.Module", "torch.nn.modules.module.Module"}
#: what torch.nn.Module (2.x) defines, class and instance attributes: a name outside
#: this list, not defined by the engine class or its engine bases, is missing
_TORCH_MODULE_ATTRS = frozenset(
    """
T_destination dump_patches call_super_init training forward __call__ __init__ __getattr__ __setattr__
__delattr__ __dir__ __getstate__ __setstate__ __repr__ _version _parameters _buffers
_non_persistent_buffers_set _backward_pre_hooks _backward_hooks _is_full_backward_hook _forward_hooks
_forward_hooks_with_kwargs _forward_hooks_always_called _forward_pre_hooks _forward_pre_hooks_with_kwargs
_state_dict_hooks _state_dict_pre_hooks _load_state_dict_pre_hooks _load_state_dict_post_hooks _modules
_compiled_call_impl register_buffer register_parameter add_module register_module get_submodule
set_submodule get_parameter get_buffer get_extra_state set_extra_state _apply apply cuda ipu xpu mtia cpu
type float double half bfloat16 to_empty to register_full_backward_pre_hook register_backward_hook
register_full_backward_hook _get_backward_hooks _get_backward_pre_hooks _maybe_warn_non_full_backward_hook
register_forward_pre_hook register_forward_hook _slow_forward _wrapped_call_impl _call_impl
register_state_dict_post_hook register_state_dict_pre_hook _save_to_state_dict state_dict
_register_state_dict_hook _register_load_state_dict_pre_hook register_load_state_dict_pre_hook
register_load_state_dict_post_hook _load_from_state_dict load_state_dict _named_members parameters
named_parameters buffers named_buffers children named_children modules named_modules train eval
requires_grad_ zero_grad share_memory _get_name extra_repr _replicate_for_data_parallel compile
""".split()
)


def _external_base(mod: ModuleIndex, base: str) -> str:
    """A base class expression as a dotted name through the module's imports."""
    head, _, rest = base.partition(".")
    if head in mod.imports:
        return mod.imports[head] + ("." + rest if rest else "")
    return base


def _class_decorators(mod: ModuleIndex, cls: ClassInfo) -> list[str]:
    node = _class_node(mod, cls)
    if node is None:
        return []
    from patchaudit.inputs.astnames import THROUGH, dotted

    return [dotted(d, THROUGH) or "?" for d in node.decorator_list]


def _in_class(ctx, mod: ModuleIndex, cls: ClassInfo, rest: list[str], depth: int, seen: set | None = None) -> Lookup:
    if not rest:
        return Lookup("found", "class", mod.path, cls.line, cls.end_line, cls.qualname, module=mod)
    seen = seen if seen is not None else set()
    if (mod.path, cls.qualname) in seen:
        return _unknown("class hierarchy loop")
    seen.add((mod.path, cls.qualname))
    name = rest[0]
    nested = f"{cls.qualname}.{name}"
    if nested in mod.classes:
        return _in_class(ctx, mod, mod.classes[nested], rest[1:], depth)
    if name in cls.methods:
        f = cls.methods[name]
        if len(rest) == 1:
            return Lookup("found", "function", mod.path, f.line, f.end_line, f.qualname, f, mod, owner_is_class=True)
        return _unknown(f"an attribute of the method `{f.qualname}`")
    if name in cls.attributes or name in _instance_attributes(mod, cls):
        if len(rest) == 1:
            line, end = _attribute_lines(mod, cls, name) or (cls.line, cls.end_line)
            return Lookup("found", "attribute", mod.path, line, end, nested, module=mod, owner_is_class=True)
        return _unknown(f"an attribute of `{nested}`")
    if name.startswith("__") and name.endswith("__") and name in dir(object):
        if len(rest) > 1:
            return _unknown(f"an attribute of `{nested}`")
        return Lookup("found", "attribute", mod.path, cls.line, cls.end_line, nested, module=mod, owner_is_class=True)
    unknown_reason = ""
    for deco in _class_decorators(mod, cls):
        if deco not in _HARMLESS_CLASS_DECORATORS:
            unknown_reason = f"`{cls.qualname}` is decorated with @{deco}"
    for base in cls.bases:
        got = ctx.index.resolve_class(mod, base)
        if got is None and _external_base(mod, base) in _TORCH_MODULE:
            if name in _TORCH_MODULE_ATTRS:
                if len(rest) > 1:
                    return _unknown(f"an attribute of `{nested}`")
                return Lookup(
                    "found",
                    "attribute",
                    mod.path,
                    cls.line,
                    cls.end_line,
                    nested,
                    module=mod,
                    owner_is_class=True,
                    reason="inherited from torch.nn.Module",
                )
            continue
        if got is None:
            if base not in _TRIVIAL_BASES and not unknown_reason:
                unknown_reason = f"`{cls.qualname}` inherits from `{base}`, outside what the engine index resolves"
            continue
        found = _in_class(ctx, got[0], got[1], rest, depth, seen)
        if found.state != "missing":
            return found
    if unknown_reason:
        return _unknown(unknown_reason)
    cands = sorted(set(cls.methods) | cls.attributes)
    return Lookup(
        "missing",
        reason=f"`{cls.qualname}` ({mod.path}:{cls.line}) has no `{name}`",
        path=mod.path,
        line=cls.line,
        suggestions=tuple(difflib.get_close_matches(name, cands, n=2)),
        module=mod,
    )


def definition_text(ctx, got: Lookup) -> str | None:
    """The source text of a definition, normalised so that moving it (other
    lines above it changed) or re-indenting it does not count as a change."""
    if got.path is None or got.line is None:
        return None
    text = ctx.source.read_text(got.path)
    if text is None:
        return None
    lines = source_lines(text)
    start, end = got.line, got.end_line or got.line
    mod = got.module
    if mod is not None and mod.tree is not None and got.kind in ("function", "class"):
        for node in ast.walk(mod.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.lineno == got.line:
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                end = getattr(node, "end_lineno", end) or end
                break
    elif got.kind == "attribute":
        if mod is None or mod.tree is None or not got.line:
            return None
        for node in ast.walk(mod.tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.lineno == got.line:
                end = getattr(node, "end_lineno", got.line) or got.line
                break
        else:
            return None  # inherited from outside the engine (object, torch.nn.Module)
    elif got.kind == "module":
        return None
    body = "\n".join(l.rstrip() for l in lines[start - 1 : end])
    return textwrap.dedent(body).strip("\n")
