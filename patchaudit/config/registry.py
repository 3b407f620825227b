"""What the run needs to know about the rules, without importing them.

Every rule module imports libcst (the base class `Rule` is a libcst visitor),
and importing libcst costs more than everything else a one-file pre-commit run
does.  Selecting rules and pre-filtering files only needs each rule's code,
kinds, needs, `requires` and `default_enabled`: this module reads them from the
rule pack's *source* with the stdlib `ast` (class attributes written as
literals, module constants, `frozenset({...})`, names imported from
`patchaudit.lint.rule` or from sibling modules of the pack), and imports a rule
module only when a file actually needs that rule to run.

Anything it cannot read for certain (an attribute computed by code, a base
class other than `Rule` or another rule of the same module) makes it import
that module and read the real class instead: the index is never guessed.
`tests/test_speed_invariants.py` checks the static reading against the real
classes for every rule of the pack.

The index is memoised per process, and on disk (in the result cache folder) by
the size and modification time of the rule sources and of `patchaudit/lint/rule.py`.

`all_rules` and `select_rules` give the real rule classes (they import the pack,
and so libcst); `select_codes` is the one resolution of `select`/`ignore`/
`extend-select` codes and prefixes, on either.  The rule framework
(patchaudit/lint/rule.py) knows nothing of the pack: finding and selecting its
rules is this module's.
"""

from __future__ import annotations

import ast
import importlib
import os
import pickle
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, cast

from patchaudit.config.byte_filter import ByteGroups
from patchaudit.config.literals import MISSING, ModuleReader, Unknown, bound_names
from patchaudit.files.usercache import atomic_write, read_file, seal, unseal, user_cache_dir

if TYPE_CHECKING:  # pragma: no cover
    from patchaudit.lint.rule import Rule

#: unit kinds (the same strings as patchaudit.lint.rule.PYTHON/TEXT/PATCH)
PYTHON, TEXT, PATCH = "python", "text", "patch"

#: the class attributes the index reads
FIELDS = ("code", "name", "kinds", "needs", "requires", "default_enabled", "repository")
#: methods whose presence changes how the runner treats a rule
METHODS = ("can_match", "check_patch_set")
#: characters that end a line for str.splitlines(): a required string holding one
#: could match a file's text and not its joined lines (or the reverse)
_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\ufeff"

PACK = "patchaudit.rules"


@dataclass(frozen=True)
class RuleMeta:
    """A rule as the scheduler sees it: enough to select and pre-filter."""

    code: str
    name: str
    module: str  # the module that defines it
    cls: str  # the class name
    kinds: frozenset[str]
    needs: frozenset[str]
    requires: tuple[tuple[str, ...], ...]
    default_enabled: bool = True
    custom_filter: bool = False  # the class overrides can_match: ask the real class
    patch_set: bool = False  # the class has check_patch_set (whole-run rule)
    repository: bool = False  # the class takes part in the whole-repository pre-pass
    static: bool = True  # read from the source (False: from the imported class)
    requires_bytes: ByteGroups = field(init=False, compare=False, repr=False)  # from `requires`

    def __post_init__(self) -> None:
        object.__setattr__(self, "requires_bytes", ByteGroups([[s.encode("utf-8") for s in g] for g in self.requires]))

    @property
    def byte_filter(self) -> bool:
        """True when `can_match_bytes` on the raw UTF-8 file is `requires` on its text
        (or on its lines joined by "\\n", as text units see it)."""
        return not any(ch in s for g in self.requires for s in g for ch in _LINE_BREAKS)

    def can_match_bytes(self, data: bytes) -> bool:
        """`Rule.can_match` on the decoded text, evaluated on valid UTF-8 bytes.

        UTF-8 is self-synchronising: the encoding of a string occurs in the
        bytes exactly when the string occurs in the text."""
        if not self.requires:
            return True
        return self.requires_bytes.match(data)

    def load(self) -> type:
        """The real rule class (imports its module, and so libcst)."""
        return getattr(importlib.import_module(self.module), self.cls)

    @classmethod
    def from_class(cls, rule: Any) -> "RuleMeta":
        from patchaudit.lint.rule import Rule

        return cls(
            code=rule.code,
            name=rule.name,
            module=rule.__module__,
            cls=rule.__name__,
            kinds=frozenset(rule.kinds),
            needs=frozenset(rule.needs),
            requires=tuple(tuple(g) for g in rule.requires),
            default_enabled=bool(rule.default_enabled),
            # bound classmethods: compare the functions (mypy types a classmethod as a plain callable)
            custom_filter=rule.can_match.__func__ is not Rule.can_match.__func__,  # type: ignore[attr-defined]
            patch_set=rule.sees_patch_set(),
            repository=bool(rule.repository),
            static=False,
        )


# --------------------------------------------------------------------------
# reading rule classes from source (the literals: patchaudit/config/literals.py)


class _SourceIndex:
    """The AST readers of the rule pack's modules and of patchaudit.lint.rule."""

    def __init__(self, pack_dir: str, rule_py: str):
        self.pack_dir = pack_dir
        self.rule_py = rule_py
        self.readers: dict[str, ModuleReader | None] = {}
        self.defaults: dict[str, Any] | None = None  # Rule's own attributes

    def reader(self, modname: str) -> ModuleReader | None:
        if modname not in self.readers:
            self.readers[modname] = None  # cycle guard
            path = self._path(modname)
            if path is None:
                return None
            try:  # the one guarded reader (patchaudit/files/reader.py)
                from patchaudit.files.reader import read_bytes

                tree = ast.parse(read_bytes(path), filename=path)
            except (OSError, SyntaxError, ValueError, RecursionError):
                return None
            r = ModuleReader(self, modname, tree)
            self.readers[modname] = r
            r.evaluate_globals()
        return self.readers[modname]

    def _path(self, modname: str) -> str | None:
        if modname == "patchaudit.lint.rule":
            return self.rule_py
        if modname.startswith(PACK + "."):
            rest = modname[len(PACK) + 1 :]
            if "." in rest:
                return None
            p = os.path.join(self.pack_dir, rest + ".py")
            return p if os.path.isfile(p) else None
        if modname.startswith("patchaudit."):  # a base class could come from the package
            base = os.path.join(os.path.dirname(os.path.dirname(self.rule_py)), *modname.split(".")[1:])
            for p in (base + ".py", os.path.join(base, "__init__.py")):
                if os.path.isfile(p):
                    return p
        return None

    def imported(self, importer: str, module: str | None, level: int, name: str) -> Any:
        if level:
            base = importer.rsplit(".", level)[0]
            target = f"{base}.{module}" if module else base
        else:
            target = module or ""
        if target == "patchaudit.model.findings" and name == "Severity":
            return _SEVERITY
        r = self.reader(target)
        if r is None:
            raise Unknown(f"{target}.{name}")
        if name not in r.env and target != "patchaudit.lint.rule":
            _rule_classes(r)  # a rule base class defined there
        value = r.lookup(name, MISSING)
        if value is MISSING:
            raise Unknown(f"{target}.{name}")
        return value


_SEVERITY = object()  # Severity is not needed by the index; a marker keeps it "known"


def _class_attrs(reader: ModuleReader, node: ast.ClassDef) -> tuple[dict[str, Any], set[str], set[str]]:
    """(attributes read, attributes bound in ways that cannot be read, methods defined)."""
    attrs: dict[str, Any] = {}
    unreadable: set[str] = set()
    methods: set[str] = set()
    for stmt in node.body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            simple = len(targets) == 1 and isinstance(targets[0], ast.Name)
            names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            field = cast(ast.Name, targets[0]).id if simple else None
            if field is not None and stmt.value is not None and field in FIELDS:
                try:
                    attrs[field] = reader.eval(stmt.value, reader.env)
                    unreadable.discard(field)
                except Unknown:
                    attrs.pop(field, None)
                    unreadable.add(field)
            elif not simple:
                unreadable |= names & set(FIELDS)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            methods.add(stmt.name)
            if stmt.name in FIELDS:
                unreadable.add(stmt.name)
        else:
            unreadable |= bound_names(stmt) & (set(FIELDS) | set(METHODS))
    return attrs, unreadable, methods


def _base_names(node: ast.ClassDef) -> list[str] | None:
    out = []
    for b in node.bases:
        if isinstance(b, ast.Name):
            out.append(b.id)
        elif isinstance(b, ast.Attribute):
            out.append(b.attr)
        else:
            return None
    if node.keywords:
        return None
    return out


def _normalise(attrs: dict[str, Any]) -> dict[str, Any]:
    out = dict(attrs)
    for key in ("kinds", "needs"):
        v = out[key]
        if not isinstance(v, (set, frozenset, tuple, list)) or not all(isinstance(s, str) for s in v):
            raise Unknown(key)
        out[key] = frozenset(v)
    req = out["requires"]
    if not isinstance(req, (tuple, list)) or not all(
        isinstance(g, (tuple, list)) and all(isinstance(s, str) for s in g) for g in req
    ):
        raise Unknown("requires")
    out["requires"] = tuple(tuple(g) for g in req)
    if not isinstance(out["code"], str) or not isinstance(out["name"], str):
        raise Unknown("code")
    if not isinstance(out["default_enabled"], bool):
        raise Unknown("default_enabled")
    if not isinstance(out["repository"], bool):
        raise Unknown("repository")
    return out


@dataclass
class _ClassInfo:
    """A rule class (or a rule base) read from source: its attributes, inherited
    ones included, and the methods it defines or inherits below `Rule`."""

    attrs: dict[str, Any]
    methods: set[str]


def _rule_classes(reader: ModuleReader) -> dict[str, _ClassInfo] | None:
    """The classes of a module that derive from `Rule`, by name; None when unsure."""
    if reader.classes_read:
        return reader.classes
    reader.classes_read = True  # cycle guard: None until read
    out: dict[str, _ClassInfo] = {}
    not_rules: list[str] = []
    for stmt in reader.tree.body:
        if not isinstance(stmt, ast.ClassDef):
            if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                isinstance(n, ast.ClassDef) for n in ast.walk(stmt)
            ):
                return None  # a class defined in a block (if/try/with): import to be sure
            continue
        bases = _base_names(stmt)
        if bases is None:
            return None
        resolved: list[_ClassInfo | str | None] = []  # "Rule": the framework's base class
        for b in bases:
            value = reader.lookup(b)
            if b in out:
                resolved.append(out[b])
            elif value is _RULE_CLASS:
                resolved.append("Rule")
            elif isinstance(value, _ClassInfo):
                resolved.append(value)
            elif value is _NOT_RULE or b == "object" or not _may_be_rule(reader, b):
                resolved.append(None)
            else:
                return None  # a base the reader cannot see could itself derive from Rule
        rule_bases = [r for r in resolved if r is not None]
        if not rule_bases:
            not_rules.append(stmt.name)
            continue
        if len(rule_bases) != len(bases) or len(bases) != 1 or stmt.decorator_list:
            return None
        base = rule_bases[0]
        if isinstance(base, str):  # "Rule", the framework's base class
            defaults = cast(_SourceIndex, reader.index).defaults  # the index that made the reader
            if defaults is None:
                return None
            inherited, methods = dict(defaults), set()
        else:
            inherited, methods = dict(base.attrs), set(base.methods)
        attrs, unreadable, own = _class_attrs(reader, stmt)
        if unreadable:
            return None
        inherited.update(attrs)
        out[stmt.name] = _ClassInfo(inherited, methods | own)
    reader.classes = out
    for name, info in out.items():
        reader.env[name] = info
        reader.unknown.discard(name)
    for name in not_rules:
        if name not in out:
            reader.env[name] = _NOT_RULE
            reader.unknown.discard(name)
    return out


def _may_be_rule(reader: ModuleReader, name: str) -> bool:
    """Whether an unknown base name could be a rule class: anything imported from
    patchaudit or the pack could; standard-library and third-party names cannot
    (a rule class always derives from patchaudit.lint.rule.Rule)."""
    for stmt in reader.tree.body:
        if isinstance(stmt, ast.ImportFrom) and any((a.asname or a.name) == name for a in stmt.names):
            return bool(stmt.level) or (stmt.module or "").split(".")[0] == "patchaudit"
        if isinstance(stmt, ast.Import) and any((a.asname or a.name).partition(".")[0] == name for a in stmt.names):
            return any(a.name.split(".")[0] == "patchaudit" for a in stmt.names)
    return True  # bound some other way at module level: cannot tell


def read_module(index: _SourceIndex, modname: str, base_defaults: dict[str, Any]) -> list[RuleMeta] | None:
    """The rules a pack module defines, read from source; None when unsure."""
    reader = index.reader(modname)
    if reader is None:
        return None
    classes = _rule_classes(reader)
    if classes is None:
        return None
    out = []
    for cls_name, info in classes.items():
        try:
            a = _normalise(info.attrs)
        except Unknown:
            return None
        if not a["code"]:
            continue  # an abstract helper base; its subclasses are the rules
        out.append(
            RuleMeta(
                code=a["code"],
                name=a["name"],
                module=modname,
                cls=cls_name,
                kinds=a["kinds"],
                needs=a["needs"],
                requires=a["requires"],
                default_enabled=a["default_enabled"],
                custom_filter="can_match" in info.methods,
                patch_set="check_patch_set" in info.methods,
                repository=a["repository"],
            )
        )
    if len({m.code for m in out}) != len(out):
        return None
    return out


_RULE_CLASS = object()  # marker: the name `Rule` imported from patchaudit.lint.rule
_NOT_RULE = object()  # marker: a class that does not derive from Rule


def _rule_defaults(index: _SourceIndex) -> dict[str, Any] | None:
    reader = index.reader("patchaudit.lint.rule")
    if reader is None:
        return None
    for stmt in reader.tree.body:
        if isinstance(stmt, ast.ClassDef) and stmt.name == "Rule":
            attrs, unreadable, _ = _class_attrs(reader, stmt)
            if unreadable or set(attrs) != set(FIELDS):
                return None
            reader.env["Rule"] = _RULE_CLASS
            return attrs
    return None


# --------------------------------------------------------------------------
# the index


def _pack_location() -> tuple[str, str]:
    import patchaudit
    import patchaudit.rules as pack

    pack_dir = list(pack.__path__)[0]
    rule_py = os.path.join(os.path.dirname(patchaudit.__file__), "lint", "rule.py")
    return pack_dir, rule_py


def _pack_modules(pack_dir: str) -> list[str]:
    import pkgutil

    return sorted(info.name for info in pkgutil.iter_modules([pack_dir]) if not info.name.startswith("_"))


#: the layout of a pickled `RuleMeta`: a saved index of another layout is built again
INDEX_FORMAT = 2


def source_stamp() -> tuple:
    """(name, size, mtime) of every source the index is read from."""
    pack_dir, rule_py = _pack_location()
    out = []
    for p in [rule_py] + [os.path.join(pack_dir, n) for n in sorted(os.listdir(pack_dir))]:
        if p.endswith(".py"):
            try:
                st = os.stat(p)
            except OSError:
                continue
            out.append((os.path.basename(p), st.st_size, st.st_mtime_ns))
    return tuple(out)


def build_index(*, static: bool = True) -> dict[str, RuleMeta]:
    """Read the rule pack.  `static=False` imports every module (the reference)."""
    pack_dir, rule_py = _pack_location()
    index = _SourceIndex(pack_dir, rule_py)
    defaults = index.defaults = _rule_defaults(index) if static else None
    found: dict[str, RuleMeta] = {}
    for name in _pack_modules(pack_dir):
        modname = f"{PACK}.{name}"
        metas = read_module(index, modname, defaults) if defaults is not None else None
        if metas is None:
            metas = _imported_metas(modname)
        for m in metas:
            if m.code in found:
                raise RuntimeError(f"rule code {m.code} defined twice ({found[m.code].module}, {modname})")
            found[m.code] = m
    return dict(sorted(found.items()))


def _imported_metas(modname: str) -> list[RuleMeta]:
    from patchaudit.lint.rule import is_rule_class

    module = importlib.import_module(modname)
    return [RuleMeta.from_class(obj) for obj in vars(module).values() if is_rule_class(obj, modname)]


_INDEX: dict[str, RuleMeta] | None = None


def rule_index(cache_root: str | None = None) -> dict[str, RuleMeta]:
    """Every rule of the pack and the run's local rules (`extend-rules`,
    patchaudit/config/local_rules.py), by code."""
    from patchaudit.config.local_rules import LOCAL

    index = pack_index(cache_root)
    if not LOCAL:
        return index
    return dict(sorted({**index, **{c: RuleMeta.from_class(r) for c, r in LOCAL.items()}}.items()))


def pack_index(cache_root: str | None = None) -> dict[str, RuleMeta]:
    """Every rule of the pack, by code: from memory, a disk cache or the sources.

    The index depends only on the rule pack's sources (their stamp is its key), not
    on the tree being checked, so it is kept in the user's cache folder as well as
    in the run's `.patchaudit_cache/`: a scan of a tree never checked before does
    not read the rule sources again.  A copy missing from `cache_root` is written
    there even when the index comes from memory.  Copies are read and written
    through `patchaudit.files.usercache.read_file`/`atomic_write`: never through a symlink
    below the cache's trusted folders, and only sealed copies are unpickled."""
    global _INDEX
    if _INDEX is not None and (cache_root is None or os.path.lexists(os.path.join(cache_root, "rule-index.pickle"))):
        return _INDEX
    if cache_root is None:
        _INDEX = build_index()
        return _INDEX
    stamp = (sys.version_info[:2], INDEX_FORMAT, source_stamp())
    paths = list(dict.fromkeys(os.path.join(d, "rule-index.pickle") for d in (cache_root, user_cache_dir()) if d))
    missing = []  # paths without this index: absent, stale or unreadable
    for path in paths:
        if _INDEX is not None:
            if not os.path.lexists(path):
                missing.append(path)
            continue
        try:
            blob = read_file(path)
            raw = unseal(blob) if blob is not None else None
            if raw is None:
                raise ValueError("missing, or not sealed with this user's key")
            saved_stamp, saved = pickle.loads(raw)
            if saved_stamp == stamp:
                _INDEX = saved
                continue
        except Exception:
            pass
        missing.append(path)
    if _INDEX is None:
        _INDEX = build_index()
    if missing:
        data = seal(pickle.dumps((stamp, _INDEX), protocol=pickle.HIGHEST_PROTOCOL))
        for path in missing if data is not None else ():
            try:
                atomic_write(path, cast(bytes, data))
            except OSError:
                pass
    return _INDEX


def select_codes(
    rules: Mapping[str, Any],
    select: Iterable[str] | None = None,
    ignore: Iterable[str] = (),
    extend_select: Iterable[str] = (),
) -> list[str]:
    """Resolve codes and prefixes (`PA1`, `PA`, `ALL`) the way ruff does.

    `rules` maps codes to anything with a `default_enabled` attribute (rule
    classes or RuleMeta).  Raises KeyError(code) for an unknown code/prefix."""

    def expand(codes: Iterable[str]) -> set[str]:
        out: set[str] = set()
        for c in codes:
            c = c.strip().upper()
            if not c:
                continue
            if c == "ALL":
                out |= set(rules)
                continue
            matched = {code for code in rules if code.startswith(c)}
            if not matched:
                raise KeyError(c)
            out |= matched
        return out

    if select is None:
        chosen = {c for c, r in rules.items() if r.default_enabled}
    else:
        chosen = expand(select)
    chosen |= expand(extend_select)
    chosen -= expand(ignore)
    return sorted(chosen)


# --------------------------------------------------------------------------
# the rule classes themselves (importing them imports libcst)

_REGISTRY: dict[str, type[Rule]] | None = None


def all_rules() -> dict[str, type[Rule]]:
    """Every rule of the built-in pack and the run's local rules (`extend-rules`), by code (sorted)."""
    from patchaudit.config.local_rules import LOCAL

    pack = pack_rules()
    return dict(sorted({**pack, **LOCAL}.items())) if LOCAL else pack


def pack_rules() -> dict[str, type[Rule]]:
    """Every rule of the built-in pack, by code (sorted)."""
    global _REGISTRY
    if _REGISTRY is None:
        import pkgutil

        import patchaudit.rules as pack
        from patchaudit.lint.rule import is_rule_class

        found: dict[str, type[Rule]] = {}
        for info in pkgutil.iter_modules(pack.__path__):
            if info.name.startswith("_"):
                continue
            module = importlib.import_module(f"{pack.__name__}.{info.name}")
            for obj in vars(module).values():
                if is_rule_class(obj, module.__name__):
                    if obj.code in found:
                        raise RuntimeError(
                            f"rule code {obj.code} defined twice ({found[obj.code].__module__}, {module.__name__})"
                        )
                    found[obj.code] = obj
        _REGISTRY = dict(sorted(found.items()))
    return _REGISTRY


def codes_with_role(role: str, rules: Iterable[type[Rule]] | None = None) -> tuple[str, ...]:
    """The codes of the rules (default: every rule of the run) that declare `role` (`Rule.roles`)."""
    pool = all_rules().values() if rules is None else rules
    return tuple(r.code for r in pool if role in r.roles)


def select_rules(
    select: Iterable[str] | None = None, ignore: Iterable[str] = (), extend_select: Iterable[str] = ()
) -> list[type[Rule]]:
    """Resolve codes and prefixes (`PA1`, `PA`, `ALL`) the way ruff does."""
    rules = all_rules()  # the same resolution as on the libcst-free index (`select_codes`)
    return [rules[c] for c in select_codes(rules, select, ignore, extend_select)]
