"""Module indexes shared by every engine view of a process, keyed by content.

One run reads the same engine file through several views: `check` through each
patch's engine context (and the original of every patched section), `bump` through
OLD, NEW and NEW with the patches applied (`OverlaySource`), where most files are
the same text in all three.  `ast` parsing and indexing a module is a pure function
of (path, module name, text), so its `ModuleIndex` is kept here under those and
handed to every view that reads the same text: an engine file unchanged between
two versions, or not touched by any patch, is parsed once per process.

The store holds its indexes weakly: an index lives as long as a view (an
`EngineIndex`, a unit) keeps it, plus the last `RECENT` indexed (a section's
pre-image is indexed just before the engine's view of the same file asks for it),
so the store adds little memory of its own.  A
`ModuleIndex` is never changed after `index_module` built it (its lazily computed
spans and calls by name, `symbols.calls_by_name`, depend on the tree only), so
sharing it is sound.  `STATS` and `INDEXED` count parses and re-uses (tests count
them: no timings); `ENABLED = False` switches the sharing off.
"""

from __future__ import annotations

import ast
import hashlib
import weakref
from collections import Counter, deque

from patchaudit.engine.definitions import ModuleIndex, index_module

#: share indexes while this is True (tests switch it off to compare)
ENABLED = True
#: indexes kept alive by the store itself, the most recent ones
RECENT = 16
#: "indexed": modules parsed and indexed here; "shared": look-ups answered from the store
STATS = {"indexed": 0, "shared": 0}
#: how often each path was parsed and indexed here
INDEXED: Counter[str] = Counter()

_STORE: "weakref.WeakValueDictionary[tuple[str, str | None, bytes], ModuleIndex]" = weakref.WeakValueDictionary()
_RECENT: deque[ModuleIndex] = deque(maxlen=RECENT)


def text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=20).digest()


def shared_index(path: str, text: str, module: str | None = None, tree: ast.Module | None = None) -> ModuleIndex:
    """`index_module(path, text, module, tree)`, built once per (path, module, text) while
    some view keeps it."""
    key = (path, module, text_key(text)) if ENABLED else None
    got = _STORE.get(key) if key is not None else None
    if got is not None:
        STATS["shared"] += 1
        return got
    mod = index_module(path, text, module, tree)
    STATS["indexed"] += 1
    INDEXED[path] += 1
    if key is not None:
        _STORE[key] = mod
        _RECENT.append(mod)
    return mod


def clear() -> None:
    """Forget every shared index (tests; a long-lived process between runs)."""
    _STORE.clear()
    _RECENT.clear()
    INDEXED.clear()
