"""An engine source that is a wheel or a zip, read in place (never extracted)."""

from __future__ import annotations

import os
import stat
import struct
import zipfile
import zlib
from typing import Iterable

from patchaudit.engine import limits
from patchaudit.engine.archives import archive_warnings, open_archive, shown_name
from patchaudit.engine.base import EngineError, EngineSource, archive_identity, fmt_size, member_name


def _zip_directory_entries(path: str) -> int | None:
    """How many entries a zip's central directory holds, counted from its bytes before
    zipfile builds a ZipInfo for each (None: zipfile will say what is wrong).  The
    directory is at most limits.MAX_CENTRAL_DIRECTORY_BYTES."""
    try:
        with open_archive(path) as fp:
            endrec = zipfile._EndRecData(fp)  # type: ignore[attr-defined]
            if not endrec:
                return None
            size_cd = endrec[zipfile._ECD_SIZE]  # type: ignore[attr-defined]
            offset_cd = endrec[zipfile._ECD_OFFSET]  # type: ignore[attr-defined]
            concat = endrec[zipfile._ECD_LOCATION] - size_cd - offset_cd  # type: ignore[attr-defined]
            if endrec[zipfile._ECD_SIGNATURE] == zipfile.stringEndArchive64:  # type: ignore[attr-defined]
                concat -= zipfile.sizeEndCentDir64 + zipfile.sizeEndCentDir64Locator  # type: ignore[attr-defined]
            if size_cd > limits.MAX_CENTRAL_DIRECTORY_BYTES:
                return limits.MAX_MEMBERS + 1 if size_cd // 46 > limits.MAX_MEMBERS else None
            fp.seek(offset_cd + concat)
            cd = fp.read(size_cd)
    except (OSError, AttributeError, IndexError, TypeError, ValueError, struct.error):
        return None
    count, pos = 0, 0
    while pos + 46 <= len(cd) and cd[pos : pos + 4] == b"PK\x01\x02":
        n, m, k = struct.unpack_from("<HHH", cd, pos + 28)
        pos += 46 + n + m + k
        count += 1
    return count


class WheelSource(EngineSource):
    """A .whl or .zip read in place (never extracted).

    zipfile lists the members; the bytes of one are read here: its deflate stream is
    inflated with a bound (no more than the member limit, whatever the archive says),
    and the result must have the size and CRC its header gives (zip bombs lie about
    sizes).  Members compressed otherwise than stored or deflated (what wheels use) are
    skipped: zipfile inflates a bzip2 or lzma chunk whole, so 1 KB can become gigabytes
    at the first read."""

    kind = "wheel"

    def identity(self) -> tuple | None:
        return archive_identity(self.kind, self.path)

    def __init__(self, path: str, name: str = "engine", spec: str | None = None) -> None:
        super().__init__(name, spec if spec is not None else path, os.path.basename(path))
        self.path = os.path.abspath(path)
        entries = _zip_directory_entries(path)
        if entries is not None and entries > limits.MAX_MEMBERS:
            raise EngineError(f"engine {name!r}: {path} has {entries} members (limit {limits.MAX_MEMBERS})")
        try:
            fh = open_archive(path)
        except OSError as e:
            raise EngineError(f"engine {name!r}: cannot read {path} as a zip archive: {e}") from e
        with fh:
            self._members = self._directory(fh, path, name)

    def _directory(self, fh, path: str, name: str) -> dict[str, zipfile.ZipInfo]:
        """The members to read, by normalised name; those left out go to `skipped`."""
        try:
            zf = zipfile.ZipFile(fh)
        except (OSError, zipfile.BadZipFile, zipfile.LargeZipFile) as e:
            raise EngineError(f"engine {name!r}: cannot read {path} as a zip archive: {e}") from e
        except Exception as e:  # a hostile directory: zipfile raises what it meets (Unicode, version...)
            raise EngineError(f"engine {name!r}: cannot read {path} as a zip archive: {e!r}") from e
        try:
            infos = zf.infolist()
            if len(infos) > limits.MAX_MEMBERS:
                raise EngineError(f"engine {name!r}: {path} has {len(infos)} members (limit {limits.MAX_MEMBERS})")
            total = sum(i.file_size for i in infos)
            if total > limits.MAX_TOTAL_BYTES:
                raise EngineError(
                    f"engine {name!r}: {path} unpacks to {fmt_size(total)} (limit {fmt_size(limits.MAX_TOTAL_BYTES)})"
                )
            members: dict[str, zipfile.ZipInfo] = {}
            for info in infos:
                if not info.filename:  # a name zipfile cut at a NUL
                    self.skipped.append(("", "empty member name"))
                    continue
                if info.is_dir():
                    continue
                if len(info.filename.encode("utf-8", "surrogateescape")) > limits.MAX_NAME_BYTES:
                    self.skipped.append((shown_name(info.filename), f"member name over {limits.MAX_NAME_BYTES} bytes"))
                    continue
                norm, reason = member_name(info.filename)
                if norm is None:
                    if reason:
                        self.skipped.append((info.filename, reason))
                    continue
                mode = info.external_attr >> 16
                if mode and stat.S_ISLNK(mode):
                    self.skipped.append((info.filename, "symlink member"))
                    continue
                if mode and stat.S_IFMT(mode) and not stat.S_ISREG(mode):
                    self.skipped.append((info.filename, "not a regular file"))
                    continue
                if info.file_size > limits.MAX_MEMBER_BYTES:
                    self.skipped.append(
                        (
                            info.filename,
                            f"over the {fmt_size(limits.MAX_MEMBER_BYTES)} limit ({fmt_size(info.file_size)})",
                        )
                    )
                    continue
                if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                    self.skipped.append(
                        (
                            info.filename,
                            f"compression method {info.compress_type} (only stored and deflated members are read)",
                        )
                    )
                    continue
                if info.flag_bits & 0x1:
                    self.skipped.append((info.filename, "encrypted member"))
                    continue
                members[norm] = info  # duplicates: the last one wins, as when installed
        except EngineError:
            zf.close()
            raise
        except Exception as e:
            zf.close()
            raise EngineError(f"engine {name!r}: cannot read {path} as a zip archive: {e!r}") from e
        zf.close()  # the bytes are read by _inflate, from the file itself
        return members

    def warnings(self) -> list[str]:
        return archive_warnings(self.skipped)

    def close(self) -> None:
        pass

    def _list(self) -> Iterable[str]:
        return self._members.keys()

    def _read(self, p: str) -> bytes | None:
        info = self._members.get(p)
        if info is None:
            return None
        what = f"engine {self.name!r} ({self.label}): {p}"
        try:
            data = self._inflate(info, min(info.file_size, limits.MAX_MEMBER_BYTES))
        except (OSError, zlib.error, struct.error) as e:
            raise EngineError(f"{what}: cannot read: {e}") from e
        except Exception as e:  # whatever a hostile member makes the reader meet
            raise EngineError(f"{what}: cannot read: {e!r}") from e
        if len(data) > info.file_size:
            raise EngineError(
                f"{what} refused: its data inflates to more than the {info.file_size} bytes its "
                f"header says (limit {fmt_size(limits.MAX_MEMBER_BYTES)})"
            )
        if len(data) < info.file_size:
            raise EngineError(
                f"{what} refused: its data inflates to {len(data)} bytes where its header says {info.file_size}"
            )
        if zlib.crc32(data) != info.CRC:
            raise EngineError(f"{what} refused: its CRC does not match its header")
        return data

    def _inflate(self, info: zipfile.ZipInfo, limit: int) -> bytes:
        """The member's bytes, at most `limit` + 1 of them (one more tells a lie)."""
        with open_archive(self.path) as fh:
            fh.seek(info.header_offset)
            head = fh.read(30)
            if len(head) != 30 or head[:4] != b"PK\x03\x04":
                raise OSError("bad local file header")
            n, m = struct.unpack("<HH", head[26:30])
            fh.seek(n + m, os.SEEK_CUR)
            left = info.compress_size
            if info.compress_type == zipfile.ZIP_STORED:
                return fh.read(min(left, limit + 1))
            inflater = zlib.decompressobj(-15)
            parts: list[bytes] = []
            size = 0
            while left > 0 and size <= limit and not inflater.eof:
                chunk = fh.read(min(left, 64 * 1024))
                if not chunk:
                    break
                left -= len(chunk)
                while chunk and size <= limit and not inflater.eof:
                    out = inflater.decompress(chunk, limit + 1 - size)
                    parts.append(out)
                    size += len(out)
                    chunk = inflater.unconsumed_tail
            return b"".join(parts)
