"""The engines of a run as patches and Python files see them.

`EngineSet` holds the run's engines (`--engine NAME=SOURCE`, repeatable), each
read through a `BoundedSource` (reads bounded by `max-file-size`, never
raising); `EngineContext` is one engine as one patch sees it (strip level,
path prefix, symbol index, call resolution for the rules).
"""

from __future__ import annotations

import functools
import os
from typing import Any

from patchaudit.engine.definitions import FuncInfo, ModuleIndex
from patchaudit.engine.shared import shared_index
from patchaudit.engine.sources import EngineError, EngineSource, detect_strip, map_path, open_named_engine
from patchaudit.engine.symbols import EngineIndex
from patchaudit.model.findings import FileError


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
        if name.startswith("__") or name == "_source":  # copy/pickle probe before __init__
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
            self._refuse(
                key,
                what,
                f"engine {self._source.name!r} file is {len(data)} bytes, over the limit of "
                f"{self.max_bytes} (max-file-size): not read, the rules see the engine "
                f"without it",
            )
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


class EngineContext:
    """One engine source as a patch sees it: strip level, symbol index, call resolution."""

    #: a section's pre-image is the blob its `index` line names, when the engine has it
    #: (bump's revision contexts read the file at their revision instead)
    use_index_blob = True
    #: bump: the patch's OLD/NEW pair (pipeline.bump_engines.PairContext sets it); None in a check
    pair: Any = None
    #: check: the run's EngineSet, on the contexts `EngineSet.contexts()` makes (monkey-patches)
    engine_set: Any = None
    #: check: which engine of the run's EngineSet this is (`for_patch`)
    engine_index: int | None = None

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
        cached = unit._module_index
        if cached is not None:
            return cached
        mod: ModuleIndex | None
        if unit.mode == "exact":
            mod = shared_index(  # the same patched text another view indexes: once (bump's overlay)
                unit.target_path or "",
                unit.text,
                self.source.module_name(unit.target_path or ""),
                tree=unit.patched_tree,
            )
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
        name = (
            func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else None)
        )
        if name is None:
            return None
        if class_name is None and unit.outer_symbol:
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
                from patchaudit.inputs.cst import dotted as cst_dotted  # libcst: imported here only

                dotted = cst_dotted(recv)
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


def unit_pair(unit) -> Any:
    """The OLD/NEW pair of a unit's engine context under `patchaudit bump` (`PairContext.pair`);
    None in a check run, for a unit without an engine, and for a text unit (which has none)."""
    engine = getattr(unit, "engine", None)  # TextUnit declares no engine
    return engine.pair if isinstance(engine, EngineContext) else None


class EngineSet:
    """The engines of a run (`--engine NAME=SOURCE`, repeatable)."""

    def __init__(self, engines: list[tuple[EngineSource, int | None]]):
        self.engines = engines
        self._indexes: dict[int, EngineIndex] = {}

    @classmethod
    def open(cls, specs, max_file_size: int | None = None) -> "EngineSet":
        """Open every engine of the run; their reads are bounded by `max_file_size`
        and never raise (BoundedSource)."""
        opened: list[tuple[Any, int | None]] = []  # BoundedSource wraps an EngineSource
        for spec in specs:
            # a known engine's name must name its package there (an error that says what was found)
            source = open_named_engine(spec.source, name=spec.name)
            opened.append((BoundedSource(source, max_file_size), spec.strip))
        return cls(opened)

    def take_errors(self) -> list[FileError]:
        """Engine files refused since the last call (each once): see BoundedSource."""
        out: list[FileError] = []
        for src, _ in self.engines:
            if isinstance(src, BoundedSource):
                out.extend(src.take_errors())
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

    def for_patch(self, patch, only: str | None = None, index: int | None = None) -> EngineContext | None:
        """The engine a patch is checked against: the one its paths match best, or, with
        `only` (the plan's engine name: pipeline/plan.py), that engine only; with `index`
        (the plan's engine of the patch's version), the run's engine `index` only.  None when
        the patch is another project's (`_foreign`): none of its files is in any engine
        and its paths name none of the engines' packages (slime's `megatron.patch`
        beside its SGLang patches, with only SGLang given)."""
        paths = [s.raw_path for s in patch.sections if s.raw_path and not s.is_binary]
        if not paths or not self.engines:
            return None
        best: tuple[int, int, int, str] | None = None  # (matches, -k, strip, prefix)
        for k, (src, strip) in enumerate(self.engines):
            if only is not None and src.name != only or index is not None and k != index:
                continue
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
        # both sides of each file: a target that climbs out of the tree (PA305) still comes
        # from the engine's package
        sides = paths + [s.source_path for s in patch.sections if s.source_path and not s.is_binary]
        if best is None or (best[0] == 0 and only is None and self._foreign(sides)):
            return None
        k = -best[1]
        ctx = EngineContext(self.engines[k][0], best[2], best[3], self._index(k))
        ctx.engine_index = k
        return ctx

    def _foreign(self, paths: list[str]) -> bool:
        """Whether no component of `paths` is a top-level folder of any engine (its
        package: `sglang` in a wheel; `python`, `sgl-kernel`... in a checkout).  A patch
        whose files all moved, or that only creates files, still names the package."""
        tops = self._tops
        return not any(part in tops for p in paths for part in p.replace("\\", "/").split("/"))

    @functools.cached_property
    def _tops(self) -> frozenset[str]:
        """The engines' top-level folders (their metadata folders left out)."""
        return frozenset(
            f.split("/", 1)[0]
            for src, _ in self.engines
            for f in src.files()
            if "/" in f and not f.split("/", 1)[0].endswith((".dist-info", ".data", ".egg-info"))
        )
