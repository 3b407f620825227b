"""A fix to a patch of a recipe's set is verified against the whole set before it is written.

The build applies a set in order (`for p in a.patch b.patch c.patch; do git apply $p`):
a fix of `b.patch` (PA202's refresh, PA208's drop of an applied hunk, PA101's edit of an
added line) is computed on the engine as the build has it at `b.patch` (the run's scope
stacks `a.patch` under it: units/stacked.py), and it must leave every patch of the set
applying as it applied before: `c.patch` may be written on lines `b.patch` adds.
`stack_breaks` plays the set in memory with the recipe's command (`apply_stack`: `git
apply` semantics when the recipe uses git apply), once with the files as they are and
once with the fixed texts, and says which patch the fix would break, or None.
"""

from __future__ import annotations

import os
from typing import Any


def stack_of(path: str, scope: dict) -> tuple[list[str], tuple] | None:
    """(the set's patches in the order applied, the scope entry of its last) for the set
    `path` (absolute) is in; None when it is in no set of two or more patches."""
    best: tuple[list[str], tuple] | None = None
    for p, entry in scope.items():
        if entry[0] != "engine":
            continue
        earlier = list(entry[3]) if len(entry) > 3 else []
        if p == path or path in earlier:
            chain = [*earlier, p]
            if best is None or len(chain) > len(best[0]):
                best = (chain, entry)
    return best if best is not None and len(best[0]) > 1 else None


def stack_breaks(path: str, texts: dict[str, str], settings: Any, engines: Any) -> str | None:
    """Why the fixed `texts` (absolute path -> new text; `path` among them) break the set
    `path` is in, or None (it applies as before, or `path` is in no set, or no engine)."""
    from patchaudit.files.reader import read_bytes
    from patchaudit.inputs.patches import read_patch
    from patchaudit.units.stacked import apply_stack

    found = stack_of(path, settings.patch_scope or {})
    if found is None or engines is None:
        return None
    chain, entry = found
    applier = entry[2]
    try:
        old = [read_patch(p, read_bytes(p, settings.max_file_size)) for p in chain]
        new = [
            read_patch(p, texts[p].encode("utf-8", "surrogateescape")) if p in texts else patch
            for p, patch in zip(chain, old)
        ]
        ctx = engines.for_patch(old[chain.index(path)], only=entry[1], index=entry[4] if len(entry) > 4 else None)
    except Exception as exc:  # an unreadable member: the set cannot be verified, so the fix is not written
        return f"its set could not be played to verify it ({exc!r})"
    if ctx is None:
        return None
    _, before = apply_stack(ctx.source.read_bytes, old, ctx.strip, ctx.prefix, applier)
    _, after = apply_stack(ctx.source.read_bytes, new, ctx.strip, ctx.prefix, applier)
    for p, was, now in zip(chain, before, after):
        if was.applied and not now.applied:
            whose = "the fixed patch" if p == path else f"the set's {os.path.relpath(p)}"
            return (
                f"{whose} would no longer apply with `{applier.describe()}` after the set's earlier "
                f"patches ({now.failure}): the build would stop there"
            )
    return None
