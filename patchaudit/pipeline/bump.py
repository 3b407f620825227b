"""The engine-bump audit behind `patchaudit bump`: a patch set against OLD and NEW.

When a pinned engine moves from OLD to NEW (`sglang==0.5.12.post1` becomes
`sglang==0.5.15.post1`), a hunk can still apply while the code around it, or
the function it calls, changed underneath it: that is how the seed-002 bug
happened (upstream added `input_ids` to `legacy_load_mm_data` and a patch
that called it kept applying and silently dropped the ids).  This module:

- applies every hunk in memory to OLD and to NEW (exact mode, `units/exact.py`)
  and keeps both results per hunk (clean / offset / fuzz / failed, with the
  enclosing engine symbol): the hunk table of the report;
- runs every rule on NEW with the patches applied, through the normal runner
  (`runner.analyse_file`), with a `PairContext`: the NEW engine context that
  also carries the OLD side (`.pair`).  The two engine-pair rules read it:
  PA203 (patched code changed upstream) and PA204 (call-signature drift), whose
  computations live here (`BumpAudit.upstream_changes`, `BumpAudit.check_call`);
- finds where the definitions of a patched file that NEW no longer has went
  (`BumpAudit.relocation`);
- runs the monkey-patch audit of issue 9 (`patchaudit.analysis.monkeypatch.audit_bump`)
  on the `.py` files given, when that module exists.

Three views of the engine are indexed (`units/symbols.EngineIndex`): OLD and
NEW as released, and NEW with every patch of the set applied in order (an
in-memory overlay), because a patch set often changes a signature in one file
and its callers in another: calls are bound against the patched definitions,
compared with upstream's own definitions in OLD and NEW, and with upstream's
own call sites in NEW.

Nothing is written anywhere: the sources are read in place (git objects,
wheel members), the patches are applied in memory.
"""

from __future__ import annotations

import ast
import difflib
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from patchaudit.inputs import source_lines
from patchaudit.config.settings import Settings
from patchaudit.model.findings import FileError, Finding, Severity, Target
from patchaudit.engine.sources import EngineError, EngineSource, map_path, open_engine
from patchaudit.units.exact import EngineContext, EngineSet, ExactResult, HunkRecord, exact_units
from patchaudit.engine.symbols import (CallShape, Callee, EngineIndex, FuncInfo, ModuleIndex, Param,
                                      call_sites, parse_python, resolve_callee)

#: PA204's options ([tool.patchaudit.rules.PA204]) and their defaults
PA204_OPTIONS = {"upstream-share": 1.0, "min-upstream-calls": 1, "include-tests": False}
MAX_COMMITS = 3


class BumpError(Exception):
    """A bad engine spec, an unreadable engine source, bad options (exit code 2)."""


# --------------------------------------------------------------------------
# the report


@dataclass
class Side:
    """How one hunk applies to one engine version."""

    status: str                  # clean | offset | fuzz | failed | already-applied | missing-file
    path: str | None             # engine path
    offset: int = 0
    fuzz: int = 0
    line: int | None = None      # GNU's "succeeded at" (in the patched file)
    source_line: int | None = None   # where it matched (or was expected) in the engine file
    symbol: str | None = None
    nearest: tuple[int, int, int] | None = None

    @classmethod
    def of(cls, rec: HunkRecord) -> "Side":
        return cls(rec.status, rec.engine_path, rec.offset, rec.fuzz, rec.line,
                   getattr(rec, "source_line", None), rec.symbol, rec.nearest)

    def label(self) -> str:
        if self.status == "offset":
            return f"offset {self.offset:+d}"
        if self.status == "fuzz":
            return f"fuzz {self.fuzz}"
        return self.status

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "path": self.path, "offset": self.offset, "fuzz": self.fuzz,
                # the engine file's line (where it matched, or was expected); GNU's count in the
                # patched file as patched_line
                "line": self.source_line if self.source_line is not None else self.line,
                "patched_line": self.line, "symbol": self.symbol,
                "nearest": list(self.nearest) if self.nearest else None}


@dataclass
class HunkRow:
    patch: str
    patch_line: int
    hunk: int                    # 1-based within its file section
    target: str                  # the path as the patch names it (no a/ b/)
    old: Side | None
    new: Side | None
    moved_to: str | None = None          # NEW lacks the file; its definitions are here
    section_line: int | None = None      # the patch line of the hunk's file section
    moved: Side | None = None            # the hunk applied to moved_to
    changed_upstream: bool | None = None  # PA203 found a change (None: not computed)

    @property
    def symbol(self) -> str | None:
        for side in (self.old, self.new, self.moved):
            if side is not None and side.symbol:
                return side.symbol
        return None

    def to_json(self) -> dict[str, Any]:
        return {"patch": self.patch, "patch_line": self.patch_line, "hunk": self.hunk, "target": self.target,
                "symbol": self.symbol, "old": self.old.to_json() if self.old else None,
                "new": self.new.to_json() if self.new else None, "moved_to": self.moved_to,
                "moved": self.moved.to_json() if self.moved else None,
                "changed_upstream": self.changed_upstream}


@dataclass
class Relocation:
    """Where the definitions of a file that NEW no longer has went."""

    old_path: str
    new_path: str | None          # None: not found (the file's code was removed)
    matched: int = 0              # definitions of the old file found in new_path
    total: int = 0
    classes: dict[str, str] = field(default_factory=dict)   # old class -> renamed class in new_path
    others: list[tuple[str, int]] = field(default_factory=list)  # more files holding some of them

    def describe(self, new_label: str) -> str:
        if self.new_path is None:
            return (f"{self.old_path} does not exist in {new_label} and its definitions were not found "
                    f"elsewhere (removed upstream)")
        out = (f"{self.old_path} does not exist in {new_label}: its definitions moved to {self.new_path} "
               f"({self.matched} of {self.total} functions and methods defined there")
        if self.others:
            out += "; " + ", ".join(f"{n} in {p}" for p, n in self.others)
        out += ")"
        if self.classes:
            out += "; " + ", ".join(f"class {a} is now {b}" for a, b in sorted(self.classes.items()))
        return out

    def to_json(self) -> dict[str, Any]:
        return {"old_path": self.old_path, "new_path": self.new_path, "matched": self.matched,
                "total": self.total, "classes": dict(self.classes),
                "others": [{"path": p, "matched": n} for p, n in self.others]}


@dataclass
class BumpReport:
    engine: str
    old_label: str               # full labels (path@rev (sha), wheel file name, directory)
    new_label: str
    old_name: str                # short names for messages ("v1", "sglang 0.5.12.post1")
    new_name: str
    findings: list[Finding] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    hunks: list[HunkRow] = field(default_factory=list)
    patches: list[str] = field(default_factory=list)
    relocations: list[Relocation] = field(default_factory=list)
    files: int = 0
    parsed: int = 0

    @property
    def exit_code(self) -> int:
        if self.errors:
            return 2
        return 1 if any(f.severity is Severity.ERROR for f in self.findings) else 0

    def hunk_counts(self, patch: str | None = None) -> dict[str, int]:
        """Hunks by their status on NEW (`moved`: NEW lacks the file)."""
        out = {"clean": 0, "offset": 0, "fuzz": 0, "failed": 0, "already-applied": 0, "missing-file": 0}
        for row in self.hunks:
            if patch is not None and row.patch != patch:
                continue
            status = row.new.status if row.new else "missing-file"
            out[status] = out.get(status, 0) + 1
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "from": {"label": self.old_label, "name": self.old_name},
            "to": {"label": self.new_label, "name": self.new_name},
            "findings": [f.to_json() for f in self.findings],
            "hunks": [h.to_json() for h in self.hunks],
            "relocations": [r.to_json() for r in self.relocations],
            "errors": [e.to_json() for e in self.errors],
        }


# --------------------------------------------------------------------------
# engine views


def short_name(src: EngineSource) -> str:
    """A short name for an engine version in messages: `v2`, `sglang 0.5.15.post1`, the directory."""
    if src.kind == "git":
        return getattr(src, "rev", src.label)
    if src.kind in ("wheel", "sdist"):
        base = os.path.basename(getattr(src, "path", src.label))
        m = re.match(r"([A-Za-z0-9_.]+?)-(\d[^-]*?)(?:\.tar\.gz|\.tgz|\.tar\.bz2|\.tar\.xz|\.tar|\.zip|-|$)", base)
        if m:
            return f"{m.group(1)} {m.group(2)}"
        return base
    return src.spec


class OverlaySource(EngineSource):
    """An engine source with some files replaced in memory (NEW with the patches applied)."""

    kind = "overlay"

    def __init__(self, base: EngineSource):
        super().__init__(base.name, base.spec, f"{base.label} + patches")
        self.base = base
        self.over: dict[str, str] = {}

    def _list(self) -> Iterable[str]:
        return list(self.base.files()) + [p for p in self.over if not self.base.has(p)]

    def _read(self, path: str) -> bytes | None:
        if path in self.over:
            return self.over[path].encode("utf-8", "surrogateescape")
        return self.base.read_bytes(path)

    def put(self, path: str, text: str) -> None:
        if path not in self.over and not self.base.has(path):
            self._files = self._fileset = self._by_base = self._roots = None  # a new file: relist
        self.over[path] = text


class RevisionContext(EngineContext):
    """One engine version as a patch sees it.  Reads the files of that version, never
    the blob an `index` line names (with two revisions of one repository that blob
    is the patch's own base, whichever revision is asked for)."""

    use_index_blob = False


class PairContext(EngineContext):
    """NEW as a patch sees it, carrying the OLD side for the engine-pair rules (`.pair`)."""

    use_index_blob = False

    def __init__(self, source, strip, prefix, index=None, *, pair: "PatchPair"):
        super().__init__(source, strip, prefix, index)
        self.pair = pair

    def unit_module(self, unit):
        # a hunk of a file NEW no longer has is resolved in the file its code moved to
        mod = super().unit_module(unit)
        if mod is None and unit.mode != "exact" and unit.target_path:
            reloc = self.pair.audit.relocation_for_new(unit.target_path, self.pair)
            if reloc is not None and reloc.new_path:
                mod = self.index.module_by_path(reloc.new_path)
                try:
                    unit._module_index = mod
                except AttributeError:  # pragma: no cover
                    pass
        return mod


class PatchPair:
    """One patch file against OLD and NEW."""

    def __init__(self, audit: "BumpAudit", patch, old_ctx: EngineContext | None, new_ctx: EngineContext):
        self.audit = audit
        self.patch = patch
        self.old_ctx = old_ctx
        self.new_ctx = new_ctx
        self._old: ExactResult | None = None
        self._new: ExactResult | None = None
        self._changes: list[tuple[int, str, Severity]] | None = None
        self.changed_hunks: set[int] = set()      # header lines of hunks PA203 flags

    @property
    def old_result(self) -> ExactResult | None:
        if self._old is None and self.old_ctx is not None:
            self._old = exact_units(self.patch, self.old_ctx, report_path=self.patch.path)[2]
        return self._old

    @property
    def new_result(self) -> ExactResult:
        if self._new is None:
            plain = RevisionContext(self.new_ctx.source, self.new_ctx.strip, self.new_ctx.prefix, self.new_ctx.index)
            self._new = exact_units(self.patch, plain, report_path=self.patch.path)[2]
        return self._new

    def old_record(self, header_line: int) -> HunkRecord | None:
        res = self.old_result
        if res is None:
            return None
        return next((h for h in res.hunks if h.patch_line == header_line), None)

    def upstream_changes(self) -> list[tuple[int, str, Severity]]:
        if self._changes is None:
            self._changes = self.audit.upstream_changes(self)
        return self._changes


class PairEngines:
    """What `runner.analyse_file` takes as `engines`: one PairContext per patch."""

    pair = "engine-pair"   # the engine-pair rules run (runner._needs_met)

    def __init__(self, audit: "BumpAudit"):
        self.audit = audit

    def for_patch(self, patch) -> PairContext | None:
        return self.audit.pair_for(patch)


def _function_ranges(text: str | None, tree: ast.AST | None = None) -> list[tuple[str, int, int]]:
    """(qualname, first line incl. decorators, last line) of every def, outermost first."""
    if tree is None:
        tree = parse_python(text) if text is not None else None
    if tree is None:
        return []
    out: list[tuple[str, int, int]] = []

    def walk(node, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
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


def _touched(hunk, start: int) -> tuple[set[int], list[int]]:
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


def _first_change(hunk, start: int) -> int:
    """The original's line at a hunk's first change (for an insertion: the line it follows)."""
    lead = next((k for k, l in enumerate(hunk.lines) if l.kind != " "), 0)
    if lead and hunk.lines[lead].kind == "+":
        lead -= 1
    return start + lead


def _innermost(ranges: list[tuple[str, int, int]], pred) -> str | None:
    best = None
    for q, s, e in ranges:
        if pred(s, e) and (best is None or (e - s) < (best[2] - best[1])):
            best = (q, s, e)
    return best[0] if best else None


def _normalise(lines: list[str]) -> list[str]:
    if not lines:
        return []
    first = lines[0]
    indent = len(first) - len(first.lstrip())
    return [l[indent:].rstrip() if l[:indent].strip() == "" else l.rstrip() for l in lines]


def _changed_lines(a: list[str], b: list[str]) -> tuple[int, int]:
    """(lines removed, lines added) from a to b."""
    removed = added = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            removed += i2 - i1
            added += j2 - j1
    return removed, added


def _is_test_path(path: str) -> bool:
    parts = path.split("/")
    base = parts[-1]
    return any(p in ("test", "tests", "testing") for p in parts[:-1]) or base.startswith("test_") \
        or base.endswith("_test.py") or base == "conftest.py"


def _param_names(params: list[Param]) -> list[str]:
    return [p.name for p in params if p.kind not in ("vararg", "varkw")]


def _positional_names(params: list[Param]) -> list[str]:
    return [p.name for p in params if p.kind in ("positional_only", "positional")]


def bind_problems(params: list[Param], shape: CallShape) -> tuple[list[str], int, list[str], list[str]]:
    """(unknown keywords, positional arguments too many, missing required parameters,
    parameters given twice) of a call with `shape` against `params`."""
    positional = [p for p in params if p.kind in ("positional_only", "positional")]
    has_var = any(p.kind == "vararg" for p in params)
    has_varkw = any(p.kind == "varkw" for p in params)
    by_name = {p.name: p for p in params if p.kind not in ("vararg", "varkw")}
    bound = {p.name for p in positional[: shape.positional]}
    too_many = 0 if has_var or shape.star_args else max(0, shape.positional - len(positional))
    unknown, twice = [], []
    for kw in shape.keywords:
        p = by_name.get(kw)
        if p is None or p.kind == "positional_only":
            if not has_varkw:
                unknown.append(kw)
            continue
        if kw in bound:
            twice.append(kw)
        bound.add(kw)
    missing = []
    if not shape.star_kwargs:
        for p in params:
            if p.kind in ("vararg", "varkw") or p.has_default or p.name in bound:
                continue
            if shape.star_args and p.kind in ("positional_only", "positional"):
                continue
            missing.append(p.name)
    return unknown, too_many, missing, twice


class BumpAudit:
    """The OLD and NEW engine versions of a bump and what is computed across them."""

    def __init__(self, engine: str, old: EngineSource, new: EngineSource, strip: int | None,
                 settings: Settings):
        self.engine = engine
        self.old = old
        self.new = new
        self.strip = strip
        self.settings = settings
        self.old_set = EngineSet([(old, strip)])
        self.new_set = EngineSet([(new, strip)])
        self.old_index = self.old_set._index(0)
        self.new_index = self.new_set._index(0)
        self.overlay = OverlaySource(new)
        self.patched_index = EngineIndex(self.overlay)
        self.old_name = short_name(old)
        self.new_name = short_name(new)
        if self.old_name == self.new_name and old.label != new.label:
            self.old_name, self.new_name = old.label, new.label
        self.pairs: dict[str, PatchPair] = {}
        self._relocations: dict[str, Relocation | None] = {}
        self._ranges: dict[tuple[str, str], list[tuple[str, int, int]]] = {}
        self._def_index: dict[str, set[str]] | None = None
        self._trees: dict[tuple, Any] = {}

    # ----- per patch ----------------------------------------------------------
    def _strip_for(self, patch) -> tuple[EngineContext | None, EngineContext | None]:
        old_ctx = self.old_set.for_patch(patch)
        new_ctx = self.new_set.for_patch(patch)
        if old_ctx is None or new_ctx is None:
            return old_ctx, new_ctx
        paths = [s.raw_path for s in patch.sections if s.raw_path and not s.is_binary]

        def hits(src, ctx):
            return sum(1 for p in paths if (mp := map_path(p, ctx.strip, ctx.prefix)) and src.has(mp))

        if hits(self.new, new_ctx) == 0 and hits(self.old, old_ctx) > 0:
            # every patched file moved in NEW: keep OLD's strip level for the paths
            new_ctx = EngineContext(self.new, old_ctx.strip, old_ctx.prefix, self.new_index)
        return old_ctx, new_ctx

    def pair_for(self, patch) -> PairContext | None:
        old_ctx, new_ctx = self._strip_for(patch)
        if new_ctx is None:
            return None
        old = RevisionContext(self.old, old_ctx.strip, old_ctx.prefix, self.old_index) if old_ctx else None
        pair = PatchPair(self, patch, old, new_ctx)
        ctx = PairContext(self.new, new_ctx.strip, new_ctx.prefix, self.new_index, pair=pair)
        pair.new_ctx = ctx
        self.pairs[patch.path] = pair
        return ctx

    def add_to_overlay(self, patch) -> None:
        """Apply `patch` (cumulatively, in the order given) to the in-memory patched NEW."""
        from patchaudit.patching.apply import apply_hunks, split_lines

        _, ctx = self._strip_for(patch)
        if ctx is None:
            return
        for section in patch.sections:
            if section.is_binary or not section.hunks or not section.is_python:
                continue
            target = ctx.engine_path(section.target_path or section.raw_path)
            if not target:
                continue
            if section.is_new and section.source_path is None:
                text = self.overlay.read_text(target) or ""
            else:
                text = self.overlay.read_text(target)
                if text is None:
                    continue
            lines, eol = split_lines(text)
            try:
                applied = apply_hunks(lines, [h.to_spec() for h in section.hunks], ends_with_newline=eol)
            except ValueError:
                continue
            self.overlay.put(target, "\n".join(applied.lines) + ("\n" if applied.ends_with_newline
                                                                 and applied.lines else ""))

    # ----- relocations ----------------------------------------------------------
    def _defs_by_name(self) -> dict[str, set[str]]:
        if self._def_index is None:
            rx = re.compile(r"^[ \t]*(?:async[ \t]+)?def[ \t]+([A-Za-z_]\w*)", re.M)
            idx: dict[str, set[str]] = {}
            for path, text in self.new_index.py_texts().items():
                for name in set(rx.findall(text)):
                    idx.setdefault(name, set()).add(path)
            self._def_index = idx
        return self._def_index

    def relocation(self, old_path: str) -> Relocation | None:
        """Where the definitions of OLD's `old_path` are in NEW, when NEW lacks that file."""
        if old_path in self._relocations:
            return self._relocations[old_path]
        reloc = None
        mod = self.old_index.module_by_path(old_path) if old_path.endswith(".py") else None
        if mod is not None and not self.new.has(old_path):
            defs = [(None, f) for f in mod.functions] + [
                (c.qualname, m) for c in mod.classes.values() for m in c.methods]
            names = {n for _, n in defs if not (n.startswith("__") and n.endswith("__"))}
            counts: dict[str, int] = {}
            index = self._defs_by_name()
            for n in names:
                for p in index.get(n, ()):
                    counts[p] = counts.get(p, 0) + 1
            reloc = Relocation(old_path, None, 0, len(names))
            ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
            if ranked and names and ranked[0][1] >= max(1, math.ceil(len(names) / 2)):
                best, n = ranked[0]
                reloc.new_path, reloc.matched = best, n
                rest = {m for m in names if best not in index.get(m, ())}
                if rest:   # a split module: where the definitions the best file lacks went
                    more: dict[str, int] = {}
                    for m in rest:
                        for p in index.get(m, ()):
                            more[p] = more.get(p, 0) + 1
                    reloc.others = sorted(more.items(), key=lambda kv: (-kv[1], kv[0]))[:2]
                new_mod = self.new_index.module_by_path(best)
                if new_mod is not None:
                    for cq, cls in mod.classes.items():
                        ms = {m for m in cls.methods if not (m.startswith("__") and m.endswith("__"))}
                        if cq in new_mod.classes or not ms:
                            continue
                        cands = sorted(((len(ms & set(c.methods)), q) for q, c in new_mod.classes.items()),
                                       reverse=True)
                        if cands and cands[0][0] >= math.ceil(len(ms) / 2):
                            reloc.classes[cq] = cands[0][1]
        self._relocations[old_path] = reloc
        return reloc

    def relocation_for_new(self, new_path: str, pair: PatchPair) -> Relocation | None:
        """The relocation of the OLD file a NEW engine path (that NEW lacks) stands for."""
        old_res = pair.old_result
        if old_res is not None:
            for rec in old_res.sections:
                if pair.new_ctx.engine_path(rec.section.target_path or rec.section.raw_path) == new_path \
                        and rec.engine_path and not rec.missing:
                    return self.relocation(rec.engine_path)
        return self.relocation(new_path) if self.old.has(new_path) else None

    def relocations(self) -> list[Relocation]:
        return [r for _, r in sorted(self._relocations.items()) if r is not None]

    # ----- PA203 ------------------------------------------------------------------
    def _ranges_of(self, side: str, path: str, text: str | None) -> list[tuple[str, int, int]]:
        key = (side, path)
        if key not in self._ranges:
            index = self.old_index if side == "old" else self.new_index
            mod = index.module_by_path(path)   # parsed once already when the engine has the file
            tree = mod.tree if mod is not None and index.engine.read_text(path) == text else None
            self._ranges[key] = _function_ranges(text, tree)
        return self._ranges[key]

    def _commits(self, path: str | None, start: int, end: int) -> str:
        if not path or start > end:
            return ""
        try:
            commits = self.new.line_commits(path, start, end, self.old)
        except EngineError:
            return ""
        if not commits:
            return ""
        shown = ", ".join(f"{c['sha'][:10]} \"{c['summary']}\"" for c in commits[:MAX_COMMITS])
        more = f" and {len(commits) - MAX_COMMITS} more" if len(commits) > MAX_COMMITS else ""
        return f"; upstream commit{'s' if len(commits) != 1 else ''}: {shown}{more}"

    def upstream_changes(self, pair: PatchPair) -> list[tuple[int, str, Severity]]:
        """PA203: (patch line, message, severity) for every hunk whose engine code changed."""
        old_res, new_res = pair.old_result, pair.new_result
        if old_res is None:
            return []
        out: list[tuple[int, str, Severity]] = []
        old_secs = {rec.section.header_line: rec for rec in old_res.sections}
        for rec in new_res.sections:
            sec = rec.section
            orec = old_secs.get(sec.header_line)
            if (sec.is_new and sec.source_path is None) or orec is None or orec.original_text is None:
                continue   # the patch creates the file, or OLD lacks it: nothing upstream to compare
            if not sec.is_python:
                continue
            old_path = orec.engine_path or sec.path
            reloc = None
            if rec.missing:
                reloc = self.relocation(old_path)
                new_path = reloc.new_path if reloc else None
                new_text = self.new.read_text(new_path) if new_path else None
                msg = reloc.describe(self.new_name) if reloc else f"{old_path} does not exist in {self.new_name}"
                out.append((sec.header_line, msg + "; port its hunks there", Severity.WARNING))
            else:
                new_path, new_text = rec.engine_path, rec.original_text
            old_hunks = {h.patch_line: h for h in orec.hunks}
            new_hunks = {h.patch_line: h for h in rec.hunks}
            for h in sec.hunks:
                msg = self._hunk_change(h, old_hunks.get(h.header_line), new_hunks.get(h.header_line),
                                        old_path, orec.original_text, new_path, new_text, reloc)
                if msg:
                    pair.changed_hunks.add(h.header_line)
                    out.append((h.header_line, msg, Severity.WARNING))
        return out

    def _elsewhere(self, qualname: str) -> str:
        """" (now `X.f` at path:line)" when NEW defines that function in exactly one place."""
        name = qualname.rsplit(".", 1)[-1]
        if name.startswith("__") and name.endswith("__"):
            return ""
        paths = self._defs_by_name().get(name, set())
        if len(paths) != 1:
            return ""
        mod = self.new_index.module_by_path(next(iter(paths)))
        if mod is None:
            return ""
        found = [f for f in mod.functions.values() if f.name == name] + [
            c.methods[name] for c in mod.classes.values() if name in c.methods]
        return f" (now `{found[0].qualname}` at {found[0].where})" if len(found) == 1 else ""

    def _hunk_change(self, h, oh: HunkRecord | None, nh: HunkRecord | None, old_path: str, old_text: str,
                     new_path: str | None, new_text: str | None, reloc: Relocation | None) -> str | None:
        start = (oh.source_line if oh is not None and oh.source_line else None) or max(h.source_start, 1)
        removed, inserts = _touched(h, start)
        o_ranges = self._ranges_of("old", old_path, old_text)
        syms: list[str] = []
        for line in sorted(removed):
            q = _innermost(o_ranges, lambda s, e, l=line: s <= l <= e)
            if q and q not in syms:
                syms.append(q)
        for gap in inserts:
            q = _innermost(o_ranges, lambda s, e, g=gap: s <= g and g + 1 <= e)
            if q and q not in syms:
                syms.append(q)
        status_new = nh.status if nh is not None else "missing-file"
        how = {"clean": "it still applies cleanly", "offset": f"it still applies (offset {nh.offset:+d})" if nh else "",
               "fuzz": f"it applies only with fuzz {nh.fuzz if nh else 0}", "failed": "it does not apply",
               "already-applied": "upstream already contains the change",
               "missing-file": f"{new_path} is where its code went" if new_path else "the file is gone"}.get(
            status_new, status_new)
        new_ranges = self._ranges_of("new", new_path, new_text) if new_path else []
        by_q = {q: (s, e) for q, s, e in new_ranges}
        parts: list[str] = []
        commits_at: list[tuple[int, int]] = []
        old_lines = source_lines(old_text)
        new_lines = source_lines(new_text) if new_text is not None else []
        for q in syms:
            s, e = next((s, e) for qq, s, e in o_ranges if qq == q)
            nq = q
            if reloc is not None and reloc.classes:
                head, _, rest = q.partition(".")
                if head in reloc.classes and rest:
                    nq = f"{reloc.classes[head]}.{rest}"
            if nq not in by_q:
                # renamed class or moved function: the only def of that name in the file
                same = [qq for qq in by_q if qq.rsplit(".", 1)[-1] == q.rsplit(".", 1)[-1]]
                nq = same[0] if len(same) == 1 else None
            if nq is None or not new_path:
                parts.append(f"`{q}` no longer exists in {new_path or self.new_name}{self._elsewhere(q)}")
                continue
            ns, ne = by_q[nq]
            a = _normalise(old_lines[s - 1:e])
            b = _normalise(new_lines[ns - 1:ne])
            if a == b:
                continue
            renamed = f" (now `{nq}` in {new_path})" if nq != q or (reloc and reloc.new_path) else ""
            removed_n, added_n = _changed_lines(a, b)
            parts.append(f"`{q}`{renamed} changed upstream (+{added_n}/-{removed_n} lines)")
            commits_at.append((ns, ne))
        rank = {"clean": 0, "offset": 0, "fuzz": 1, "failed": 2, "already-applied": 2}
        worse = oh is not None and nh is not None and (
            rank.get(nh.status, 0) > rank.get(oh.status, 0) or (nh.status == oh.status == "fuzz" and nh.fuzz > oh.fuzz))
        if not parts and worse and new_path:
            # module or class level code, or context reaching outside the function: the
            # hunk's own lines changed (it applied better to OLD than it does to NEW)
            where = nh.source_line if nh is not None and nh.source_line else start
            if nh is not None and nh.nearest:
                where = nh.nearest[0]
            n_pre = len(h.pre_image)
            parts.append(f"the {n_pre} engine lines this hunk patches changed upstream")
            commits_at.append((max(1, where - 1), where + n_pre))
        if not parts:
            return None
        commits = ""
        for s, e in commits_at:
            commits = self._commits(new_path, s, e)
            if commits:
                break
        todo = {"failed": "port it to the new code", "fuzz": "check where it lands and refresh it",
                "already-applied": "drop it if upstream's change does the same",
                "missing-file": "port it there"}.get(status_new, "review it against the new code")
        return (f"hunk #{h.index + 1}: {'; '.join(parts)} between {self.old_name} and {self.new_name}; "
                f"{how}: {todo}{commits}")

    # ----- PA204 ------------------------------------------------------------------
    def pa204_options(self) -> dict[str, Any]:
        return {**PA204_OPTIONS, **self.settings.options_for("PA204")}

    def module_for(self, unit) -> ModuleIndex | None:
        """The module a unit's calls are resolved in: the patched NEW file (or where its code moved)."""
        path = unit.target_path
        if not path:
            return None
        mod = self.patched_index.module_by_path(path)
        if mod is None:
            pair = getattr(unit.engine, "pair", None)
            reloc = self.relocation_for_new(path, pair) if pair is not None else None
            if reloc is not None and reloc.new_path:
                mod = self.patched_index.module_by_path(reloc.new_path)
        return mod

    def class_for(self, mod: ModuleIndex, class_q: str | None, unit) -> str | None:
        if class_q and mod.find_class(class_q) is not None:
            return class_q
        cands: list[str] = []
        if class_q:
            cands.append(class_q)
        pair = getattr(unit.engine, "pair", None)
        hunk = getattr(unit, "hunk", None)
        if pair is not None and hunk is not None:
            rec = pair.old_record(hunk.header_line)
            if rec is not None and rec.symbol:
                parts = rec.symbol.split(".")
                cands += [".".join(parts[:k]) for k in range(len(parts), 0, -1)]
        if getattr(unit, "outer_symbol", None):
            cands.append(unit.outer_symbol)
        for c in cands:
            if mod.find_class(c) is not None:
                return c
            for reloc in self._relocations.values():
                if reloc is not None and c in reloc.classes and mod.find_class(reloc.classes[c]) is not None:
                    return reloc.classes[c]
        return class_q

    def _upstream(self, index: EngineIndex, f: FuncInfo) -> FuncInfo | None:
        mod = index.module_by_path(f.path)
        if mod is None and f.module:
            mod = index.module(f.module)
        return index.function(mod, f.qualname) if mod is not None else None

    def _old_version(self, f: FuncInfo) -> FuncInfo | None:
        got = self._upstream(self.old_index, f)
        if got is not None:
            return got
        # the file moved in NEW: its OLD path is the one whose relocation lands here
        for reloc in self._relocations.values():
            if reloc is None or reloc.new_path != f.path:
                continue
            mod = self.old_index.module_by_path(reloc.old_path)
            if mod is None:
                continue
            cls_q, _, name = f.qualname.rpartition(".")
            back = {v: k for k, v in reloc.classes.items()}
            q = f"{back.get(cls_q, cls_q)}.{name}" if cls_q else name
            got = self.old_index.function(mod, q)
            if got is not None:
                return got
        return None

    def check_call(self, unit, callee: str, shape: CallShape, class_q: str | None,
                   complete: bool = True) -> list[tuple[str, Severity]]:
        """PA204: the problems of one call in patched code, as (message, severity).

        `complete` is False for a call whose arguments run past a hunk that NEW
        cannot place (and that OLD's patched file could not complete): then only
        what its visible arguments show is judged."""
        mod = self.module_for(unit)
        if mod is None:
            return []
        class_q = self.class_for(mod, class_q, unit)
        got = resolve_callee(self.patched_index, mod, callee, class_q)
        if got is None:
            return []
        f = got.func
        params = got.params()
        name = f"`{f.name}()`" if f.name != "__init__" else f"`{f.qualname.rsplit('.', 1)[0]}()`"
        where = f"`{f.qualname}` at {f.where}"
        up_new = self._upstream(self.new_index, f)
        up_old = self._old_version(f)
        old_params = Callee(up_old, got.how).params() if up_old is not None else None
        new_up_params = Callee(up_new, got.how).params() if up_new is not None else None
        old_names = _param_names(old_params) if old_params is not None else None
        out: list[tuple[str, Severity]] = []
        unknown, too_many, missing, twice = bind_problems(params, shape)
        if not complete:
            missing, twice = [], []
        # a keyword OLD took and NEW renamed: one finding naming both names
        renamed: dict[str, str] = {}
        if old_names is not None:
            gone = [kw for kw in unknown if kw in old_names]
            added = [p for p in _param_names(params) if p not in old_names]
            if len(gone) == 1 and len(added) == 1:
                renamed[gone[0]] = added[0]
        for kw in unknown:
            if kw in renamed:
                new = renamed[kw]
                out.append((f"{name} gets keyword `{kw}`, which {where} no longer takes: it was renamed to "
                            f"`{new}` between {self.old_name} and {self.new_name}; pass `{new}=`",
                            Severity.ERROR))
                continue
            msg = f"{name} gets keyword `{kw}`, which {where} does not take"
            if old_names is not None and kw in old_names:
                msg += f": `{kw}` was removed between {self.old_name} and {self.new_name}"
            out.append((msg, Severity.ERROR))
        if too_many:
            out.append((f"{name} gets {shape.positional} positional arguments, {too_many} more than {where} "
                        f"takes", Severity.ERROR))
        for p in missing:
            if p in renamed.values():
                continue
            msg = f"{name} does not pass `{p}`, which {where} requires"
            if old_names is not None and p not in old_names:
                msg += f" (`{p}` is new in {self.new_name})"
            out.append((msg, Severity.ERROR))
        for p in twice:
            out.append((f"{name} gets `{p}` both by position and by keyword", Severity.ERROR))
        if old_params is not None and new_up_params is not None and shape.positional:
            o_pos, n_pos = _positional_names(old_params), _positional_names(new_up_params)
            for i in range(min(shape.positional, len(o_pos), len(n_pos))):
                if o_pos[i] != n_pos[i]:
                    out.append((f"{name}: positional argument {i + 1} was `{o_pos[i]}` in {self.old_name} and is "
                                f"`{n_pos[i]}` in {self.new_name} ({where}): a parameter was added, removed or "
                                f"renamed before it; pass it by keyword", Severity.ERROR))
                    break
        if complete and up_new is not None and new_up_params is not None and not shape.star_kwargs:
            out += self._upstream_relies(name, where, f, up_new, up_old, got.how, params, new_up_params,
                                         old_params, shape)
        return out

    def calls_to_check(self, unit) -> list[tuple[int, int, int, int, str, CallShape, str | None, bool]]:
        """The calls PA204 judges in a unit: (line, col, end line, end col of the callee, callee,
        shape, enclosing class, complete) for every call touching a line the patch changed.
        Read with `ast` (positions of libcst cost more than the parse)."""
        from patchaudit.engine.symbols import _calls_in, ast_call_shape, ast_callee

        tree = parse_python(unit.text)
        if tree is None:
            return []
        lines = unit.text.split("\n")

        def col(line: int, byte_col: int) -> int:
            text = lines[line - 1] if 0 < line <= len(lines) else ""
            return len(text.encode("utf-8", "surrogateescape")[:byte_col].decode("utf-8", "ignore"))

        out = []
        for call, class_q, _sym in _calls_in(tree):
            end = getattr(call, "end_lineno", call.lineno) or call.lineno
            if not unit.judges(call.lineno, end):
                continue
            callee = ast_callee(call.func)
            if callee is None:
                continue
            shape = ast_call_shape(call)
            end_col = col(end, getattr(call, "end_col_offset", 0) or 0)
            complete = not unit.is_incomplete(end, end_col)
            if not complete:
                got = self._complete_from_old(unit, call.lineno, callee)
                if got is not None:
                    shape, complete = got, True
            f_end = getattr(call.func, "end_lineno", call.lineno) or call.lineno
            out.append((call.lineno, col(call.lineno, call.col_offset), f_end,
                        col(f_end, getattr(call.func, "end_col_offset", 0) or 0), callee, shape, class_q, complete))
        return out

    def _complete_from_old(self, unit, line: int, callee: str) -> CallShape | None:
        """The whole call, from OLD's patched file, for a call a failed hunk cuts off.

        A hunk that NEW cannot place applied to OLD: the lines after it (where
        the call's other arguments are) are in OLD's patched file."""
        from patchaudit.engine.symbols import ast_call_shape, ast_callee

        pair = getattr(unit.engine, "pair", None)
        hunk, section, info = getattr(unit, "hunk", None), getattr(unit, "section", None), unit.info(line)
        if pair is None or hunk is None or section is None or info is None or pair.old_result is None:
            return None
        rec = next((r for r in pair.old_result.sections if r.section.header_line == section.header_line), None)
        old_h = pair.old_record(hunk.header_line)
        if rec is None or rec.patched_text is None or old_h is None or old_h.status not in ("clean", "offset", "fuzz") \
                or old_h.line is None:
            return None
        post = [l for l in hunk.lines if l.kind != "-"]
        k = next((i for i, l in enumerate(post) if l.patch_line == info.line), None)
        if k is None:
            return None
        key = ("old-patched", section.header_line, id(pair))
        tree = self._trees.get(key)
        if tree is None:
            tree = self._trees[key] = parse_python(rec.patched_text)
        if tree is None:
            return None
        target = old_h.line + k
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and node.lineno == target and ast_callee(node.func) == callee:
                return ast_call_shape(node)
        return None

    def _sites(self, index: EngineIndex, f: FuncInfo) -> list:
        opts = self.pa204_options()
        sites = call_sites(index, f)
        if not opts["include-tests"]:
            sites = [s for s in sites if not _is_test_path(s.path)]
        return sites

    def _upstream_relies(self, name, where, f, up_new, up_old, how, params, new_up_params, old_params,
                         shape) -> list[tuple[str, Severity]]:
        opts = self.pa204_options()
        share = float(opts["upstream-share"])
        least = int(opts["min-upstream-calls"])
        out: list[tuple[str, Severity]] = []
        sites = None
        for p in new_up_params:
            if p.kind in ("vararg", "varkw") or not p.has_default:
                continue   # required ones are "missing" above
            if p.name not in _param_names(params):
                continue   # the patch itself removed it from the definition
            if shape.passes(params, p.name) is not False:
                continue
            if sites is None:
                sites = self._sites(self.new_index, up_new)
            known = [s for s in sites if s.shape.passes(new_up_params, p.name) is not None]
            passing = [s for s in known if s.shape.passes(new_up_params, p.name)]
            if not passing or len(known) < least or len(passing) < share * len(known):
                continue
            is_new = old_params is not None and p.name not in _param_names(old_params)
            ex = passing[0]
            msg = (f"{name} leaves out `{p.name}`, which upstream's own call sites pass in {self.new_name}: "
                   f"{len(passing)} of {len(known)} (e.g. {ex.where}" + (f" in {ex.symbol}" if ex.symbol else "")
                   + ")")
            if is_new:
                msg += (f"; `{p.name}` is new in {self.new_name} ({where}; {self.old_name}'s has no such "
                        f"parameter): the default `{p.name}` this call gets may drop what upstream now relies on")
                out.append((msg, Severity.ERROR))
                continue
            # the parameter existed: drift only if upstream started passing it
            old_sites = self._sites(self.old_index, up_old) if up_old is not None else []
            o_known = [s for s in old_sites if s.shape.passes(old_params or [], p.name) is not None]
            o_pass = [s for s in o_known if s.shape.passes(old_params or [], p.name)]
            if up_old is not None and o_known and len(o_pass) >= share * len(o_known):
                continue   # upstream passed it in OLD too: not drift
            o_txt = f"{len(o_pass)} of {len(o_known)}" if o_known else "none"
            msg += f"; in {self.old_name} {o_txt} did: upstream started relying on it"
            out.append((msg, Severity.WARNING))
        return out


# --------------------------------------------------------------------------
# the run


def _validate_options(settings: Settings) -> None:
    opts = {**PA204_OPTIONS, **settings.options_for("PA204")}
    where = f"{settings.config_path}: " if settings.config_path else ""
    unknown = set(opts) - set(PA204_OPTIONS)
    if unknown:
        raise BumpError(f"{where}[tool.patchaudit.rules.PA204]: unknown option(s) {sorted(unknown)} "
                        f"(known: {', '.join(sorted(PA204_OPTIONS))})")
    share = opts["upstream-share"]
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
        raise BumpError(f"{where}[tool.patchaudit.rules.PA204] upstream-share: expected a number in (0, 1], "
                        f"got {share!r}")
    least = opts["min-upstream-calls"]
    if isinstance(least, bool) or not isinstance(least, int) or least < 1:
        raise BumpError(f"{where}[tool.patchaudit.rules.PA204] min-upstream-calls: expected a positive "
                        f"integer, got {least!r}")
    if not isinstance(opts["include-tests"], bool):
        raise BumpError(f"{where}[tool.patchaudit.rules.PA204] include-tests: expected true or false, "
                        f"got {opts['include-tests']!r}")


def _monkeypatch_findings(py_files: list[str], audit: BumpAudit, report: BumpReport) -> list[Finding]:
    """Issue 9's runtime monkey-patch audit, when that module is there."""
    if not py_files:
        return []
    try:
        from patchaudit.analysis.monkeypatch import audit_bump
    except ImportError:
        return []
    old_ctx = EngineContext(audit.old, audit.strip or 0, "", audit.old_index)
    new_ctx = EngineContext(audit.new, audit.strip or 0, "", audit.new_index)
    try:
        return list(audit_bump(py_files, old_ctx, new_ctx, audit.settings))
    except Exception as exc:  # their bug must not hide the rest of the report
        report.errors.append(FileError(py_files[0], f"monkey-patch audit crashed: {exc!r}"))
        return []


def _locate(findings: list[Finding], rows: list[HunkRow]) -> None:
    """Findings at a hunk's @@ line (PA201-PA203, PA208) get the hunk's engine place."""
    at = {(r.patch, r.patch_line): r for r in rows}
    sections = {(r.patch, r.section_line): r for r in rows if r.moved_to}
    for f in findings:
        if f.target is not None:
            continue
        row = at.get((f.path, f.line))
        if row is None:
            moved = sections.get((f.path, f.line))
            if moved is not None:   # a file NEW no longer has: where its code went
                f.target = Target(moved.moved_to, None, None)
            continue
        side = row.new if row.new is not None and row.new.status not in ("missing-file",) else (row.moved or row.old)
        if side is None:
            continue
        path = row.moved_to if side is row.moved and row.moved_to else side.path
        f.target = Target(path or row.target, side.source_line or side.line, side.symbol or row.symbol)


def _reword_incomplete(findings: list[Finding], new_name: str) -> None:
    """Fragment units say "give --engine to confirm"; under bump the engine is there, the
    hunk just does not apply to it."""
    from patchaudit.units import INCOMPLETE_NOTE

    note = f" ({INCOMPLETE_NOTE})"
    for f in findings:
        if note in f.message:
            f.message = f.message.replace(note, f" (the call continues past a hunk that does not apply to "
                                                f"{new_name}: judged from the lines the patch shows)")


def _hunk_rows(pair: PatchPair, audit: BumpAudit) -> list[HunkRow]:
    from patchaudit.patching.apply import apply_hunks, split_lines

    old_res, new_res = pair.old_result, pair.new_result
    old_by = {h.patch_line: h for h in old_res.hunks} if old_res is not None else {}
    new_by = {h.patch_line: h for h in new_res.hunks}
    rows: list[HunkRow] = []
    for rec in new_res.sections:
        sec = rec.section
        moved_to, moved = None, {}
        if rec.missing and sec.hunks:
            orec = next((r for r in (old_res.sections if old_res else []) if r.section.header_line ==
                         sec.header_line), None)
            reloc = audit.relocation(orec.engine_path) if orec is not None and orec.engine_path and \
                orec.original_text is not None else None
            if reloc is not None and reloc.new_path:
                moved_to = reloc.new_path
                text = audit.new.read_text(moved_to) or ""
                lines, eol = split_lines(text)
                try:
                    applied = apply_hunks(lines, [h.to_spec() for h in sec.hunks], ends_with_newline=eol)
                    mod = audit.new_index.module_by_path(moved_to)
                    from patchaudit.engine.symbols import index_module

                    ix = index_module(moved_to, text) if mod is None else mod
                    for h, r in zip(sec.hunks, applied.hunks):
                        at = _first_change(h, r.source_line or h.source_start)
                        moved[h.header_line] = Side(r.status, moved_to, r.offset, r.fuzz, r.line, r.source_line,
                                                    ix.symbol_at(at), r.nearest)
                except ValueError:
                    pass
        for h in sec.hunks:
            o, n = old_by.get(h.header_line), new_by.get(h.header_line)
            rows.append(HunkRow(pair.patch.path, h.header_line, h.index + 1, sec.path,
                                Side.of(o) if o else None, Side.of(n) if n else None, moved_to,
                                sec.header_line, moved.get(h.header_line),
                                (h.header_line in pair.changed_hunks) if pair._changes is not None else None))
    return rows


def open_pair(engine: str, old_spec: str, new_spec: str) -> tuple[EngineSource, EngineSource]:
    try:
        old = open_engine(old_spec, name=engine)
    except EngineError as exc:
        raise BumpError(f"--from: {exc}") from None
    try:
        new = open_engine(new_spec, name=engine)
    except EngineError as exc:
        old.close()
        raise BumpError(f"--to: {exc}") from None
    return old, new


def run_bump(paths: list[str], engine: str, old_spec: str, new_spec: str, settings: Settings,
             strip: int | None = None) -> BumpReport:
    """Audit the patches (and monkey-patching .py files) under `paths` for the bump OLD -> NEW."""
    from patchaudit.inputs.discover import PATCH, PYTHON, discover
    from patchaudit.inputs.patches import read_patch
    from patchaudit.pipeline.runner import RunError, analyse_file, load_tokenizer, resolve_rules

    _validate_options(settings)
    try:
        rules = resolve_rules(settings)
        tokenizer = load_tokenizer(settings)
    except RunError as exc:
        raise BumpError(str(exc)) from None
    files, errors = discover(paths, settings.exclude)
    old, new = open_pair(engine, old_spec, new_spec)
    try:
        audit = BumpAudit(engine, old, new, strip, settings)
        report = BumpReport(engine, old.label, new.label, audit.old_name, audit.new_name,
                            errors=list(getattr(settings, "problems", ())) + list(errors), files=len(files))
        try:
            # NEW with every patch applied, in the order given: what the patched engine defines
            for src in files:
                if src.kind != PATCH:
                    continue
                try:   # the one guarded reader: a FIFO named x.patch is never opened
                    from patchaudit.files.reader import read_bytes

                    data = read_bytes(src.path, settings.max_file_size)
                except OSError:
                    continue   # analyse_file reports it
                audit.add_to_overlay(read_patch(src.path, data))
            engines = PairEngines(audit)
            py_files: list[str] = []
            for src in files:
                if src.kind == PATCH:
                    report.patches.append(src.path)
                elif src.kind == PYTHON:
                    py_files.append(src.path)
                fr = analyse_file(src, settings, rules, engines if src.kind == PATCH else None, tokenizer)
                report.findings.extend(fr.findings)
                report.errors.extend(fr.errors)
                report.parsed += fr.parsed
            selected = {r.code for r in rules}
            report.findings += [f for f in _monkeypatch_findings(py_files, audit, report) if f.code in selected]
            for path in report.patches:
                pair = audit.pairs.get(path)
                if pair is None:
                    continue
                try:
                    report.hunks.extend(_hunk_rows(pair, audit))
                except EngineError:
                    raise
                except Exception as exc:  # one patch's bug never hides the others
                    report.errors.append(FileError(path, f"internal error building the hunk table: {exc!r}"))
            report.relocations = audit.relocations()
        except EngineError as exc:
            raise BumpError(str(exc)) from None
        _locate(report.findings, report.hunks)
        _reword_incomplete(report.findings, audit.new_name)
        report.findings.sort(key=Finding.sort_key)
        return report
    finally:
        old.close()
        new.close()
