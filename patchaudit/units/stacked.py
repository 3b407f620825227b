"""An engine as a patch of a recipe's set sees it: with the set's earlier patches applied.

A recipe applies its patches one after the other to one checkout (`for p in a.patch
b.patch; do git apply $p; done`): `b.patch` is written on, and applied to, the engine
with `a.patch` in it.  `StackedSource` wraps an engine source and answers a file read
with that file after the earlier patches of the set (in the recipe's order,
pipeline/plan.py) have been applied to it in memory, by the same applier (hunks that
do not apply are left out, as the file would be if the build went on); every other
read is the engine's own.  Blobs named by `index` lines are not used: the build patches
the checkout's files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from patchaudit.engine.sources import map_path

if TYPE_CHECKING:  # pragma: no cover
    from patchaudit.engine.sources import EngineSource

#: earlier patches of a set one patch is stacked on (a longer set: the first ones only)
MAX_STACK = 64


class StackedSource:
    def __init__(self, source: Any, earlier: list, strip: int, prefix: str, max_fuzz: int = 0):
        self._source = source
        self._earlier = earlier[-MAX_STACK:]  # PatchFile objects, in the order applied
        self._strip = strip
        self._prefix = prefix
        self._max_fuzz = max_fuzz
        self._cache: dict[str, bytes | None] = {}

    def __getattr__(self, name: str):
        if name.startswith("__") or name == "_source":
            raise AttributeError(name)
        return getattr(self._source, name)

    def _sections_for(self, path: str) -> list:
        out = []
        for patch in self._earlier:
            for section in patch.sections:
                if section.is_binary or not section.hunks:
                    continue
                raw = section.target_path or section.raw_path
                if raw and map_path(raw, self._strip, self._prefix) == path:
                    out.append(section)
        return out

    def read_bytes(self, path: str) -> bytes | None:
        if path in self._cache:
            return self._cache[path]
        from patchaudit.patching.apply import apply_hunks, split_lines

        data = self._source.read_bytes(path)
        sections = self._sections_for(path)
        if sections:
            text = "" if data is None else data.decode("utf-8", "surrogateescape")
            for section in sections:
                if data is None and not section.is_new:
                    break
                lines, eol = split_lines(text)
                applied = apply_hunks(
                    lines, [h.to_spec() for h in section.hunks], ends_with_newline=eol, max_fuzz=self._max_fuzz
                )
                if section.is_deleted:
                    text, data = "", None
                    continue
                text = "\n".join(applied.lines) + ("\n" if applied.ends_with_newline and applied.lines else "")
                data = text.encode("utf-8", "surrogateescape")
        self._cache[path] = data
        return data

    def read_text(self, path: str) -> str | None:
        data = self.read_bytes(path)
        return None if data is None else data.decode("utf-8", "surrogateescape")

    def has(self, path: str) -> bool:
        return self._source.has(path) or self.read_bytes(path) is not None

    def blob(self, sha_prefix: str, path: str | None = None) -> bytes | None:
        return None  # the build patches the checkout's files, not the index lines' blobs


def stacked_context(ctx: Any, earlier_paths: list[str], max_fuzz: int, limit: int) -> Any:
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
    source = cast("EngineSource", StackedSource(ctx.source, patches, ctx.strip, ctx.prefix, max_fuzz))
    out = EngineContext(source, ctx.strip, ctx.prefix, ctx.index)
    out.engine_set = ctx.engine_set
    return out
