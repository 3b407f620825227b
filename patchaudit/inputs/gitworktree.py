"""The user's own checkout, for `check --diff-base REF` (see `patchaudit.inputs.safegit`)."""

from __future__ import annotations

import os

from patchaudit.inputs.gitfiles import MAX_REF_FILE, read_small
from patchaudit.inputs.gitrun import CompletedProcess, GitError, NotARepository, run, user_safe_directories

#: per-driver keys of the user's repository config that name a program: (section, key) -> override
_DRIVER_KEYS = {
    ("filter", "clean"): "",
    ("filter", "smudge"): "",
    ("filter", "process"): "",
    ("filter", "required"): "false",
    ("diff", "textconv"): "",
    ("diff", "command"): "",
    ("merge", "driver"): "",
    ("credential", "helper"): "",
    ("protocol", "allow"): "never",
}

_DUBIOUS = "dubious ownership"


def _dotgit_above(cwd: str) -> str | None:
    """The real path of the git directory named by the nearest `.git` (a folder, or a
    `gitdir:` file) at or above `cwd`, as git's own discovery of a work tree finds it."""
    d = os.path.abspath(cwd)
    while True:
        dotgit = os.path.join(d, ".git")
        if os.path.isdir(dotgit):
            return os.path.realpath(dotgit)
        if os.path.isfile(dotgit):
            try:
                text = (read_small(dotgit, MAX_REF_FILE) or b"").decode("utf-8", "surrogateescape").strip()
            except (GitError, OSError):
                return None
            if not text.startswith("gitdir:"):
                return None
            return os.path.realpath(os.path.join(d, text[len("gitdir:") :].strip()))
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


class WorkTree:
    """The repository of the current directory, for `--diff-base` (see the module docstring)."""

    def __init__(self, top: str, gitdir: str, extra: list[tuple[str, str]], overrides: list[tuple[str, str]]):
        self.top = top
        self.gitdir = gitdir
        self._extra = extra
        self.overrides = overrides

    @classmethod
    def discover(cls, cwd: str | None = None) -> "WorkTree":
        """The repository holding `cwd` (default: the current directory), as git finds it
        from there; a bare-looking folder is never taken (safe.bareRepository=explicit)."""
        cwd = os.path.abspath(cwd or os.getcwd())
        extra: list[tuple[str, str]] = []
        args = ("rev-parse", "--absolute-git-dir", "--show-toplevel")
        proc = run(args, cwd=cwd, check=False)
        if proc.returncode != 0 and _DUBIOUS in proc.stderr.decode("utf-8", "replace"):
            extra = [("safe.directory", d) for d in user_safe_directories()]
            if extra:
                proc = run(args, cwd=cwd, config=extra, check=False)
        err = proc.stderr.decode("utf-8", "replace").strip()
        first = err.split("\n", 1)[0].removeprefix("fatal: ")
        if proc.returncode != 0:
            if "not a git repository" in err:
                raise NotARepository(f"{cwd} is not inside a git repository", err, proc.returncode)
            if "must be run in a work tree" in err or "bare repository" in err:
                raise GitError(f"{cwd} is not in the work tree of a git repository ({first})", err, proc.returncode)
            if _DUBIOUS in err:
                raise GitError(
                    f"git refuses the repository of {cwd}: {first} (it belongs to another user; "
                    f"if you trust it, add it to safe.directory in your git config)",
                    err,
                    proc.returncode,
                )
            raise GitError(first or f"git rev-parse failed in {cwd}", err, proc.returncode)
        lines = proc.stdout.decode("utf-8", "surrogateescape").split("\n")
        if len(lines) < 2 or not lines[0] or not lines[1]:
            raise GitError(f"{cwd} is not in the work tree of a git repository")
        gitdir, top = lines[0], lines[1]
        # git (older than 2.38, without safe.bareRepository) may have taken a folder that
        # only looks like a git directory: the repository must be the one a `.git` names
        named = _dotgit_above(cwd)
        if named is None or named != os.path.realpath(gitdir):
            raise GitError(
                f"{cwd} is not in the work tree of a git repository (git found {gitdir}, which no .git names)"
            )
        wt = cls(os.path.realpath(top), gitdir, extra, [])
        wt.overrides = wt._driver_overrides()
        return wt

    def _env(self) -> dict[str, str]:
        return {"GIT_DIR": self.gitdir, "GIT_WORK_TREE": self.top}

    def _driver_overrides(self) -> list[tuple[str, str]]:
        """-c overrides for every program-running driver/helper setting in this repository's config."""
        proc = run(
            ("config", "--list", "--name-only", "-z"), cwd=self.top, env=self._env(), config=self._extra, check=False
        )
        if proc.returncode not in (0, 1):  # 1: no config at all
            err = proc.stderr.decode("utf-8", "replace").strip()
            raise GitError(f"cannot read the git config of {self.top}: {err}", err, proc.returncode)
        out: list[tuple[str, str]] = []
        seen = set()
        for raw in proc.stdout.split(b"\0"):
            name = raw.decode("utf-8", "surrogateescape").strip("\n")
            if not name or name in seen:
                continue
            seen.add(name)
            section, _, rest = name.partition(".")
            sub, _, key = rest.rpartition(".")
            section, key = section.lower(), key.lower()
            if sub and (section, key) in _DRIVER_KEYS:
                out.append((name, _DRIVER_KEYS[(section, key)]))
            elif section == "pager" and not sub and key:
                out.append((name, "false"))
        return out

    def git(self, *args: str, input: bytes | None = None, check: bool = True) -> CompletedProcess:
        return run(
            args, cwd=self.top, env=self._env(), config=[*self._extra, *self.overrides], input=input, check=check
        )

    def close(self) -> None:
        pass

    def __enter__(self) -> "WorkTree":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
