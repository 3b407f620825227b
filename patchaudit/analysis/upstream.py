"""What changed upstream between two engine versions, under a patch.

Pure computations for `patchaudit bump`: given OLD's and NEW's text (or parsed
trees, or module indexes) of a patched file, which engine functions a hunk
changes, whether they changed or went between the two versions, and where the
definitions of a file that NEW no longer has went.  No findings, no rule codes,
no I/O: the bump pipeline (`patchaudit/pipeline/bump_audit.py`) hands the texts
in, the engine-pair rule on patched code that changed upstream judges and
words what comes out.
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass, field
from typing import Any, Iterable

from patchaudit.analysis.relocation import Move, NewEngine, move_of, relocate_definitions, summarise
from patchaudit.engine.definitions import ModuleIndex, parse_python
from patchaudit.inputs import source_lines


@dataclass
class Relocation:
    """Where the definitions of a file that NEW no longer has (or turned into a
    re-export shim) went, definition by definition (`patchaudit/analysis/relocation.py`)."""

    old_path: str
    new_path: str | None  # the file most of them went to; None: not found (removed upstream)
    matched: int = 0  # functions and methods of the old file found in new_path
    total: int = 0
    classes: dict[str, str] = field(default_factory=dict)  # old class -> renamed class
    others: list[tuple[str, int]] = field(default_factory=list)  # more files holding some of them
    moves: dict[str, Move] = field(default_factory=dict)  # old qualname -> where it is now
    shim: list[str] = field(default_factory=list)  # NEW keeps the file as a re-export of these modules

    @property
    def found(self) -> int:
        return self.matched + sum(n for _, n in self.others)

    def destination(self, symbol: str | None) -> Move | None:
        """Where the OLD definition `symbol` (or its nearest enclosing one) is now."""
        return move_of(self.moves, symbol)

    def describe(self, new_label: str) -> str:
        gone = (
            f"{self.old_path} is a re-export of {', '.join(self.shim)} in {new_label}"
            if self.shim
            else f"{self.old_path} does not exist in {new_label}"
        )
        if self.new_path is None:
            return f"{gone} and its definitions were not found elsewhere (removed upstream)"
        if self.others:
            files = [(self.new_path, self.matched)] + list(self.others)
            out = (
                f"{gone}: its definitions were split across {len(files)} files ("
                + ", ".join(f"{n} in {p}" for p, n in files)
                + f"; {self.found} of {self.total} functions and methods found"
            )
        else:
            out = (
                f"{gone}: its definitions moved to {self.new_path} "
                f"({self.matched} of {self.total} functions and methods defined there"
            )
        out += ")"
        if self.classes:
            out += "; " + ", ".join(f"class {a} is now {b}" for a, b in sorted(self.classes.items()))
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "old_path": self.old_path,
            "new_path": self.new_path,
            "matched": self.matched,
            "total": self.total,
            "classes": dict(self.classes),
            "others": [{"path": p, "matched": n} for p, n in self.others],
            "shim": list(self.shim),
            "symbols": {q: m.to_json() for q, m in sorted(self.moves.items())},
        }


@dataclass
class MissingFile:
    """A patched file that NEW no longer has (reported at its file header)."""

    line: int  # the patch line of the file section's header
    old_path: str
    relocation: Relocation | None


@dataclass
class SymbolChange:
    """One engine function a hunk changes in OLD, and what became of it in NEW."""

    qualname: str  # in OLD
    new_qualname: str | None  # in NEW; None: it no longer exists there
    renamed: bool = False  # name it as `new_qualname` in `new_path`
    added: int = 0
    removed: int = 0


@dataclass
class HunkChange:
    """What changed upstream under one hunk."""

    line: int  # the hunk's @@ line
    number: int  # 1-based within its file section
    status: str  # how it applies to NEW (clean, offset, fuzz, failed, ...)
    offset: int
    fuzz: int
    new_path: str | None
    symbols: list[SymbolChange] = field(default_factory=list)
    #: not None: the hunk's own engine lines (that many) changed, outside any function
    lines_changed: int | None = None
    #: NEW's line ranges whose upstream commits explain the change, in order
    ranges: list[tuple[int, int]] = field(default_factory=list)


def function_ranges(text: str | None, tree: ast.AST | None = None) -> list[tuple[str, int, int]]:
    """(qualname, first line incl. decorators, last line) of every def, outermost first."""
    if tree is None:
        tree = parse_python(text) if text is not None else None
    if tree is None:
        return []
    out: list[tuple[str, int, int]] = []

    def walk(node, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                continue  # no definition is ever inside an expression: nothing to walk
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}.{child.name}" if prefix else child.name
                if not isinstance(child, ast.ClassDef):
                    start = min([child.lineno] + [d.lineno for d in child.decorator_list])
                    out.append((name, start, getattr(child, "end_lineno", child.lineno)))
                walk(child, name)
            else:
                walk(child, prefix)

    walk(tree, "")
    return out


def touched(hunk, start: int) -> tuple[set[int], list[int]]:
    """Lines of the original a hunk changes, when its pre-image sits at `start`:
    (removed lines, insertion points L meaning "between lines L and L+1")."""
    removed: set[int] = set()
    inserts: list[int] = []
    line = start
    for l in hunk.lines:
        if l.kind == " ":
            line += 1
        elif l.kind == "-":
            removed.add(line)
            line += 1
        else:
            inserts.append(line - 1)
    return removed, inserts


def first_change(hunk, start: int) -> int:
    """The original's line at a hunk's first change (for an insertion: the line it follows)."""
    lead = next((k for k, l in enumerate(hunk.lines) if l.kind != " "), 0)
    if lead and hunk.lines[lead].kind == "+":
        lead -= 1
    return start + lead


def innermost(ranges: list[tuple[str, int, int]], pred) -> str | None:
    best = None
    for q, s, e in ranges:
        if pred(s, e) and (best is None or (e - s) < (best[2] - best[1])):
            best = (q, s, e)
    return best[0] if best else None


def normalise(lines: list[str]) -> list[str]:
    if not lines:
        return []
    first = lines[0]
    indent = len(first) - len(first.lstrip())
    return [l[indent:].rstrip() if l[:indent].strip() == "" else l.rstrip() for l in lines]


def changed_lines(a: list[str], b: list[str]) -> tuple[int, int]:
    """(lines removed, lines added) from a to b."""
    removed = added = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            removed += i2 - i1
            added += j2 - j1
    return removed, added


# --------------------------------------------------------------------------
# relocations


def relocate(
    old_path: str,
    mod: ModuleIndex,
    old_lines: list[str],
    new: NewEngine,
    shim: list[str] | None = None,
    hints: list[str] | None = None,
) -> Relocation:
    """Where OLD's module `mod` (at `old_path`) went in NEW, definition by definition;
    `shim`: the modules NEW's file re-exports (their paths in `hints`)."""
    moves = relocate_definitions(mod, old_lines, new, hints)
    best, matched, others, classes = summarise(moves, mod)
    total = sum(1 for f in list(mod.functions) + [m for c in mod.classes.values() for m in c.methods] if not _dunder(f))
    return Relocation(old_path, best, matched, total, classes, others, moves, list(shim or []))


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


# --------------------------------------------------------------------------
# one hunk


def _touched_functions(h, start: int, o_ranges: list[tuple[str, int, int]]) -> list[str]:
    """The innermost OLD functions around the lines a hunk removes and the places it inserts."""
    removed, inserts = touched(h, start)
    syms: list[str] = []
    for line in sorted(removed):
        q = innermost(o_ranges, lambda s, e, l=line: s <= l <= e)
        if q and q not in syms:
            syms.append(q)
    for gap in inserts:
        q = innermost(o_ranges, lambda s, e, g=gap: s <= g and g + 1 <= e)
        if q and q not in syms:
            syms.append(q)
    return syms


def _new_name(q: str, by_q: dict[str, tuple[int, int]], reloc: Relocation | None) -> str | None:
    nq: str | None = q
    mv = reloc.moves.get(q) if reloc is not None else None
    if mv is not None and mv.new in by_q:
        return mv.new
    if reloc is not None and reloc.classes:
        head, _, rest = q.partition(".")
        if head in reloc.classes and rest:
            nq = f"{reloc.classes[head]}.{rest}"
    if nq not in by_q:
        # renamed class or moved function: the only def of that name in the file
        same = [qq for qq in by_q if qq.rsplit(".", 1)[-1] == q.rsplit(".", 1)[-1]]
        nq = same[0] if len(same) == 1 else None
    return nq


def hunk_change(
    h,
    oh,
    nh,
    o_ranges: list[tuple[str, int, int]],
    new_ranges: list[tuple[str, int, int]],
    old_text: str,
    new_path: str | None,
    new_text: str | None,
    reloc: Relocation | None,
) -> HunkChange | None:
    """What changed upstream under hunk `h` (`oh`, `nh`: its records on OLD and NEW, or
    None), given the function ranges of OLD's and NEW's file; None when nothing did."""
    start = (oh.source_line if oh is not None and oh.source_line else None) or max(h.source_start, 1)
    syms = _touched_functions(h, start, o_ranges)
    status_new = nh.status if nh is not None else "missing-file"
    out = HunkChange(
        h.header_line,
        h.index + 1,
        status_new,
        nh.offset if nh is not None else 0,
        nh.fuzz if nh is not None else 0,
        new_path,
    )
    by_q = {q: (s, e) for q, s, e in new_ranges}
    old_lines = source_lines(old_text)
    new_lines = source_lines(new_text) if new_text is not None else []
    for q in syms:
        s, e = next((s, e) for qq, s, e in o_ranges if qq == q)
        nq = _new_name(q, by_q, reloc)
        if nq is None or not new_path:
            out.symbols.append(SymbolChange(q, None))
            continue
        ns, ne = by_q[nq]
        a = normalise(old_lines[s - 1 : e])
        b = normalise(new_lines[ns - 1 : ne])
        if a == b:
            continue
        renamed = nq != q or bool(reloc and reloc.new_path)
        removed_n, added_n = changed_lines(a, b)
        out.symbols.append(SymbolChange(q, nq, renamed, added_n, removed_n))
        out.ranges.append((ns, ne))
    rank = {"clean": 0, "offset": 0, "fuzz": 1, "failed": 2, "already-applied": 2}
    worse = (
        oh is not None
        and nh is not None
        and (
            rank.get(nh.status, 0) > rank.get(oh.status, 0) or (nh.status == oh.status == "fuzz" and nh.fuzz > oh.fuzz)
        )
    )
    if not out.symbols and worse and new_path:
        # module or class level code, or context reaching outside the function: the
        # hunk's own lines changed (it applied better to OLD than it does to NEW)
        where = nh.source_line if nh is not None and nh.source_line else start
        if nh is not None and nh.nearest:
            where = nh.nearest[0]
        out.lines_changed = len(h.pre_image)
        out.ranges.append((max(1, where - 1), where + out.lines_changed))
    if not out.symbols and out.lines_changed is None:
        return None
    return out


def sections_changed(old_sections: Iterable, new_sections: Iterable) -> Iterable[tuple[Any, Any]]:
    """(NEW's section record, OLD's) of the Python file sections whose engine code can be
    compared: the patch does not create the file, and OLD has it."""
    old_secs = {rec.section.header_line: rec for rec in old_sections}
    for rec in new_sections:
        sec = rec.section
        orec = old_secs.get(sec.header_line)
        if (sec.is_new and sec.source_path is None) or orec is None or orec.original_text is None:
            continue  # the patch creates the file, or OLD lacks it: nothing upstream to compare
        if not sec.is_python:
            continue
        yield rec, orec
