"""Progress bars on a terminal (stderr): one line, redrawn in place, cleared at the end.

`FileProgress` counts the files `patchaudit check` has finished (and names the last
patch, its engine and applier when the run takes over a second); `ByteProgress`
the bytes `patchaudit tokens` has read.  Both are drawn only when the stream is a
terminal, and cleared (`clear()`) before other lines are printed.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
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
    """A progress bar on stderr for scans of many files, or for any run that takes longer
    than a second (exact mode, bump: a few patches against a large engine), only when
    stderr is a terminal.  `note()` names what was finished last: the patch, its engine
    and the applier (`sglang.patch -> sglang 0.5.15.post1, git apply`)."""

    MIN_FILES = 50
    #: seconds after which a run of few files shows the bar too
    MIN_SECONDS = 1.0

    def __init__(self, stream: IO[str] | None = None, enabled: bool | None = None) -> None:
        stream = stream if stream is not None else sys.stderr
        if enabled is None:
            enabled = stream.isatty() and os.environ.get("TERM") != "dumb"
        super().__init__(stream, enabled)
        self.done = 0
        self.total = 0
        self.started = time.monotonic()
        self.text = ""

    def __call__(self, total: int) -> None:
        """Called once per finished file."""
        self.done += 1
        self.total = total
        if not self.enabled or (total < self.MIN_FILES and time.monotonic() - self.started < self.MIN_SECONDS):
            return
        if total >= self.MIN_FILES and self.done % max(1, total // 200) and self.done != total:
            return
        self.draw()

    def note(self, text: str) -> None:
        """What was finished last (drawn with the bar, escaped)."""
        self.text = text
        if self.enabled and self.shown:
            self.draw()

    def draw(self) -> None:
        total = max(self.total, self.done, 1)
        width = 30
        fill = width * min(self.done, total) // total
        note = f"  {safe(self.text)}" if self.text else ""
        columns = shutil.get_terminal_size((100, 20)).columns
        line = f"[{'#' * fill}{'.' * (width - fill)}] {self.done}/{total} files{note}"
        self.show("\r\x1b[K" + line[: max(columns - 1, 20)])  # output-safe: numbers, and the note escaped

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
