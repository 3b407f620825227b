"""The one reader: every file patchaudit opens goes through this module.

A checked-out repository is someone else's data.  Whatever a command opens --
patches, Python and text sources, `pyproject.toml`, `.gitignore`, quilt
`series` files, baselines, tokenizers, recorded JSONL rollouts, the rule index
and cache files -- is read here, with the same guards:

* only regular files are opened.  A FIFO would block the run forever, a device
  such as `/dev/zero` never ends, a socket cannot be read: each is refused with
  a `ReadError` that names the path, before it is opened.  The file is opened
  with `O_NONBLOCK` and checked again with `fstat` on the open descriptor, so a
  path swapped for a FIFO between the two checks cannot block either;
* a dangling symlink and a symlink loop are errors that say so, not silent
  skips;
* `root`, when given, confines the read: a path whose real location lies
  outside that folder (through a symlink) is refused;
* every read is bounded by `limit` bytes, also when the file grows while it is
  read, and so is the output of a decompressing reader (`.gz`, `.bz2`, `.xz`):
  a small archive that inflates to gigabytes stops at the limit.

The engine sources (a folder, a wheel, an sdist) open their files here too:
`open_regular` with no size bound gives them a guarded, seekable file of an
archive, `decompressing` and `BoundedStream` the bounded decompression of an
sdist, which raises the engine's own error past its budget (`too_much`) and
lets the decompressor's errors through unchanged (`wrap_errors=False`).

Callers catch `ReadError` and report it as an error of the file (exit code 2);
the rest of the run goes on.  Nothing here writes.

Within `reading_once()` (a run: `check`, `bump`, the language server's analysis of a
change) `read_bytes` reads each file once: its bytes (or the error) are kept for the
rest of the run, so the whole-repository pre-pass, the scan and the patch-set rules
share one read instead of each opening the file again.  A read with a larger
`limit` than a kept refusal for size reads again; a kept file larger than a
caller's `limit` is refused to that caller as a fresh read would be.
"""

from __future__ import annotations

import bz2
import errno
import gzip
import io
import lzma
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO

from patchaudit.files.observe import note

#: the default bound of one read (the `max-file-size` setting's default)
DEFAULT_LIMIT = 64 * 1024 * 1024

_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)

_KIND = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


class ReadError(OSError):
    """A file that is not read, with the reason; `str()` is `path: reason`."""

    def __init__(self, path: str, reason: str, line: int | None = None, *, cause: BaseException | None = None):
        super().__init__(reason)
        self.path = path
        self.reason = reason
        self.line = line
        #: the error of the operating system or of the decompressor behind this one, if any
        self.cause = cause

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.reason}"


class TooLarge(ReadError):
    """A file (or what it decompresses to) over the limit of the read."""


def kind_of(mode: int) -> str | None:
    """What a non-regular file is ("a FIFO (named pipe)", ...), None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return _KIND.get(stat.S_IFMT(mode), "not a regular file")


def _os_reason(path: str, exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symlink loop: not read"
    if exc.errno == errno.ENOENT and os.path.islink(path):
        return f"dangling symlink (-> {os.readlink(path)}): not read"
    return f"cannot read: {exc.strerror or exc}"


def check_regular(path: str, root: str | None = None) -> os.stat_result:
    """The `stat` of `path` if it may be read: a regular file (after symlinks),
    inside `root` when one is given.  Raises `ReadError` otherwise."""
    note(path)  # an observed run depends on it, read or refused (files/observe.py)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ReadError(path, _os_reason(path, exc), cause=exc) from None
    what = kind_of(st.st_mode)
    if what is not None:
        raise ReadError(path, f"{what}, not a regular file: not read")
    if root is not None:
        real, top = os.path.realpath(path), os.path.realpath(root)
        if real != top and not real.startswith(top.rstrip(os.sep) + os.sep):
            raise ReadError(path, f"resolves to {real}, outside {top}: not read")
    return st


def _too_big(path: str, size: int | str, limit: int) -> ReadError:
    return TooLarge(path, f"file is {size} bytes, over the limit of {limit}")


def _open_checked(path: str, limit: int | None, root: str | None) -> tuple[int, os.stat_result]:
    """A descriptor of a checked regular file no larger than `limit` (None: any
    size), and its stat: checked before it is opened (a FIFO is never opened) and
    again on the open descriptor (a path swapped for a FIFO or a device in
    between is refused)."""
    st = check_regular(path, root)
    if limit is not None and st.st_size > limit:
        raise _too_big(path, st.st_size, limit)
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        raise ReadError(path, _os_reason(path, exc), cause=exc) from None
    try:
        what = kind_of(os.fstat(fd).st_mode)
    except OSError as exc:
        os.close(fd)
        raise ReadError(path, _os_reason(path, exc), cause=exc) from None
    if what is not None:
        os.close(fd)
        raise ReadError(path, f"{what}, not a regular file: not read")
    return fd, st


def open_regular(path: str, limit: int | None = DEFAULT_LIMIT, root: str | None = None) -> io.BufferedReader:
    """An open binary file object for a checked regular file no larger than `limit`
    (None: of any size, for an archive read in place, whose members are bounded).

    The caller still bounds how much it reads (a file may grow); `read_bytes`
    does both."""
    fd, _ = _open_checked(path, limit, root)
    try:
        return open(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise


class _Once:
    """The files one run read: (absolute path, root) -> (the limit read with, bytes or the error)."""

    def __init__(self) -> None:
        self.kept: dict[tuple[str, str | None], tuple[int, bytes | ReadError]] = {}
        self.reads = 0  # files opened and read (for the tests: each at most once)


#: the runs under way (innermost last): `reading_once`
_ONCE: list[_Once] = []


@contextmanager
def reading_once() -> Iterator[_Once]:
    """Within it, `read_bytes` reads each file once and keeps its bytes for the run."""
    once = _Once()
    _ONCE.append(once)
    try:
        yield once
    finally:
        _ONCE.remove(once)


def read_bytes(path: str, limit: int = DEFAULT_LIMIT, root: str | None = None) -> bytes:
    """The whole content of a regular file of at most `limit` bytes (once per run:
    `reading_once`)."""
    if not _ONCE:
        return _read_bytes(path, limit, root)
    once = _ONCE[-1]
    key = (os.path.abspath(path), root)
    got = once.kept.get(key)
    if got is not None:
        kept_limit, value = got
        if isinstance(value, bytes):
            note(path)  # the run depends on it (files/observe.py), as on a first read
            if len(value) > limit:
                raise _too_big(path, len(value), limit)
            return value
        if not (isinstance(value, TooLarge) and limit > kept_limit):
            note(path)
            raise type(value)(path, value.reason, value.line, cause=value.cause)
    once.reads += 1
    try:
        data = _read_bytes(path, limit, root)
    except ReadError as exc:
        once.kept[key] = (limit, exc)
        raise
    once.kept[key] = (limit, data)
    return data


def _read_bytes(path: str, limit: int, root: str | None) -> bytes:
    """The whole content of a regular file of at most `limit` bytes.

    The hot path of every scan (one call per file): the descriptor is read
    directly, without a file object; `O_NONBLOCK` has no effect on a regular
    file, so it is left set."""
    fd, st = _open_checked(path, limit, root)
    chunks = []
    try:
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, max(st.st_size + 1, 1 << 16)))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise ReadError(path, _os_reason(path, exc), cause=exc) from None
    finally:
        os.close(fd)
    data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    if len(data) > limit:
        raise _too_big(path, f"more than {limit}", limit)
    return data


def decode_utf8(path: str, data: bytes) -> str:
    """`data` as UTF-8 text (a BOM dropped); `ReadError` naming the line otherwise."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ReadError(path, f"not valid UTF-8 (byte 0x{data[exc.start]:02x})", line) from None


def read_text(path: str, limit: int = DEFAULT_LIMIT, root: str | None = None) -> str:
    """The content of a regular UTF-8 text file of at most `limit` bytes."""
    return decode_utf8(path, read_bytes(path, limit, root))


try:
    from zlib import error as zlib_error
except ImportError:  # pragma: no cover
    zlib_error = OSError  # type: ignore[misc,assignment]


class BoundedStream(io.RawIOBase):
    """A (decompressed) stream that raises past `limit` bytes: `ReadError`, or
    what `too_much()` returns.  The decompressor's errors become a `ReadError`
    ("cannot decompress"), or go through unchanged when `wrap_errors` is False.
    Closing it closes `raw` and then `base`, the file under a decompressor."""

    def __init__(
        self,
        path: str,
        raw,
        limit: int,
        *,
        base: IO[bytes] | None = None,
        too_much: Callable[[], Exception] | None = None,
        wrap_errors: bool = True,
    ):
        self._path, self._raw, self._limit, self._seen = path, raw, limit, 0
        self._base, self._too_much, self._wrap = base, too_much, wrap_errors

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        try:
            data = self._raw.read(len(b))
        except (EOFError, OSError, lzma.LZMAError, zlib_error) as exc:
            if not self._wrap:
                raise
            raise ReadError(self._path, f"cannot decompress: {exc}", cause=exc) from None
        self._seen += len(data)
        if self._seen > self._limit:
            if self._too_much is not None:
                raise self._too_much()
            raise TooLarge(self._path, f"decompresses to more than {self._limit} bytes (the limit)")
        b[: len(data)] = data
        return len(data)

    def close(self) -> None:
        try:
            self._raw.close()
            if self._base is not None and self._base is not self._raw:
                self._base.close()
        finally:
            super().close()


def decompressing(fh: io.BufferedReader):
    """A reader of `fh` decompressed on the fly when it starts with a gzip, bzip2
    or xz signature; `fh` itself otherwise.  Closing a decompressor leaves `fh`
    open (`BoundedStream` closes both)."""
    magic = fh.peek(6)[:6]
    if magic[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=fh, mode="rb")
    if magic[:3] == b"BZh":
        return bz2.BZ2File(fh, "rb")
    if magic == b"\xfd7zXZ\x00":
        return lzma.LZMAFile(fh, "rb")
    return fh


def open_maybe_compressed(
    path: str, limit: int = DEFAULT_LIMIT, *, compressed_limit: int | None = None, root: str | None = None
) -> io.BufferedReader:
    """A binary stream of a regular file, decompressed on the fly when it starts
    with a gzip, bzip2 or xz signature.  Both the file on disk
    (`compressed_limit`, default `limit`) and what it decompresses to (`limit`)
    are bounded: reading past either raises `ReadError`."""
    fh = open_regular(path, compressed_limit or limit, root)
    try:
        return io.BufferedReader(BoundedStream(path, decompressing(fh), limit, base=fh), 1 << 16)
    except BaseException:
        fh.close()
        raise


def iter_lines(stream: io.BufferedReader, path: str, max_line: int) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of a binary stream, each line at most `max_line`
    bytes: a longer one raises `ReadError` naming its line instead of being
    gathered in memory (one 'line' of gigabytes is the classic line bomb)."""
    n = 0
    while True:
        line = stream.readline(max_line + 1)
        if not line:
            return
        n += 1
        if len(line) > max_line and not line.endswith(b"\n"):
            raise ReadError(path, f"line longer than {max_line} bytes: not read", n)
        yield n, line
