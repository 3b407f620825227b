"""Running git: the one module that starts a program (see `patchaudit.inputs.safegit`
for the policy: the environment, the `-c` overrides, the executable).

`run` runs one command; `run_pip` runs `python -m pip` (the engine resolver's
download, patchaudit/engine/resolve.py); `Batch` keeps a `git cat-file --batch[-check]` process for an
engine repository; `user_safe_directories` reads the user's `safe.directory` entries.
Nothing else in patchaudit imports `subprocess` (tests/test_security_git.py checks).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from typing import Iterable, Sequence

from patchaudit.files.observe import unstable

#: what `run` returns (for the annotations of the modules that call it)
CompletedProcess = subprocess.CompletedProcess

#: `-c` overrides given to every git command (the command line beats every config file).
#: An empty value disables: no fsmonitor (a bool since git 2.36, a hook path before:
#: empty is "none" in both), no pager, no askpass, no credential helper.
SAFE_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", ""),
    ("core.hooksPath", os.devnull),  # no hook can be found below a non-folder
    ("core.pager", ""),
    ("core.editor", ":"),
    ("sequence.editor", ":"),
    ("core.askPass", ""),
    ("credential.helper", ""),  # an empty value resets the list of helpers
    ("log.showSignature", "false"),
    ("core.useReplaceRefs", "false"),
    ("color.ui", "never"),
    ("core.quotePath", "true"),
    ("diff.noprefix", "false"),
    ("diff.mnemonicPrefix", "false"),
    ("diff.relative", "false"),
    ("diff.submodule", "short"),
    ("submodule.recurse", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("protocol.allow", "never"),
    ("safe.bareRepository", "explicit"),
    ("help.autoCorrect", "0"),
)

#: caller variables never passed on (besides every GIT_* one)
_DROP_ENV = frozenset(
    {"PAGER", "EDITOR", "VISUAL", "SSH_ASKPASS", "SSH_ASKPASS_REQUIRE", "LESSOPEN", "LESSCLOSE", "DISPLAY_ASKPASS"}
)


class GitError(Exception):
    """A git command failed, or a repository cannot be read safely."""

    def __init__(self, message: str, stderr: str = "", returncode: int | None = None):
        super().__init__(message)
        self.stderr = stderr
        self.returncode = returncode


class NotARepository(GitError):
    """The path (or the current directory) is not in a git repository."""


# ---------------------------------------------------------------------------
# the command itself


def _safe_path() -> str:
    parts = [p for p in os.environ.get("PATH", os.defpath).split(os.pathsep) if p and os.path.isabs(p)]
    return os.pathsep.join(parts)


_EXE: dict[str, str] = {}


def git_executable() -> str:
    """The absolute path of git, from PATH without its relative entries ('', '.')."""
    path = _safe_path()
    exe = _EXE.get(path)
    if exe is None:
        found = shutil.which("git", path=path)
        if not found:
            raise GitError("git is not installed (or not on PATH)")
        exe = _EXE[path] = os.path.abspath(found)
    return exe


def safe_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment every git command gets (see the module docstring)."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("GIT_") and k not in _DROP_ENV}
    env.update(
        {
            "PATH": _safe_path(),
            "HOME": os.devnull,
            "XDG_CONFIG_HOME": os.devnull,  # no ~/.gitconfig, ~/.config/git/*
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_SYSTEM": os.devnull,
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ASKPASS": "",  # empty: no askpass program at all
            "GIT_PAGER": "",
            "GIT_EDITOR": ":",
            "GIT_SEQUENCE_EDITOR": ":",
            "GIT_ALLOW_PROTOCOL": "",  # an empty list: no transport allowed
            "GIT_NO_LAZY_FETCH": "1",
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_LITERAL_PATHSPECS": "1",
            "LC_ALL": "C",
            "LANGUAGE": "C",
        }
    )
    if extra:
        env.update(extra)
    return env


def config_args(config: Iterable[tuple[str, str]]) -> list[str]:
    out = []
    for key, value in config:
        if "=" in key or "\n" in key or "\0" in key or "\0" in value:
            raise GitError(f"cannot pass the git setting {key!r} on the command line")
        out += ["-c", f"{key}={value}"]
    return out


def run(
    args: Sequence[str],
    *,
    cwd: str,
    env: dict[str, str] | None = None,
    config: Iterable[tuple[str, str]] = (),
    input: bytes | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess:
    """Run ``git --no-pager -c SAFE... -c config... ARGS`` in `cwd` with `safe_env(env)`;
    stdout and stderr are captured as bytes.  Raises GitError on a non-zero exit if `check`."""
    argv = [git_executable(), "--no-pager", *config_args(SAFE_CONFIG), *config_args(config), *args]
    unstable("it ran git")  # what git read is not noted (files/observe.py): no replay
    try:
        proc = subprocess.run(
            argv,
            cwd=cwd,
            env=safe_env(env),
            input=input,
            capture_output=True,
            stdin=None if input is not None else subprocess.DEVNULL,
        )
    except OSError as exc:
        raise GitError(f"cannot run git: {exc}") from None
    if check and proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip()
        raise GitError(
            f"git {args[0] if args else ''} failed: {err or f'exit code {proc.returncode}'}", err, proc.returncode
        )
    return proc


class ProgramError(Exception):
    """A program other than git could not be run, failed, or ran out of time."""


def run_pip(args: Sequence[str], *, cwd: str, timeout: float) -> subprocess.CompletedProcess:
    """`python -m pip ARGS` with this interpreter, as the user configured pip (their
    environment, pip.conf: index, find-links, proxies), in `cwd`, which must be a folder of
    patchaudit's own (`python -m` puts it first on `sys.path`: never the checked tree).
    Output is captured; no input.  Raises ProgramError when it cannot start or runs
    past `timeout` seconds (the process is killed); the caller reads the exit code."""
    if any(not isinstance(a, str) or "\0" in a for a in args):
        raise ProgramError("refusing an argument with a NUL byte")
    argv = [sys.executable, "-m", "pip", *args]
    unstable("it ran pip")
    env = {**os.environ, "PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    try:
        return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, stdin=subprocess.DEVNULL, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ProgramError(f"pip did not finish in {timeout:g} s (killed)") from None
    except OSError as exc:
        raise ProgramError(f"cannot run pip with {sys.executable}: {exc}") from None


class Batch:
    """A persistent `git cat-file --batch[-check]` process, run in `cwd` with `env` (an
    `ObjectRepo`'s private git directory); it is appended to `procs`, which its owner
    kills when it closes."""

    def __init__(self, cwd: str, env: dict[str, str], procs: list, mode: str):
        argv = [git_executable(), "--no-pager", *config_args(SAFE_CONFIG), "cat-file", mode]
        try:
            self.proc = subprocess.Popen(
                argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
            )
        except OSError as exc:
            raise GitError(f"cannot run git: {exc}") from None
        procs.append(self.proc)

    def header(self, name: str) -> tuple[str, str, int] | None:
        """(full sha, type, size) for an object name, None if missing or ambiguous."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(name.encode("ascii") + b"\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (OSError, ValueError) as exc:
            raise GitError(f"git cat-file stopped: {exc}") from None
        if not line.endswith(b"\n"):
            raise GitError("git cat-file stopped")
        parts = line.split()
        if len(parts) != 3 or parts[1] in (b"missing", b"ambiguous"):
            return None
        try:
            return parts[0].decode("ascii"), parts[1].decode("ascii"), int(parts[2])
        except (UnicodeDecodeError, ValueError):
            raise GitError(f"git cat-file: unexpected answer {line[:100]!r}") from None

    def body(self, size: int) -> bytes:
        assert self.proc.stdout is not None
        data = self.proc.stdout.read(size + 1)
        if len(data) != size + 1:
            raise GitError("git cat-file stopped")
        return data[:size]


def user_safe_directories() -> list[str]:
    """The `safe.directory` entries of the user's own (system and global) config,
    to hand on with -c when git refuses a repository owned by someone else (a
    CI container); read with git config, which runs nothing."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.upper().startswith("GIT_") or k in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM")
    }
    env.update({"GIT_PAGER": "", "GIT_ALLOW_PROTOCOL": "", "LC_ALL": "C", "PATH": _safe_path()})
    out = []
    for scope in ("--system", "--global"):
        try:
            proc = subprocess.run(
                [
                    git_executable(),
                    "--no-pager",
                    *config_args(SAFE_CONFIG),
                    "config",
                    scope,
                    "--path",
                    "--get-all",
                    "safe.directory",
                ],
                cwd=tempfile.gettempdir(),
                env=env,
                capture_output=True,
                stdin=subprocess.DEVNULL,
            )
        except OSError:
            continue
        if proc.returncode == 0:
            out += [v for v in proc.stdout.decode("utf-8", "surrogateescape").split("\n") if v]
    return out
