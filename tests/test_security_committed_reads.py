"""Every read of a file a checkout can commit is bounded, cache shards included.

A committed 1.5 GB cache shard was read whole (and copied: 3.1 GB resident).  Shards here
are sparse files: they cost no disk, and reading one whole would cost its size in memory.
"""

from __future__ import annotations

import os

from test_security_readers import MAX_RSS_KB, no_traceback, pa  # (tests/ is on sys.path)

from patchaudit.files.safefs import open_folder

HUGE = 1536 * 1024 * 1024


def test_a_folder_read_is_bounded(tmp_path):
    big = tmp_path / "big.pickle"
    with open(big, "wb") as fh:
        fh.truncate(HUGE)
    (tmp_path / "small").write_bytes(b"x" * 10)
    with open_folder(str(tmp_path)) as folder:
        assert folder.read("big.pickle") is None  # never read whole
        assert folder.read("small", limit=10) == (b"x" * 10, os.stat(tmp_path / "small").st_mtime_ns)
        assert folder.read("small", limit=9) is None


def test_a_committed_huge_cache_shard_is_not_read(tmp_path):
    (tmp_path / "mod.py").write_text("def f(prompt):\n    return prompt\n")
    first = pa(tmp_path, "check", ".")
    assert first.returncode == 0, first
    shards = [p for p in (tmp_path / ".patchaudit_cache").rglob("*.pickle")]
    assert shards
    for p in shards:  # the checkout commits shards of 1.5 GB (sparse: no disk used)
        with open(p, "r+b") as fh:
            fh.truncate(HUGE)
    res = pa(tmp_path, "check", ".", limit_memory=True)
    no_traceback(res)
    assert res.returncode == 0, res
    assert res.maxrss_kb is not None and res.maxrss_kb < MAX_RSS_KB, res.maxrss_kb
