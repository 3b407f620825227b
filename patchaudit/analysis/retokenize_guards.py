"""What PA103 reads from a module's syntax besides the dataflow: drift guards and mask sizes.

PA103 (rules/pa103_decode_retokenize.py) follows text that is encoded again into ids
through the dataflow layer (patchaudit/analysis/dataflow.py).  Two facts it needs are
about statements, not values, and the layer has no hook for them:

- **Drift guards.**  Re-encoded ids checked against the ids the engine produced, by a
  check that fails loudly: `assert again == ids`, `if again != ids: raise ...`, a fork
  (`if again != ids: again = ids`, `... return ...`), or the same on their length
  (`if len(again) != n: raise ...`).  After the check (inside the `==` branch, or after
  an `!=` branch that leaves, or after the assert) the ids are known to round-trip.
  `candidates(module)` lists them by syntax, `resolve` gives one its lines, and
  `guarded(...)` says whether a trace leaves the guarded variable after the guard.
- **Mask sizes.**  `len(ids)` inside what is stored into a loss mask or a log-prob list
  (`loss_mask += [1] * len(ids)`, `masks.append([1] * len(ids))`, `Out(loss_mask=[1] *
  len(ids))`, `{"loss_mask": ...}`) says that these ids are the trained ones.  A mask of
  zeros (`[0] * len(obs_ids)`: observation tokens, never trained) does not.
  `mask_len_lines(tree, patterns)` gives the lines (and arguments) of those `len(...)` calls
  and the mask each sizes (a length subtracted, `len(seq) - len(prompt_ids)`, is not one),
  read on the stdlib `ast` tree (the pre-filter's, parsed once per text);
  `may_size_mask(tree, patterns)` is the pre-filter's question (zeros not told apart).

No finding, no rule code: the rule decides what these facts mean.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from patchaudit.analysis.flow_values import matches
from patchaudit.inputs import pyast
from patchaudit.inputs.astnames import dotted

#: statements that leave the current path: an `!=` check followed by one of these fails loudly
_LEAVE = (ast.Raise, ast.Return, ast.Continue, ast.Break)


@dataclass(frozen=True)
class Guard:
    name: str  # the checked variable
    line: int  # the check's line
    start: int  # first line where the variable is known to round-trip
    end: int  # last such line
    fn_start: int  # the enclosing function's lines
    fn_end: int


# --------------------------------------------------------------------------
# drift guards


def _compared(test: ast.expr) -> Iterator[tuple[str, str]]:
    """(name, operator) of every variable compared by `==`/`!=` with something not a literal."""
    for node in ast.walk(test):
        if not isinstance(node, ast.Compare) or len(node.ops) != 1:
            continue
        op = "==" if isinstance(node.ops[0], ast.Eq) else "!=" if isinstance(node.ops[0], ast.NotEq) else ""
        if not op:
            continue
        left, right = node.left, node.comparators[0]
        for side, other in ((left, right), (right, left)):
            name = _checked_name(side)
            if name is not None and not _is_literal(other):
                yield name, op


def _checked_name(node: ast.expr) -> str | None:
    """`x`, `x[...]`, `len(x)`, `list(x)` -> "x"."""
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("len", "list", "tuple"):
        if len(node.args) + len(node.keywords) == 1:
            node = node.args[0] if node.args else node.keywords[0].value
            if isinstance(node, ast.Starred):
                node = node.value
            if isinstance(node, ast.Subscript):
                node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _is_literal(node: ast.expr) -> bool:
    """A number (not imaginary), a string or bytes literal, an f-string, None, True or False."""
    if isinstance(node, ast.JoinedStr):
        return True
    return isinstance(node, ast.Constant) and not isinstance(node.value, complex) and node.value is not ...


def _statements(body: Any) -> Iterator[Any]:
    """Every statement under `body` (a statement or a list of them), compound ones and
    their blocks included (handlers and cases too); not expressions."""
    todo = [body]
    while todo:
        n = todo.pop()
        if isinstance(n, (list, tuple)):
            todo.extend(reversed(n))
            continue
        yield n
        for attr in ("body", "orelse", "handlers", "finalbody", "cases"):
            sub = getattr(n, attr, None)
            if isinstance(sub, list):
                todo.append(sub)


def _leaves_or_assigns(block: Any, name: str) -> bool:
    if not block:
        return False
    for node in _statements(block):
        if isinstance(node, _LEAVE):
            return True
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Name) and func.id in ("exit", "abort"):
                return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return True
    return False


@dataclass(frozen=True)
class Candidate:
    """A drift guard found by syntax alone; `resolve` gives its lines."""

    name: str
    fn: Any  # ast.FunctionDef or AsyncFunctionDef
    node: Any  # the Assert or If
    region: str  # "rest": the rest of the function; "body": the If's body


def candidates(module: ast.Module) -> list[Candidate]:
    """Every drift guard of the module's functions (see the module docstring), unresolved."""
    out: list[Candidate] = []
    for fn in _statements(module.body):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in _statements(fn.body):
            if isinstance(node, ast.Assert):
                out.extend(Candidate(name, fn, node, "rest") for name, op in _compared(node.test) if op == "==")
            elif isinstance(node, ast.If):
                for name, op in _compared(node.test):
                    if op == "==":  # the equal branch is checked; a leaving other branch checks the rest
                        out.append(Candidate(name, fn, node, "body"))
                        if _leaves_or_assigns(node.orelse, name):
                            out.append(Candidate(name, fn, node, "rest"))
                    elif _leaves_or_assigns(node.body, name):
                        out.append(Candidate(name, fn, node, "rest"))
    return out


def resolve(c: Candidate) -> Guard:
    """The lines of candidate `c`: where its variable is known to round-trip."""
    line = c.node.lineno
    end = c.fn.end_lineno
    if c.region == "body" and isinstance(c.node, ast.If):
        end = c.node.body[-1].end_lineno
    return Guard(c.name, line, line, end, c.fn.lineno, c.fn.end_lineno)


def traced_names(steps: tuple[tuple[int, str], ...]) -> set[str]:
    """The variables a trace assigns (its notes: "assigned to `x`", "unpacked into `x`")."""
    out: set[str] = set()
    for _, note in steps:
        for m in _ASSIGNED.finditer(note):
            out.add(m.group(1))
    return out


_ASSIGNED = re.compile(r"(?:to|into) `([A-Za-z_][A-Za-z_0-9]*)`")


def guarded(guards_: Iterable[Guard], steps: tuple[tuple[int, str], ...], sink_line: int) -> bool:
    """Whether the flow `steps` (ending at `sink_line`) held its value in a guarded variable
    before the guard and used it after: the trace assigns the variable (a step inside the
    guard's function, before the guard) and its next step is where the guard holds."""
    lines = [l for l, _ in steps] + [sink_line]
    for g in guards_:
        marks = (f"to `{g.name}`", f"into `{g.name}`")
        for i, (line, note) in enumerate(steps):
            if not (g.fn_start <= line < g.line) or not any(m in note for m in marks):
                continue
            after = next((l for l in lines[i + 1 :] if l != line), sink_line)
            if g.start <= after <= g.end or after > g.fn_end:
                return True
    return False


# --------------------------------------------------------------------------
# mask sizes (read on the stdlib `ast` tree the pre-filter parsed: no libcst walk)


def may_size_mask(tree: ast.AST, patterns: list[str]) -> bool:
    """Whether some store, append, keyword or dict key named like `patterns` holds a `len(...)`
    call (the pre-filter's question: zeros are not told apart)."""
    for node in pyast.walk(tree):
        for name, value in _ast_mask_values(node):
            if matches(name, patterns) and _has_len(value):
                return True
    return False


def mask_len_lines(tree: ast.AST, patterns: list[str]) -> dict[tuple[int, str | None], str]:
    """(line, argument) of a `len(argument)` call -> the mask it sizes, for masks named like
    `patterns` and not filled with zeros (`[0] * len(obs_ids)`).  The argument is its dotted
    name (`sample.tokens`), None when it is not one (then any `len(...)` of that line counts).
    What a length is subtracted from (`mask[:len(seq) - len(prompt_ids)]`) leaves those ids
    out of the mask: the subtracted `len(...)` is not kept."""
    out: dict[tuple[int, str | None], str] = {}
    for node in pyast.walk(tree):
        for name, value in _ast_mask_values(node):
            if name is not None and matches(name, patterns):
                _collect_len(value, name, False, out)
    return out


def _collect_len(node: ast.AST, mask: str, zero: bool, out: dict[tuple[int, str | None], str]) -> None:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        _collect_len(node.left, mask, zero or _zeros(node.right), out)
        _collect_len(node.right, mask, zero or _zeros(node.left), out)
        return
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
        _collect_len(node.left, mask, zero, out)
        return
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" and not zero:
        arg = dotted(node.args[0]) if len(node.args) == 1 and not node.keywords else None
        out.setdefault((node.lineno, arg), mask)
    for child in ast.iter_child_nodes(node):
        _collect_len(child, mask, zero, out)


def _zeros(node: ast.AST) -> bool:
    """`[0]`, `[0.0]`, `[False]`, `(0,)`: a list of zeros to repeat."""
    if not isinstance(node, (ast.List, ast.Tuple)) or not node.elts:
        return False
    return all(isinstance(e, ast.Constant) and e.value in (0, False) and e.value is not None for e in node.elts)


def _ast_mask_values(node: ast.AST) -> Iterator[tuple[str | None, ast.AST]]:
    if isinstance(node, ast.Assign):
        for t in node.targets:
            yield _ast_last_name(t), node.value
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
        yield _ast_last_name(node.target), node.value
    elif isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("append", "extend", "insert"):
            for a in node.args:
                yield _ast_last_name(func.value), a
            for k in node.keywords:
                yield _ast_last_name(func.value), k.value
        for k in node.keywords:
            yield k.arg, k.value
    elif isinstance(node, ast.Dict):
        for key, value in zip(node.keys, node.values):
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                yield key.value, value


def _ast_last_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            return node.slice.value
        return _ast_last_name(node.value)
    return None


def _has_len(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "len" for n in pyast.walk(node)
    )
