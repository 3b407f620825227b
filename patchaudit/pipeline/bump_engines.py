"""The engine views of `patchaudit bump`: OLD and NEW as one patch sees them.

- `OverlaySource`: NEW with every patch of the set applied (in memory);
- `RevisionContext`: one engine version, read as released;
- `PairContext`: NEW as a patch sees it, carrying the OLD side (`.pair`), the
  engine context the engine-pair rules (PA203, PA204) read;
- `PatchPair`: one patch file applied to OLD and to NEW (exact mode), and what
  changed upstream under it (`patchaudit/analysis/upstream.py`).
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterable

from patchaudit.analysis.upstream import HunkChange, MissingFile
from patchaudit.engine.sources import EngineSource
from patchaudit.units.engines import EngineContext
from patchaudit.units.exact import ExactResult, HunkRecord, exact_units


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

    def __init__(self, audit: Any, patch, old_ctx: EngineContext | None, new_ctx: EngineContext):
        # audit: the run's `patchaudit.pipeline.bump_audit.BumpAudit`
        self.audit = audit
        self.patch = patch
        self.old_ctx = old_ctx
        self.new_ctx = new_ctx
        self._old: ExactResult | None = None
        self._new: ExactResult | None = None
        self._changes: list[MissingFile | HunkChange] | None = None
        self.changed_hunks: set[int] = set()  # header lines of hunks whose engine code changed

    @property
    def old_result(self) -> ExactResult | None:
        if self._old is None and self.old_ctx is not None:
            # OLD's hunk records and patched texts: no rule runs on OLD, so no units are built
            self._old = exact_units(self.patch, self.old_ctx, report_path=self.patch.path, records_only=True)[2]
        return self._old

    @property
    def new_result(self) -> ExactResult:
        if self._new is None:
            plain = RevisionContext(self.new_ctx.source, self.new_ctx.strip, self.new_ctx.prefix, self.new_ctx.index)
            self._new = exact_units(self.patch, plain, report_path=self.patch.path)[2]
        return self._new

    def offer_new_result(self, patch, ctx: EngineContext, result: ExactResult) -> None:
        """Exact mode on this pair's NEW context (the check pass, `analyse_file`) hands its
        result here: it is what `new_result` would compute again (same source, strip,
        prefix, no index blobs, GNU patch's defaults), so NEW is patched once."""
        if self._new is None and patch is self.patch and ctx is self.new_ctx:
            self._new = result

    def old_record(self, header_line: int) -> HunkRecord | None:
        res = self.old_result
        if res is None:
            return None
        return next((h for h in res.hunks if h.patch_line == header_line), None)

    def upstream_changes(self) -> list[MissingFile | HunkChange]:
        """What changed upstream under this patch (computed once, when PA203 asks)."""
        if self._changes is None:
            self._changes = self.audit.upstream_changes(self)
        return self._changes

    @property
    def changes_computed(self) -> bool:
        """True once `upstream_changes` ran (`changed_hunks` is then known)."""
        return self._changes is not None


class PairEngines:
    """What `analyse.analyse_file` takes as `engines`: one PairContext per patch."""

    pair = "engine-pair"  # the engine-pair rules run (run_rules.needs_met)

    def __init__(self, audit: Any):
        self.audit = audit

    def for_patch(self, patch) -> PairContext | None:
        return self.audit.pair_for(patch)
