"""The limits of the engine sources against hostile or runaway sources.

Module-level so callers (and tests) can adjust them; they are read at the time a
source is opened/read (as ``limits.NAME``, never copied).  ``patchaudit.engine.sources``
forwards reads and writes of these names here.
"""

from __future__ import annotations

__all__ = [
    "MAX_MEMBER_BYTES",
    "MAX_MEMBERS",
    "MAX_NAME_BYTES",
    "MAX_PAX_HEADER_BYTES",
    "MAX_SPARSE_BLOCKS",
    "MAX_CENTRAL_DIRECTORY_BYTES",
    "MAX_TOTAL_BYTES",
    "MAX_DIR_FILES",
    "SDIST_KEEP_BYTES",
    "MAX_STRIP",
    "SKIP_DIRS",
]

# Limits against hostile or runaway sources.  Module-level so callers (and
# tests) can adjust them; they are read at the time a source is opened/read.
# One file, uncompressed.  No engine source file is near this (SGLang's largest is
# ~200 KB); a 92 KB wheel holding one 60 MiB member took the run's memory.
MAX_MEMBER_BYTES = 16 * 1024 * 1024
MAX_MEMBERS = 200_000  # members of one archive
# A member name longer than this (a tar GNU long name, a pax path) is skipped with a
# warning, and a GNU long name or a pax header longer than the limits below is never
# read: tarfile reads them whole (a 1.5 GiB name in a 1.5 MB sdist took all memory).
MAX_NAME_BYTES = 4096
MAX_PAX_HEADER_BYTES = 1024 * 1024
# extension headers of one GNU sparse member (tarfile keeps every entry of each)
MAX_SPARSE_BLOCKS = 64
# a zip's central directory is read whole by zipfile (an entry is >= 46 bytes)
MAX_CENTRAL_DIRECTORY_BYTES = 64 * 1024 * 1024
MAX_TOTAL_BYTES = 2 * 1024 * 1024 * 1024  # all members of one archive, uncompressed
MAX_DIR_FILES = 1_000_000  # files listed from one directory source
# An sdist is decompressed once, in a single streaming pass; the contents of
# its files are kept in memory up to this budget.  Files beyond it are listed
# and read on demand by streaming the archive again (slow, but bounded).
SDIST_KEEP_BYTES = 256 * 1024 * 1024

MAX_STRIP = 4

# Names never listed from a directory source (nor read through a symlink):
# VCS metadata and caches.
SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__"})
