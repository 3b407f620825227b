"""Opening the folders and files patchaudit writes without following symlinks.

The result cache lives in the checked tree, which may be hostile: a checkout can
commit `.patchaudit_cache` (or any folder of a `cache-dir`) as a symlink to a
folder elsewhere.  Everything the cache reads, writes or deletes is therefore
reached from a trusted folder (`base`: the tree's root, or a folder the user
named) one component at a time, each opened with `O_NOFOLLOW | O_DIRECTORY`
relative to the previous one (`dir_fd`), so that no component is ever a
symlink, not even one swapped in between a check and a use.  Files are opened
the same way (`O_NOFOLLOW`, regular files only), created with `O_EXCL` and
replaced by renaming a temporary file in the same folder (a rename replaces a
symlink, it never writes through it).

Where the platform lacks `dir_fd` support (Windows), the same checks are made on
paths with `lstat`, which leaves a window between check and use.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from typing import Iterator, Sequence

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
#: the largest file `Folder.read` returns (the default `max-file-size`): a cache folder may
#: be the checkout's, and a committed 1.5 GB shard was read whole (and copied: 3.1 GB)
MAX_READ = 64 * 1024 * 1024
_BINARY = getattr(os, "O_BINARY", 0)

#: folders are opened relative to their parent's descriptor
FD_OK = (
    bool(NOFOLLOW and _DIRECTORY)
    and all(f in os.supports_dir_fd for f in (os.open, os.mkdir, os.stat, os.unlink, os.rmdir, os.rename))
    and os.scandir in os.supports_fd
    and os.stat in os.supports_follow_symlinks
)

TMP_PREFIX = ".tmp-"


class Refused(OSError):
    """A component of a path that is a symlink, not a folder, or not private."""

    def __init__(self, path: str, reason: str):
        super().__init__(errno.EPERM, reason, path)
        self.path = path
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def _name_ok(name: str) -> bool:
    return (
        bool(name)
        and name not in (".", "..")
        and "/" not in name
        and os.sep not in name
        and (os.altsep is None or os.altsep not in name)
        and "\0" not in name
    )


class Folder:
    """An open folder (a descriptor, or a checked path without dir_fd support)."""

    def __init__(self, path: str, fd: int | None):
        self.path = path
        self.fd = fd

    # -- lifetime
    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> "Folder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- helpers
    def _p(self, name: str) -> str:
        if not _name_ok(name):
            raise ValueError(f"not a plain file name: {name!r}")
        return os.path.join(self.path, name)

    def _kw(self) -> dict:
        return {"dir_fd": self.fd} if self.fd is not None else {}

    def _target(self, name: str) -> str:
        return name if self.fd is not None else self._p(name)

    def lstat(self, name: str) -> os.stat_result | None:
        self._p(name)
        try:
            return os.stat(self._target(name), follow_symlinks=False, **self._kw())
        except OSError:
            return None

    # -- folders
    def sub(self, name: str, *, create: bool = False, mode: int = 0o777, private: bool = False) -> "Folder":
        """The folder `name` in this one, never through a symlink (Refused); created when
        missing and `create`.  `private`: it must belong to this user, and loses the
        group/other write bits if it had them."""
        path = self._p(name)
        for _ in range(3):
            try:
                if self.fd is not None:
                    fd = os.open(name, os.O_RDONLY | _DIRECTORY | NOFOLLOW | _CLOEXEC, dir_fd=self.fd)
                    sub = Folder(path, fd)
                else:
                    st = os.lstat(path)
                    if not stat.S_ISDIR(st.st_mode):
                        raise NotADirectoryError(errno.ENOTDIR, "not a folder", path)
                    sub = Folder(path, None)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(self._target(name), mode, **self._kw())
                except FileExistsError:
                    pass  # made meanwhile (or a symlink): open it again, and see
                continue
            except OSError as exc:
                seen = self.lstat(name)
                if seen is not None and stat.S_ISLNK(seen.st_mode):
                    raise Refused(path, "is a symlink") from None
                if seen is not None and not stat.S_ISDIR(seen.st_mode):
                    raise Refused(path, "is not a folder") from None
                raise exc
            if private:
                try:
                    sub._make_private()
                except BaseException:
                    sub.close()
                    raise
            return sub
        raise Refused(path, "keeps changing")

    def _make_private(self) -> None:
        getuid = getattr(os, "getuid", None)
        if getuid is None:
            return
        st = os.fstat(self.fd) if self.fd is not None else os.lstat(self.path)
        if st.st_uid != getuid():
            raise Refused(self.path, "belongs to another user")
        if st.st_mode & 0o022:
            if self.fd is not None:
                os.fchmod(self.fd, stat.S_IMODE(st.st_mode) & ~0o022)
            else:
                os.chmod(self.path, stat.S_IMODE(st.st_mode) & ~0o022)

    def entries(self) -> Iterator[tuple[str, os.stat_result]]:
        """(name, lstat) of every entry (symlinks are not followed)."""
        with os.scandir(self.fd if self.fd is not None else self.path) as it:
            for e in it:
                try:
                    yield e.name, e.stat(follow_symlinks=False)
                except OSError:
                    continue

    def writable(self) -> bool:
        if self.fd is not None and os.access in os.supports_dir_fd:
            return os.access(".", os.W_OK, dir_fd=self.fd)
        return os.access(self.path, os.W_OK)

    def touch(self) -> None:
        if self.fd is not None and os.utime in os.supports_fd:
            os.utime(self.fd)
        else:
            os.utime(self.path)

    # -- files
    def read(self, name: str, limit: int = MAX_READ) -> tuple[bytes, int] | None:
        """(content, mtime_ns) of the regular file `name`, or None (missing, a symlink,
        a FIFO or a device: never opened through, never blocked on; larger than `limit`
        bytes, even if it grows while read: never read whole)."""
        try:
            if self.fd is not None:
                fd = os.open(name, os.O_RDONLY | NOFOLLOW | _NONBLOCK | _CLOEXEC | _BINARY, dir_fd=self.fd)
            else:
                st = os.lstat(self._p(name))
                if not stat.S_ISREG(st.st_mode):
                    return None
                fd = os.open(self._p(name), os.O_RDONLY | _NONBLOCK | _BINARY)
        except (OSError, ValueError):
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
                return None
            with os.fdopen(fd, "rb", closefd=False) as fh:
                data = fh.read(limit + 1)
            return (data, st.st_mtime_ns) if len(data) <= limit else None
        except OSError:
            return None
        finally:
            os.close(fd)

    def create(self, name: str, data: bytes, mode: int = 0o666) -> bool:
        """Write a new file `name`; False when anything (a symlink too) is there already."""
        try:
            fd = os.open(
                self._target(name),
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | _CLOEXEC | _BINARY,
                mode,
                **self._kw(),
            )
        except FileExistsError:
            return False
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        return True

    def replace(self, name: str, data: bytes, mode: int = 0o644) -> None:
        """Write `name` atomically: a new temporary file (O_EXCL) renamed over it.  A
        symlink at `name` is replaced, never written through."""
        self._p(name)
        fd, tmp = self.temp()
        try:
            try:
                _write_all(fd, data)
                if hasattr(os, "fchmod"):
                    os.fchmod(fd, mode & ~umask())
            finally:
                os.close(fd)
            self.rename(tmp, name)
        except BaseException:
            self.unlink(tmp)
            raise

    def temp(self, prefix: str = TMP_PREFIX) -> tuple[int, str]:
        """(descriptor, name) of a new private file in this folder (O_EXCL, never a symlink),
        to be renamed over its target (`rename`) or removed (`unlink`)."""
        for _ in range(100):
            tmp = prefix + secrets.token_hex(8)
            try:
                fd = os.open(
                    self._target(tmp),
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | _CLOEXEC | _BINARY,
                    0o600,
                    **self._kw(),
                )
                return fd, tmp
            except FileExistsError:
                continue
        raise FileExistsError(errno.EEXIST, "no free temporary name", self.path)  # pragma: no cover

    def rename(self, src: str, dst: str) -> None:
        """Rename `src` over `dst`, both in this folder (a symlink at `dst` is replaced)."""
        self._p(src)
        self._p(dst)
        if self.fd is not None:
            os.replace(src, dst, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        else:
            os.replace(self._p(src), self._p(dst))

    def read_file(self, name: str, limit: int) -> tuple[bytes, os.stat_result]:
        """(content, fstat) of the regular file `name`, read through no symlink and never
        blocking (a FIFO, a device): Refused naming what it is, or over `limit` bytes."""
        path = self._p(name)
        try:
            if self.fd is not None:
                fd = os.open(name, os.O_RDONLY | NOFOLLOW | _NONBLOCK | _CLOEXEC | _BINARY, dir_fd=self.fd)
            else:
                writable_kind(path, os.lstat(path))
                fd = os.open(path, os.O_RDONLY | _NONBLOCK | _BINARY)
        except OSError as exc:
            seen = self.lstat(name)
            if seen is not None and not stat.S_ISREG(seen.st_mode):
                raise Refused(path, f"is {kind_name(seen.st_mode)}") from None
            raise exc
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise Refused(path, f"is {kind_name(st.st_mode)}")
            if st.st_size > limit:
                raise Refused(path, f"is larger than {limit} bytes")
            with os.fdopen(fd, "rb", closefd=False) as fh:
                data = fh.read(limit + 1)
            if len(data) > limit:
                raise Refused(path, f"is larger than {limit} bytes")
            return data, st
        finally:
            os.close(fd)

    def check_rewrite(self, name: str, read: os.stat_result | None = None) -> os.stat_result:
        """The lstat of the file `name` that is about to be replaced by a rename in this
        folder: Refused when it is not a regular file (a symlink is never replaced by a
        file, a FIFO or a device never written), when it or this folder is read-only, or
        when it is no longer the file `read` (another inode, size or time)."""
        path = self._p(name)
        st = self.lstat(name)
        if st is None:
            raise Refused(path, "no longer exists")
        writable_kind(path, st)
        if read is not None and (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) != (
            read.st_dev,
            read.st_ino,
            read.st_size,
            read.st_mtime_ns,
        ):
            raise Refused(path, "changed since it was read")
        if not st.st_mode & 0o222 or not self._access(name):
            raise Refused(path, "is read-only")
        mode = os.fstat(self.fd).st_mode if self.fd is not None else os.stat(self.path).st_mode
        if not mode & 0o222 or not self.writable():
            raise Refused(path, "its folder is read-only")
        return st

    def _access(self, name: str) -> bool:
        if self.fd is not None and os.access in os.supports_dir_fd:
            return os.access(name, os.W_OK, dir_fd=self.fd, follow_symlinks=False)
        return os.access(self._p(name), os.W_OK)

    def unlink(self, name: str) -> bool:
        """Remove the file (or symlink itself) `name`; False when it cannot be."""
        try:
            os.unlink(self._target(name), **self._kw())
            return True
        except (OSError, ValueError):
            return False

    def rmdir(self, name: str) -> bool:
        """Remove the empty folder `name` (never a symlink); False when it cannot be."""
        try:
            os.rmdir(self._target(name), **self._kw())
            return True
        except (OSError, ValueError):
            return False


_KINDS = {
    stat.S_IFLNK: "a symlink",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
}


def kind_name(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def writable_kind(path: str, st: os.stat_result) -> None:
    """Refused unless `st` (an lstat) is a regular file's."""
    if not stat.S_ISREG(st.st_mode):
        raise Refused(path, f"is {kind_name(st.st_mode)}")


def below(root: str, path: str) -> list[str]:
    """The components of `path` below the folder `root` (both as the run names them, the
    current directory being a real path); Refused when `path` is not below `root` or
    climbs with `..` after a name (`a/link/../b` is not where it reads)."""
    parts = [p for p in path.replace(os.altsep or os.sep, os.sep).split(os.sep) if p not in ("", ".")]
    lead = 0
    while lead < len(parts) and parts[lead] == "..":
        lead += 1
    if ".." in parts[lead:]:
        raise Refused(path, "climbs out of a folder with '..'")
    full = os.path.abspath(path)
    top = os.path.abspath(root)
    try:
        rel = os.path.relpath(full, top)
    except ValueError:  # another drive
        rel = os.pardir
    if rel == os.curdir or rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel):
        raise Refused(path, f"is outside the project root {root}")
    return rel.split(os.sep)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def open_folder(
    base: str, parts: Sequence[str] = (), *, create: bool = False, mode: int = 0o777, private: bool = False
) -> Folder:
    """The folder `base/parts...`.  `base` is trusted and opened as it is (following
    symlinks; made with its parents when missing and `create`); each of `parts` is
    reached with `Folder.sub` (never a symlink: Refused)."""
    if create and not os.path.isdir(base):
        os.makedirs(base, exist_ok=True)
    if FD_OK:
        top = Folder(base, os.open(base, os.O_RDONLY | _DIRECTORY | _CLOEXEC))
    else:
        if not os.path.isdir(base):
            raise NotADirectoryError(errno.ENOTDIR, "not a folder", base)
        top = Folder(base, None)
    cur = top
    try:
        for part in parts:
            nxt = cur.sub(part, create=create, mode=mode, private=private)
            cur.close()
            cur = nxt
    except BaseException:
        cur.close()
        raise
    return cur
