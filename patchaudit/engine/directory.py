"""An engine source on disk: a checkout, an unpacked wheel, site-packages.

Files are read through the one guarded reader (`patchaudit.files.reader`):
regular files only, bounded by the member limit.
"""

from __future__ import annotations

import os
from typing import Iterable

from patchaudit.engine import limits
from patchaudit.engine.base import EngineError, EngineSource, fmt_size, norm_rel, within
from patchaudit.files.reader import ReadError, TooLarge, read_bytes

# directory


class DirectorySource(EngineSource):
    """Files on disk under a root directory (a checkout, an unpacked wheel,
    site-packages).  Symlinks are followed only while their target stays
    inside the root; ``.git``/``__pycache__`` and friends are not listed."""

    kind = "directory"

    def __init__(self, path: str, name: str = "engine", spec: str | None = None, only: str | None = None) -> None:
        """`only`: a folder of `path` (one component): the engine is that folder alone, seen
        from `path` (`--engine sglang=.../site-packages/sglang` reads `sglang/...`)."""
        if not os.path.isdir(path):
            raise EngineError(f"engine {name!r}: {path!r} is not a directory")
        self.root = os.path.realpath(path)
        self.only = only
        label = os.path.abspath(os.path.join(path, only) if only else path)
        super().__init__(name, spec if spec is not None else path, label)
        self.notes: list[str] = []

    def warnings(self) -> list[str]:
        return list(self.notes)

    def _list(self) -> Iterable[str]:
        out: list[str] = []
        # (relative prefix, real directory, real ancestors for cycle checks)
        start = os.path.realpath(os.path.join(self.root, self.only)) if self.only else self.root
        if self.only and not within(self.root, start):
            return out
        stack: list[tuple[str, str, tuple[str, ...]]] = [
            (self.only + "/" if self.only else "", start, (self.root, start) if self.only else (self.root,))
        ]
        while stack:
            rel, real, ancestors = stack.pop()
            try:
                it = os.scandir(real)
            except OSError as exc:
                self.skipped.append((rel or ".", f"unreadable directory: {exc.strerror}"))
                continue
            with it:
                for e in it:
                    if e.name in limits.SKIP_DIRS:
                        continue
                    relp = rel + e.name
                    try:
                        if e.is_symlink():
                            target = os.path.realpath(e.path)
                            if not within(self.root, target):
                                self.skipped.append((relp, "symlink leaves the engine root"))
                                continue
                            if self._in_skipped_dir(target):
                                continue
                            if os.path.isdir(target):
                                if any(within(target, a) for a in ancestors):
                                    self.skipped.append((relp, "symlink loop"))
                                    continue
                                stack.append((relp + "/", target, ancestors + (target,)))
                            elif os.path.isfile(target):
                                out.append(relp)
                            continue
                        if e.is_dir(follow_symlinks=False):
                            sub = os.path.join(real, e.name)
                            stack.append((relp + "/", sub, ancestors + (sub,)))
                        elif e.is_file(follow_symlinks=False):
                            out.append(relp)
                    except OSError as err:
                        self.skipped.append((relp, f"unreadable: {err.strerror}"))
                        continue
                    if len(out) > limits.MAX_DIR_FILES:
                        raise EngineError(
                            f"engine {self.name!r} ({self.label}): more than {limits.MAX_DIR_FILES} files"
                        )
        return out

    def _resolve(self, p: str) -> str | None:
        parts = p.split("/")
        if any(c in limits.SKIP_DIRS for c in parts) or (self.only and parts[0] != self.only):
            return None
        if self._fileset is not None:  # listed already: be exactly consistent
            if p not in self._fileset:
                return None
        full = os.path.realpath(os.path.join(self.root, *parts))
        if not within(self.root, full) or self._in_skipped_dir(full) or not os.path.isfile(full):
            return None
        return full

    def _in_skipped_dir(self, real: str) -> bool:
        """True if the real path lies under .git/, __pycache__/ ... of the root."""
        rel = os.path.relpath(real, self.root)
        return any(c in limits.SKIP_DIRS for c in rel.split(os.sep))

    def has(self, path: str) -> bool:
        p = norm_rel(path)
        return p is not None and self._resolve(p) is not None

    def _read(self, p: str) -> bytes | None:
        full = self._resolve(p)
        if full is None:
            return None
        try:
            return read_bytes(full, limits.MAX_MEMBER_BYTES)
        except TooLarge:
            raise EngineError(
                f"engine {self.name!r} ({self.label}): {p} is over the {fmt_size(limits.MAX_MEMBER_BYTES)} limit"
            ) from None
        except ReadError as e:  # the OS's reason when it has one; else what the guards refused (a FIFO...)
            why = e.cause.strerror if isinstance(e.cause, OSError) else e.reason
            raise EngineError(f"engine {self.name!r} ({self.label}): cannot read {p}: {why}") from e
