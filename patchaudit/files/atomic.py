"""Writing a file patchaudit produces (a report, `--output FILE`, `--also FORMAT:FILE`, a
baseline): whole or not at all, and never through what the checkout put there.

The report goes to a temporary file created (`O_EXCL`, never through a symlink) in
FILE's folder, opened once (patchaudit/files/safefs.py), and is then renamed over
FILE relative to that folder's descriptor (`os.replace` with `src_dir_fd`/`dst_dir_fd`,
atomic on POSIX), so a failure at any point (a full disk, an error while
rendering, a kill) leaves FILE as it was and no temporary file behind; a reader
never sees a half-written report.

FILE's folder, when it lies below the current directory (the checkout, in CI), is
reached from there one folder at a time through no symlink: a committed
`reports -> /elsewhere` is refused, never written into.  What is at FILE decides
(`lstat`, no link followed):

* nothing, or a regular file: replaced as above (a regular file keeps its mode);
* a symlink: the link itself is replaced by the report, never written through: a
  checkout can commit `report.sarif -> /dev/sda`, or a link to a FIFO that would
  block the run for ever;
* standard output itself (`-`, or a path such as `/dev/stdout` that is the very file
  this process's standard output is): written there directly; so is the null device
  named as itself (`-o /dev/null`: discarded);
* anything else (a FIFO, a device, a socket, a folder): refused (`Refused`, an
  OSError naming FILE and what it is), nothing written.

The text is written as UTF-8; the reporters make sure it encodes
(patchaudit/model/escape.py), and anything that still would not is written
as a backslash escape rather than failing the run.
"""

from __future__ import annotations

import io
import os
import stat
import sys

from patchaudit.files.safefs import Folder, Refused, kind_name, open_folder, umask

#: the name that means standard output
STDOUT = "-"


def _is_stdout(path: str) -> bool:
    """`path` is this process's standard output (`-`, or the same open file: `/dev/stdout`)."""
    if path == STDOUT:
        return True
    try:
        fd = sys.stdout.fileno()
        return os.path.samestat(os.stat(path), os.fstat(fd))
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return False


def _is_null(path: str, seen: os.stat_result) -> bool:
    """`path` names the null device itself (not through a symlink): the user's "discard it"."""
    try:
        return stat.S_ISCHR(seen.st_mode) and os.path.samestat(seen, os.stat(os.devnull))
    except OSError:
        return False


def _stdout_raw() -> io.RawIOBase:
    try:
        return io.FileIO(os.dup(sys.stdout.fileno()), "wb")
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):  # a captured stdout (tests)
        return _Forward(sys.stdout)


class _Forward(io.RawIOBase):
    """Bytes forwarded to a text stream that has no descriptor."""

    def __init__(self, stream):
        self.stream = stream

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        data = bytes(b)
        buffer = getattr(self.stream, "buffer", None)
        if buffer is not None:
            buffer.write(data)
        else:
            self.stream.write(data.decode("utf-8", "backslashreplace"))
        return len(data)


def _open_target_folder(folder: str) -> Folder:
    """The folder of a report: below the current directory (the checkout, in CI) reached one
    folder at a time through no symlink (`-o reports/x.sarif` with a committed
    `reports -> /elsewhere` is refused, Refused naming it); elsewhere as the user wrote it."""
    cwd = os.getcwd()
    try:
        rel = os.path.relpath(folder, cwd)
    except ValueError:  # another drive
        rel = os.pardir
    if rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel):
        return open_folder(folder)
    return open_folder(cwd, [p for p in rel.split(os.sep) if p != os.curdir])


class AtomicFile(io.TextIOWrapper):
    """A text file that becomes `path` on `commit()` (or when its `with` block ends without an
    exception) and is removed on `discard()` (or an exception).  Refused (an OSError) when
    `path` is a FIFO, a device or any other file that is not regular (module docstring)."""

    def __init__(self, path: str):
        self.target = path
        self.tmp: str | None = None
        self.folder: Folder | None = None
        self.direct = _is_stdout(path)
        self._perm = 0o666 & ~umask()
        raw: io.RawIOBase
        if self.direct:
            raw = _stdout_raw()
        else:
            raw = self._open(path)
        super().__init__(raw, encoding="utf-8", errors="backslashreplace", newline="")  # type: ignore[arg-type]
        self._done = False

    def _open(self, path: str) -> io.RawIOBase:
        """The temporary file in FILE's folder (or the null device), after the checks."""
        folder_path, self._leaf = os.path.split(os.path.abspath(path))
        folder = _open_target_folder(folder_path)
        try:
            seen = folder.lstat(self._leaf)
            if seen is not None and _is_null(path, seen):
                folder.close()
                return io.FileIO(os.devnull, "wb")
            if seen is not None and not (stat.S_ISREG(seen.st_mode) or stat.S_ISLNK(seen.st_mode)):
                raise Refused(path, f"is {kind_name(seen.st_mode)}: not written")
            if seen is not None and stat.S_ISREG(seen.st_mode):
                self._perm = stat.S_IMODE(seen.st_mode)
            fd, self.tmp = folder.temp(".patchaudit-")
        except BaseException:
            folder.close()
            raise
        self.folder = folder
        return io.FileIO(fd, "wb")

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
                if hasattr(os, "fchmod"):
                    try:
                        os.fchmod(self.fileno(), self._perm)
                    except OSError:
                        pass
            self.close()
            if self.tmp is not None and self.folder is not None:
                self.folder.rename(self.tmp, self._leaf)
                self.tmp = None
        except BaseException:
            self._remove()
            raise
        finally:
            self._close_folder()

    def discard(self) -> None:
        if self._done:
            return
        self._done = True
        try:
            self.close()
        except OSError:
            pass
        self._remove()
        self._close_folder()

    def _remove(self) -> None:
        if self.tmp is not None and self.folder is not None:
            self.folder.unlink(self.tmp)
            self.tmp = None

    def _close_folder(self) -> None:
        if self.folder is not None:
            self.folder.close()
            self.folder = None

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
