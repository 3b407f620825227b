"""Where the definitions of an engine file went, one definition at a time.

Pure computations for `patchaudit bump`: given OLD's module index of a file
that NEW no longer has (or that NEW turned into a re-export shim such as
`from .dsa.dsa_indexer import *`), find for each of its classes, functions and
methods the NEW file and qualified name that defines it now.  Upstream moves
code in three ways this follows:

- a module split across several files (a mixin's methods spread over three
  `scheduler_components/*.py` classes): each definition is placed on its own;
- renamed classes and definitions (`SchedulerProfilerMixin.init_profile`
  became `SchedulerProfilerManager._init_profile`): names are compared without
  their leading underscores, classes by the methods they share, and a
  definition whose name went is matched by the similarity of its body among
  the definitions of the files the rest of the module went to;
- re-export modules: the names a shim imports point at the module that now
  defines them.

No findings, no rule codes, no I/O: the bump pipeline hands in the texts (a
`NewEngine`), `patchaudit/analysis/upstream.py` words the file-level summary.
"""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass, field
from typing import Callable

from patchaudit.engine.definitions import FuncInfo, ModuleIndex

#: a definition's body must be at least this similar to be matched by its body alone
BODY_ALONE = 0.5
#: ... and at least this similar to be preferred among definitions of the same name
BODY_SAME_NAME = 0.25
#: files searched for a definition by its body (the files most of the module went to)
BODY_FILES = 6
#: a name defined in more files than this is only looked for in the module's destinations
COMMON_NAME = 12

_DEF = re.compile(r"^[ \t]*(?:async[ \t]+)?def[ \t]+([A-Za-z_]\w*)", re.M)
_CLASS = re.compile(r"^[ \t]*class[ \t]+([A-Za-z_]\w*)", re.M)


def bare(name: str) -> str:
    """A name without its leading underscores (`_init_profile` and `init_profile` match)."""
    return name.lstrip("_") or name


@dataclass
class NameIndex:
    """NEW's definitions by bare name: function/method name -> files, class name -> files."""

    defs: dict[str, set[str]] = field(default_factory=dict)
    classes: dict[str, set[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, texts: dict[str, str]) -> "NameIndex":
        out = cls()
        for path, text in texts.items():
            for name in set(_DEF.findall(text)):
                out.defs.setdefault(bare(name), set()).add(path)
            for name in set(_CLASS.findall(text)):
                out.classes.setdefault(name, set()).add(path)
        return out


@dataclass
class NewEngine:
    """What relocation reads of NEW: the name index, a module by path, a file's lines."""

    names: NameIndex
    module: Callable[[str], ModuleIndex | None]
    lines: Callable[[str], list[str]]


@dataclass(frozen=True)
class Move:
    """Where one OLD definition is in NEW."""

    old: str  # qualname in OLD
    path: str  # NEW file
    new: str  # qualname there
    how: str  # "same name" | "renamed" | "body" | "re-export"
    score: float = 1.0  # body similarity (1.0 when not compared)

    def to_json(self) -> dict:
        return {"old": self.old, "path": self.path, "new": self.new, "how": self.how, "score": round(self.score, 2)}


def _body(lines: list[str], f: FuncInfo) -> list[str]:
    """A definition's lines without its `def` line, stripped, blank lines and comments dropped."""
    out = []
    for line in lines[f.line : f.end_line]:
        s = line.strip()
        if s and not s.startswith("#"):
            out.append(s.replace("self: Scheduler", "self"))
    return out


def similarity(a: list[str], b: list[str]) -> float:
    if not a or not b:
        return 1.0 if a == b else 0.0
    if len(a) <= 3 and len(b) <= 3:  # short bodies: compare their text, not whole lines
        return difflib.SequenceMatcher(None, "\n".join(a), "\n".join(b), autojunk=False).ratio()
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    if sm.real_quick_ratio() < 0.2 or sm.quick_ratio() < 0.2:
        return sm.quick_ratio() * 0.5
    return sm.ratio()


def _defs_of(mod: ModuleIndex) -> list[FuncInfo]:
    return list(mod.functions.values()) + [m for c in mod.classes.values() for m in c.methods.values()]


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def reexported(mod: ModuleIndex | None) -> list[str]:
    """The modules a re-export shim takes its names from (`from X import *`, or every
    definition it has imported from one module); empty for a module that defines code."""
    if mod is None or mod.tree is None:
        return []
    stars: list[str] = []
    for stmt in mod.tree.body:
        if isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names) and stmt.module:
            base = stmt.module
            if stmt.level and mod.module:
                parts = mod.module.split(".")[: -stmt.level]
                base = ".".join(parts + [stmt.module])
            stars.append(base)
    if stars or mod.classes or mod.functions:
        return stars
    sources = {t.rsplit(".", 1)[0] for t in mod.imports.values() if "." in t}
    return sorted(sources) if len(sources) == 1 else []


class _Placer:
    def __init__(self, old: ModuleIndex, old_lines: list[str], new: NewEngine, hints: list[str]):
        self.old, self.old_lines, self.new, self.hints = old, old_lines, new, hints
        self._bodies: dict[tuple[str, str], list[str]] = {}
        self.parts: dict[str, set[tuple[str, str]]] = {}

    def body(self, path: str, f: FuncInfo) -> list[str]:
        key = (path, f.qualname)
        if key not in self._bodies:
            lines = self.old_lines if path == "\0old" else self.new.lines(path)
            self._bodies[key] = _body(lines, f)
        return self._bodies[key]

    def destinations(self) -> list[str]:
        """The NEW files most of the module's definitions are defined in, by name."""
        counts: dict[str, int] = {}
        for f in _defs_of(self.old):
            if _dunder(f.name):
                continue
            paths = self.new.names.defs.get(bare(f.name), set())
            if len(paths) > COMMON_NAME:
                continue
            for p in paths:
                counts[p] = counts.get(p, 0) + 1
        for c in self.old.classes.values():
            for p in self.new.names.classes.get(c.name, set()):
                counts[p] = counts.get(p, 0) + 2
        ranked = [p for p, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
        return list(dict.fromkeys(self.hints + ranked))[:BODY_FILES]

    def class_scores(self, dests: list[str]) -> dict[str, tuple[str, str, float]]:
        """OLD class -> (NEW path, class, share of its methods there) for the best match; the
        other NEW classes holding a fifth of its methods or more go to `self.parts`."""
        out: dict[str, tuple[str, str, float]] = {}
        self.parts = {}
        for cq, cls in self.old.classes.items():
            ms = {bare(m) for m in cls.methods if not _dunder(m)}
            best: tuple[float, str, str] | None = None
            for p in dests:
                mod = self.new.module(p)
                if mod is None:
                    continue
                for nq, nc in mod.classes.items():
                    share = len(ms & {bare(m) for m in nc.methods}) / len(ms) if ms else 0.0
                    if share >= 0.2:
                        self.parts.setdefault(cq, set()).add((p, nq))
                    if nc.name == cls.name:
                        share += 0.5
                    elif share > 0:  # ties between classes sharing as many methods: the closer name
                        share += 0.1 * difflib.SequenceMatcher(None, cls.name, nc.name).ratio()
                    if share > 0 and (best is None or share > best[0]):
                        best = (share, p, nq)
            if best is not None:
                out[cq] = (best[1], best[2], best[0])
                self.parts.setdefault(cq, set()).add((best[1], best[2]))
        return out

    def place(self, f: FuncInfo, dests: list[str], classes: dict[str, tuple[str, str, float]]) -> Move | None:
        cls_q = f.qualname.rsplit(".", 1)[0] if f.is_method else None
        mine = self.body("\0old", f)
        paths = self.new.names.defs.get(bare(f.name), set())
        if len(paths) > COMMON_NAME or _dunder(f.name):
            paths = paths & set(dests)
        best: tuple[float, str, FuncInfo] | None = None
        for p in sorted(paths):
            mod = self.new.module(p)
            if mod is None:
                continue
            for g in _defs_of(mod):
                if bare(g.name) != bare(f.name):
                    continue
                score = similarity(mine, self.body(p, g)) - (0.1 if g.is_method != f.is_method else 0.0)
                g_cls = g.qualname.rsplit(".", 1)[0] if g.is_method else None
                if cls_q and g_cls and (p, g_cls) in self.parts.get(cls_q, ()):
                    score += 1.0  # where (part of) the rest of its class went: stronger than any body
                if g.name == f.name:
                    score += 0.05
                if best is None or score > best[0]:
                    best = (score, p, g)
        if best is not None and (best[0] >= BODY_SAME_NAME or (len(paths) == 1 and best[0] >= 0.1)):
            score, p, g = best
            return Move(f.qualname, p, g.qualname, "same name" if g.name == f.name else "renamed", min(score, 1.0))
        # its name went too: the most similar body among the files the module went to
        if len(mine) < 3:
            return None
        for p in dests:
            mod = self.new.module(p)
            if mod is None:
                continue
            for g in _defs_of(mod):
                score = similarity(mine, self.body(p, g))
                if score >= BODY_ALONE and (best is None or score > best[0]):
                    best = (score, p, g)
        if best is not None and best[0] >= BODY_ALONE:
            return Move(f.qualname, best[1], best[2].qualname, "body", best[0])
        return None


def relocate_definitions(
    old: ModuleIndex, old_lines: list[str], new: NewEngine, hints: list[str] | None = None
) -> dict[str, Move]:
    """OLD qualname -> its `Move` for every class, function and method of `old` found in NEW.

    `hints`: NEW modules' paths to look in first (the targets of a re-export shim)."""
    placer = _Placer(old, old_lines, new, list(hints or []))
    dests = placer.destinations()
    classes = placer.class_scores(dests)
    out: dict[str, Move] = {}
    for f in _defs_of(old):
        mv = placer.place(f, dests, classes)
        if mv is not None:
            out[f.qualname] = mv
    for cq, (p, nq, share) in classes.items():
        # a class goes where most of its methods went (or where its name is)
        homes: dict[tuple[str, str], int] = {}
        for mq, mv in out.items():
            if mq.rsplit(".", 1)[0] == cq and "." in mv.new:
                key = (mv.path, mv.new.rsplit(".", 1)[0])
                homes[key] = homes.get(key, 0) + 1
        if nq.rsplit(".", 1)[-1] == cq.rsplit(".", 1)[-1]:
            out[cq] = Move(cq, p, nq, "same name")  # the class kept its name (its methods may be inherited)
        elif homes:
            (hp, hq), _ = max(
                homes.items(),
                key=lambda kv: (
                    kv[1],
                    kv[0] == (p, nq),
                    difflib.SequenceMatcher(None, cq.rsplit(".", 1)[-1], kv[0][1].rsplit(".", 1)[-1]).ratio(),
                ),
            )
            out[cq] = Move(cq, hp, hq, "same name" if hq.rsplit(".", 1)[-1] == cq.rsplit(".", 1)[-1] else "renamed")
        elif share >= 0.5:
            out[cq] = Move(cq, p, nq, "same name" if nq.rsplit(".", 1)[-1] == cq.rsplit(".", 1)[-1] else "renamed")
    return out


def move_of(moves: dict[str, Move], symbol: str | None) -> Move | None:
    """The move of `symbol` (an OLD qualname) or of its nearest enclosing definition."""
    parts = (symbol or "").split(".")
    while parts and parts[0]:
        got = moves.get(".".join(parts))
        if got is not None:
            return got
        parts.pop()
    return None


def summarise(
    moves: dict[str, Move], old: ModuleIndex
) -> tuple[str | None, int, list[tuple[str, int]], dict[str, str]]:
    """(the NEW file most definitions went to, how many, the other files with their counts,
    renamed classes) of a module's moves: functions and methods counted, dunders left out."""
    counts: dict[str, int] = {}
    for f in _defs_of(old):
        mv = moves.get(f.qualname)
        if mv is not None and not _dunder(f.name):
            counts[mv.path] = counts.get(mv.path, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if not ranked:
        return None, 0, [], {}
    renamed = {
        cq: mv.new
        for cq in old.classes
        if (mv := moves.get(cq)) is not None and mv.new.rsplit(".", 1)[-1] != cq.rsplit(".", 1)[-1]
    }
    return ranked[0][0], ranked[0][1], ranked[1:], renamed
