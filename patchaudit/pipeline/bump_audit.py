"""The OLD and NEW engine versions of a bump and what is computed across them.

`BumpAudit` holds the three indexed views of the engine (OLD and NEW as
released, NEW with every patch of the set applied: `OverlaySource`), applies
each patch to both versions (`PatchPair`), finds where the definitions of a
file NEW no longer has went (`relocation`), and gives the engine-pair rules
what they judge: what changed upstream under each hunk (PA203,
`upstream_changes`, computed by `patchaudit/analysis/upstream.py`) and, for
every call in patched code, the definitions it binds to in OLD and NEW with
upstream's own call sites (PA204, `calls_to_check`, `call_target`,
`call_sites`; compared by `patchaudit/analysis/signatures.py`).  It builds no
finding: the rules do.
"""

from __future__ import annotations

import ast
from typing import Any

from patchaudit.analysis.relocation import NameIndex, NewEngine, reexported
from patchaudit.analysis.signatures import CallTarget
from patchaudit.analysis.upstream import (
    HunkChange,
    MissingFile,
    Relocation,
    function_ranges,
    hunk_change,
    relocate,
    sections_changed,
)
from patchaudit.config.settings import Settings
from patchaudit.engine.definitions import FuncInfo, ModuleIndex, parse_python
from patchaudit.engine.shared import shared_index
from patchaudit.engine.sources import EngineError, EngineSource, map_path
from patchaudit.engine.symbols import Callee, CallShape, EngineIndex, call_sites, resolve_callee
from patchaudit.inputs.testfiles import is_test_file
from patchaudit.pipeline.bump_engines import OverlaySource, PairContext, PatchPair, RevisionContext, short_name
from patchaudit.units.engines import EngineContext, EngineSet, unit_pair
from patchaudit.units.exact import HunkRecord


class BumpAudit:
    """The OLD and NEW engine versions of a bump and what is computed across them."""

    def __init__(self, engine: str, old: EngineSource, new: EngineSource, strip: int | None, settings: Settings):
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
        self._def_index: NameIndex | None = None
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
            text: str | None
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
            self.overlay.put(
                target, "\n".join(applied.lines) + ("\n" if applied.ends_with_newline and applied.lines else "")
            )

    # ----- relocations ----------------------------------------------------------
    def _defs_by_name(self) -> NameIndex:
        if self._def_index is None:
            self._def_index = NameIndex.of(self.new_index.py_texts())
        return self._def_index

    def _new_lines(self, path: str) -> list[str]:
        from patchaudit.inputs import source_lines

        return source_lines(self.new.read_text(path) or "")

    def relocation(self, old_path: str) -> Relocation | None:
        """Where the definitions of OLD's `old_path` are in NEW, when NEW lacks that file or
        keeps it only as a re-export shim (`from .dsa.dsa_indexer import *`)."""
        if old_path in self._relocations:
            return self._relocations[old_path]
        from patchaudit.inputs import source_lines

        reloc = None
        mod = self.old_index.module_by_path(old_path) if old_path.endswith(".py") else None
        if mod is not None and (mod.classes or mod.functions):
            shim: list[str] = []
            if self.new.has(old_path):
                shim = reexported(self.new_index.module_by_path(old_path))
            if shim or not self.new.has(old_path):
                hints = [p for p in (self.new.module_path(m) for m in shim) if p]
                engine = NewEngine(self._defs_by_name(), self.new_index.module_by_path, self._new_lines)
                text = self.old.read_text(old_path) or ""
                reloc = relocate(old_path, mod, source_lines(text), engine, shim, hints)
        self._relocations[old_path] = reloc
        return reloc

    def relocation_for_new(self, new_path: str, pair: PatchPair) -> Relocation | None:
        """The relocation of the OLD file a NEW engine path (that NEW lacks) stands for."""
        old_res = pair.old_result
        if old_res is not None:
            for rec in old_res.sections:
                if (
                    pair.new_ctx.engine_path(rec.section.target_path or rec.section.raw_path) == new_path
                    and rec.engine_path
                    and not rec.missing
                ):
                    return self.relocation(rec.engine_path)
        return self.relocation(new_path) if self.old.has(new_path) else None

    def relocations(self) -> list[Relocation]:
        return [r for _, r in sorted(self._relocations.items()) if r is not None]

    # ----- PA203: what changed upstream ---------------------------------------------
    def _ranges_of(self, side: str, path: str, text: str | None) -> list[tuple[str, int, int]]:
        key = (side, path)
        if key not in self._ranges:
            index = self.old_index if side == "old" else self.new_index
            mod = index.module_by_path(path)  # parsed once already when the engine has the file
            tree = mod.tree if mod is not None and index.engine.read_text(path) == text else None
            self._ranges[key] = function_ranges(text, tree)
        return self._ranges[key]

    def line_commits(self, path: str | None, start: int, end: int) -> list[dict[str, Any]]:
        """The upstream commits between OLD and NEW that changed NEW's lines start..end of
        `path` (`git log -L`; none when OLD and NEW are not two revisions of one repository)."""
        if not path or start > end:
            return []
        try:
            return self.new.line_commits(path, start, end, self.old) or []
        except EngineError:
            return []

    def upstream_changes(self, pair: PatchPair) -> list[MissingFile | HunkChange]:
        """Every file of the patch that NEW lacks, and every hunk whose engine code changed."""
        old_res, new_res = pair.old_result, pair.new_result
        if old_res is None:
            return []
        out: list[MissingFile | HunkChange] = []
        for rec, orec in sections_changed(old_res.sections, new_res.sections):
            sec = rec.section
            old_path = orec.engine_path or sec.path
            reloc = self.relocation(old_path)
            if rec.missing or reloc is not None:
                out.append(MissingFile(sec.header_line, old_path, reloc))
            if (
                reloc is None
                and not rec.missing
                and old_path == rec.engine_path
                and orec.original_text is not None
                and orec.original_text == rec.original_text
            ):
                continue  # the same file in OLD and NEW: nothing under its hunks changed upstream
            old_hunks = {h.patch_line: h for h in orec.hunks}
            new_hunks = {h.patch_line: h for h in rec.hunks}
            for h in sec.hunks:
                oh = old_hunks.get(h.header_line)
                new_path, new_text = rec.engine_path, rec.original_text
                if rec.missing or reloc is not None:
                    mv = reloc.destination(oh.symbol if oh else None) if reloc else None
                    new_path = mv.path if mv else (reloc.new_path if reloc else None)
                    new_text = self.new.read_text(new_path) if new_path else None
                change = self._hunk_change(
                    h, oh, new_hunks.get(h.header_line), old_path, orec.original_text, new_path, new_text, reloc
                )
                if change is not None:
                    pair.changed_hunks.add(h.header_line)
                    out.append(change)
        return out

    def elsewhere(self, qualname: str) -> FuncInfo | None:
        """NEW's definition of that function's name, when NEW defines it in exactly one place."""
        name = qualname.rsplit(".", 1)[-1]
        if name.startswith("__") and name.endswith("__"):
            return None
        from patchaudit.analysis.relocation import bare

        paths = self._defs_by_name().defs.get(bare(name), set())
        if not paths or len(paths) > 8:
            return None
        found: list[FuncInfo] = []
        for path in sorted(paths):
            mod = self.new_index.module_by_path(path)
            if mod is not None:
                found += [f for f in mod.functions.values() if f.name == name]
                found += [c.methods[name] for c in mod.classes.values() if name in c.methods]
        return found[0] if len(found) == 1 else None

    def _hunk_change(
        self,
        h,
        oh: HunkRecord | None,
        nh: HunkRecord | None,
        old_path: str,
        old_text: str,
        new_path: str | None,
        new_text: str | None,
        reloc: Relocation | None,
    ) -> HunkChange | None:
        o_ranges = self._ranges_of("old", old_path, old_text)
        new_ranges = self._ranges_of("new", new_path, new_text) if new_path else []
        return hunk_change(h, oh, nh, o_ranges, new_ranges, old_text, new_path, new_text, reloc)

    # ----- PA204: calls in patched code -------------------------------------------
    def module_for(self, unit) -> ModuleIndex | None:
        """The module a unit's calls are resolved in: the patched NEW file (or where its code moved)."""
        path = unit.target_path
        if not path:
            return None
        mod = self.patched_index.module_by_path(path)
        if mod is None:
            pair = unit_pair(unit)
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
        pair = unit_pair(unit)
        hunk = unit.hunk
        if pair is not None and hunk is not None:
            rec = pair.old_record(hunk.header_line)
            if rec is not None and rec.symbol:
                parts = rec.symbol.split(".")
                cands += [".".join(parts[:k]) for k in range(len(parts), 0, -1)]
        if unit.outer_symbol:
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
            if reloc is None:
                continue
            mod = self.old_index.module_by_path(reloc.old_path)
            if mod is None:
                continue
            back_q = next((q for q, m in reloc.moves.items() if (m.path, m.new) == (f.path, f.qualname)), None)
            if back_q is not None and (got := self.old_index.function(mod, back_q)) is not None:
                return got
            if reloc.new_path != f.path:
                continue
            cls_q, _, name = f.qualname.rpartition(".")
            back = {v: k for k, v in reloc.classes.items()}
            q = f"{back.get(cls_q, cls_q)}.{name}" if cls_q else name
            got = self.old_index.function(mod, q)
            if got is not None:
                return got
        return None

    def call_target(self, unit, callee: str, class_q: str | None) -> CallTarget | None:
        """The definitions a call in patched code binds to: in NEW with the patches applied
        (resolved through the module's imports and the class hierarchy), and the same
        definition as upstream has it in NEW and in OLD; None when it does not resolve."""
        mod = self.module_for(unit)
        if mod is None:
            return None
        class_q = self.class_for(mod, class_q, unit)
        got = resolve_callee(self.patched_index, mod, callee, class_q)
        if got is None:
            return None
        f = got.func
        up_new = self._upstream(self.new_index, f)
        up_old = self._old_version(f)
        old_params = Callee(up_old, got.how).params() if up_old is not None else None
        new_up_params = Callee(up_new, got.how).params() if up_new is not None else None
        return CallTarget(f, got.how, got.params(), up_new, up_old, new_up_params, old_params)

    def call_sites(self, side: str, f: FuncInfo, include_tests: bool) -> list:
        """Upstream's own call sites of `f` in NEW (`side` "new") or OLD ("old")."""
        sites = call_sites(self.new_index if side == "new" else self.old_index, f)
        if not include_tests:
            sites = [s for s in sites if not is_test_file(s.path)]
        return sites

    def calls_to_check(self, unit) -> list[tuple[int, int, int, int, str, CallShape, str | None, bool]]:
        """The calls PA204 judges in a unit: (line, col, end line, end col of the callee, callee,
        shape, enclosing class, complete) for every call touching a line the patch changed.
        Read with `ast` (positions of libcst cost more than the parse)."""
        from patchaudit.engine.symbols import ast_call_shape, ast_callee, calls_in

        tree = _tree_of(unit)
        if tree is None:
            return []
        lines = unit.text.split("\n")

        def col(line: int, byte_col: int) -> int:
            text = lines[line - 1] if 0 < line <= len(lines) else ""
            return len(text.encode("utf-8", "surrogateescape")[:byte_col].decode("utf-8", "ignore"))

        out = []
        for call, class_q, _sym in calls_in(tree):
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
            out.append(
                (
                    call.lineno,
                    col(call.lineno, call.col_offset),
                    f_end,
                    col(f_end, getattr(call.func, "end_col_offset", 0) or 0),
                    callee,
                    shape,
                    class_q,
                    complete,
                )
            )
        return out

    def patched_definitions(self, unit) -> list[tuple[FuncInfo, FuncInfo, list, list]]:
        """The definitions whose `def` line a patch adds or changes in this unit, that replace
        (same class) or override (a base class) one of NEW whose parameters differ: (the
        patched definition, upstream's in NEW, NEW's call sites resolved to upstream's, NEW's
        calls of a method of that name on receivers of unknown type)."""
        from patchaudit.engine.symbols import name_call_sites

        path = unit.target_path
        if not path or getattr(unit, "mode", "exact") != "exact":
            return []
        tree = _tree_of(unit)
        if tree is None:
            return []
        # the patched file as this unit has it (its lines are the unit's lines)
        mod = shared_index(path, unit.text, self.new.module_name(path), tree)
        up_mod = self.new_index.module_by_path(path)
        out = []
        for node, cls_q in _defs_with_class(tree):
            if not unit.judges(node.lineno, node.lineno) or cls_q is None:
                continue
            cls = mod.classes.get(cls_q)
            mine = cls.methods.get(node.name) if cls is not None else None
            if mine is None or mine.line != node.lineno:
                continue  # not the definition the class ends up with
            up = None
            up_cls = up_mod.classes.get(cls_q) if up_mod is not None else None
            if up_cls is not None and up_mod is not None:
                up = up_cls.methods.get(node.name)
                if up is None:
                    found = self.new_index.find_method(up_mod, up_cls, node.name, skip_self=True)
                    up = found[1] if found is not None else None
            if up is None or up.bound_params() == mine.bound_params() or node.name.startswith("__"):
                continue
            sites = [s for s in call_sites(self.new_index, up) if not is_test_file(s.path)]
            by_name = [s for s in name_call_sites(self.new_index, node.name) if not is_test_file(s.path)]
            out.append((mine, up, sites, by_name))
        return out

    def _complete_from_old(self, unit, line: int, callee: str) -> CallShape | None:
        """The whole call, from OLD's patched file, for a call a failed hunk cuts off.

        A hunk that NEW cannot place applied to OLD: the lines after it (where
        the call's other arguments are) are in OLD's patched file."""
        from patchaudit.engine.symbols import ast_call_shape, ast_callee

        pair = unit_pair(unit)
        hunk, section, info = unit.hunk, unit.section, unit.info(line)
        if pair is None or hunk is None or section is None or info is None or pair.old_result is None:
            return None
        rec = next((r for r in pair.old_result.sections if r.section.header_line == section.header_line), None)
        old_h = pair.old_record(hunk.header_line)
        if (
            rec is None
            or rec.patched_text is None
            or old_h is None
            or old_h.status not in ("clean", "offset", "fuzz")
            or old_h.line is None
        ):
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


def _tree_of(unit) -> ast.Module | None:
    """The `ast` tree of a unit's text: exact mode parsed it once already (`patched_tree`)."""
    tree = unit.patched_tree
    return tree if tree is not None else parse_python(unit.text)


def _defs_with_class(tree: ast.AST):
    """(def node, enclosing class qualname or None) for every function of a module."""
    stack: list[tuple[ast.AST, str | None]] = [(tree, None)]
    while stack:
        node, cls = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                stack.append((child, f"{cls}.{child.name}" if cls else child.name))
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield child, cls
            elif not isinstance(child, ast.expr):
                stack.append((child, cls))
