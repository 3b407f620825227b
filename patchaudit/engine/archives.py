"""What the archive sources (wheel, sdist) share: opening the archive, the warnings about
skipped members."""

from __future__ import annotations

import io

from patchaudit.files.reader import ReadError, open_regular

#: skipped members not worth a warning: links and special files (they are never read)
_QUIET_REASONS = ("symlink member", "hard link member", "not a regular file")
#: members too large to be a source that no warning is needed for: binaries (a real
#: vllm wheel holds .so files of hundreds of MB)
_BINARY_SUFFIXES = (
    ".so",
    ".pyd",
    ".dll",
    ".dylib",
    ".a",
    ".o",
    ".lib",
    ".bin",
    ".pt",
    ".pth",
    ".ckpt",
    ".safetensors",
    ".onnx",
    ".cubin",
    ".fatbin",
    ".ptx",
    ".whl",
    ".zip",
    ".gz",
    ".tar",
    ".xz",
    ".bz2",
    ".zst",
    ".npz",
    ".npy",
    ".pkl",
    ".jar",
    ".exe",
    ".dat",
)


def shown_name(name: str, limit: int = 300) -> str:
    return name if len(name) <= limit else f"{name[:limit]}... ({len(name)} characters)"


def archive_warnings(skipped: list[tuple[str, str]]) -> list[str]:
    out = []
    for name, reason in skipped:
        if not reason or reason in _QUIET_REASONS:
            continue
        if reason.startswith("over the") and name.lower().endswith(_BINARY_SUFFIXES):
            continue
        out.append(f"member {shown_name(name)} skipped: {reason}")
    return out


def open_archive(path: str) -> io.BufferedReader:
    """The archive's file, opened by the guarded reader: a regular file (never a FIFO or
    a device), of any size (its members are bounded).  An error of the operating system
    is raised as `open()` raises it, so the messages that quote it stay the same."""
    try:
        return open_regular(path, None)
    except ReadError as e:
        if isinstance(e.cause, OSError):
            raise e.cause from None
        raise
