"""Progress bars on a terminal (stderr): one line, redrawn in place, cleared at the end.

`FileProgress` counts the files `patchaudit check` has finished; `ByteProgress`
the bytes `patchaudit tokens` has read.  Both are drawn only when the stream is a
terminal, and cleared (`clear()`) before other lines are printed.
"""

from __future__ import annotations

import os
import sys
from typing import IO

from patchaudit.model.escape import safe


class TerminalProgress:
    """A one-line progress bar on `stream`, drawn only when `enabled`."""

    def __init__(self, stream: IO[str], enabled: bool):
        self.stream = stream
        self.enabled = enabled
        self.shown = False

    def show(self, line: str) -> None:
        """Draw `line` (it starts with "\\r": it overwrites the bar drawn before)."""
        self.stream.write(line)  # output-safe: the callers' numbers, and notes escaped there
        self.stream.flush()
        self.shown = True

    def clear(self) -> None:
        if self.enabled and self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False


class FileProgress(TerminalProgress):
    """A progress bar on stderr for scans of many files, only when stderr is a terminal."""

    MIN_FILES = 50

    def __init__(self) -> None:
        super().__init__(sys.stderr, sys.stderr.isatty() and os.environ.get("TERM") != "dumb")
        self.done = 0

    def __call__(self, total: int) -> None:
        """Called once per finished file."""
        self.done += 1
        if not self.enabled or total < self.MIN_FILES:
            return
        if self.done % max(1, total // 200) and self.done != total:
            return
        width = 30
        fill = width * self.done // total
        self.show(f"\r[{'#' * fill}{'.' * (width - fill)}] {self.done}/{total} files")  # output-safe: numbers

    def close(self) -> None:
        self.clear()


class ByteProgress(TerminalProgress):
    """A one-line progress bar on a terminal (stderr); `clear()` before printing other lines."""

    WIDTH = 28

    def __init__(self, total: int, stream: IO[str], enabled: bool):
        super().__init__(stream, enabled)
        self.total = max(total, 1)
        self.done = 0
        self.note = ""

    def advance(self, n: int) -> None:
        self.done += n

    def render(self, note: str | None = None) -> None:
        if not self.enabled:
            return
        if note is not None:
            self.note = note
        frac = min(self.done / self.total, 1.0)
        fill = int(frac * self.WIDTH)
        mb = 1024 * 1024
        bar = (
            f"\r\x1b[K[{'#' * fill}{'-' * (self.WIDTH - fill)}] {frac * 100:5.1f}% "
            f"{self.done / mb:.1f}/{self.total / mb:.1f} MB  {safe(self.note)}"
        )
        self.show(bar)  # output-safe: numbers, and the note escaped
