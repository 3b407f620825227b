"""Writing a file patchaudit produces (a report, `--output FILE`, a baseline): whole or not at all.

The report goes to a temporary file in the same folder, which is then renamed
over FILE (`os.replace`, atomic on POSIX and Windows), so a failure at any
point (a full disk, an error while rendering, a kill) leaves FILE as it was and
no temporary file behind; a reader never sees a half-written report.  FILE
itself is replaced: if it is a symlink, the link is replaced, not the file it
points to.  FILE that exists and is not a regular file (`/dev/stdout`, a FIFO)
is written directly, since it cannot be replaced.

The text is written as UTF-8; the reporters make sure it encodes
(patchaudit/model/escape.py), and anything that still would not is written
as a backslash escape rather than failing the run.
"""

from __future__ import annotations

import io
import os
import stat
import tempfile


def _mode_for(path: str) -> int:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def _special(path: str) -> bool:
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


class AtomicFile(io.TextIOWrapper):
    """A text file that becomes `path` on `commit()` (or when its `with` block ends without an
    exception) and is removed on `discard()` (or an exception)."""

    def __init__(self, path: str):
        self.target = path
        self.direct = _special(path)
        if self.direct:
            self.tmp = None
            raw = open(path, "wb")
        else:
            folder = os.path.dirname(os.path.abspath(path))
            fd, self.tmp = tempfile.mkstemp(prefix=".patchaudit-", suffix=".tmp", dir=folder)
            raw = os.fdopen(fd, "wb")
        super().__init__(raw, encoding="utf-8", errors="backslashreplace", newline="")
        self._done = False

    def commit(self) -> None:
        if self._done:
            return
        self._done = True
        try:
            self.flush()
            if self.tmp is not None:
                try:
                    os.fsync(self.fileno())
                except OSError:
                    pass
            self.close()
            if self.tmp is not None:
                if os.name != "nt":
                    try:
                        os.chmod(self.tmp, _mode_for(self.target))
                    except OSError:
                        pass
                os.replace(self.tmp, self.target)
        except BaseException:
            self._remove()
            raise

    def discard(self) -> None:
        if self._done:
            return
        self._done = True
        try:
            self.close()
        except OSError:
            pass
        self._remove()

    def _remove(self) -> None:
        if self.tmp is not None:
            try:
                os.unlink(self.tmp)
            except OSError:
                pass

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.commit()
        else:
            self.discard()
        return False


def write_atomic(path: str, text: str) -> None:
    """Write `text` to `path`, whole or not at all (raises OSError, leaving `path` as it was)."""
    with AtomicFile(path) as fh:
        fh.write(text)
