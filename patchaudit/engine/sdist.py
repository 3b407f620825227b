"""An engine source that is an sdist (a tarball), read in one streaming pass.

The tarball is opened and decompressed by the one guarded reader
(`patchaudit.files.reader`): its `BoundedStream` stops the stream past the
budget of an archive with this module's own error.
"""

from __future__ import annotations

import io
import lzma
import os
import tarfile
import zlib
from typing import Iterable

from patchaudit.engine import limits
from patchaudit.engine.archives import archive_warnings, open_archive, shown_name
from patchaudit.engine.base import EngineError, EngineSource, archive_identity, fmt_size, member_name
from patchaudit.files.reader import BoundedStream, decompressing


class _BoundedTarInfo(tarfile.TarInfo):
    """tarfile's member headers, with the extension headers bounded.

    tarfile reads the data of a GNU long name (or long link) header and of a pax
    header whole, and decodes it, before the member it describes is seen: a 1.5 GiB
    name, 1.5 MB compressed, took all memory.  Past limits.MAX_NAME_BYTES (a long name) or
    limits.MAX_PAX_HEADER_BYTES (a pax header) the data is skipped as it streams by (never
    kept) and the member it describes is refused (`refused` says why).  A GNU sparse
    member (never in an sdist) is refused too, after at most limits.MAX_SPARSE_BLOCKS
    extension blocks, whose entries are not kept."""

    refused: str | None = None

    def _skip_extension(self, tf, why: str):
        # the header's data starts right after it; tarfile's stream reads it by chunks
        end = self.offset + tarfile.BLOCKSIZE + self._block(self.size)  # type: ignore[attr-defined]
        if end > limits.MAX_TOTAL_BYTES + 64 * 1024 * 1024:  # a stream seeks block by block: 2**64 spins
            raise tarfile.ReadError(f"a header claims {self.size} bytes, more than an archive may unpack to")
        tf.fileobj.seek(end)
        try:
            nxt = self.fromtarfile(tf)
        except tarfile.HeaderError as e:
            raise tarfile.ReadError(str(e)) from None
        nxt.offset = self.offset
        nxt.refused = getattr(nxt, "refused", None) or why
        return nxt

    def _proc_gnulong(self, tf):
        if self.size > limits.MAX_NAME_BYTES:
            what = "long name" if self.type == tarfile.GNUTYPE_LONGNAME else "long link name"
            return self._skip_extension(
                tf, f"GNU {what} of {self.size} bytes (limit {limits.MAX_NAME_BYTES}): not read"
            )
        return super()._proc_gnulong(tf)

    def _proc_pax(self, tf):
        if self.size > limits.MAX_PAX_HEADER_BYTES:
            return self._skip_extension(
                tf, f"pax header of {self.size} bytes (limit {limits.MAX_PAX_HEADER_BYTES}): not read"
            )
        return super()._proc_pax(tf)

    def _proc_sparse(self, tf):
        got = getattr(self, "_sparse_structs", None)
        if got is None:  # pragma: no cover - another tarfile: its own reader
            nxt = super()._proc_sparse(tf)
            nxt.refused = "sparse member"
            return nxt
        _, extended, origsize = got
        del self._sparse_structs
        blocks = 0
        while extended:
            buf = tf.fileobj.read(tarfile.BLOCKSIZE)
            blocks += 1
            if len(buf) < tarfile.BLOCKSIZE or blocks > limits.MAX_SPARSE_BLOCKS:
                raise tarfile.ReadError(
                    f"a sparse member with more than {limits.MAX_SPARSE_BLOCKS} extension headers"
                    if blocks > limits.MAX_SPARSE_BLOCKS
                    else "unexpected end of data"
                )
            extended = bool(buf[504])
        self.sparse = []
        self.refused = "sparse member"
        self.offset_data = tf.fileobj.tell()
        # (see _skip_extension)
        if self.offset_data + self._block(self.size) > limits.MAX_TOTAL_BYTES + 64 * 1024 * 1024:
            raise tarfile.ReadError(f"a header claims {self.size} bytes, more than an archive may unpack to")
        tf.offset = self.offset_data + self._block(self.size)
        self.size = origsize
        return self


class SdistSource(EngineSource):
    """A .tar.gz/.tgz/.tar (also .tar.bz2/.tar.xz) read in memory with
    tarfile in one streaming pass; regular members only, never extracted.
    Extension headers are bounded (`_BoundedTarInfo`), and so are the names,
    the members' sizes, their count and their total."""

    kind = "sdist"

    def identity(self) -> tuple | None:
        return archive_identity(self.kind, self.path)

    def __init__(self, path: str, name: str = "engine", spec: str | None = None) -> None:
        super().__init__(name, spec if spec is not None else path, os.path.basename(path))
        self.path = os.path.abspath(path)
        self._data: dict[str, bytes | None] = {}  # None: listed, read on demand
        kept = 0
        try:
            for norm, member, tf in self._stream():
                if member.size <= limits.SDIST_KEEP_BYTES - kept:
                    fh = tf.extractfile(member)
                    data = fh.read(limits.MAX_MEMBER_BYTES + 1) if fh is not None else b""
                    kept += len(data)
                    self._data[norm] = data
                else:
                    self._data[norm] = None
        except EngineError:
            raise
        except RecursionError as e:  # a chain of extension headers
            raise EngineError(f"engine {name!r}: cannot read {path} as a tar archive: headers nested too deeply") from e
        except (OSError, tarfile.TarError, EOFError, zlib.error, lzma.LZMAError) as e:
            raise EngineError(f"engine {name!r}: cannot read {path} as a tar archive: {e}") from e
        except Exception as e:  # tarfile raises what a hostile header makes it meet (int(""), ...)
            raise EngineError(f"engine {name!r}: cannot read {path} as a tar archive: {e!r}") from e

    def warnings(self) -> list[str]:
        return archive_warnings(self.skipped)

    def _stream(self, record: bool = True):
        """Yield (name, member, tarfile) for every safe regular member."""
        what = f"engine {self.name!r}: {self.path}"
        budget = self._open_bounded(what)
        count = 0
        total = 0
        with budget, tarfile.open(fileobj=budget, mode="r|", tarinfo=_BoundedTarInfo) as tf:
            while True:
                member = tf.next()
                tf.members.clear()  # type: ignore[attr-defined]  # tarfile keeps every member it read: none needed
                if member is None:
                    break
                # the next header lies past this member's data: tarfile's stream seeks
                # there block by block, so a size of 2**64 (base-256, any type) would
                # spin for ever after the end of the data
                if member.offset_data + max(member.size, 0) > limits.MAX_TOTAL_BYTES + 64 * 1024 * 1024:
                    raise EngineError(
                        f"{what}: member {shown_name(member.name)!r} claims "
                        f"{member.size} bytes, more than an archive may unpack to "
                        f"({fmt_size(limits.MAX_TOTAL_BYTES)})"
                    )
                count += 1
                if count > limits.MAX_MEMBERS:
                    raise EngineError(f"{what} has more than {limits.MAX_MEMBERS} members")
                refused = getattr(member, "refused", None)
                if refused:
                    if record:
                        self.skipped.append((shown_name(member.name), refused))
                    continue
                if len(member.name.encode("utf-8", "surrogateescape")) > limits.MAX_NAME_BYTES:
                    if record:
                        self.skipped.append(
                            (shown_name(member.name), f"member name over {limits.MAX_NAME_BYTES} bytes")
                        )
                    continue
                if member.isdir():
                    continue
                norm, reason = member_name(member.name)
                if norm is None:
                    if reason and record:
                        self.skipped.append((member.name, reason))
                    continue
                if not member.isreg():
                    if record:
                        kind = (
                            "symlink member"
                            if member.issym()
                            else ("hard link member" if member.islnk() else "not a regular file")
                        )
                        self.skipped.append((member.name, kind))
                    continue
                total += member.size
                if total > limits.MAX_TOTAL_BYTES:
                    raise EngineError(f"{what} unpacks to more than {fmt_size(limits.MAX_TOTAL_BYTES)}")
                if member.size > limits.MAX_MEMBER_BYTES:
                    if record:
                        self.skipped.append(
                            (
                                member.name,
                                f"over the {fmt_size(limits.MAX_MEMBER_BYTES)} limit ({fmt_size(member.size)})",
                            )
                        )
                    continue
                yield norm, member, tf

    def _open_bounded(self, what: str) -> io.BufferedReader:
        """The tarball, decompressed, failing (EngineError) once it unpacks to more than an
        archive may: bounds the decompressed size whatever its headers claim.  The
        decompressor's own errors go through as they are."""
        fh = open_archive(self.path)
        try:
            raw = decompressing(fh)
        except BaseException:
            fh.close()
            raise

        def too_much() -> EngineError:
            return EngineError(f"{what} unpacks to more than {fmt_size(limits.MAX_TOTAL_BYTES)}")

        return io.BufferedReader(
            BoundedStream(
                self.path, raw, limits.MAX_TOTAL_BYTES + 64 * 1024 * 1024, base=fh, too_much=too_much, wrap_errors=False
            )
        )

    def _list(self) -> Iterable[str]:
        return self._data.keys()

    def _read(self, p: str) -> bytes | None:
        if p not in self._data:
            return None
        data = self._data[p]
        if data is not None:
            return data
        try:  # over the in-memory budget: stream the archive again
            found = None
            for norm, member, tf in self._stream(record=False):
                if norm == p:
                    fh = tf.extractfile(member)
                    found = fh.read(limits.MAX_MEMBER_BYTES + 1) if fh is not None else b""
            return found
        except EngineError:
            raise
        except RecursionError as e:
            raise EngineError(f"engine {self.name!r} ({self.label}): cannot read {p}: headers nested too deeply") from e
        except (OSError, tarfile.TarError, EOFError, zlib.error, lzma.LZMAError) as e:
            raise EngineError(f"engine {self.name!r} ({self.label}): cannot read {p}: {e}") from e
        except Exception as e:
            raise EngineError(f"engine {self.name!r} ({self.label}): cannot read {p}: {e!r}") from e
