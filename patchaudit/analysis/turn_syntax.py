"""The syntax PA106 and PA107 read beside their dataflow: loops, functions, config flags.

Pure functions of a module's `ast` tree (patchaudit/inputs/pyast.py parses it once).  The
flow specifications (patchaudit/analysis/multiturn_spec.py, patchaudit/analysis/resume_spec.py)
find where a value goes; these say where a line sits: in which loop and which function, under
which `if` reading a configuration flag, and which lines of a function mark a resumed sample
(an aborted status compared), add to its held response, or discard it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Iterable

from patchaudit.analysis.flow_values import matches
from patchaudit.inputs import astnames


@dataclass(frozen=True)
class Span:
    start: int
    end: int

    def holds(self, line: int) -> bool:
        return self.start <= line <= self.end


@dataclass(frozen=True)
class Flag:
    """A configuration flag an `if` reads: its dotted name and the line it is read on."""

    name: str
    line: int


@dataclass
class Layout:
    """Where the lines of a module sit."""

    loops: list[Span] = field(default_factory=list)
    functions: list[tuple[Span, ast.AST]] = field(default_factory=list)
    ifs: list[tuple[Span, ast.If, ast.AST | None]] = field(default_factory=list)  # (body span, node, function)

    def loop_of(self, line: int) -> Span | None:
        """The innermost loop holding `line`."""
        best = None
        for s in self.loops:
            if s.holds(line) and (best is None or s.start >= best.start):
                best = s
        return best

    def function_of(self, line: int) -> ast.AST | None:
        best: tuple[Span, ast.AST] | None = None
        for s, node in self.functions:
            if s.holds(line) and (best is None or s.start >= best[0].start):
                best = (s, node)
        return best[1] if best else None

    def flag_of(self, line: int, config_names: list[str]) -> Flag | None:
        """The configuration flag of the innermost `if` whose branch holds `line` and whose
        test reads one (`args.x`, `self.cfg.x`, `CONFIGS["x"]`, or a local bound once to
        such a read, reported where that local is bound)."""
        best: tuple[Span, ast.If, ast.AST | None] | None = None
        for entry in self.ifs:
            span, node, _ = entry
            if span.holds(line) and not (node.test.lineno <= line <= (node.test.end_lineno or node.lineno)):
                if best is None or span.start >= best[0].start:
                    best = entry
        seen: set[int] = set()
        while best is not None and id(best[1]) not in seen:
            span, node, fn = best
            seen.add(id(node))
            flag = _flag_in(node.test, config_names, fn)
            if flag is not None:
                return flag
            outer = [e for e in self.ifs if e[0].holds(node.lineno) and e[1] is not node and e[0].start <= span.start]
            best = max(outer, key=lambda e: e[0].start, default=None)
        return None


def layout(tree: ast.Module) -> Layout:
    out = Layout()
    _walk(tree, None, out)
    return out


def _walk(node: ast.AST, fn: ast.AST | None, out: Layout) -> None:
    for child in ast.iter_child_nodes(node):
        end = int(getattr(child, "end_lineno", None) or getattr(child, "lineno", None) or 0)
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.functions.append((Span(child.lineno, end), child))
            _walk(child, child, out)
            continue
        if isinstance(child, (ast.For, ast.AsyncFor, ast.While)):
            out.loops.append(Span(child.lineno, end))
        elif isinstance(child, ast.If):
            body_start = child.body[0].lineno if child.body else child.lineno
            out.ifs.append((Span(body_start, end), child, fn))
        _walk(child, fn, out)


def dotted(node: ast.AST) -> str | None:
    """`a.b.c`, `a["k"].b` as a dotted name (string keys become `["k"]`)."""
    return astnames.dotted(node, astnames.KEYS)


def _config_read(node: ast.AST, config_names: list[str]) -> str | None:
    """The first read of a configuration object's field in `node` (`args.use_x`)."""
    for sub in ast.walk(node):
        if isinstance(sub, (ast.Attribute, ast.Subscript)):
            name = dotted(sub)
            if name is None:
                continue
            root = name.split(".", 1)[0].split("[", 1)[0]
            parts = name.replace('["', ".").replace('"]', "").split(".")
            if any(matches(p, config_names) for p in parts[:-1]) or matches(root, config_names):
                return name
    return None


def _flag_shaped(test: ast.expr) -> bool:
    """A test that reads a switch: a name or field (`args.x`, `cfg["x"]`), `not` of one, a
    comparison of one with constants (`args.mode == "text"`), or `and`/`or` of those; not a
    call or an `is None` check of an object."""
    if isinstance(test, (ast.Name, ast.Attribute, ast.Subscript)):
        return True
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _flag_shaped(test.operand)
    if isinstance(test, ast.BoolOp):
        return all(_flag_shaped(v) for v in test.values)
    if isinstance(test, ast.Compare):
        return (
            _flag_shaped(test.left)
            and all(isinstance(c, ast.Constant) and c.value is not None for c in test.comparators)
            and not any(isinstance(op, (ast.Is, ast.IsNot)) for op in test.ops)
        )
    return False


def _flag_in(test: ast.expr, config_names: list[str], fn: ast.AST | None) -> Flag | None:
    if not _flag_shaped(test):
        return None
    name = _config_read(test, config_names)
    if name is not None:
        return Flag(name, test.lineno)
    if fn is None:
        return None
    locals_read = [n.id for n in ast.walk(test) if isinstance(n, ast.Name)]
    for local in locals_read:
        binds = [
            s
            for s in ast.walk(fn)
            if isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == local for t in s.targets)
        ]
        if len(binds) == 1 and _flag_shaped(binds[0].value):
            name = _config_read(binds[0].value, config_names)
            if name is not None:
                return Flag(f"{local} = {ast.unparse(binds[0].value)}", binds[0].lineno)
    return None


# --------------------------------------------------------------------------
# PA107: what a function does with a sample it may resume


def _attr_tail(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    return None


def _names(node: ast.AST) -> Iterable[str]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            yield sub.id
        elif isinstance(sub, ast.Attribute):
            yield sub.attr
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            yield sub.value


def resume_lines(
    fn: ast.AST, status_fields: list[str], status_values: list[str], partial_fields: list[str]
) -> list[int]:
    """Lines of `fn` that admit a partially generated sample: its status compared with an
    aborted value (`assert sample.status in (PENDING, ABORTED)`, `if sample.status ==
    Sample.Status.ABORTED: ...`), or its partial response measured (a `partial-fields` read:
    `sample.response_length`).  A guard that turns such a sample away (`if sample.status ==
    ABORTED: return sample`, `assert sample.status != ABORTED`) admits none."""
    out: set[int] = set()
    refused: set[int] = set()
    for sub in ast.walk(fn):
        if isinstance(sub, ast.If) and _exits(sub.body):
            for cmp in ast.walk(sub.test):
                if isinstance(cmp, ast.Compare) and _status_compare(cmp, status_fields, status_values):
                    (out if _negative(cmp) else refused).add(cmp.lineno)
        elif isinstance(sub, ast.Assert):
            for cmp in ast.walk(sub.test):
                if isinstance(cmp, ast.Compare) and _status_compare(cmp, status_fields, status_values):
                    (refused if _negative(cmp) else out).add(cmp.lineno)
    for sub in ast.walk(fn):
        if isinstance(sub, ast.Compare) and _status_compare(sub, status_fields, status_values):
            if sub.lineno not in refused:
                out.add(sub.lineno)
        elif isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Load) and matches(sub.attr, partial_fields):
            out.add(sub.lineno)
    return sorted(out - refused)


def _status_compare(cmp: ast.Compare, status_fields: list[str], status_values: list[str]) -> bool:
    sides = [cmp.left, *cmp.comparators]
    tails = [_attr_tail(s) for s in sides]
    return any(t is not None and matches(t, status_fields) for t in tails) and any(
        matches(n, status_values) for s in sides for n in _names(s)
    )


def _negative(cmp: ast.Compare) -> bool:
    return all(isinstance(op, (ast.NotEq, ast.NotIn, ast.IsNot)) for op in cmp.ops)


def _exits(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Continue, ast.Break, ast.Raise))


def append_lines(fn: ast.AST, held_fields: list[str], append_calls: list[str]) -> list[int]:
    """Lines of `fn` that add to a sample's held response: an append helper
    (`sample.append_response_tokens(...)`), `sample.tokens += ...`/`.extend(...)`,
    `sample.response = sample.response + ...`."""
    out = []
    for sub in ast.walk(fn):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute):
            if matches(sub.func.attr, append_calls):
                out.append(sub.lineno)
            elif sub.func.attr in ("extend", "append") and matches(_attr_tail(sub.func.value), held_fields):
                out.append(sub.lineno)
        elif isinstance(sub, ast.AugAssign) and matches(_attr_tail(sub.target), held_fields):
            out.append(sub.lineno)
        elif isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.value, ast.BinOp):
            tail = _attr_tail(sub.targets[0])
            if matches(tail, held_fields) and dotted(sub.targets[0]) in {dotted(n) for n in ast.walk(sub.value)}:
                out.append(sub.lineno)
    return sorted(set(out))


_EMPTY = (ast.Constant, ast.List, ast.Tuple, ast.Dict)


def discard_lines(fn: ast.AST, held_fields: list[str], reset_calls: list[str]) -> list[int]:
    """Lines of `fn` that drop a sample's partial response: a held field set to an empty
    value or to something that does not read it (`sample.tokens = prompt_ids`,
    `sample.response = ""`), a slice of it (`sample.tokens = sample.tokens[:n]`), or a reset
    call (`sample.reset_for_retry()`); not under an `if` that tests the same field's
    emptiness (`if not sample.tokens: sample.tokens = prompt_ids` only fills an empty one)."""
    guarded: set[int] = set()
    for sub in ast.walk(fn):
        if isinstance(sub, ast.If):
            tested = {_attr_tail(n) for n in ast.walk(sub.test)}
            if any(matches(t, held_fields) for t in tested if t):
                guarded.update(range(sub.body[0].lineno, (sub.end_lineno or sub.lineno) + 1))
    out = []
    for sub in ast.walk(fn):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and matches(sub.func.attr, reset_calls):
            out.append(sub.lineno)
        if not isinstance(sub, ast.Assign) or len(sub.targets) != 1 or sub.lineno in guarded:
            continue
        target = sub.targets[0]
        tail = _attr_tail(target)
        if not matches(tail, held_fields):
            continue
        name = dotted(target)
        value = sub.value
        reads = name is not None and name in {dotted(n) for n in ast.walk(value)}
        head_slice = (
            isinstance(value, ast.Subscript)
            and isinstance(value.slice, ast.Slice)
            and value.slice.lower is None
            and value.slice.upper is not None
        )
        if isinstance(value, _EMPTY) and not any(isinstance(n, ast.Name) for n in ast.walk(value)):
            out.append(sub.lineno)
        elif not reads or head_slice:
            out.append(sub.lineno)
    return sorted(set(out))


def under_test_of(fn: ast.AST, line: int, fields: list[str]) -> bool:
    """Whether `line` sits in a branch of an `if` (or a conditional expression) of `fn` whose
    test reads one of `fields` (`if len(sample.response) > 0: ... else: ...`): a request built
    there is the fresh or the resumed arm of a resume test, chosen on purpose."""
    for sub in ast.walk(fn):
        if isinstance(sub, (ast.If, ast.IfExp)):
            start = getattr(sub.test, "end_lineno", None) or sub.lineno
            if not (start <= line <= (sub.end_lineno or sub.lineno)):
                continue
            if any(matches(_attr_tail(n), fields) for n in ast.walk(sub.test) if _attr_tail(n)):
                return True
    return False


# --------------------------------------------------------------------------
# the rules' quick pre-filter: names found with str.find, their surroundings checked

_AFTER_CALLEE = re.compile(r"(?:\s|\\\n|#[^\n]*(?![^\n]))*\(")
_AFTER_KEYWORD = re.compile(r"\s*=(?!=)")


def _occurrences(text: str, name: str) -> Iterable[int]:
    """Where `name` occurs in `text` as a whole word."""
    i = text.find(name)
    while i >= 0:
        end = i + len(name)
        if (i == 0 or not _is_word(text[i - 1])) and (end >= len(text) or not _is_word(text[end])):
            yield i
        i = text.find(name, i + 1)


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def calls_one_of(text: str, names: Iterable[str]) -> bool:
    """Whether `name(` occurs for one of `names` (blanks, comments and line continuations
    allowed between the callee and its parenthesis, as Python allows)."""
    for name in names:
        for i in _occurrences(text, name):
            if _AFTER_CALLEE.match(text, i + len(name)):
                return True
    return False


def field_of(text: str, names: Iterable[str], keyword: bool = False) -> bool:
    """Whether one of `names` occurs as an attribute or a string key (`.name`, `"name"`,
    `'name'`), or with `keyword`, as a keyword argument (`(name=`, `, name=`, after blanks,
    comments or line breaks)."""
    for name in names:
        for i in _occurrences(text, name):
            if i > 0 and text[i - 1] in ".'\"":
                return True
            if keyword and _AFTER_KEYWORD.match(text, i + len(name)) and _prev_code(text, i - 1) in ("(", ","):
                return True
    return False


def _prev_code(text: str, j: int) -> str:
    """The last character of code before `j` (inclusive), past blanks, line continuations and
    comments (a `#` earlier on a line makes the rest of the line a comment)."""
    while j >= 0:
        ch = text[j]
        if ch in " \t\r\n\\":
            j -= 1
            continue
        start = text.rfind("\n", 0, j + 1) + 1
        hash_at = text.find("#", start, j + 1)
        if hash_at >= 0 and ch not in "(,":
            j = hash_at - 1
            continue
        return ch
    return ""


_WORD_CHARS = re.compile(r"\w*")


def calls_containing(text: str, runs: Iterable[str]) -> bool:
    """Whether a callee whose last name contains one of `runs` is called (`my_tokenizer(`,
    `self.tok(`): each occurrence of a run, the rest of its name, then `(`."""
    for run in runs:
        i = text.find(run)
        while i >= 0:
            end = _WORD_CHARS.match(text, i + len(run))
            if end is not None and _AFTER_CALLEE.match(text, end.end()):
                return True
            i = text.find(run, i + 1)
    return False
