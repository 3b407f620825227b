"""The monkey-patch pre-filter: the engine package names of a run, and two
sound checks that a file cannot hold a monkey-patch of them (a regular
expression, then the stdlib `ast`), so that libcst parses only the files that
can."""

from __future__ import annotations

import ast
import bisect
import functools
import re
from typing import Any, Iterable

from patchaudit.engine.versions import DEFAULT_PACKAGES
from patchaudit.inputs.pyast import walk

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
            rf"|[\"'](?:{alt})(?:[.\"']))"
        )
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


def may_have_sites(text: str, packages: Iterable[str], lines: Iterable[int] | None = None) -> bool:
    """A second, still sound pre-filter with the stdlib `ast` (about ten times
    cheaper than libcst's parse, let alone its scope metadata): False only when
    no statement of the file can be a site the recognizer accepts.

    Names are tracked file-wide, ignoring scopes (a superset of what the
    scope-aware recognizer resolves): names bound by imports of an engine
    package, then, to a fixed point, names assigned (or bound by `for`/`with`)
    from an expression that mentions such a name or a string naming an engine
    package.  A site needs an attribute assignment, `setattr(...)` or a
    `patch...(...)` call whose expression mentions one of them.

    `lines`, if given: only sites whose statement holds one of these lines count (the
    lines a unit judges: the recognizer's report on a site lies inside the site's
    statement, its decorators included)."""
    packages = tuple(packages)
    if not can_match(text, packages):
        return False
    got = _engine_sites(text, packages)
    if got is None:
        return True  # let libcst decide (and report) on text ast cannot read
    if lines is None or not got[1]:
        return bool(got[1])
    judged = sorted(set(lines))
    for lo, hi in _site_spans(text, packages):
        k = bisect.bisect_left(judged, lo)
        if k < len(judged) and judged[k] <= hi:
            return True
    return False


# (PA206 and PA207 ask the same of a file, and a unit's judged-lines check follows its
# text's: the last two texts' answers are kept)
@functools.lru_cache(maxsize=2)
def _engine_sites(text: str, packages: tuple[str, ...]) -> tuple | None:
    """(the ast tree, the possible sites whose expression mentions an engine name), or
    None when ast cannot read the text."""
    from patchaudit.inputs.pyast import parse

    tree = parse(text)
    if tree is None:
        return None
    prefixes = tuple(p + "." for p in packages)
    names, binds, sites = _scan(tree, packages)

    def mentions(expr) -> bool:
        return _mentions(expr, names, packages, prefixes)

    changed = True
    while changed:
        changed = False
        for tgts, value in binds:
            if not set(tgts) <= names and _aliasable(value) and mentions(value):
                names.update(tgts)
                changed = True
    return tree, tuple(s for s in sites if mentions(s))


@functools.lru_cache(maxsize=2)
def _site_spans(text: str, packages: tuple[str, ...]) -> tuple[tuple[int, int], ...]:
    """(first, last) line of each site's statement, from its decorators, or the site, to
    its end: the recognizer's report on the site lies within it."""
    got = _engine_sites(text, packages)
    if got is None:
        return ()
    tree, sites = got
    out = []
    for site in sites:
        stmt = _statement_of(tree, site)
        lo = min(getattr(site, "lineno", 1), getattr(stmt, "lineno", 1))
        for d in getattr(stmt, "decorator_list", ()):
            lo = min(lo, d.lineno)
        hi = max(getattr(site, "end_lineno", None) or lo, getattr(stmt, "end_lineno", None) or lo)
        out.append((lo, hi))
    return tuple(out)


def _statement_of(tree: ast.Module, node: ast.AST) -> ast.AST:
    """The innermost statement that holds expression `node`: found by position, going down
    the statement lists only (statements nest and siblings never overlap; a decorator is
    its definition's), not by walking every node of the file for its parents."""
    at = (node.lineno, node.col_offset)  # type: ignore[attr-defined]
    end = (node.end_lineno or node.lineno, node.end_col_offset or 0)  # type: ignore[attr-defined]
    found: ast.AST = tree
    body: list = tree.body
    while body:
        inner = None
        for stmt in body:
            first = min(
                [(stmt.lineno, stmt.col_offset)] + [(d.lineno, d.col_offset - 1) for d in stmt.decorator_list]
                if hasattr(stmt, "decorator_list")
                else [(stmt.lineno, stmt.col_offset)]
            )
            if first <= at and end <= (stmt.end_lineno or stmt.lineno, stmt.end_col_offset or 0):
                inner = stmt
                break
        if inner is None:
            break
        found = inner
        body = [
            s
            for f in ("body", "orelse", "finalbody", "handlers", "cases")
            for x in getattr(inner, f, None) or ()
            for s in (x.body if isinstance(x, (ast.ExceptHandler, ast.match_case)) else [x])
        ]
    return found


def _targets_of(node) -> list[str]:
    """Names a target binds (not the names inside `a.b = ...` or `a[i] = ...`)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        return [n for el in node.elts for n in _targets_of(el)]
    if isinstance(node, ast.Starred):
        return _targets_of(node.value)
    return []


def _scan(tree, packages: tuple[str, ...]) -> tuple[set[str], list[tuple[list[str], ast.AST]], list[ast.AST]]:
    """(names bound by imports of an engine package, (names, value) of every binding,
    the expressions of every possible site)."""
    names: set[str] = set()
    binds: list[tuple[list[str], ast.AST]] = []
    sites: list[ast.AST] = []
    mock_names: set[str] = {"patch", "mock"}
    for node in walk(tree):  # no context or operator leaves: none is a binding or a site
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
                binds.append(([n for t in tgts for n in _targets_of(t)], node.value))
            for t in tgts:
                if any(isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) for n in walk(t)):
                    sites.append(t)
                elif isinstance(t, ast.Subscript):  # X.__dict__["f"] = ..., vars(X)["f"] = ...
                    sites.append(t.value)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            binds.append((_targets_of(node.target), node.iter))
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            binds.append((_targets_of(node.optional_vars), node.context_expr))
        elif isinstance(node, ast.NamedExpr):
            binds.append(([node.target.id], node.value))
        elif isinstance(node, ast.Call):
            f = node.func
            last = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if last == "setattr" and node.args:
                sites.append(node.args[0])
            elif last in ("patch", "object", "multiple") or last in mock_names:
                sites.append(node)
    return names, binds, sites


def _mentions(expr, names: set[str], packages: tuple[str, ...], prefixes: tuple[str, ...]) -> bool:
    for n in walk(expr):
        if isinstance(n, ast.Name) and n.id in names:
            return True
        if (
            isinstance(n, ast.Constant)
            and isinstance(n.value, str)
            and (n.value in packages or n.value.startswith(prefixes))
        ):
            return True
    return False


def _aliasable(expr) -> bool:
    """Values the recognizer follows through a name: references, strings,
    literal tables, import_module/getattr calls, sys.modules[...]."""
    if isinstance(expr, (ast.Name, ast.Attribute, ast.Constant, ast.List, ast.Tuple, ast.Set)):
        return True
    if isinstance(expr, ast.Subscript):  # sys.modules["..."]
        return isinstance(expr.value, ast.Attribute) and expr.value.attr == "modules"
    if isinstance(expr, ast.Call):
        f = expr.func
        last = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        return last in ("import_module", "__import__", "getattr")
    return False
