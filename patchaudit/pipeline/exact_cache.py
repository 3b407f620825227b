"""The result cache in exact mode: what a patch's result depends on beyond its own content.

In exact mode (`--engine`) the result of a patch file depends on its content (the
per-file digest of `pipeline/cache.py`), the rules and the configuration (the run
key, which covers every setting: the engine specs and, once the plan is made, each
patch's scope: engine, applier and the earlier patches of its set), and on three
things outside the file:

- the engines' content: a wheel or sdist is identified by its path, size,
  modification time and inode (as the cache identifies its own code), a git
  revision by the commit it resolves to; a directory has no such identity (any
  file under it may change), so a run with a directory engine is not cached;
- the content of the earlier patches of each patch's set (`units/stacked.py`
  applies them first), read through the one guarded reader and digested;
- the engine files each patch reads: covered by the engine's identity.

`exact_run_key` is that part of the run key, or None: do not cache this run.
"""

from __future__ import annotations

import hashlib
from typing import Any


def _scope_digests(settings) -> list[tuple[str, str]] | None:
    """(path, content digest) of every earlier patch some patch of the run is stacked on."""
    from patchaudit.files.reader import ReadError, read_bytes

    earlier = sorted({p for entry in (settings.patch_scope or {}).values() if len(entry) > 3 for p in entry[3]})
    out = []
    for p in earlier:
        try:
            data = read_bytes(p, settings.max_file_size)
        except (ReadError, OSError):
            return None  # unreadable now: its patch's result is not reused
        out.append((p, hashlib.sha256(data).hexdigest()))
    return out


def exact_run_key(settings, engines: Any) -> str | None:
    """The part of the run key exact mode adds (see the module docstring), or None."""
    if engines is None:
        return None
    stamps: list[Any] = []
    for source, strip in engines.engines:
        identity = source.identity()
        if identity is None:
            return None
        stamps.append((source.name, strip, identity))
    scoped = _scope_digests(settings)
    if scoped is None:
        return None
    return hashlib.sha256(repr((stamps, scoped)).encode("utf-8", "surrogateescape")).hexdigest()
