"""Runtime monkey-patches of the engine: recognition, engine checks, bump audit.

Most RL frameworks patch the inference engine from Python at run time rather
than with `.patch` files (`Scheduler.method = ours`, `setattr(module, "fn",
wrapped)`, `unittest.mock.patch("sglang.srt....", new)`, whole per-version
patch packages chosen by `sglang.__version__`).  They break on engine bumps
exactly like `.patch` files, so patchaudit treats them as patches:

* **recognition** (`collect`, `Collector`): libcst with ScopeProvider and
  QualifiedNameProvider.  A site is an assignment (or `setattr`, or a
  `mock.patch`/`patch.object`/`patch.multiple` call) whose target resolves,
  through the module's imports (aliases included, and local names bound to an
  engine object, `importlib.import_module("...")`, `sys.modules["..."]`,
  `getattr(X, "...")`), to an attribute of an engine package.  The metadata is
  computed only for files that can match (`can_match`: an engine package name
  in an import or a string literal).
* **engine checks** (`lookup`, `check_site`): the target looked up in an engine
  source with the `ast` index of `units/symbols.py` (PA206 when it is missing),
  and the replacement's signature compared with the original's as callers see
  them, binding included (PA207).  Enclosing version gates
  (`if version.parse(sglang.__version__) >= ...`) are evaluated against the
  engine's version; a module of a per-version patch package (a path component
  like `v0_5_9`, `sglang_0_5_9` or `0.5.9`) is checked only against the engine
  of that version.
* **bump** (`audit_bump`): PA203 when a patched target's definition changed
  between two engine versions, PA206/PA207 against the new one.

Nothing here imports or runs the code it reads.
"""

from __future__ import annotations

import ast
import difflib
import os
import re
import textwrap
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from patchaudit.inputs import source_lines
from patchaudit.engine.symbols import ClassInfo, FuncInfo, ModuleIndex, Param

DEFAULT_PACKAGES = ("sglang", "vllm", "megatron")

POSITIONAL = ("positional_only", "positional")

#: callables of unittest.mock (and the `mock` backport) that install a patch
_MOCK_PATCH = {"unittest.mock.patch", "mock.patch"}
_MOCK_OBJECT = {"unittest.mock.patch.object", "mock.patch.object"}
_MOCK_MULTIPLE = {"unittest.mock.patch.multiple", "mock.patch.multiple"}
#: keyword arguments of patch() that are not the replacement
_PATCH_KWARGS = {"spec", "create", "spec_set", "autospec", "new_callable", "new", "target", "attribute"}
#: decorators that keep a function's signature as written
_TRANSPARENT_DECORATORS = {"functools.wraps", "wraps", "functools.lru_cache", "functools.cache",
                           "typing.override", "typing_extensions.override", "override"}
#: base classes whose attributes are not engine attributes (lookups through them are unknown
#: unless they are known to add nothing)
_TRIVIAL_BASES = {"object", "ABC", "abc.ABC", "Generic", "typing.Generic", "Protocol", "typing.Protocol"}
#: class decorators that add no attribute a monkey-patch could target
_HARMLESS_CLASS_DECORATORS = {"dataclass", "dataclasses.dataclass", "final", "typing.final",
                              "total_ordering", "functools.total_ordering", "unique", "enum.unique"}
_TEST_NAME_RE = re.compile(r"(^test_.*|.*_test|^conftest)\.py$")


# --------------------------------------------------------------------------
# engine package names and the pre-filter


def engine_packages(settings: Any = None) -> tuple[str, ...]:
    """The engine package names of a run: `engine-packages` plus every
    `--engine NAME=...` whose NAME is a package name."""
    names = list(getattr(settings, "engine_packages", None) or DEFAULT_PACKAGES)
    for spec in getattr(settings, "engines", None) or ():
        name = getattr(spec, "name", "")
        if name and name.isidentifier() and name != "engine" and name not in names:
            names.append(name)
    return tuple(names)


_FILTERS: dict[tuple[str, ...], re.Pattern] = {}


def _filter_re(packages: tuple[str, ...]) -> re.Pattern:
    pat = _FILTERS.get(packages)
    if pat is None:
        alt = "|".join(re.escape(p) for p in packages)
        # an import of the package (anywhere, indented too; backslash continuations
        # tolerated) or a string literal naming it (importlib, mock.patch, sys.modules)
        pat = re.compile(
            rf"(?m)(?:^[ \t]*(?:from(?:[ \t]|\\\n)+(?:{alt})\b|import(?:[ \t]|\\\n)(?:[^\n#]|\\\n)*\b(?:{alt})\b)"
            rf"|[\"'](?:{alt})(?:[.\"']))")
        _FILTERS[packages] = pat
    return pat


def can_match(text: str, packages: Iterable[str]) -> bool:
    """False only when `text` cannot hold a monkey-patch of these packages: every
    target the recognizer accepts comes from an import of the package or from a
    string literal that starts with its name."""
    packages = tuple(packages)
    if not packages or not any(p in text for p in packages):
        return False
    return _filter_re(packages).search(text) is not None


def may_have_sites(text: str, packages: Iterable[str]) -> bool:
    """A second, still sound pre-filter with the stdlib `ast` (about ten times
    cheaper than libcst's parse, let alone its scope metadata): False only when
    no statement of the file can be a site the recognizer accepts.

    Names are tracked file-wide, ignoring scopes (a superset of what the
    scope-aware recognizer resolves): names bound by imports of an engine
    package, then, to a fixed point, names assigned (or bound by `for`/`with`)
    from an expression that mentions such a name or a string naming an engine
    package.  A site needs an attribute assignment, `setattr(...)` or a
    `patch...(...)` call whose expression mentions one of them."""
    packages = tuple(packages)
    if not can_match(text, packages):
        return False
    try:
        with __import__("warnings").catch_warnings():
            __import__("warnings").simplefilter("ignore")
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True   # let libcst decide (and report) on text ast cannot read
    prefixes = tuple(p + "." for p in packages)
    names: set[str] = set()
    binds: list[tuple[list[str], ast.AST]] = []
    sites: list[ast.AST] = []
    mock_names: set[str] = {"patch", "mock"}

    def targets_of(node) -> list[str]:
        """Names a target binds (not the names inside `a.b = ...` or `a[i] = ...`)."""
        if isinstance(node, ast.Name):
            return [node.id]
        if isinstance(node, (ast.Tuple, ast.List)):
            return [n for el in node.elts for n in targets_of(el)]
        if isinstance(node, ast.Starred):
            return targets_of(node.value)
        return []

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".", 1)[0] in packages:
                    names.add(a.asname or a.name.split(".", 1)[0])
                if "mock" in a.name:
                    mock_names.add(a.asname or a.name.split(".", 1)[0])
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if not node.level and mod.split(".", 1)[0] in packages:
                names.update(a.asname or a.name for a in node.names)
            if "mock" in mod:
                mock_names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            tgts = node.targets if isinstance(node, ast.Assign) else [node.target]
            if node.value is not None:
                binds.append(([n for t in tgts for n in targets_of(t)], node.value))
            for t in tgts:
                if any(isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) for n in ast.walk(t)):
                    sites.append(t)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            binds.append((targets_of(node.target), node.iter))
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            binds.append((targets_of(node.optional_vars), node.context_expr))
        elif isinstance(node, ast.NamedExpr):
            binds.append(([node.target.id], node.value))
        elif isinstance(node, ast.Call):
            f = node.func
            last = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if last == "setattr" and node.args:
                sites.append(node.args[0])
            elif last in ("patch", "object", "multiple") or last in mock_names:
                sites.append(node)

    def mentions(expr) -> bool:
        for n in ast.walk(expr):
            if isinstance(n, ast.Name) and n.id in names:
                return True
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and (
                    n.value in packages or n.value.startswith(prefixes)):
                return True
        return False

    def aliasable(expr) -> bool:
        """Values the recognizer follows through a name: references, strings,
        literal tables, import_module/getattr calls, sys.modules[...]."""
        if isinstance(expr, (ast.Name, ast.Attribute, ast.Constant, ast.List, ast.Tuple, ast.Set)):
            return True
        if isinstance(expr, ast.Subscript):   # sys.modules["..."]
            return isinstance(expr.value, ast.Attribute) and expr.value.attr == "modules"
        if isinstance(expr, ast.Call):
            f = expr.func
            last = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            return last in ("import_module", "__import__", "getattr")
        return False

    changed = True
    while changed:
        changed = False
        for tgts, value in binds:
            if not set(tgts) <= names and aliasable(value) and mentions(value):
                names.update(tgts)
                changed = True
    return any(mentions(s) for s in sites)


def is_test_file(path: str) -> bool:
    parts = path.replace(os.sep, "/").split("/")
    return any(p in ("tests", "test", "testing") for p in parts[:-1]) or bool(_TEST_NAME_RE.match(parts[-1]))


# --------------------------------------------------------------------------
# versions (a small PEP 440 subset; `packaging` is not a dependency)

_VER_RE = re.compile(
    r"^\s*v?(\d+(?:\.\d+)*)"
    r"(?:[-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?(\d*))?"
    r"(?:[-_.]?(post|rev|r)[-_.]?(\d*))?"
    r"(?:[-_.]?(dev)[-_.]?(\d*))?"
    r"(?:\+[A-Za-z0-9.]+)?\s*$", re.I)
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}


class Version:
    """A parsed version that compares like packaging's `Version` (release,
    pre-release, post-release, dev; local labels ignored)."""

    __slots__ = ("text", "release", "key")

    def __init__(self, text: str):
        m = _VER_RE.match(text)
        if not m:
            raise ValueError(text)
        self.text = text
        rel = tuple(int(x) for x in m.group(1).split("."))
        self.release = rel
        trimmed = rel
        while len(trimmed) > 1 and trimmed[-1] == 0:
            trimmed = trimmed[:-1]
        pre = (_PRE_RANK[m.group(2).lower()], int(m.group(3) or 0)) if m.group(2) else None
        post = int(m.group(5) or 0) if m.group(4) else None
        dev = int(m.group(7) or 0) if m.group(6) else None
        if pre is None and post is None and dev is not None:
            pre_key: tuple = (-1,)
        elif pre is None:
            pre_key = (9,)
        else:
            pre_key = pre
        self.key = (trimmed, pre_key, -1 if post is None else post, float("inf") if dev is None else dev)

    @classmethod
    def parse(cls, text: Any) -> "Version | None":
        if isinstance(text, Version):
            return text
        if not isinstance(text, str):
            return None
        try:
            return cls(text)
        except ValueError:
            return None

    @property
    def base_version(self) -> str:
        return ".".join(str(x) for x in self.release)

    def __repr__(self) -> str:
        return f"Version({self.text!r})"

    def __str__(self) -> str:
        return self.text

    def _cmp(self, other: Any):
        o = Version.parse(other) if not isinstance(other, Version) else other
        if o is None:
            raise TypeError(other)
        return self.key, o.key

    def __eq__(self, other: Any) -> bool:  # type: ignore[override]
        a, b = self._cmp(other)
        return a == b

    def __lt__(self, other: Any) -> bool:
        a, b = self._cmp(other)
        return a < b

    def __le__(self, other: Any) -> bool:
        a, b = self._cmp(other)
        return a <= b

    def __gt__(self, other: Any) -> bool:
        a, b = self._cmp(other)
        return a > b

    def __ge__(self, other: Any) -> bool:
        a, b = self._cmp(other)
        return a >= b

    def __hash__(self) -> int:
        return hash(self.key)


_VERSION_ASSIGN_RE = re.compile(r"""(?m)^(?:__version__|version|VERSION)\s*(?::[^=\n]*)?=\s*(?:__version__\s*=\s*)?["']([^"'\n]+)["']""")
_PKG_INFO_RE = re.compile(r"(?m)^(MAJOR|MINOR|PATCH)\s*=\s*(\d+)")
_DIST_RE = re.compile(r"^([A-Za-z0-9_.]+?)-(\d[^-/]*)\.(?:dist|egg)-info$")


def _cache_on(obj: Any, name: str, value: Any) -> Any:
    """Memoise on the object itself (ids are reused after garbage collection)."""
    try:
        setattr(obj, name, value)
    except AttributeError:  # pragma: no cover - a slotted object
        pass
    return value


def engine_versions(source) -> dict[str, str]:
    """Versions of the top-level packages of an engine source: from
    `*.dist-info`/`*.egg-info` names, then `PKG-INFO`, then `__version__ = "..."`
    in `_version.py`/`version.py`/`__init__.py`, then megatron's `package_info.py`,
    then a git revision that reads as a version (`v0.5.9`)."""
    cached = getattr(source, "_pa_versions", None)
    if cached is not None:
        return cached
    out: dict[str, str] = {}
    try:
        files = source.files()
    except Exception:
        files = []
    tops = top_packages(source)
    for f in files:
        for comp in f.split("/")[:-1]:
            m = _DIST_RE.match(comp)
            if m:
                out.setdefault(m.group(1).replace("-", "_").lower(), m.group(2))
    if not out:
        for f in files:
            if f.rsplit("/", 1)[-1] == "PKG-INFO" and f.count("/") <= 1:
                text = source.read_text(f) or ""
                n = re.search(r"(?m)^Name:\s*(\S+)", text)
                v = re.search(r"(?m)^Version:\s*(\S+)", text)
                if n and v:
                    out.setdefault(n.group(1).replace("-", "_").lower(), v.group(1))
    for pkg in tops:
        if pkg.lower() in out:
            out.setdefault(pkg, out[pkg.lower()])
            continue
        for mod in (f"{pkg}._version", f"{pkg}.version", pkg, f"{pkg}.core.package_info", f"{pkg}.package_info"):
            path = source.module_path(mod)
            text = source.read_text(path) if path else None
            if not text:
                continue
            m = _VERSION_ASSIGN_RE.search(text)
            if m and Version.parse(m.group(1)):
                out[pkg] = m.group(1)
                break
            parts = dict(_PKG_INFO_RE.findall(text))
            if {"MAJOR", "MINOR"} <= set(parts):
                out[pkg] = f"{parts['MAJOR']}.{parts['MINOR']}.{parts.get('PATCH', '0')}"
                break
    rev = getattr(source, "rev", None)
    if isinstance(rev, str) and Version.parse(rev) is not None:
        for pkg in tops:
            out.setdefault(pkg, rev.lstrip("vV"))
    _cache_on(source, "_pa_versions", out)
    return out


def _python_paths(source) -> list[str]:
    """Every .py file of an engine source, relative to each package root holding it
    ("" too: a namespace package at the top, megatron/core/..., has no root of its own)."""
    try:
        roots = list(dict.fromkeys(source.package_roots() + [""]))
        files = source.files()
    except Exception:
        roots, files = [""], []
    return [f[len(root):] for f in files if f.endswith(".py") for root in roots if f.startswith(root)]


def top_packages(source) -> frozenset[str]:
    """Top-level importable names of an engine source (packages and modules)."""
    cached = getattr(source, "_pa_tops", None)
    if cached is None:
        tops: set[str] = set()
        for rel in _python_paths(source):
            first = rel.split("/", 1)[0]
            name = first[:-3] if first.endswith(".py") else first
            if name.isidentifier():
                tops.add(name)
        cached = _cache_on(source, "_pa_tops", frozenset(tops))
    return cached


def _package_dirs(source) -> frozenset[str]:
    """Dotted names of every directory holding Python files (namespace packages included)."""
    cached = getattr(source, "_pa_dirs", None)
    if cached is None:
        out: set[str] = set()
        for rel in _python_paths(source):
            parts = rel.split("/")[:-1]
            for k in range(1, len(parts) + 1):
                out.add(".".join(parts[:k]))
        cached = _cache_on(source, "_pa_dirs", frozenset(out))
    return cached


_TAG_PLAIN = re.compile(r"^v?(\d+(?:[._]\d+){1,3})(?:[._]?((?:post|rc|dev|a|b)\d+))?$", re.I)


def path_version_tag(path: str, packages: Iterable[str]) -> tuple[str | None, str] | None:
    """The engine version a module of a per-version patch package is for, from
    its path: a component (directory or file stem) that is exactly a version
    (`v0_5_9`, `0.5.9`, `v0_5`) or a package name and a version
    (`sglang_0_5_9`, `vllm-0.11.0`, `sglang_v0_5_15_post1`).  Model names like
    `qwen2_5_vl` are not versions.  Returns (package or None, "0.5.9")."""
    comps = path.replace(os.sep, "/").split("/")
    if comps and comps[-1].endswith(".py"):
        comps[-1] = comps[-1][:-3]
    for comp in reversed(comps):
        pkg = None
        rest = comp
        for p in packages:
            if comp.lower().startswith(p.lower()) and len(comp) > len(p):
                tail = comp[len(p):].lstrip("_-.")
                if tail and (tail[0].isdigit() or (tail[0] in "vV" and tail[1:2].isdigit())):
                    pkg, rest = p, tail
                    break
        m = _TAG_PLAIN.match(rest)
        if m:
            ver = re.sub(r"[._]", ".", m.group(1))
            if m.group(2):
                ver += "." + m.group(2).lower()
            return pkg, ver
    return None


def tag_matches(tag: str, version: str | None) -> bool:
    """A tag `0.5` matches 0.5.x; `0.5.15` matches 0.5.15 and 0.5.15.post1;
    `0.5.15.post1` only itself."""
    if version is None:
        return False
    v = Version.parse(version)
    t = Version.parse(tag.split(".post")[0].split(".rc")[0].split(".dev")[0])
    if v is None or t is None:
        return False
    if v.release[: len(t.release)] != t.release and not (
            len(v.release) < len(t.release) and t.release[len(v.release):] == (0,) * (len(t.release) - len(v.release))
            and t.release[: len(v.release)] == v.release):
        return False
    extra = tag[len(".".join(str(x) for x in t.release)):].strip(".")
    if extra:
        full = Version.parse(tag)
        return full is not None and full == v
    return True


# --------------------------------------------------------------------------
# version gates: the conditions around a patch, compiled to a small tree


@dataclass(frozen=True)
class Cond:
    """A compiled condition: op in {"ver", "lit", "parse", "base", "cmp",
    "not", "and", "or", "unknown"}."""

    op: str
    args: tuple = ()

    def evaluate(self, versions: dict[str, str], has: Callable[[str], bool | None] | None = None) -> Any:
        """True/False, a value (for "ver"/"lit"/...), or None when unknown.
        `has(dotted)` answers `hasattr` conditions from the engine source."""
        op = self.op
        if op == "has":
            return has(self.args[0]) if has is not None else None
        if op == "lit":
            return self.args[0]
        if op == "ver":
            return versions.get(self.args[0])
        if op == "parse":
            inner = self.args[0].evaluate(versions, has)
            return Version.parse(inner) if isinstance(inner, (str, Version)) else None
        if op == "base":
            inner = self.args[0].evaluate(versions, has)
            v = Version.parse(inner) if isinstance(inner, (str, Version)) else None
            return v.base_version if v is not None else None
        if op == "not":
            inner = self.args[0].evaluate(versions, has)
            return None if not isinstance(inner, bool) else not inner
        if op in ("and", "or"):
            vals = [a.evaluate(versions, has) for a in self.args]
            bools = [v if isinstance(v, bool) else None for v in vals]
            if op == "and":
                if any(v is False for v in bools):
                    return False
                return True if all(v is True for v in bools) else None
            if any(v is True for v in bools):
                return True
            return False if all(v is False for v in bools) else None
        if op == "cmp":
            cmp_op, left, right = self.args
            a, b = left.evaluate(versions, has), right.evaluate(versions, has)
            if a is None or b is None:
                return None
            try:
                if cmp_op in ("in", "not in"):
                    if not isinstance(b, tuple):
                        return None
                    hit = any(_eq(a, x) for x in b)
                    return hit if cmp_op == "in" else not hit
                if isinstance(a, Version) or isinstance(b, Version):
                    a2, b2 = Version.parse(a), Version.parse(b)
                    if a2 is None or b2 is None:
                        return None
                    a, b = a2, b2
                return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b,
                        "==": a == b, "!=": a != b}[cmp_op]
            except (TypeError, KeyError):
                return None
        return None

    def packages(self) -> set[str]:
        if self.op == "ver":
            return {self.args[0]}
        out: set[str] = set()
        for a in self.args:
            if isinstance(a, Cond):
                out |= a.packages()
        return out


def _eq(a: Any, b: Any) -> bool:
    if isinstance(a, Version) or isinstance(b, Version):
        va, vb = Version.parse(a), Version.parse(b)
        return va is not None and vb is not None and va == vb
    return a == b


UNKNOWN = Cond("unknown")


@dataclass(frozen=True)
class Gate:
    cond: Cond
    polarity: bool       # True: the patch runs when cond is true
    text: str            # the condition as written (for reports)

    def evaluate(self, versions: dict[str, str], has: Callable[[str], bool | None] | None = None) -> bool | None:
        v = self.cond.evaluate(versions, has)
        if not isinstance(v, bool):
            return None
        return v if self.polarity else not v

    def describe(self) -> str:
        return self.text if self.polarity else f"not ({self.text})"


# --------------------------------------------------------------------------
# what recognition produces


@dataclass
class Replacement:
    """What a monkey-patch installs, as far as one file tells."""

    name: str | None = None          # as written (`new_forward`, `functools.partial(f, x=1)`)
    line: int | None = None          # where it is defined in the fork file
    params: list[Param] | None = None   # its own parameters (None: unknown)
    is_async: bool | None = None
    #: "function" (a plain function: bound when set on a class), "static",
    #: "class", "unbound" (partial, callable object: never bound), "unknown"
    binding: str = "unknown"
    engine_ref: str | None = None     # the replacement is itself an engine symbol
    fork_ref: str | None = None       # imported from another module of the fork (dotted)
    note: str = ""


@dataclass
class MonkeyPatch:
    path: str
    line: int
    column: int                      # 0-based
    end_line: int
    end_column: int
    targets: tuple[str, ...]         # candidate dotted targets (usually one)
    form: str                        # assign | setattr | mock.patch | mock.patch.object | mock.patch.multiple
    how: str                         # replaced | wrapped | added | mocked
    replacement: Replacement | None = None
    function: str | None = None      # the fork function that applies the patch
    gates: tuple[Gate, ...] = ()
    version_tag: tuple[str | None, str] | None = None
    code: str = ""                   # the statement, first line

    @property
    def target(self) -> str:
        return self.targets[0]

    @property
    def top(self) -> str:
        return self.target.split(".", 1)[0]

    def to_json(self) -> dict[str, Any]:
        r = self.replacement
        return {
            "path": self.path, "line": self.line, "column": self.column + 1,
            "target": self.target, "alternatives": list(self.targets[1:]), "form": self.form, "how": self.how,
            "replacement": None if r is None else {"name": r.name, "line": r.line, "async": r.is_async,
                                                   "binding": r.binding},
            "function": self.function, "gates": [g.describe() for g in self.gates],
            "version_tag": None if self.version_tag is None else self.version_tag[1],
        }


# --------------------------------------------------------------------------
# recognition (libcst)


def _libcst():
    import libcst as cst
    from libcst.metadata import PositionProvider, QualifiedNameProvider, QualifiedNameSource, ScopeProvider

    return cst, PositionProvider, QualifiedNameProvider, QualifiedNameSource, ScopeProvider


def _code(node) -> str:
    import libcst as cst

    try:
        return cst.Module([]).code_for_node(node)
    except Exception:  # pragma: no cover
        return "?"


def _string(node) -> str | None:
    import libcst as cst

    if isinstance(node, cst.SimpleString):
        try:
            v = node.evaluated_value
        except Exception:  # pragma: no cover
            return None
        return v if isinstance(v, str) else None
    if isinstance(node, cst.ConcatenatedString):
        left, right = _string(node.left), _string(node.right)
        return left + right if left is not None and right is not None else None
    return None


def _make_collector_class():
    cst, PositionProvider, QualifiedNameProvider, QualifiedNameSource, ScopeProvider = _libcst()

    class Collector(cst.CSTVisitor):
        """One pass over a module: records patch sites with their gates, and what
        names are bound to; `finish()` turns the sites into MonkeyPatch records."""

        METADATA_DEPENDENCIES = (PositionProvider, ScopeProvider, QualifiedNameProvider)

        def __init__(self, path: str, packages: Iterable[str]):
            super().__init__()
            self.path = path
            self.packages = tuple(packages)
            self.in_tests = is_test_file(path)
            self.tag = path_version_tag(path, self.packages)
            self.gates: list[Gate] = []
            self.handlers: list[set[str]] = []
            self.funcs: list[str] = []
            self.bound: dict[Any, tuple] = {}      # Name target node -> ("value", node) | ("for", For, index)
            self.sites: list[dict] = []
            self.patches: list[MonkeyPatch] = []
            self._ref_cache: dict[int, frozenset[str]] = {}
            self.probed: set[str] = set()          # attribute names the file tests for

        # ----- metadata helpers ----------------------------------------------
        def _qnames(self, node) -> set[str]:
            try:
                names = self.get_metadata(QualifiedNameProvider, node, set())
            except Exception:
                return set()
            return {q.name for q in names if q.source == QualifiedNameSource.IMPORT}

        def _callee(self, call) -> set[str]:
            try:
                names = self.get_metadata(QualifiedNameProvider, call.func, set())
            except Exception:
                return set()
            return {q.name for q in names}

        def _is_engine(self, dotted: str) -> bool:
            return dotted.split(".", 1)[0] in self.packages

        def _assignments(self, name_node):
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
            self._ref_cache[key] = frozenset()      # cycle guard
            out = frozenset(self._refs(node, depth))
            self._ref_cache[key] = out
            return out

        def _refs(self, node, depth: int) -> set[str]:
            if depth > 6:
                return set()
            if isinstance(node, (cst.Name, cst.Attribute)):
                direct = {q for q in self._qnames(node) if self._is_engine(q)}
                if direct:
                    return direct
            if isinstance(node, cst.Attribute):
                return {f"{b}.{node.attr.value}" for b in self.refs(node.value, depth + 1)}
            if isinstance(node, cst.Name):
                assigns = self._assignments(node)
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
                callee = self._callee(node)
                args = [a for a in node.args if a.star == ""]
                if callee & {"importlib.import_module", "builtins.__import__"} and args:
                    s = _string(args[0].value)
                    if s and self._is_engine(s) and "builtins.__import__" not in callee:
                        return {s}
                if "builtins.getattr" in callee and len(args) >= 2:
                    attr = _string(args[1].value)
                    if attr:
                        return {f"{b}.{attr}" for b in self.refs(args[0].value, depth + 1)}
                return set()
            if isinstance(node, cst.Subscript):
                # sys.modules["sglang.srt.x"]
                if {q for q in self._qnames(node.value)} & {"sys.modules"} and len(node.slice) == 1:
                    sl = node.slice[0].slice
                    if isinstance(sl, cst.Index):
                        s = _string(sl.value)
                        if s and self._is_engine(s):
                            return {s}
            return set()

        def strings(self, node, depth: int = 0) -> list[str] | None:
            """The string value(s) of an expression: a literal, or a name bound to one."""
            s = _string(node)
            if s is not None:
                return [s]
            if isinstance(node, cst.Name) and depth < 4:
                assigns = self._assignments(node)
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
                    vals = [_string(r) for r in rows]
                    return None if any(v is None for v in vals) else vals  # type: ignore[return-value]
            return None

        def loop_rows(self, for_node, index: tuple[int, ...]):
            """The elements a `for` target (at tuple `index`) takes over a literal table."""
            it = for_node.iter
            if isinstance(it, cst.Name):
                assigns = self._assignments(it)
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
            assigns = self._assignments(node)
            if not assigns or len(assigns) != 1:
                return None
            bound = self.bound.get(getattr(assigns[0], "node", None))
            if bound is None or bound[0] != "for":
                return None
            return bound[1], bound[2]

        # ----- bindings ------------------------------------------------------
        def _bind(self, target, value) -> None:
            if isinstance(target, cst.Name):
                self.bound[target] = ("value", value)
            elif isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)) \
                    and len(target.elements) == len(value.elements):
                for t, v in zip(target.elements, value.elements):
                    self._bind(t.value, v.value)

        def _bind_for(self, target, for_node, index: tuple[int, ...] = ()) -> None:
            if isinstance(target, cst.Name):
                self.bound[target] = ("for", for_node, index)
            elif isinstance(target, (cst.Tuple, cst.List)):
                for k, t in enumerate(target.elements):
                    self._bind_for(t.value, for_node, index + (k,))

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
            self.gates.append(Gate(self.compile_cond(node.test), True, _code(node.test)))

        def leave_If_body(self, node) -> None:
            self.gates.pop()

        def visit_If_orelse(self, node) -> None:
            self.gates.append(Gate(self.compile_cond(node.test), False, _code(node.test)))

        def leave_If_orelse(self, node) -> None:
            self.gates.pop()

        def visit_ExceptHandler(self, node) -> None:
            names: set[str] = set()
            t = node.type
            elems = t.elements if isinstance(t, cst.Tuple) else ([] if t is None else [t])
            for e in elems:
                v = e.value if isinstance(e, cst.Element) else e
                if isinstance(v, (cst.Name, cst.Attribute)):
                    names.add(_code(v).rsplit(".", 1)[-1])
            if t is None:
                names.add("BaseException")
            self.handlers.append(names)

        def leave_ExceptHandler(self, original_node) -> None:
            self.handlers.pop()

        def visit_For(self, node) -> None:
            self._bind_for(node.target, node)

        # ----- sites -----------------------------------------------------------
        def _site(self, form: str, anchor, targets: Iterable[str], value, stmt, *, create: bool = False,
                  row=None) -> None:
            targets = tuple(sorted(set(targets)))
            if not targets:
                return
            self.sites.append(dict(form=form, anchor=anchor, targets=targets, value=value, stmt=stmt,
                                   gates=tuple(self.gates), handlers=[set(h) for h in self.handlers],
                                   function=".".join(self.funcs) or None, create=create, row=row))

        def visit_Assign(self, node) -> None:
            for t in node.targets:
                self._bind(t.target, node.value)
            for t in node.targets:
                self._assign_site(t.target, node.value, node)

        def visit_AnnAssign(self, node) -> None:
            if node.value is not None:
                self._bind(node.target, node.value)
                self._assign_site(node.target, node.value, node)

        def _assign_site(self, target, value, stmt) -> None:
            if isinstance(target, cst.Attribute):
                refs = self.refs(target)
                if refs:
                    self._site("assign", target, refs, value, stmt)
            elif isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)) \
                    and len(target.elements) == len(value.elements):
                for t, v in zip(target.elements, value.elements):
                    self._assign_site(t.value, v.value, stmt)

        def visit_Call(self, node) -> None:
            callee = self._callee(node)
            if not callee:
                return
            if callee & {"builtins.hasattr", "builtins.getattr"} and len(node.args) >= 2:
                probed = _string(node.args[1].value)
                if probed and ("builtins.hasattr" in callee or len(node.args) == 3):
                    self.probed.add(probed)      # hasattr(X, "f"), getattr(X, "f", default)
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
                s = _string(n_node)
                if s is None:
                    continue
                targets = [f"{o}.{s}" for o in owners] if owners is not None else ([s] if self._is_engine(s) else [])
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
                self._site("mock.patch", node, [n for n in names if self._is_engine(n)], new, node, create=create)
            elif callee & _MOCK_OBJECT:
                obj = pos[0].value if pos else kw.get("target")
                attr = pos[1].value if len(pos) > 1 else kw.get("attribute")
                new = pos[2].value if len(pos) > 2 else kw.get("new")
                if obj is None or attr is None:
                    return
                owners = self.refs(obj)
                names = self.strings(attr)
                if owners and names:
                    self._site("mock.patch.object", node, [f"{o}.{n}" for o in owners for n in names], new, node,
                               create=create)
            else:
                target = pos[0].value if pos else kw.get("target")
                if target is None:
                    return
                owners = set(self.refs(target))
                names = self.strings(target)
                if names:
                    owners |= {n for n in names if self._is_engine(n)}
                if not owners:
                    return
                for a in node.args:
                    if a.keyword is not None and a.keyword.value not in _PATCH_KWARGS:
                        self._site("mock.patch.multiple", a.keyword, [f"{o}.{a.keyword.value}" for o in owners],
                                   a.value, node, create=create)

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
                ops = {cst.LessThan: "<", cst.LessThanEqual: "<=", cst.GreaterThan: ">",
                       cst.GreaterThanEqual: ">=", cst.Equal: "==", cst.NotEqual: "!=", cst.In: "in",
                       cst.NotIn: "not in"}
                op = ops.get(type(comp.operator))
                if op is None:
                    return UNKNOWN
                return Cond("cmp", (op, self.compile_value(node.left, depth + 1),
                                    self.compile_value(comp.comparator, depth + 1)))
            if isinstance(node, cst.Call) and "builtins.hasattr" in self._callee(node) and len(node.args) == 2:
                attr = _string(node.args[1].value)
                owners = self.refs(node.args[0].value)
                if attr and len(owners) == 1:
                    return Cond("has", (f"{next(iter(owners))}.{attr}",))
            if isinstance(node, cst.Name):
                bound = self._single_value(node)
                if bound is not None:
                    return self.compile_cond(bound, depth + 1)
            return UNKNOWN

        def _single_value(self, name_node):
            assigns = self._assignments(name_node)
            if not assigns or len(assigns) != 1:
                return None
            bound = self.bound.get(getattr(assigns[0], "node", None))
            if bound is None or bound[0] != "value":
                return None
            return bound[1]

        def compile_value(self, node, depth: int = 0) -> Cond:
            if depth > 8:
                return UNKNOWN
            s = _string(node)
            if s is not None:
                return Cond("lit", (s,))
            if isinstance(node, (cst.Tuple, cst.List)):
                vals = []
                for el in node.elements:
                    v = _string(el.value)
                    if v is None:
                        return UNKNOWN
                    vals.append(v)
                return Cond("lit", (tuple(vals),))
            if isinstance(node, cst.Attribute):
                if node.attr.value == "__version__":
                    for r in self.refs(node.value) or {q for q in self._qnames(node.value)}:
                        top = r.split(".", 1)[0]
                        if top in self.packages:
                            return Cond("ver", (top,))
                    return UNKNOWN
                if node.attr.value in ("base_version", "public"):
                    return Cond("base", (self.compile_value(node.value, depth + 1),))
            if isinstance(node, cst.Name):
                for q in self._qnames(node):
                    if q.endswith(".__version__") and self._is_engine(q):
                        return Cond("ver", (q.split(".", 1)[0],))     # from sglang import __version__
            if isinstance(node, cst.Call) and len(node.args) == 1 and not node.args[0].keyword:
                callee = self._callee(node)
                if callee & {"importlib.metadata.version", "importlib_metadata.version"}:
                    dist = _string(node.args[0].value)
                    if dist:
                        pkg = dist.replace("-", "_").split(".", 1)[0]
                        return Cond("ver", (pkg,)) if pkg in self.packages else UNKNOWN
                last = {c.rsplit(".", 1)[-1] for c in callee} | (
                    {node.func.attr.value} if isinstance(node.func, cst.Attribute) else
                    {node.func.value} if isinstance(node.func, cst.Name) else set())
                if last & {"parse", "Version", "parse_version", "LooseVersion", "StrictVersion"}:
                    return Cond("parse", (self.compile_value(node.args[0].value, depth + 1),))
            if isinstance(node, cst.Name):
                bound = self._single_value(node)
                if bound is not None:
                    return self.compile_value(bound, depth + 1)
            return UNKNOWN

        # ----- turning sites into patches --------------------------------------
        def leave_Module(self, original_node) -> None:
            self.finish()   # metadata is only there during the traversal

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
            if value is not None and isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) \
                    and self.refs(value) & tset and not isinstance(value, cst.Call):
                return None   # `X.f = orig` restores the original: not a patch of its own
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
            elif isinstance(value, (cst.Name, cst.Integer, cst.Float, cst.SimpleString)) and (
                    not isinstance(value, cst.Name) or value.value in ("True", "False", "None")) \
                    and targets[0].rsplit(".", 1)[-1] in self.probed:
                how = "added"     # a marker the fork sets and tests for (`X._patched = True`)
            rep = self.replacement(value) if value is not None else None
            code = _code(s["stmt"]).strip().splitlines()
            return MonkeyPatch(self.path, pos.start.line, pos.start.column, pos.end.line, pos.end.column,
                               tuple(targets), s["form"], how, rep, s["function"], s["gates"], self.tag,
                               code[0] if code else "")

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
            assigns = self._assignments(name_node)
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
            name = _code(value)
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
                assigns = self._assignments(value)
                engine = {q for q in self._qnames(value) if self._is_engine(q)}
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
                    refs = {q.name for q in self.get_metadata(QualifiedNameProvider, value, set())
                            if q.source == QualifiedNameSource.IMPORT}
                    if len(refs) == 1:
                        rep.fork_ref = next(iter(refs))
                rep.note = ("imported from another module" if kind == "ImportAssignment" else
                            "a builtin" if kind == "BuiltinAssignment" else "not a function of this file")
                return rep
            if isinstance(value, cst.Attribute):
                engine = {q for q in self._qnames(value) if self._is_engine(q)} or set(self.refs(value))
                if engine:
                    rep.engine_ref = sorted(engine)[0]
                    return rep
                # LocalClass.method
                if isinstance(value.value, cst.Name):
                    assigns = self._assignments(value.value)
                    if assigns and len(assigns) == 1 and isinstance(getattr(assigns[0], "node", None), cst.ClassDef):
                        cls = assigns[0].node
                        for stmt in cls.body.body:
                            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == value.attr.value:
                                got = self._from_def(stmt, rep)
                                if got.binding == "static":
                                    got.binding = "function"
                                return got
                refs = {q.name for q in self.get_metadata(QualifiedNameProvider, value, set())
                        if q.source == QualifiedNameSource.IMPORT}
                if len(refs) == 1:
                    rep.fork_ref = next(iter(refs))     # ForkClass.method imported from the fork
                return rep
            if isinstance(value, cst.Call):
                callee = self._callee(value)
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
            return rep

        def _from_def(self, fn, rep: Replacement) -> Replacement:
            try:
                rep.line = self.get_metadata(PositionProvider, fn).start.line
            except Exception:
                pass
            binding = "function"
            for d in fn.decorators:
                dname = _code(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator)
                qn = self._callee(d.decorator) if isinstance(d.decorator, cst.Call) else self._qnames(d.decorator)
                if dname in ("staticmethod",):
                    binding = "static"
                elif dname in ("classmethod",):
                    binding = "class"
                elif dname in _TRANSPARENT_DECORATORS or qn & _TRANSPARENT_DECORATORS:
                    continue
                else:
                    rep.note = f"decorated with @{dname}"
                    return rep
            rep.params = _cst_params(fn.params)
            rep.is_async = fn.asynchronous is not None
            rep.binding = binding
            return rep

    return Collector


_COLLECTOR = None


def collector_class():
    global _COLLECTOR
    if _COLLECTOR is None:
        _COLLECTOR = _make_collector_class()
    return _COLLECTOR


def _walk(node, skip_defs: bool = True):
    """Every node under `node` (pre-order)."""
    import libcst as cst

    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if skip_defs and n is not node and isinstance(n, (cst.FunctionDef, cst.ClassDef)):
            continue
        stack.extend(reversed(list(n.children)))


def _returned_def(fn):
    """The nested function a factory returns (`def wrap(orig): def inner(...): ...; return inner`)."""
    import libcst as cst

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
    import libcst as cst

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


def collect(path: str, text: str, packages: Iterable[str] = DEFAULT_PACKAGES) -> list[MonkeyPatch]:
    """Monkey-patches of the engine packages in one Python file.  Parses (and
    computes scope/qualified-name metadata) only when `can_match` says it can."""
    packages = tuple(packages)
    if not may_have_sites(text, packages):
        return []
    import libcst as cst

    from patchaudit.units.nesting import too_deep
    from patchaudit.inputs.pyast import over_limit

    if over_limit(text) is not None:   # over max-parse-size: libcst would take gigabytes
        return []
    if too_deep(text, 200) is not None:   # libcst's native parser would crash the process (SIGSEGV)
        return []
    try:
        module = cst.parse_module(text)
    except (cst.ParserSyntaxError, RecursionError):
        return []
    col = collector_class()(path, packages)
    try:   # positions computed only when a site is found (patchaudit/analysis/lazy_metadata.py)
        from patchaudit.analysis.lazy_metadata import metadata_wrapper

        wrapper = metadata_wrapper(module)
    except ImportError:  # pragma: no cover
        from libcst.metadata import MetadataWrapper

        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    try:
        wrapper.visit(col)
    except RecursionError:
        return []
    return col.patches


def collect_with(rule, module, packages: Iterable[str]) -> list[MonkeyPatch]:
    """Recognition inside a rule's batched traversal: reuses the metadata the
    runner computed for the rule (the rule declares the collector's providers)."""
    col = collector_class()(rule.unit.path, tuple(packages))
    col.metadata = rule.metadata
    module.visit(col)
    return col.patches


# --------------------------------------------------------------------------
# engine lookups


@dataclass
class Lookup:
    state: str                            # found | missing | unknown
    kind: str = ""                        # module | class | function | attribute
    path: str | None = None               # engine file of the definition
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
    dirs = _package_dirs(source)
    for cut in range(len(parts) - 1, 0, -1):
        pkg = ".".join(parts[:cut])
        if pkg in dirs:
            names = sorted({d.split(".")[cut] for d in dirs if d.startswith(pkg + ".") and d.count(".") == cut}
                           | _modules_in(source, pkg))
            return Lookup("missing", reason=f"module `{pkg}.{parts[cut]}` does not exist",
                          suggestions=tuple(difflib.get_close_matches(parts[cut], names, n=2)))
    return Lookup("missing", reason=f"module `{dotted}` does not exist")


def _modules_in(source, pkg: str) -> set[str]:
    out = set()
    prefix = pkg.replace(".", "/") + "/"
    for root in source.package_roots() or [""]:
        for f in source.files():
            if f.startswith(root + prefix) and f.endswith(".py"):
                rest = f[len(root + prefix):]
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
            for node in ast.walk(stmt) if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                   ast.ClassDef)) else ():
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    names.add(node.id)
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(stmt.name)
                if stmt.name == "__getattr__":
                    dynamic = True
            if isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names):
                base = stmt.module or ""
                if stmt.level:
                    package = mod.module.rsplit(".", 1)[0] if mod.module and not mod.path.endswith(
                        "__init__.py") else (mod.module or "")
                    p = package.split(".")
                    keep = p[: len(p) - (stmt.level - 1)] if stmt.level > 1 else p
                    base = ".".join([x for x in keep if x] + ([stmt.module] if stmt.module else []))
                stars.append(base)
    return _cache_on(mod, "_pa_facts", (names, dynamic, stars))


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
        sub = lookup(ctx, f"{mod.module}.{'.'.join(rest)}", depth + 1) if ctx.index.module(
            f"{mod.module}.{head}") is not None else None
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
    return Lookup("missing", reason=reason, path=mod.path,
                  suggestions=tuple(difflib.get_close_matches(head, cands, n=2)), module=mod)


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
        nodes = _cache_on(mod, "_pa_class_nodes", {})
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
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name) \
                and n.value.id in ("self", "cls"):
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
                if isinstance(t, ast.Attribute) and t.attr == name and isinstance(t.value, ast.Name) \
                        and t.value.id in ("self", "cls"):
                    return n.lineno, getattr(n, "end_lineno", n.lineno) or n.lineno
    return None


_TORCH_MODULE = {"torch.nn.Module", "torch.nn.modules.module.Module"}
#: what torch.nn.Module (2.x) defines, class and instance attributes: a name outside
#: this list, not defined by the engine class or its engine bases, is missing
_TORCH_MODULE_ATTRS = frozenset("""
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
""".split())


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
    from patchaudit.engine.symbols import dotted_name

    return [dotted_name(d) or "?" for d in node.decorator_list]


def _in_class(ctx, mod: ModuleIndex, cls: ClassInfo, rest: list[str], depth: int,
              seen: set | None = None) -> Lookup:
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
        return Lookup("found", "attribute", mod.path, cls.line, cls.end_line, nested, module=mod,
                      owner_is_class=True)
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
                return Lookup("found", "attribute", mod.path, cls.line, cls.end_line, nested, module=mod,
                              owner_is_class=True, reason="inherited from torch.nn.Module")
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
    return Lookup("missing", reason=f"`{cls.qualname}` ({mod.path}:{cls.line}) has no `{name}`", path=mod.path,
                  line=cls.line, suggestions=tuple(difflib.get_close_matches(name, cands, n=2)), module=mod)


# --------------------------------------------------------------------------
# the checks (shared by PA206/PA207, inventory and bump)


@dataclass
class Issue:
    code: str                 # PA206 | PA207 | PA203
    message: str
    patch: MonkeyPatch
    lookup: Lookup | None = None
    severity: str | None = None     # overrides the rule's default ("warning", ...)


def engine_contexts(engine: Any) -> list:
    """Every engine context of a run, from the one a unit carries."""
    if engine is None:
        return []
    es = getattr(engine, "engine_set", None)
    if es is not None and hasattr(es, "contexts"):
        return list(es.contexts())
    return [engine]


def engine_title(ctx, pkg: str) -> str:
    ver = engine_versions(ctx.source).get(pkg)
    return f"{pkg} {ver}" if ver else ctx.source.label


def engine_summary(ctx) -> str:
    """An engine as a user names it: its packages' versions and where it comes from."""
    versions = engine_versions(ctx.source)
    tops = sorted(top_packages(ctx.source))
    named = [f"{p} {versions[p]}" for p in tops if p in versions and p in DEFAULT_PACKAGES] or \
            [f"{p} {versions[p]}" for p in tops if p in versions][:3]
    label = ctx.source.label
    return f"{', '.join(named)} ({label})" if named else label


def contexts_for(mp: MonkeyPatch, ctxs: list, packages: Iterable[str] = ()) -> tuple[list, str]:
    """The engines a patch is checked against, and why others were left out:
    engines that have the target's package; for a module of a per-version
    patch package, only the engine of that version."""
    pkg = mp.top
    have = [c for c in ctxs if pkg in top_packages(c.source)]
    if not have:
        return [], f"no engine given for `{pkg}`"
    if mp.version_tag is not None:
        tag_pkg, tag = mp.version_tag
        if tag_pkg is not None and tag_pkg != pkg:
            return [], f"module is for {tag_pkg} {tag}"
        match = [c for c in have if tag_matches(tag, engine_versions(c.source).get(pkg))]
        if not match:
            known = ", ".join(sorted({engine_versions(c.source).get(pkg) or "?" for c in have}))
            return [], f"module is for {pkg} {tag}; engine(s) given: {known}"
        return match, ""
    return have, ""


def gated_off(mp: MonkeyPatch, ctx) -> Gate | None:
    """The enclosing condition that is false for this engine, if any: version
    comparisons against its version, `hasattr(EngineThing, "x")` against its source."""
    versions = engine_versions(ctx.source)

    def has(dotted: str) -> bool | None:
        return {"found": True, "missing": False}.get(lookup(ctx, dotted).state)

    for g in mp.gates:
        if g.evaluate(versions, has) is False:
            return g
    return None


def resolve_target(mp: MonkeyPatch, ctx) -> tuple[str, Lookup]:
    """The first candidate target that exists (or the first one's lookup)."""
    first: tuple[str, Lookup] | None = None
    for t in mp.targets:
        got = lookup(ctx, t)
        if got.state == "found":
            return t, got
        if first is None or (first[1].state == "missing" and got.state == "unknown"):
            first = (t, got)
    assert first is not None
    return first


def check_site(mp: MonkeyPatch, ctx, title: str | None = None) -> list[Issue]:
    """PA206 and PA207 for one patch against one engine."""
    if gated_off(mp, ctx) is not None:
        return []
    title = title or engine_title(ctx, mp.top)
    target, got = resolve_target(mp, ctx)
    if got.state == "unknown":
        return []
    if got.state == "missing":
        if mp.how == "added":
            return []
        hint = ""
        if got.suggestions:
            hint = f"; renamed to {' or '.join(f'`{s}`' for s in got.suggestions)}?"
        effect = {
            "assign": "the assignment adds an attribute the engine never uses, so the patch silently does nothing",
            "setattr": "setattr adds an attribute the engine never uses, so the patch silently does nothing",
        }.get(mp.form, "patch() raises AttributeError when it starts")
        if got.reason.startswith("module "):
            effect = "importing it fails"
        return [Issue("PA206", f"monkey-patch target `{target}` does not exist in {title}: {got.reason}{hint}; "
                               f"{effect}", mp, got)]
    return check_signature(mp, ctx, target, got)


def check_signature(mp: MonkeyPatch, ctx, target: str, got: Lookup) -> list[Issue]:
    rep = mp.replacement
    if rep is None or got.kind != "function" or got.func is None:
        return []
    params, is_async, binding = rep.params, rep.is_async, rep.binding
    if rep.engine_ref is not None:
        other = lookup(ctx, rep.engine_ref)
        if other.state != "found" or other.func is None:
            return []
        f = other.func
        params, is_async = list(f.params), f.is_async
        binding = "function"
        if other.owner_is_class and f.is_classmethod:
            params, binding = params[1:], "unbound"
    if params is None:
        return []
    orig = got.func
    where = f"`{orig.qualname}` ({got.where})"
    rname = f"`{rep.name}`" + (f" ({rep.note[len('defined at '):]})" if rep.note.startswith("defined at ")
                               else f" (line {rep.line})" if rep.line else "")
    problems: list[str] = []
    on_class = got.owner_is_class
    o_view = list(orig.params)
    if on_class and not orig.is_static and o_view and o_view[0].kind in POSITIONAL:
        o_view = o_view[1:]
    r_view = list(params)
    if on_class and binding in ("function", "class"):
        if r_view and r_view[0].kind in POSITIONAL:
            r_view = r_view[1:]
        elif not any(p.kind == "vararg" for p in r_view):
            problems.append("the replacement takes no parameter for the instance the engine binds it to")
    if on_class and orig.is_static and binding == "function":
        problems.append("the original is a @staticmethod: a plain function set on the class is bound and "
                        "receives the instance as its first argument; wrap it in staticmethod()")
    elif on_class and orig.is_classmethod and binding == "function":
        problems.append("the original is a @classmethod: a plain function set on the class is not bound to "
                        "the class; wrap it in classmethod()")
    if not problems:
        problems = compare_params(o_view, r_view)
    if is_async is not None and orig.is_async != is_async:
        if orig.is_async:
            problems.append("the original is async (callers `await` it) but the replacement is a plain function")
        else:
            problems.append("the original is a plain function but the replacement is async (callers get a "
                            "coroutine, never awaited)")
    if not problems:
        return []
    msg = f"replacement {rname} for {where} cannot accept the calls the original accepts: {problems[0]}"
    if len(problems) > 1:
        msg += f" (and {len(problems) - 1} more: {'; '.join(problems[1:])})"
    return [Issue("PA207", msg, mp, got)]


def compare_params(orig: list[Param], repl: list[Param]) -> list[str]:
    """Why calls valid for `orig` can fail on `repl` (caller views: bound
    parameters removed).  `*args`/`**kwargs` accept everything."""
    out: list[str] = []
    o_pos = [p for p in orig if p.kind in POSITIONAL]
    r_pos = [p for p in repl if p.kind in POSITIONAL]
    r_var = any(p.kind == "vararg" for p in repl)
    r_kw = any(p.kind == "varkw" for p in repl)
    r_names = {p.name: p for p in repl if p.kind in ("positional", "keyword_only")}
    for i, p in enumerate(o_pos):
        pos_ok = i < len(r_pos) or r_var
        name_ok = p.kind == "positional_only" or p.name in r_names or r_kw
        if not pos_ok and not (p.name in r_names):
            out.append(f"parameter `{p.name}` of the original is missing from the replacement")
        elif not name_ok:
            if i < len(r_pos):
                out.append(f"parameter `{p.name}` of the original is missing from the replacement (position "
                           f"{i + 1} is `{r_pos[i].name}`: a call passing `{p.name}=` fails)")
            else:
                out.append(f"parameter `{p.name}` of the original is missing from the replacement")
        elif not pos_ok:
            out.append(f"parameter `{p.name}` (position {i + 1}) of the original cannot be passed positionally "
                       f"to the replacement")
        elif i < len(r_pos) and p.kind == "positional" and r_pos[i].name != p.name and p.name in r_names:
            out.append(f"parameter `{p.name}` is at position {i + 1} in the original, where the replacement "
                       f"has `{r_pos[i].name}`: positional calls bind the wrong parameter")
    for p in orig:
        if p.kind == "keyword_only" and p.name not in r_names and not r_kw:
            out.append(f"keyword parameter `{p.name}` of the original is missing from the replacement")
    if any(p.kind == "vararg" for p in orig) and not r_var:
        out.append("the original accepts extra positional arguments (*args), the replacement does not")
    if any(p.kind == "varkw" for p in orig) and not r_kw:
        out.append("the original accepts any keyword argument (**kwargs), the replacement does not")
    o_by_name = {p.name: p for p in orig}
    for i, p in enumerate(repl):
        if p.has_default or p.kind in ("vararg", "varkw"):
            continue
        op = o_by_name.get(p.name)
        if op is None:
            # a required positional slot the original also always fills is not an addition
            if p.kind in POSITIONAL and i < len(o_pos) and not o_pos[i].has_default:
                continue   # every call fills this slot; a name mismatch is reported above
            out.append(f"the replacement requires parameter `{p.name}`, which the original does not have")
        elif op.has_default:
            out.append(f"the replacement makes `{p.name}` required (it has a default in the original)")
    return out


# --------------------------------------------------------------------------
# rule support: one recognition and one check per unit, shared by PA206/PA207


def unit_issues(rule, module) -> list[Issue]:
    """Issues of the unit a rule runs on (cached on the unit)."""
    unit = rule.unit
    cached = getattr(unit, "_monkeypatch_issues", None)
    if cached is not None:
        return cached
    settings = getattr(rule.context, "settings", None)
    packages = engine_packages(settings)
    patches = collect_with(rule, module, packages)
    issues: list[Issue] = []
    ctxs = engine_contexts(getattr(unit, "engine", None))
    for mp in patches:
        chosen, _ = contexts_for(mp, ctxs, packages)
        for ctx in chosen:
            issues.extend(check_site(mp, ctx))
    try:
        unit._monkeypatch_issues = issues
    except AttributeError:  # pragma: no cover
        pass
    return issues


# --------------------------------------------------------------------------
# the bump audit


def _definition_text(ctx, got: Lookup) -> str | None:
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
            return None   # inherited from outside the engine (object, torch.nn.Module)
    elif got.kind == "module":
        return None
    body = "\n".join(l.rstrip() for l in lines[start - 1:end])
    return textwrap.dedent(body).strip("\n")


def _selected(code: str, settings: Any) -> bool:
    select = getattr(settings, "select", None)
    ignore = list(getattr(settings, "ignore", None) or [])
    extend = list(getattr(settings, "extend_select", None) or [])

    def hit(codes):
        return any(c.strip().upper() == "ALL" or code.startswith(c.strip().upper()) for c in codes if c.strip())

    if hit(ignore):
        return False
    if select is None:
        return True
    return hit(select) or hit(extend)


def _rule_meta(code: str, default_name: str, default_severity: str):
    from patchaudit.model.findings import Severity

    try:
        from patchaudit.lint.rule import all_rules

        r = all_rules().get(code)
    except Exception:  # pragma: no cover - a broken rule module elsewhere
        r = None
    if r is not None:
        return r.name, r.severity
    return default_name, Severity(default_severity)


def issue_finding(issue: Issue, ctx, lines: list[str] | None = None):
    """A Finding for an issue, located at the patch site, its target the engine definition."""
    from patchaudit.model.findings import Finding, Severity, Target

    names = {"PA203": ("patched-code-changed-upstream", "warning"),
             "PA206": ("monkeypatch-target-missing", "error"),
             "PA207": ("monkeypatch-signature-mismatch", "error")}
    name, sev = _rule_meta(issue.code, *names[issue.code])
    mp = issue.patch
    target = None
    got = issue.lookup
    if got is not None and got.path is not None:
        target = Target(got.path, got.line, got.qualname)
    context = []
    if lines is not None and 0 < mp.line <= len(lines):
        context = [lines[mp.line - 1]]
    return Finding(code=issue.code, name=name, severity=Severity(issue.severity) if issue.severity else sev,
                   message=issue.message, path=mp.path, line=mp.line, column=mp.column + 1,
                   end_line=mp.end_line, end_column=mp.end_column + 1, target=target, context=context)


def audit_bump(py_files: list[str], old_ctx, new_ctx, settings) -> list:
    """Monkey-patches of `py_files` across an engine bump: PA203 when a patched
    target's definition changed between OLD and NEW (its source text, so a
    definition that only moved is unchanged), PA206/PA207 against NEW.

    A module of a per-version patch package is audited only when its version
    tag matches NEW (it is the module that will run on NEW); untagged modules
    always are.  Version gates are evaluated against NEW (PA206/PA207) and
    against both (PA203: a patch gated off on both versions is skipped)."""
    from patchaudit.pipeline.runner import apply_per_file_ignores, apply_suppressions

    packages = engine_packages(settings)
    fork = ForkIndex(py_files)
    fork.max_file_size = settings.max_file_size
    out = []
    for path in py_files:
        try:   # the one guarded reader: regular files only, bounded (analyse_file reports the rest)
            from patchaudit.files.reader import read_text

            text = read_text(path, settings.max_file_size)
        except OSError:   # ReadError too
            continue
        patches = collect(path, text, packages)
        if not patches:
            continue
        lines = source_lines(text)
        findings = []
        for mp in patches:
            chosen, _ = contexts_for(mp, [new_ctx], packages)
            if not chosen:
                continue
            fork.resolve(mp)
            if _selected("PA203", settings) and not (gated_off(mp, old_ctx) and gated_off(mp, new_ctx)):
                issue = changed_upstream(mp, old_ctx, new_ctx)
                if issue is not None:
                    findings.append(issue_finding(issue, new_ctx, lines))
            for issue in check_site(mp, new_ctx):
                if _selected(issue.code, settings):
                    findings.append(issue_finding(issue, new_ctx, lines))
        findings = apply_per_file_ignores(findings, settings)
        kept, _ = apply_suppressions(findings, lines)
        out.extend(kept)
    seen = set()
    result = []
    for f in sorted(out, key=lambda f: f.sort_key()):
        key = (f.code, f.path, f.line, f.column, f.message)
        if key not in seen:
            seen.add(key)
            result.append(f)
    return result


class ForkIndex:
    """The fork's own modules among the files of a run, to resolve a replacement
    imported from another module of the fork (`from fork.patches import new_fn`)."""

    #: the largest module read (the run's max-file-size, set by audit_bump)
    max_file_size = 64 * 1024 * 1024

    def __init__(self, paths: Iterable[str]):
        self.by_module: dict[str, str] = {}
        for path in paths:
            parts = os.path.normpath(path).replace(os.sep, "/").split("/")
            if not parts[-1].endswith(".py"):
                continue
            parts[-1] = parts[-1][:-3]
            if parts[-1] == "__init__":
                parts.pop()
            for k in range(len(parts)):
                name = ".".join(p for p in parts[k:] if p not in (".", ".."))
                if name:
                    self.by_module.setdefault(name, path)
        self._modules: dict[str, ModuleIndex | None] = {}

    def function(self, dotted: str) -> FuncInfo | None:
        from patchaudit.engine.symbols import index_module

        parts = dotted.lstrip(".").split(".")
        for cut in range(len(parts) - 1, 0, -1):
            path = self.by_module.get(".".join(parts[:cut]))
            if path is None:
                continue
            if path not in self._modules:
                try:   # the one guarded reader: regular files only, bounded
                    from patchaudit.files.reader import read_text

                    self._modules[path] = index_module(path, read_text(path, self.max_file_size))
                except OSError:   # ReadError too
                    self._modules[path] = None
            mod = self._modules[path]
            rest = parts[cut:]
            if mod is None:
                return None
            if len(rest) == 1:
                return mod.functions.get(rest[0])
            cls = mod.classes.get(".".join(rest[:-1]))
            return cls.methods.get(rest[-1]) if cls else None
        return None

    def resolve(self, mp: MonkeyPatch) -> None:
        """Fill in the signature of a replacement defined in another fork module."""
        rep = mp.replacement
        if rep is None or rep.params is not None or not rep.fork_ref:
            return
        f = self.function(rep.fork_ref)
        if f is None:
            return
        extra = [d for d in f.decorators if d not in ("staticmethod", "classmethod")
                 and d not in _TRANSPARENT_DECORATORS]
        if extra:
            rep.note = f"decorated with @{extra[0]}"
            return
        rep.params, rep.is_async = list(f.params), f.is_async
        if f.is_method:
            # read through its class: a staticmethod or a plain method is a plain function,
            # a classmethod is bound to the fork's class
            rep.binding = "function"
            if f.is_classmethod:
                rep.params, rep.binding = rep.params[1:], "unbound"
        else:
            rep.binding = "static" if f.is_static else "class" if f.is_classmethod else "function"
        rep.note = f"defined at {f.path}:{f.line}"


def changed_upstream(mp: MonkeyPatch, old_ctx, new_ctx) -> Issue | None:
    """PA203 for one patch: its target exists in both versions and its
    definition's text differs."""
    t_old, old = resolve_target(mp, old_ctx)
    t_new, new = resolve_target(mp, new_ctx)
    if old.state != "found" or new.state != "found":
        return None
    a, b = _definition_text(old_ctx, old), _definition_text(new_ctx, new)
    if a is None or b is None or a == b:
        return None
    diff = [l for l in difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="", n=0)
            if l[:1] in "+-" and not l.startswith(("---", "+++"))]
    added = sum(1 for l in diff if l.startswith("+"))
    removed = len(diff) - added
    old_title, new_title = engine_title(old_ctx, mp.top), engine_title(new_ctx, mp.top)
    moved = "" if (old.path, old.line) == (new.path, new.line) else f", now at {new.where}"
    verb = {"wrapped": "wraps", "added": "adds", "mocked": "mocks"}.get(mp.how, "replaces")
    return Issue("PA203", f"`{t_new}` changed upstream between {old_title} and {new_title} "
                          f"(+{added}/-{removed} lines{moved}); this monkey-patch {verb} it: re-check the "
                          f"replacement against the new definition", mp, new)
