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

One bad input costs the smallest unit it belongs to (SECURITY.md, promise 6): a
hunk the applier refuses (no added or removed line) is left out of the
application and marked "malformed" (PA301 reports it), the other hunks of the
file apply; an engine file over `max-file-size` (or one the engine source
cannot read) is reported once per run as an error naming it and the limit, the
rules see the engine without it, and a section whose pre-image it is is judged
in fragment mode ("unreadable"); an unexpected failure inside one file section
is an error naming the patch and the section's line, and that section falls
back to fragment mode while the other sections keep their exact results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import os

from patchaudit.model.findings import FileError
from patchaudit.engine.sources import EngineError, EngineSource, detect_strip, map_path, open_engine
from patchaudit.units import LineInfo, PythonUnit, TextUnit
from patchaudit.engine.symbols import EngineIndex, FuncInfo, ModuleIndex, index_module, parse_python


@dataclass
class HunkRecord:
    patch: str
    patch_line: int              # the hunk's "@@" line in the patch file
    section_path: str            # the path the patch names (without a/ b/)
    engine_path: str | None
    index: int
    # clean | offset | fuzz | failed | already-applied | missing-file | unreadable (the engine
    # file is over max-file-size or cannot be read) | malformed (the applier refuses the hunk)
    status: str
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
    #: what went wrong inside one section or hunk (the patch file and line named)
    errors: list[FileError] = field(default_factory=list)

    @property
    def hunks(self) -> list[HunkRecord]:
        return [h for s in self.sections for h in s.hunks]


class BoundedSource:
    """An engine source whose reads are bounded by the run's `max-file-size` and never
    raise: a file over the limit, or one the source cannot read (EngineError: over its
    own member cap, an I/O error), reads as None and is remembered with the error to
    report.  `take_errors()` hands each such error out once (the runner puts it on the
    result of the file being analysed; run_check drops the copies that other worker
    processes bring: each opens its own engines), so one bad engine file is one error
    of the run, and every rule and patch that would have read it goes on without it.

    Everything else is the wrapped source's (`__getattr__`)."""

    def __init__(self, source: EngineSource, max_bytes: int | None = None):
        self._source = source
        self.max_bytes = max_bytes
        self._refused: dict[str, FileError] = {}
        self._taken: set[str] = set()

    def __getattr__(self, name: str):
        if name.startswith("__") or name == "_source":   # copy/pickle probe before __init__
            raise AttributeError(name)
        return getattr(self._source, name)

    def __repr__(self) -> str:
        return f"<bounded {self._source!r}>"

    @property
    def wrapped(self) -> EngineSource:
        return self._source

    def where(self, what: str) -> str:
        """The engine file as an error names it: a real path for a directory engine."""
        src = self._source
        if src.kind == "directory":
            return os.path.join(src.label, what)
        return f"{src.label}:{what}"

    def _refuse(self, key: str, what: str, message: str) -> None:
        if key not in self._refused:
            self._refused[key] = FileError(self.where(what), message)

    def _bounded(self, key: str, what: str, read) -> bytes | None:
        if key in self._refused:
            return None
        try:
            data = read()
        except EngineError as exc:
            self._refuse(key, what, f"engine file not read: {exc}")
            return None
        if data is not None and self.max_bytes is not None and len(data) > self.max_bytes:
            self._refuse(key, what, f"engine {self._source.name!r} file is {len(data)} bytes, over the limit of "
                                    f"{self.max_bytes} (max-file-size): not read, the rules see the engine "
                                    f"without it")
            return None
        return data

    def read_bytes(self, path: str) -> bytes | None:
        return self._bounded(path, path, lambda: self._source.read_bytes(path))

    def read_text(self, path: str) -> str | None:
        data = self.read_bytes(path)
        return None if data is None else data.decode("utf-8", "surrogateescape")

    def blob(self, sha_prefix: str, path: str | None = None) -> bytes | None:
        # named by its path: the same file met again through its path is the same error
        what = path or f"blob {sha_prefix}"
        return self._bounded("blob:" + str(sha_prefix), what, lambda: self._source.blob(sha_prefix))

    def refused(self, path: str | None = None, blob: str | None = None) -> bool:
        """Whether the file (or the blob) was refused: it exists but was not read."""
        return (path is not None and path in self._refused) or (blob is not None and "blob:" + blob in self._refused)

    def take_errors(self) -> list[FileError]:
        out = [e for k, e in self._refused.items() if k not in self._taken]
        self._taken.update(self._refused)
        return out


def _refused(source, path: str | None = None, blob: str | None = None) -> bool:
    check = getattr(source, "refused", None)
    return bool(check(path, blob)) if callable(check) else False


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
                from patchaudit.engine.symbols import dotted_name  # noqa: F401

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
    def open(cls, specs, max_file_size: int | None = None) -> "EngineSet":
        """Open every engine of the run; their reads are bounded by `max_file_size`
        and never raise (BoundedSource)."""
        opened = []
        for spec in specs:
            opened.append((BoundedSource(open_engine(spec.source, name=spec.name), max_file_size), spec.strip))
        return cls(opened)

    def take_errors(self) -> list[FileError]:
        """Engine files refused since the last call (each once): see BoundedSource."""
        out: list[FileError] = []
        for src, _ in self.engines:
            take = getattr(src, "take_errors", None)
            if callable(take):
                out.extend(take())
        return out

    def _index(self, k: int) -> EngineIndex:
        if k not in self._indexes:
            self._indexes[k] = EngineIndex(self.engines[k][0])
        return self._indexes[k]

    def contexts(self) -> list[EngineContext]:
        """Every engine of the run as plain Python files see it (strip 0); each
        context knows its set (`engine_set`), so a rule can pick the engine
        that has a given package (monkey-patches, patchaudit/analysis/monkeypatch.py)."""
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


def _blob(source, sha: str, path: str | None) -> bytes | None:
    if isinstance(source, BoundedSource):
        return source.blob(sha, path)
    return source.blob(sha)


def _read_original(ctx: EngineContext, section) -> tuple[str | None, str | None, bool]:
    """(pre-image text, engine path it came from, refused): `refused` when the engine
    has the file but it was not read (over max-file-size, unreadable: BoundedSource)."""
    src_path = ctx.engine_path(section.source_path) if section.source_path else None
    path = src_path or ctx.engine_path(section.raw_path)
    # bump compares two revisions of one repository: there the file at the
    # revision counts, not the pre-image blob the index line names
    if getattr(ctx, "use_index_blob", True) and section.index and not set(section.index[0]) <= {"0"}:
        blob = _blob(ctx.source, section.index[0], path)
        if blob is not None:
            return blob.decode("utf-8", "surrogateescape"), path, False
        if _refused(ctx.source, blob=section.index[0]):
            return None, path, True    # the named pre-image is too large: not another version instead
    if path is None:
        return None, None, False
    text = ctx.source.read_text(path)
    return text, path, text is None and _refused(ctx.source, path)


def hunk_defect(hunk) -> str | None:
    """Why the applier (like GNU patch, "malformed patch") refuses a hunk, or None."""
    if not any(l.kind in "+-" for l in hunk.lines):
        return "has no added or removed line"
    old = sum(1 for l in hunk.lines if l.kind != "+")
    new = sum(1 for l in hunk.lines if l.kind != "-")
    if old != hunk.source_length or new != hunk.target_length:
        return (f"has {old} old and {new} new lines where its header says "
                f"-{hunk.source_start},{hunk.source_length} +{hunk.target_start},{hunk.target_length}")
    return None


def exact_units(patch, ctx: EngineContext, report_path: str):
    """Units of a patch in exact mode: (python units, text units, ExactResult).

    Each file section is judged on its own: a failure inside one (reported in
    `ExactResult.errors` with the section's line) leaves it to fragment mode and
    the other sections as they are."""
    from patchaudit.inputs.discover import classify

    result = ExactResult(ctx.label, ctx.source.name, ctx.strip, ctx.prefix)
    py: list[PythonUnit] = []
    text_units: list[TextUnit] = []
    # a file changed by two sections of one patch: the second applies to the first's result,
    # as GNU patch does
    patched_so_far: dict[str, tuple[str, str | None]] = {}
    problem_lines = {p.line for p in getattr(patch, "problems", ())}
    for section in patch.sections:
        if section.is_binary:
            continue
        try:
            target = ctx.engine_path(section.target_path or section.rename_to and ("b/" + section.rename_to)
                                     or section.raw_path) or section.path
        except Exception:   # never lose the section over its name (map_path is not known to raise)
            target = section.path
        rec = SectionRecord(section, target)
        result.sections.append(rec)
        kind = "python" if section.is_python else classify(section.path)
        if not section.hunks:
            continue
        sec_py: list[PythonUnit] = []
        sec_text: list[TextUnit] = []
        try:
            _exact_section(patch, ctx, report_path, section, rec, target, kind, patched_so_far,
                           problem_lines, result, sec_py, sec_text)
        except Exception as exc:  # one section's failure never costs the others (RecursionError too)
            import traceback

            tb = traceback.extract_tb(exc.__traceback__)[-1]
            result.errors.append(FileError(
                report_path, f"internal error in exact mode on the file section for {section.path}: {exc!r} "
                             f"at {os.path.basename(tb.filename)}:{tb.lineno}; its hunks were checked "
                             f"without the engine", section.header_line))
            rec.hunks, rec.missing, rec.syntax_error, rec.patched_text = [], False, None, None
            sec_py, sec_text = [], []
            try:
                _fallback_units(patch, section, section.hunks, report_path, kind, sec_py, sec_text, ctx)
            except Exception:
                sec_py, sec_text = [], []
        py.extend(sec_py)
        text_units.extend(sec_text)
    return py, text_units, result


def _exact_section(patch, ctx: EngineContext, report_path: str, section, rec: SectionRecord, target: str,
                   kind, patched_so_far: dict, problem_lines: set[int], result: ExactResult,
                   py: list, text_units: list) -> None:
    """One file section in exact mode: its hunk records and units (appended to `py`/`text_units`)."""
    from patchaudit.inputs.discover import PATCH, PYTHON
    from patchaudit.patching.apply import apply_hunks, split_lines

    # hunks the applier refuses are left out; the others apply as GNU patch would apply them
    good = []
    records: dict[int, HunkRecord] = {}
    for h in section.hunks:
        defect = hunk_defect(h)
        if defect is None:
            good.append(h)
            continue
        records[h.index] = HunkRecord(report_path, h.header_line, section.path, target, h.index, "malformed",
                                      engine=ctx.label)
        if h.header_line not in problem_lines:   # PA301 reports what the patch reader found
            result.errors.append(FileError(report_path, f"hunk #{h.index + 1} {defect}: not applied "
                                                        f"(GNU patch refuses it as malformed)", h.header_line))

    def finish_records() -> None:
        rec.hunks = [records[k] for k in sorted(records)]

    if not good:
        finish_records()
        return
    if section.is_new and section.source_path is None:
        original, orig_path = "", target
        try:
            existing = ctx.source.read_text(target) if target else None
        except EngineError:
            existing = None
        if existing is not None:
            # the patch creates a file the engine already has (GNU patch asks "Assume -R?")
            post = "\n".join(l.text for h in good for l in h.post_image)
            same = existing.rstrip("\n") == post.rstrip("\n")
            for h in good:
                records[h.index] = HunkRecord(report_path, h.header_line, section.path, target, h.index,
                                              "already-applied" if same else "failed", line=1, engine=ctx.label)
            finish_records()
            if not same:
                _fallback_units(patch, section, good, report_path, kind, py, text_units, ctx)
            return
        refused = False
    else:
        source_key = ctx.engine_path(section.source_path) if section.source_path else target
        refused = False
        if source_key in patched_so_far:
            original, orig_path = patched_so_far[source_key]
        else:
            try:
                original, orig_path, refused = _read_original(ctx, section)
            except EngineError as exc:   # an engine source that raises (not a BoundedSource)
                result.errors.append(FileError(report_path, f"engine file not read: {exc}", section.header_line))
                original, orig_path, refused = None, None, True
    if original is None:
        rec.missing = not refused
        for h in good:
            records[h.index] = HunkRecord(report_path, h.header_line, section.path, target, h.index,
                                          "unreadable" if refused else "missing-file", engine=ctx.label)
        finish_records()
        _fallback_units(patch, section, good, report_path, kind, py, text_units, ctx)
        return
    rec.original_text = original
    lines, eol = split_lines(original)
    applied = apply_hunks(lines, [h.to_spec() for h in good], ends_with_newline=eol)
    orig_index = index_module(orig_path or target, original) if kind == PYTHON else None
    for h, r in zip(good, applied.hunks):
        # the symbol around the hunk's first change (not its leading context), looked up
        # in the original (r.line is in patched-file coordinates)
        lead = next((k for k, l in enumerate(h.lines) if l.kind != " "), 0)
        if lead and h.lines[lead].kind == "+":
            lead -= 1      # an insertion: the line it follows
        at = (r.source_line or r.line or h.source_start) + lead
        symbol = orig_index.symbol_at(at) if orig_index else None
        records[h.index] = HunkRecord(report_path, h.header_line, section.path, target, h.index, r.status,
                                      r.offset, r.fuzz, r.line, r.nearest, symbol, ctx.label,
                                      source_line=r.source_line)
    finish_records()
    failed = [h for h, r in zip(good, applied.hunks) if r.status == "failed"]
    if section.is_deleted:
        return
    patched = "\n".join(applied.lines) + ("\n" if applied.ends_with_newline and applied.lines else "")
    rec.patched_text = patched
    patched_so_far[target] = (patched, target)
    lines_map: dict[int, LineInfo] = {}
    judged: set[int] = set()
    hunk_of: dict[int, Any] = {}
    changed_idx = [_changed_hunk_lines(h) for h in good]
    for line_no, (hi, li) in applied.origin.items():
        h = good[hi]
        hl = h.lines[li]
        is_changed = li in changed_idx[hi]
        lines_map[line_no] = LineInfo(hl.patch_line, 1, line_no, is_changed)
        hunk_of[line_no] = h
        if is_changed:
            judged.add(line_no)
    if kind == PYTHON:
        from patchaudit.inputs.pyast import over_limit

        # over max-parse-size: never parsed (not a syntax error); the runner reports the unit
        too_large = over_limit(patched) is not None
        patched_tree = None if too_large else parse_python(patched)
        if patched_tree is None and not too_large:
            if orig_index is not None and orig_index.tree is not None:   # the patch broke it
                rec.syntax_error = _syntax_error(patched, lines_map)
            _fallback_units(patch, section, good, report_path, kind, py, text_units, ctx)
            return
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


def _fallback_units(patch, section, hunks, report_path, kind, py, text_units, ctx) -> None:
    """Fragment-mode units for hunks exact mode cannot place (failed, missing file)."""
    from patchaudit.inputs.discover import PATCH, PYTHON
    from patchaudit.pipeline.runner import hunk_text_unit
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
