"""An engine as a patch of a recipe's set sees it: with the set's earlier patches applied.

A recipe applies its patches one after the other to one checkout (`for p in a.patch
b.patch; do git apply $p; done`): `b.patch` is written on, and applied to, the engine
with `a.patch` in it.  `apply_stack` plays a set in memory with the recipe's command
(patching/build.py: `git apply` places hunks without fuzz, and a patch with a hunk that
does not apply is applied not at all; GNU `patch` applies what it can, with fuzz): the
files the patches leave, and for each patch whether it applied and where it failed.
`StackedSource` wraps an engine source and answers a file read with that file as the
set's earlier patches leave it; every other read is the engine's own.  Blobs named by
`index` lines are not used: the build patches the checkout's files.  The fixes of
`--fix` are verified against the same play of the whole set (pipeline/fix_stack.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, cast

from patchaudit.engine.sources import map_path
from patchaudit.patching.appliers import DEFAULT_APPLIER, Applier

if TYPE_CHECKING:  # pragma: no cover
    from patchaudit.engine.sources import EngineSource

#: earlier patches of a set one patch is stacked on (a longer set: the first ones only)
MAX_STACK = 64


@dataclass
class StackStep:
    """One patch of a set as the build's command applies it."""

    patch: Any  # PatchFile
    applied: bool  # every hunk applied (git apply: else nothing of the patch is)
    failure: str | None = None  # where it first fails: "hunk #2 of python/x.py (failed)"


def apply_stack(
    read: Callable[[str], bytes | None], patches: list, strip: int, prefix: str, applier: Applier = DEFAULT_APPLIER
) -> tuple[dict[str, bytes | None], list[StackStep]]:
    """`patches` applied in order by `applier` to the files `read(engine path)` gives:
    (the files they changed, as bytes or None for deleted; one StackStep per patch)."""
    files: dict[str, bytes | None] = {}
    steps: list[StackStep] = []
    for patch in patches:
        trial = dict(files)
        failure = None
        for section in patch.sections:
            if section.is_binary or not section.hunks:
                continue
            got = _apply_section(read, trial, section, strip, prefix, applier)
            failure = failure or got
        if failure is None or not applier.all_or_nothing:
            files = trial
        steps.append(StackStep(patch, failure is None, failure))
    return files, steps


def _apply_section(read, files: dict, section, strip: int, prefix: str, applier: Applier) -> str | None:
    """One file section applied to `files` (updated); where it fails, or None."""
    from patchaudit.patching.apply import split_lines
    from patchaudit.patching.build import build_apply
    from patchaudit.units.exact import hunk_defect

    raw = section.target_path or section.raw_path
    path = map_path(raw, strip, prefix) if raw else None
    if path is None:
        return None
    src_raw = section.source_path
    src = map_path(src_raw, strip, prefix) if src_raw else path
    src = src or path
    data = files[src] if src in files else read(src)
    if data is None and not section.is_new:
        return f"{section.path}: no such file"
    text = "" if data is None else data.decode("utf-8", "surrogateescape")
    lines, eol = split_lines(text)
    specs = [h.to_spec() for h in section.hunks if hunk_defect(h) is None]
    applied, _ = build_apply(applier, lines, specs, eol, lambda: None)
    bad = next((r for r in applied.hunks if r.status in ("failed", "already-applied")), None)
    failure = f"hunk #{bad.index + 1} of {section.path} ({bad.status})" if bad is not None else None
    if section.is_deleted:
        files[path] = None
        return failure
    out = "\n".join(applied.lines) + ("\n" if applied.ends_with_newline and applied.lines else "")
    files[path] = out.encode("utf-8", "surrogateescape")
    if src != path:
        files[src] = None  # a rename
    return failure


class StackedSource:
    def __init__(self, source: Any, earlier: list, strip: int, prefix: str, applier: Applier = DEFAULT_APPLIER):
        self._source = source
        self._earlier = earlier[-MAX_STACK:]  # PatchFile objects, in the order applied
        self._strip = strip
        self._prefix = prefix
        self._applier = applier
        self._files: dict[str, bytes | None] | None = None
        self.steps: list[StackStep] = []

    def __getattr__(self, name: str):
        if name.startswith("__") or name == "_source":
            raise AttributeError(name)
        return getattr(self._source, name)

    def _stacked(self) -> dict[str, bytes | None]:
        if self._files is None:
            self._files, self.steps = apply_stack(
                self._source.read_bytes, self._earlier, self._strip, self._prefix, self._applier
            )
        return self._files

    def read_bytes(self, path: str) -> bytes | None:
        files = self._stacked()
        return files[path] if path in files else self._source.read_bytes(path)

    def read_text(self, path: str) -> str | None:
        data = self.read_bytes(path)
        return None if data is None else data.decode("utf-8", "surrogateescape")

    def has(self, path: str) -> bool:
        files = self._stacked()
        return files[path] is not None if path in files else self._source.has(path)

    def blob(self, sha_prefix: str, path: str | None = None) -> bytes | None:
        return None  # the build patches the checkout's files, not the index lines' blobs


def stacked_context(ctx: Any, earlier_paths: list[str], applier: Applier, limit: int) -> Any:
    """`ctx` (an EngineContext) with the earlier patches of its set applied; `ctx` itself
    when there are none (or none can be read)."""
    from patchaudit.files.reader import read_bytes
    from patchaudit.inputs.patches import read_patch
    from patchaudit.units.engines import EngineContext

    patches = []
    for p in earlier_paths:
        try:
            patches.append(read_patch(p, read_bytes(p, limit)))
        except Exception:  # unreadable: the per-file pass reports it; stack the others
            continue
    if not patches:
        return ctx
    source = cast("EngineSource", StackedSource(ctx.source, patches, ctx.strip, ctx.prefix, applier))
    out = EngineContext(source, ctx.strip, ctx.prefix, ctx.index)
    out.engine_set = ctx.engine_set
    out.engine_index = ctx.engine_index
    return out
