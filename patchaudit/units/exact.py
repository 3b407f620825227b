"""Exact mode: patches applied in memory to the real engine source.

For each file section of a patch, the engine file (or, for a git engine, the
exact pre-image blob named by the `index` line) is patched in memory with the
GNU-patch-compatible applier, and the whole patched file becomes one unit:
rules see complete code, and only findings on lines the patch added or changed
are kept, reported at the patch line *and* the engine line with the enclosing
engine symbol.  Per-hunk results (clean / offset / fuzz / failed /
already-applied) feed PA201, PA202, PA208; a patched file that does not parse
feeds PA302.  A hunk that fails still gets its fragment-mode units, so the
rules still judge what it adds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from patchaudit.inputs.engine import EngineError, EngineSource, detect_strip, map_path, open_engine
from patchaudit.units import LineInfo, PythonUnit, TextUnit
from patchaudit.units.symbols import EngineIndex, FuncInfo, ModuleIndex, index_module, parse_python


@dataclass
class HunkRecord:
    patch: str
    patch_line: int              # the hunk's "@@" line in the patch file
    section_path: str            # the path the patch names (without a/ b/)
    engine_path: str | None
    index: int
    status: str                  # clean | offset | fuzz | failed | already-applied | missing-file
    offset: int = 0
    fuzz: int = 0
    line: int | None = None      # where the pre-image matched in the engine file
    nearest: tuple[int, int, int] | None = None
    symbol: str | None = None
    engine: str = ""
    source_line: int | None = None   # where the hunk was found (or expected) in the original file

    def to_json(self) -> dict[str, Any]:
        return {
            "patch": self.patch, "patch_line": self.patch_line, "target": self.engine_path or self.section_path,
            "hunk": self.index + 1, "status": self.status, "offset": self.offset, "fuzz": self.fuzz,
            "engine_line": self.source_line if self.source_line is not None else self.line,
            "patched_line": self.line, "nearest": list(self.nearest) if self.nearest else None,
            "symbol": self.symbol, "engine": self.engine,
        }


@dataclass
class SectionRecord:
    section: Any
    engine_path: str | None
    missing: bool = False
    hunks: list[HunkRecord] = field(default_factory=list)
    syntax_error: tuple[int, int | None, str] | None = None   # (patched line, patch line, message)
    patched_text: str | None = None
    original_text: str | None = None


@dataclass
class ExactResult:
    engine_label: str
    engine_name: str
    strip: int
    prefix: str
    sections: list[SectionRecord] = field(default_factory=list)

    @property
    def hunks(self) -> list[HunkRecord]:
        return [h for s in self.sections for h in s.hunks]


class EngineContext:
    """One engine source as a patch sees it: strip level, symbol index, call resolution."""

    def __init__(self, source: EngineSource, strip: int, prefix: str, index: EngineIndex | None = None):
        self.source = source
        self.strip = strip
        self.prefix = prefix
        self.index = index or EngineIndex(source)

    @property
    def label(self) -> str:
        return self.source.label

    def engine_path(self, raw_path: str | None) -> str | None:
        if not raw_path:
            return None
        return map_path(raw_path, self.strip, self.prefix)

    # ----- symbol resolution for rules --------------------------------------
    def unit_module(self, unit) -> ModuleIndex | None:
        cached = getattr(unit, "_module_index", None)
        if cached is not None:
            return cached
        if unit.mode == "exact":
            mod = index_module(unit.target_path or "", unit.text, self.source.module_name(unit.target_path or ""),
                               tree=getattr(unit, "patched_tree", None))
        elif unit.target_path:
            mod = self.index.module_by_path(unit.target_path)
        else:
            mod = None
        try:
            unit._module_index = mod
        except AttributeError:  # pragma: no cover
            pass
        return mod

    def resolve_call(self, unit, call, class_name: str | None) -> FuncInfo | None:
        """The engine definition a libcst Call in `unit` calls, or None when unsure."""
        import libcst as cst

        func = call.func
        mod = self.unit_module(unit)
        name = func.attr.value if isinstance(func, cst.Attribute) else (
            func.value if isinstance(func, cst.Name) else None)
        if name is None:
            return None
        if class_name is None and getattr(unit, "outer_symbol", None):
            class_name = unit.outer_symbol
        if mod is not None and isinstance(func, cst.Attribute):
            recv = func.value
            is_self = isinstance(recv, cst.Name) and recv.value in ("self", "cls")
            is_super = isinstance(recv, cst.Call) and isinstance(recv.func, cst.Name) and recv.func.value == "super"
            if (is_self or is_super) and class_name:
                cls = mod.find_class(class_name)
                if cls is not None:
                    found = self.index.find_method(mod, cls, name, skip_self=is_super)
                    if found:
                        return found[1]
            if isinstance(recv, (cst.Name, cst.Attribute)):
                from patchaudit.units.symbols import dotted_name  # noqa: F401

                dotted = _cst_dotted(recv)
                if dotted and dotted.split(".")[0] in mod.imports:
                    head, _, rest = dotted.partition(".")
                    target = mod.imports[head] + ("." + rest if rest else "") + "." + name
                    got = self.index.resolve(target)
                    if got and got[1] == "function":
                        return self.index.function(got[0], got[2])
        if mod is not None and isinstance(func, cst.Name):
            if name in mod.functions:
                return mod.functions[name]
            if name in mod.imports:
                got = self.index.resolve(mod.imports[name])
                if got and got[1] == "function":
                    return self.index.function(got[0], got[2])
        # last resort: every definition of that name in the engine agrees
        cands = self.index.functions_named(name)
        shapes = {tuple((p.name, p.kind) for p in f.bound_params()) for f in cands}
        if len(shapes) == 1:
            return cands[0]
        return None


def _cst_dotted(node) -> str | None:
    import libcst as cst

    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = _cst_dotted(node.value)
        return f"{base}.{node.attr.value}" if base else None
    return None


class EngineSet:
    """The engines of a run (`--engine NAME=SOURCE`, repeatable)."""

    def __init__(self, engines: list[tuple[EngineSource, int | None]]):
        self.engines = engines
        self._indexes: dict[int, EngineIndex] = {}

    @classmethod
    def open(cls, specs) -> "EngineSet":
        opened = []
        for spec in specs:
            opened.append((open_engine(spec.source, name=spec.name), spec.strip))
        return cls(opened)

    def _index(self, k: int) -> EngineIndex:
        if k not in self._indexes:
            self._indexes[k] = EngineIndex(self.engines[k][0])
        return self._indexes[k]

    def contexts(self) -> list[EngineContext]:
        """Every engine of the run as plain Python files see it (strip 0); each
        context knows its set (`engine_set`), so a rule can pick the engine
        that has a given package (monkey-patches, patchaudit/monkeypatch.py)."""
        cache = self.__dict__.setdefault("_contexts", {})
        for k in range(len(self.engines)):
            if k not in cache:
                ctx = EngineContext(self.engines[k][0], 0, "", self._index(k))
                ctx.engine_set = self
                cache[k] = ctx
        return [cache[k] for k in range(len(self.engines))]

    def for_python(self) -> EngineContext | None:
        """The engine a plain .py file is checked against: the first of the run."""
        ctxs = self.contexts()
        return ctxs[0] if ctxs else None

    def for_patch(self, patch) -> EngineContext | None:
        paths = [s.raw_path for s in patch.sections if s.raw_path and not s.is_binary]
        if not paths or not self.engines:
            return None
        best: tuple[int, int, int, str] | None = None   # (matches, -k, strip, prefix)
        for k, (src, strip) in enumerate(self.engines):
            if strip is not None:
                cand = (strip, "")
                try:
                    cand = (strip, detect_strip(paths, src)[1]) if detect_strip(paths, src)[0] == strip else cand
                except EngineError:
                    pass
            else:
                try:
                    cand = detect_strip(paths, src)
                except EngineError:
                    cand = (1 if any(p.startswith(("a/", "b/")) for p in paths) else 0, "")
            n = sum(1 for p in paths if (mp := map_path(p, cand[0], cand[1])) and src.has(mp))
            key = (n, -k, cand[0], cand[1])
            if best is None or key > best:
                best = key
        assert best is not None
        k = -best[1]
        return EngineContext(self.engines[k][0], best[2], best[3], self._index(k))


def _changed_hunk_lines(hunk) -> set[int]:
    """Indexes (into hunk.lines) of added lines and of the line after each removal run."""
    out: set[int] = set()
    pending = False
    for i, l in enumerate(hunk.lines):
        if l.kind == "+":
            out.add(i)
            pending = False
        elif l.kind == "-":
            pending = True
        else:
            if pending:
                out.add(i)
            pending = False
    return out


def _read_original(ctx: EngineContext, section) -> tuple[str | None, str | None]:
    """(pre-image text, engine path it came from)."""
    src_path = ctx.engine_path(section.source_path) if section.source_path else None
    # bump compares two revisions of one repository: there the file at the
    # revision counts, not the pre-image blob the index line names
    if getattr(ctx, "use_index_blob", True) and section.index and not set(section.index[0]) <= {"0"}:
        blob = ctx.source.blob(section.index[0])
        if blob is not None:
            return blob.decode("utf-8", "surrogateescape"), src_path or ctx.engine_path(section.raw_path)
    path = src_path or ctx.engine_path(section.raw_path)
    if path is None:
        return None, None
    return ctx.source.read_text(path), path


def exact_units(patch, ctx: EngineContext, report_path: str):
    """Units of a patch in exact mode: (python units, text units, ExactResult)."""
    from patchaudit.inputs.discover import PATCH, PYTHON, classify
    from patchaudit.runner import hunk_text_unit
    from patchaudit.units.apply import apply_hunks, split_lines
    from patchaudit.units.fragments import fragment_units

    result = ExactResult(ctx.label, ctx.source.name, ctx.strip, ctx.prefix)
    py: list[PythonUnit] = []
    text_units: list[TextUnit] = []
    # a file changed by two sections of one patch: the second applies to the first's result,
    # as GNU patch does
    patched_so_far: dict[str, tuple[str, str | None]] = {}
    for section in patch.sections:
        if section.is_binary:
            continue
        target = ctx.engine_path(section.target_path or section.rename_to and ("b/" + section.rename_to)
                                 or section.raw_path) or section.path
        rec = SectionRecord(section, target)
        result.sections.append(rec)
        kind = "python" if section.is_python else classify(section.path)
        if not section.hunks:
            continue
        if section.is_new and section.source_path is None:
            original, orig_path = "", target
            existing = ctx.source.read_text(target) if target else None
            if existing is not None:
                # the patch creates a file the engine already has (GNU patch asks "Assume -R?")
                post = "\n".join(l.text for h in section.hunks for l in h.post_image)
                same = existing.rstrip("\n") == post.rstrip("\n")
                for h in section.hunks:
                    rec.hunks.append(HunkRecord(report_path, h.header_line, section.path, target, h.index,
                                                "already-applied" if same else "failed", line=1,
                                                engine=ctx.label))
                if not same:
                    _fallback_units(patch, section, section.hunks, report_path, kind, py, text_units, ctx)
                continue
        else:
            source_key = ctx.engine_path(section.source_path) if section.source_path else target
            if source_key in patched_so_far:
                original, orig_path = patched_so_far[source_key]
            else:
                original, orig_path = _read_original(ctx, section)
        if original is None:
            rec.missing = True
            for h in section.hunks:
                rec.hunks.append(HunkRecord(report_path, h.header_line, section.path, target, h.index,
                                            "missing-file", engine=ctx.label))
            _fallback_units(patch, section, section.hunks, report_path, kind, py, text_units, ctx)
            continue
        rec.original_text = original
        lines, eol = split_lines(original)
        applied = apply_hunks(lines, [h.to_spec() for h in section.hunks], ends_with_newline=eol)
        orig_index = index_module(orig_path or target, original) if kind == PYTHON else None
        for h, r in zip(section.hunks, applied.hunks):
            # the symbol around the hunk's first change (not its leading context), looked up
            # in the original (r.line is in patched-file coordinates)
            lead = next((k for k, l in enumerate(h.lines) if l.kind != " "), 0)
            if lead and h.lines[lead].kind == "+":
                lead -= 1      # an insertion: the line it follows
            at = (r.source_line or r.line or h.source_start) + lead
            symbol = orig_index.symbol_at(at) if orig_index else None
            rec.hunks.append(HunkRecord(report_path, h.header_line, section.path, target, h.index, r.status,
                                        r.offset, r.fuzz, r.line, r.nearest, symbol, ctx.label,
                                        source_line=r.source_line))
        failed = [h for h, r in zip(section.hunks, applied.hunks) if r.status == "failed"]
        if section.is_deleted:
            continue
        patched = "\n".join(applied.lines) + ("\n" if applied.ends_with_newline and applied.lines else "")
        rec.patched_text = patched
        patched_so_far[target] = (patched, target)
        lines_map: dict[int, LineInfo] = {}
        judged: set[int] = set()
        hunk_of: dict[int, Any] = {}
        changed_idx = {h.index: _changed_hunk_lines(h) for h in section.hunks}
        for line_no, (hi, li) in applied.origin.items():
            h = section.hunks[hi]
            hl = h.lines[li]
            is_changed = li in changed_idx[hi]
            lines_map[line_no] = LineInfo(hl.patch_line, 1, line_no, is_changed)
            hunk_of[line_no] = h
            if is_changed:
                judged.add(line_no)
        if kind == PYTHON:
            patched_tree = parse_python(patched)
            if patched_tree is None:
                if orig_index is not None and orig_index.tree is not None:   # the patch broke it
                    rec.syntax_error = _syntax_error(patched, lines_map)
                _fallback_units(patch, section, section.hunks, report_path, kind, py, text_units, ctx)
                continue
            unit = PythonUnit(path=report_path, lines_map=lines_map, judged=frozenset(judged), target_path=target,
                              patch=patch, section=section, mode="exact", text=patched, engine=ctx)
            unit.hunk_of = hunk_of
            unit.patched_tree = patched_tree   # reused by EngineContext.unit_module: one ast parse
            py.append(unit)
        elif kind not in (None, PATCH):
            unit = TextUnit(path=report_path, lines_map=lines_map, judged=frozenset(judged), target_path=target,
                            patch=patch, section=section, mode="exact", flavor=kind,
                            lines=list(applied.lines))
            unit.hunk_of = hunk_of
            text_units.append(unit)
        if failed:
            _fallback_units(patch, section, failed, report_path, kind, py, text_units, ctx)
    return py, text_units, result


def _fallback_units(patch, section, hunks, report_path, kind, py, text_units, ctx) -> None:
    """Fragment-mode units for hunks exact mode cannot place (failed, missing file)."""
    from patchaudit.inputs.discover import PATCH, PYTHON
    from patchaudit.runner import hunk_text_unit
    from patchaudit.units.fragments import fragment_units

    for h in hunks:
        if kind == PYTHON:
            for u in fragment_units(patch, section, h, report_path=report_path):
                u.engine = ctx
                u.target_path = ctx.engine_path(section.raw_path) or section.path
                py.append(u)
        elif kind not in (None, PATCH):
            text_units.append(hunk_text_unit(patch, section, h, kind, report_path))


def _syntax_error(text: str, lines_map: dict[int, LineInfo]) -> tuple[int, int | None, str]:
    try:
        compile(text, "<patched>", "exec", dont_inherit=True, flags=0x400)  # PyCF_ONLY_AST
    except SyntaxError as exc:
        line = exc.lineno or 1
        info = lines_map.get(line)
        if info is None and lines_map:
            nearest = min(lines_map, key=lambda l: abs(l - line))
            info = lines_map[nearest]
        return line, info.line if info else None, exc.msg or "invalid syntax"
    except (ValueError, RecursionError, MemoryError) as exc:
        return 1, None, str(exc)
    return 1, None, "does not parse"
