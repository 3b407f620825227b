"""Timing for bench/run.py: one fresh process per run, its wall time and peak memory.

The peak memory of a run is the `ru_maxrss` that `os.wait4` returns for the child: the
largest resident set of the process and of the processes it waited for (its workers), each
on its own, as `/usr/bin/time -f %M` reports it; not the sum of processes alive at once.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator


@dataclass
class Run:
    seconds: float
    rss_mb: float
    returncode: int
    stdout: str
    stderr: str


@dataclass
class Cell:
    """One row of the table: a tool in a configuration on a tree, up to --repeat runs."""

    tree: str
    tool: str
    config: str
    times: list[float]
    check: str
    note: str = ""
    rss: list[float] = field(default_factory=list)  # MB per run; empty for tools not measured
    findings: int | None = None
    found: list = field(default_factory=list, repr=False)  # the findings, to compare configurations

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def peak_mb(self) -> float | None:
        return max(self.rss) if self.rss else None

    def to_json(self) -> dict:
        return {
            "tree": self.tree,
            "tool": self.tool,
            "config": self.config,
            "runs": self.times,
            "median": self.median,
            "peak_rss_mb": self.peak_mb,
            "rss_mb": self.rss,
            "findings": self.findings,
            "check": self.check,
            "note": self.note,
        }


def timed(cmd: list[str], cwd: Path, env: dict | None = None, before: Callable[[], None] | None = None) -> Run:
    """Run `cmd` once in a fresh process; its output goes to temporary files (no pipe to
    drain), and the child is reaped with wait4 to read its peak RSS."""
    if before is not None:
        before()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text_out = out.read().decode("utf-8", "replace")
        text_err = err.read().decode("utf-8", "replace")
    # ru_maxrss is in kilobytes on Linux, in bytes on macOS
    rss_mb = usage.ru_maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024)
    return Run(seconds, rss_mb, proc.returncode, text_out, text_err)


def repeat(
    cmd: list[str],
    cwd: Path,
    *,
    runs: int,
    budget: float,
    env: dict | None = None,
    before: Callable[[], None] | None = None,
    ok_codes: tuple[int, ...] = (0, 1),
) -> tuple[list[float], list[float], Run]:
    """Up to `runs` runs (fewer once they have taken `budget` seconds; at least one): the
    times, the peak RSS of each run (MB) and the first run (its output)."""
    times: list[float] = []
    rss: list[float] = []
    first: Run | None = None
    spent = 0.0
    while len(times) < runs and (not times or spent + times[-1] <= budget):
        run = timed(cmd, cwd, env, before)
        if run.returncode not in ok_codes:
            raise SystemExit(f"{' '.join(cmd)} (in {cwd}) exited {run.returncode}:\n{run.stderr[-3000:]}")
        times.append(run.seconds)
        rss.append(run.rss_mb)
        spent += run.seconds
        first = first or run
    assert first is not None
    return times, rss, first


BUSY_LOOP = """\
import sys, time
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    pass
"""


@contextmanager
def busy_core(limit: float) -> Iterator[subprocess.Popen]:
    """Another process keeping one core busy while the block runs: a spinning child that
    stops by itself after `limit` seconds at the latest, and is killed when the block ends."""
    proc = subprocess.Popen([sys.executable, "-c", BUSY_LOOP, str(limit)], stdin=subprocess.DEVNULL)
    try:
        time.sleep(0.2)  # let it start spinning
        yield proc
    finally:
        proc.kill()
        proc.wait()
