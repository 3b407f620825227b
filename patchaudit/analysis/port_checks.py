"""The checks `patchaudit port` makes of a ported hunk, and the forms in which the
new release may already contain a hunk's change.

Pure computations on texts (lists of lines without terminators), with `ast` and
`symtable`: no I/O, no findings, no rule codes.  `pipeline/port.py` hands in the
file before and after the hunk and the lines the hunk added (1-based, in the
file after), and words the result.

- `parse_error`: the ported file does not parse (line and message);
- `duplicate_definitions`: a name the hunk defines that its scope (the module, a
  class body) now defines twice, where the file before did not;
- `undefined_names`: a global name the hunk's added code reads that the ported
  file neither defines, imports nor has as a builtin (``symtable``'s view of the
  scopes: a local, a parameter, a comprehension variable is never reported);
- `imports_from`: the `from MODULE import NAME` statements of the added lines,
  for the driver to look up in the new release's symbol index;
- `upstream_form`: the new release already holds the change in another form:
  every definition the hunk adds is defined in the same scope of the new file
  (`same names defined`), or nearly all of its added lines are there, in order,
  where OLD did not have them (`near match of the added lines`).
"""

from __future__ import annotations

import ast
import builtins
import difflib
import functools
import re
import symtable
from dataclasses import dataclass

#: share of a hunk's significant added lines the new file must hold (in order) for a near match
NEAR_SHARE = 0.9
#: ... and at least this many of them (a two-line hunk is too weak a signal)
NEAR_MIN = 3

_BUILTINS = frozenset(dir(builtins)) | {"__file__", "__name__", "__doc__", "__spec__", "__path__", "__builtins__"}


@dataclass(frozen=True)
class Place:
    """A name at a line (1-based) of a file."""

    name: str
    line: int


@functools.lru_cache(maxsize=48)
def _parse(text: str) -> ast.Module | Place:
    """The module, or the first syntax error (kept for the last few texts: a hunk's file
    after is the next hunk's file before)."""
    try:
        return ast.parse(text)
    except SyntaxError as exc:
        return Place(exc.msg or "invalid syntax", exc.lineno or 1)
    except (ValueError, RecursionError, MemoryError) as exc:
        return Place(str(exc), 1)


def parse_error(lines: list[str]) -> Place | None:
    """(message, line) of the first syntax error of the file, or None."""
    got = _parse("\n".join(lines) + "\n")
    return got if isinstance(got, Place) else None


def _tree(lines: list[str]) -> ast.Module | None:
    got = _parse("\n".join(lines) + "\n")
    return None if isinstance(got, Place) else got


def _near(tree: ast.Module, lines: set[int]) -> list[ast.AST]:
    """The nodes of the top-level statements that overlap `lines` (all their nodes)."""
    out: list[ast.AST] = []
    for stmt in tree.body:
        end = getattr(stmt, "end_lineno", None) or stmt.lineno
        if any(stmt.lineno <= n <= end for n in lines):
            out.extend(ast.walk(stmt))
    return out


def _scope_defs(body: list[ast.stmt], scope: str, out: dict[tuple[str, str], list[int]]) -> None:
    """(scope, name) -> lines of its def/class statements (and a class's annotated fields),
    the branches of an `if`/`try` counted as alternatives (only the first branch)."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if any(_is_overload(d) for d in getattr(node, "decorator_list", [])):
                continue
            out.setdefault((scope, node.name), []).append(node.lineno)
            if isinstance(node, ast.ClassDef):
                _scope_defs(node.body, f"{scope}.{node.name}" if scope else node.name, out)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and scope:
            out.setdefault((scope, node.target.id), []).append(node.lineno)


def _is_overload(dec: ast.expr) -> bool:
    name = dec.attr if isinstance(dec, ast.Attribute) else getattr(dec, "id", "")
    return name in ("overload", "setter", "getter", "deleter", "register") or (
        isinstance(dec, ast.Attribute) and dec.attr in ("setter", "getter", "deleter", "register")
    )


def definitions(lines: list[str]) -> dict[tuple[str, str], list[int]]:
    """(scope qualname, name) -> definition lines of a module ("" for the module itself)."""
    return dict(_definitions("\n".join(lines) + "\n"))


@functools.lru_cache(maxsize=8)
def _definitions(text: str) -> dict[tuple[str, str], list[int]]:
    got = _parse(text)
    tree = None if isinstance(got, Place) else got
    out: dict[tuple[str, str], list[int]] = {}
    if tree is not None:
        _scope_defs(tree.body, "", out)
    return out


def duplicate_definitions(before: list[str], after: list[str], added: set[int]) -> list[Place]:
    """Names defined twice in one scope of `after`, one of them on an added line, that
    `before` did not define twice."""
    old = definitions(before)
    out: list[Place] = []
    for (scope, name), at in definitions(after).items():
        if len(at) > 1 and any(n in added for n in at) and len(old.get((scope, name), [])) < len(at):
            out.append(Place(f"{scope}.{name}" if scope else name, max(at)))
    return sorted(out, key=lambda p: p.line)


def _module_bindings(tree: ast.Module) -> set[str]:
    """The names a module binds at its top level (under `if`/`try`/`with`/`for` too), and
    those its functions declare `global`."""
    names: set[str] = set()
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)  # (a function's `global X`: read from the text, see _bindings)
            continue
        if isinstance(node, ast.Global):
            names.update(node.names)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.Lambda):
            continue
        todo.extend(ast.iter_child_nodes(node))
    return names


@functools.lru_cache(maxsize=8)
def _bindings(text: str) -> frozenset[str]:
    got = _parse(text)
    if isinstance(got, Place):
        return frozenset()
    found = re.finditer(r"^[ \t]+global[ \t]+([\w, \t]+)$", text, re.M)
    declared = {n.strip() for m in found for n in m.group(1).split(",")}
    return frozenset(_module_bindings(got) | declared)


def _snippet_globals(lines: list[str], stmt: ast.stmt) -> set[str]:
    """The free (global) names one top-level statement reads, by `symtable` on its text."""
    first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
    text = "\n".join(lines[first - 1 : (stmt.end_lineno or stmt.lineno)]) + "\n"
    try:
        table = symtable.symtable(text, "<hunk>", "exec")
    except (SyntaxError, ValueError, RecursionError):
        return set()
    out: set[str] = set()
    todo = [table]
    while todo:
        t = todo.pop()
        for sym in t.get_symbols():
            if sym.is_referenced() and (sym.is_global() or t.get_type() == "module") and not sym.is_assigned():
                if not sym.is_imported():
                    out.add(sym.get_name())
        todo.extend(t.get_children())
    return out


def undefined_names(after: list[str], added: set[int], before: list[str] | None = None) -> list[Place]:
    """Global names read on the added lines that the module does not bind (none when the
    module star-imports: its names are unknown), and that `before` (the file without the
    hunk) did not already read without binding.  Scopes are `symtable`'s, on the
    top-level statements the added lines are in."""
    tree = _tree(after)
    if tree is None or any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in tree.body):
        return []
    bound = _bindings("\n".join(after) + "\n") | _BUILTINS
    before_text = "\n".join(before) if before is not None else ""
    out: list[Place] = []
    for stmt in tree.body:
        end = stmt.end_lineno or stmt.lineno
        if not any(stmt.lineno <= n <= end for n in added):
            continue
        loads = {
            n.id: n.lineno
            for n in ast.walk(stmt)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.lineno in added and n.id not in bound
        }
        if loads:
            free = _snippet_globals(after, stmt)
            out.extend(
                Place(name, line)
                for name, line in loads.items()
                if name in free and not re.search(r"(?<![\w.])" + re.escape(name) + r"\b", before_text)
            )
    return sorted(out, key=lambda p: p.line)


def imports_from(after: list[str], added: set[int]) -> list[tuple[str, int, str, int]]:
    """(module, level, name, line) of each `from MODULE import NAME` on an added line."""
    tree = _tree(after)
    if tree is None:
        return []
    out: list[tuple[str, int, str, int]] = []
    for n in _near(tree, added):
        if isinstance(n, ast.ImportFrom) and n.lineno in added:
            out.extend((n.module or "", n.level, a.name, n.lineno) for a in n.names if a.name != "*")
    return out


def top_level_names(lines: list[str]) -> set[str] | None:
    """The names a module binds at its top level (None: it does not parse or star-imports,
    so any name may be there)."""
    tree = _tree(lines)
    if tree is None:
        return None
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return None
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _significant(text: str) -> str | None:
    s = text.strip()
    if not s or s.startswith("#") or s in ("(", ")", "[", "]", "{", "}", "):", "],", "},", "),", "pass", "else:"):
        return None
    return s


def _added_defs(added_text: list[str]) -> list[str]:
    out = []
    for t in added_text:
        s = t.strip()
        for kw in ("def ", "async def ", "class "):
            if s.startswith(kw):
                out.append(s[len(kw) :].split("(")[0].split(":")[0].strip())
    return out


def upstream_form(
    added_text: list[str], removed_text: list[str], old_lines: list[str], new_lines: list[str]
) -> tuple[str, int] | None:
    """(how, line in NEW) when NEW already holds the hunk's change in another form, or None.

    `same names defined`: every def/class the hunk adds is defined in NEW and was not in OLD;
    `near match of the added lines`: at least NEAR_SHARE of its significant added lines
    (stripped) are in NEW, in order, that OLD did not hold."""
    defs = _added_defs(added_text)
    if defs:
        new_defs = {name: at for (_, name), at in definitions(new_lines).items()}
        old_defs = {name for (_, name) in definitions(old_lines)}
        if all(d in new_defs and d not in old_defs for d in defs):
            return f"same names defined ({', '.join(defs)})", min(new_defs[defs[0]])
    sig = [s for s in (_significant(t) for t in added_text) if s]
    if len(sig) < NEAR_MIN:
        return None
    new_sig = [(_significant(t), i + 1) for i, t in enumerate(new_lines)]
    new_sig = [(s, i) for s, i in new_sig if s]
    old_set = {s for s in (_significant(t) for t in old_lines) if s}
    if all(s in old_set for s in sig):
        return None  # OLD had these lines already: nothing tells the change is upstream
    present = {s for s, _ in new_sig}
    if sum(s in present for s in sig) < NEAR_SHARE * len(sig):
        return None  # too few of them are in NEW at all (the alignment below is the costly part)
    matcher = difflib.SequenceMatcher(None, sig, [s for s, _ in new_sig], autojunk=False)
    blocks = [b for b in matcher.get_matching_blocks() if b.size]
    hit = sum(b.size for b in blocks)
    if hit >= NEAR_SHARE * len(sig) and blocks:
        span = new_sig[blocks[-1].b + blocks[-1].size - 1][1] - new_sig[blocks[0].b][1]
        if span <= 3 * len(sig) + 10:  # together, not scattered over the file
            removed = {s for s in (_significant(t) for t in removed_text) if s}
            still = {s for s, _ in new_sig}
            if all(r not in still or r in sig for r in removed):  # what it removes is gone too
                return "near match of the added lines", new_sig[blocks[0].b][1]
    return None


_CHAIN = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_STRING = re.compile(r"(?:[rbfuRBFU]{0,2})(\"\"\"|'''|\"|')(?:\\.|(?!\1).)*\1")


def _chains(text: str) -> set[str]:
    code = _STRING.sub("''", text.split("#", 1)[0] if "#" in text and "'" not in text and '"' not in text else text)
    return set(_CHAIN.findall(code))


def _count(chain: str, text: str) -> int:
    return len(re.findall(r"(?<![\w.])" + re.escape(chain) + r"(?!\w)", text))


@functools.lru_cache(maxsize=16)
def _imported_modules(text: str) -> frozenset[str]:
    """The first components of the modules a file binds with `import X` / `import X as Y`."""
    out = set()
    for m in re.finditer(r"^[ \t]*import ([\w.]+)(?: as (\w+))?[ \t]*$", text, re.M):
        out.add(m.group(1).split(".")[0])
        if m.group(2):
            out.add(m.group(2))
    return frozenset(out)


def vanished_usages(added_text: list[str], old_lines: list[str], new_lines: list[str]) -> list[str]:
    """The dotted names (`self.scheduler.enable_metrics`, `utils.helper`) the added lines use
    that the old file used too and the new file no longer does: upstream rewrote those uses
    (renamed, moved, or changed what they are), so the hunk's copy is likely stale."""
    out = []
    old_text, new_text = "\n".join(old_lines), "\n".join(new_lines)
    modules = _imported_modules(old_text) | _imported_modules(new_text)
    for chain in sorted({c for t in added_text for c in _chains(t)}):
        if chain.split(".")[0] in modules:
            continue  # a module's function (`time.perf_counter`): upstream's use of it says nothing
        if chain.split(".")[0] in ("self", "cls") and chain.count(".") == 1:
            # one attribute of self: the patch may define it itself; judged with two or more
            if _count(chain + " =", old_text) or not _count(chain, old_text):
                continue
        if _count(chain, old_text) and not _count(chain, new_text):
            out.append(chain)
    return out


def unused_imports(lines: list[str], added: set[str]) -> list[str]:
    """The names imported on lines whose stripped text is in `added` that the module never
    reads (an `__all__` entry, a string annotation or a `TYPE_CHECKING` use counts as read)."""
    tree = _tree(lines)
    if tree is None:
        return []
    bound: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and getattr(node, "module", None) != "__future__":
            for alias in node.names:
                at = getattr(alias, "lineno", node.lineno)
                if 0 < at <= len(lines) and lines[at - 1].strip() in added and alias.name != "*":
                    bound.append(alias.asname or alias.name.split(".")[0])
    if not bound:
        return []
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    strings = " ".join(n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str))
    return [b for b in bound if b not in used and not re.search(r"\b" + re.escape(b) + r"\b", strings)]
