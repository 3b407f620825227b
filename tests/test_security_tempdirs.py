"""A git engine's private temporary git directory (patchaudit/inputs/gitobjects.py) is removed
on every path: after `check` of a Python file and `inventory` (the console script ends with
a hard exit that runs no finalizer), with workers, after an error, and on SIGTERM/SIGINT
(patchaudit/files/tempdirs.py).  Each run gets its own empty TMPDIR, which must be empty
again when it ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from patchaudit.testing import write_tree

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    write_tree(root / "eng", {"python/sglang/__init__.py": "", "python/sglang/a.py": "def f():\n    pass\n"})
    git = ["git", "-c", "user.email=a@b", "-c", "user.name=a"]
    subprocess.run([*git, "init", "-q"], cwd=root / "eng", check=True)
    subprocess.run([*git, "add", "-A"], cwd=root / "eng", check=True)
    subprocess.run([*git, "commit", "-qm", "x"], cwd=root / "eng", check=True)
    write_tree(root, {"b.py": "import sglang.a\nsglang.a.f = lambda: 1\n", "c.py": "x = 1\n"})
    return root


def _run(root: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess:
    tmp.mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(tmp)}
    env.pop("PATCHAUDIT_RUN_TMP", None)
    return subprocess.run(
        [sys.executable, "-P", "-m", "patchaudit", *args], cwd=root, env=env, capture_output=True, text=True
    )


@pytest.mark.parametrize(
    "args",
    [
        ["check", "--no-cache", "--engine", "sglang=eng@HEAD", "b.py"],
        ["check", "--no-cache", "--engine", "sglang=eng@HEAD", "--jobs", "2", "b.py", "c.py"],
        ["check", "--no-cache", "--engine", "sglang=eng@no-such-rev", "b.py"],  # an error
        ["inventory", "--engine", "sglang=eng@HEAD", "."],
    ],
    ids=["check", "check-jobs", "check-error", "inventory"],
)
def test_no_private_git_directory_is_left_behind(tmp_path, args):
    root = _tree(tmp_path)
    res = _run(root, tmp_path / "tmp", *args)
    assert "Traceback" not in res.stderr, res.stderr
    assert list((tmp_path / "tmp").iterdir()) == [], res.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_removes_the_private_git_directory(tmp_path, sig):
    root = _tree(tmp_path)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = textwrap.dedent(
        """
        import sys, time
        from patchaudit.files.tempdirs import run_scope
        from patchaudit.inputs.gitobjects import ObjectRepo

        with run_scope():
            repo = ObjectRepo("eng")
            repo.resolve_commit("HEAD")
            print(repo.private, flush=True)
            time.sleep(120)
        """
    )
    env = {**os.environ, "TMPDIR": str(tmp)}
    env.pop("PATCHAUDIT_RUN_TMP", None)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=root, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        private = proc.stdout.readline().strip()
        assert private and os.path.isdir(private)
        proc.send_signal(sig)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not os.path.exists(private)
    assert list(tmp.iterdir()) == []
    assert proc.returncode != 0


def test_the_signal_handlers_are_restored(tmp_path):
    from patchaudit.files.tempdirs import run_scope

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit):
        with run_scope():
            os.kill(os.getpid(), signal.SIGTERM)
            signal.pthread_sigmask(signal.SIG_BLOCK, [])  # let the handler run here
            raise AssertionError("SIGTERM did not end the scope")  # pragma: no cover
    assert signal.getsignal(signal.SIGTERM) == before
    assert "PATCHAUDIT_RUN_TMP" not in os.environ


def test_workers_die_on_sigterm_as_before():
    """A worker forked inside the scope gets SIGTERM's default back (pipeline/parallel.py
    `harden_worker`): its task loop would otherwise catch the SystemExit and go on."""
    from patchaudit.files.tempdirs import run_scope, worker_signals

    before = signal.getsignal(signal.SIGTERM)
    with run_scope():
        assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, before)
        worker_signals()
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert signal.getsignal(signal.SIGTERM) == before
