"""Colour only on a terminal (NO_COLOR honoured), a progress bar on stderr only when it is one.

Real pseudo-terminals (os.openpty) and real subprocesses.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")

ESC = "\x1b["


def _read_all(fd: int) -> str:
    chunks = []
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: the other side is closed
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


def run(cwd: Path, args: list[str], *, tty_out: bool, tty_err: bool, env: dict[str, str] | None = None):
    """Run `patchaudit ARGS` with stdout and/or stderr on a pseudo-terminal: (rc, stdout, stderr)."""
    environ = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    environ["TERM"] = "xterm"
    environ.update(env or {})
    out_m = out_s = err_m = err_s = None
    if tty_out:
        out_m, out_s = os.openpty()
    if tty_err:
        err_m, err_s = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "patchaudit", *args], cwd=cwd, env=environ,
                            stdin=subprocess.DEVNULL,
                            stdout=out_s if tty_out else subprocess.PIPE,
                            stderr=err_s if tty_err else subprocess.PIPE)
    for fd in (out_s, err_s):
        if fd is not None:
            os.close(fd)
    # read the terminals while the process runs (a full pty buffer would block it)
    import threading

    results: dict[str, str] = {}

    def reader(name, fd):
        results[name] = _read_all(fd)

    threads = []
    for name, fd in (("out", out_m), ("err", err_m)):
        if fd is not None:
            t = threading.Thread(target=reader, args=(name, fd))
            t.start()
            threads.append(t)
    piped_out, piped_err = proc.communicate()
    for t in threads:
        t.join()
    for fd in (out_m, err_m):
        if fd is not None:
            os.close(fd)
    out = results.get("out", (piped_out or b"").decode())
    err = results.get("err", (piped_err or b"").decode())
    return proc.returncode, out, err


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "a.py").write_text("out = legacy_load_mm_data(prompt=t)\n")
    return tmp_path


def test_colour_on_a_terminal(tree):
    rc, out, _ = run(tree, ["check", "--no-cache", "a.py"], tty_out=True, tty_err=False)
    assert rc == 1 and ESC in out and "PA101" in out


def test_no_colour_when_piped(tree):
    rc, out, _ = run(tree, ["check", "--no-cache", "a.py"], tty_out=False, tty_err=False)
    assert rc == 1 and ESC not in out and "a.py:1:7: PA101" in out


def test_no_color_is_honoured(tree):
    rc, out, _ = run(tree, ["check", "--no-cache", "a.py"], tty_out=True, tty_err=False, env={"NO_COLOR": "1"})
    assert rc == 1 and ESC not in out and "PA101" in out


def test_empty_no_color_does_not_disable_colour(tree):
    # no-color.org: only a non-empty NO_COLOR counts
    rc, out, _ = run(tree, ["check", "--no-cache", "a.py"], tty_out=True, tty_err=False, env={"NO_COLOR": ""})
    assert ESC in out


def test_no_colour_in_machine_formats_on_a_terminal(tree):
    for fmt in ("github",):
        _, out, _ = run(tree, ["check", "--no-cache", "--format", fmt, "a.py"], tty_out=True, tty_err=False)
        assert ESC not in out, fmt


@pytest.fixture
def many(tmp_path):
    for k in range(60):
        (tmp_path / f"m{k:02}.py").write_text(f"x{k} = {k}\n")
    return tmp_path


def test_progress_bar_on_a_terminal_stderr(many):
    rc, out, err = run(many, ["check", "--no-cache", "--jobs", "1", "."], tty_out=False, tty_err=True)
    assert rc == 0 and "All checks passed (60 files checked)." in out
    # each redraw goes back to the line's start and clears it (ESC [K) before the bar
    assert "60/60 files" in err and "\r\x1b[K[" in err


def test_no_progress_bar_when_stderr_is_not_a_terminal(many):
    rc, _, err = run(many, ["check", "--no-cache", "--jobs", "1", "."], tty_out=True, tty_err=False)
    assert rc == 0 and err == ""


def test_no_progress_bar_for_a_few_files(tree):
    _, _, err = run(tree, ["check", "--no-cache", "a.py"], tty_out=False, tty_err=True)
    assert "files" not in err
