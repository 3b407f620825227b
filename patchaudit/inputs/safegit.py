"""Every git command patchaudit runs goes through this module.

A checkout under review is hostile, and git is a program runner: a repository's
config can name programs for it to run (`core.fsmonitor`, `gpg.program` with
`log.showSignature`, `core.pager`/`pager.<cmd>`, `diff.external`,
`diff.<driver>.textconv/command`, `filter.<driver>.clean/smudge/process` chosen
by a committed `.gitattributes`, `core.hooksPath` and hooks, `core.sshCommand`,
`core.askPass`, credential helpers, a partial clone's lazy fetch from a
promisor remote whose URL is an `ext::` command, ...), and git looks for the
repository itself, in the folder it is started in and above it, where a
checkout can commit a folder that looks like a git directory.  Two kinds of
repository are read here, each in the most robust way it allows:

* **an engine repository** (`ObjectRepo`, `--engine PATH@REV`, `bump`): only its
  objects and refs are wanted, and it may be committed in the checkout, config
  and all.  So git never opens it as a repository: every command runs in a
  private, temporary git directory whose config, HEAD and refs patchaudit
  writes itself, with the engine's object folder as ``GIT_OBJECT_DIRECTORY``.
  The engine's refs are read here as data (loose refs, `packed-refs`, `HEAD`,
  `shallow`: validated text) and written into the private directory; the
  engine's own config, hooks, info/attributes and index are never read by git
  at all, so no setting of it can matter, even one git does not know yet.
* **the user's own checkout** (`WorkTree`, `check --diff-base REF`): git has to
  read its index and its work tree, so it runs there, but only in the
  repository of the current directory (found by git from there, with
  ``safe.bareRepository=explicit``: a folder that merely looks like a git
  directory is not taken for one), then with ``GIT_DIR``/``GIT_WORK_TREE``
  set explicitly; never in a repository found next to a path.  Its config is
  the clone's own (the checkout cannot write `.git/config`), and still every
  setting that makes git run a program is overridden: the fixed set below,
  plus every filter, diff and merge driver, pager, protocol and credential
  helper the repository's config defines (listed with `git config --list`
  under the same environment, so the list is the one git will read).  Only
  plumbing commands that never write the index run there (`diff-index`, not
  `diff`, which refreshes and writes the index and so runs the
  `post-index-change` hook).

Every command, of either kind, runs with:

* an environment without any ``GIT_*`` variable of the caller (no
  ``GIT_EXTERNAL_DIFF``, ``GIT_PAGER``, ``GIT_SSH_COMMAND``, ``GIT_ASKPASS``,
  ``GIT_CONFIG_COUNT``/``GIT_CONFIG_PARAMETERS``, ``GIT_DIR``, ``GIT_TRACE``
  ...), nor ``PAGER``/``EDITOR``/``VISUAL``/``SSH_ASKPASS``; with no system
  and no global config (``GIT_CONFIG_NOSYSTEM=1``, ``GIT_CONFIG_GLOBAL`` and
  ``HOME``/``XDG_CONFIG_HOME`` pointing at nothing), no terminal prompt, no
  pager (``GIT_PAGER=`` and ``--no-pager``), no transport at all
  (``GIT_ALLOW_PROTOCOL=`` allows none, so no fetch, lazy or not, can start a
  transport program), no lazy fetch (``GIT_NO_LAZY_FETCH=1``), no optional
  locks, no replace objects, literal pathspecs;
* the ``-c`` overrides of `SAFE_CONFIG` (``core.fsmonitor=`` and
  ``core.hooksPath=/dev/null``, ``log.showSignature=false``, ...) - `-c` wins
  over every config file, and unknown keys are ignored by older git;
* arguments that can never be options (revisions and paths are checked by the
  callers, or passed after ``--``), and no shell.

The git executable is looked up on ``PATH`` without its relative entries, so a
`git` planted in the checkout is never the one run.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import tempfile
from typing import Iterable, Sequence

__all__ = [
    "GitError",
    "NotARepository",
    "SAFE_CONFIG",
    "git_executable",
    "safe_env",
    "run",
    "ObjectRepo",
    "WorkTree",
]

#: `-c` overrides given to every git command (the command line beats every config file).
#: An empty value disables: no fsmonitor (a bool since git 2.36, a hook path before:
#: empty is "none" in both), no pager, no askpass, no credential helper.
SAFE_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", ""),
    ("core.hooksPath", os.devnull),          # no hook can be found below a non-folder
    ("core.pager", ""),
    ("core.editor", ":"),
    ("sequence.editor", ":"),
    ("core.askPass", ""),
    ("credential.helper", ""),               # an empty value resets the list of helpers
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
_DROP_ENV = frozenset({"PAGER", "EDITOR", "VISUAL", "SSH_ASKPASS", "SSH_ASKPASS_REQUIRE", "LESSOPEN",
                       "LESSCLOSE", "DISPLAY_ASKPASS"})

#: per-driver keys of the user's repository config that name a program: (section, key) -> override
_DRIVER_KEYS = {
    ("filter", "clean"): "", ("filter", "smudge"): "", ("filter", "process"): "",
    ("filter", "required"): "false",
    ("diff", "textconv"): "", ("diff", "command"): "",
    ("merge", "driver"): "",
    ("credential", "helper"): "",
    ("protocol", "allow"): "never",
}

_HEX = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_HEX_PREFIX = re.compile(r"[0-9a-fA-F]{4,64}")
_BAD_REF_CHARS = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")
_PSEUDO_REFS = ("ORIG_HEAD", "FETCH_HEAD", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD")
MAX_REF_FILE = 4096
MAX_PACKED_REFS = 512 * 1024 * 1024
MAX_REFS = 2_000_000


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
    env.update({
        "PATH": _safe_path(),
        "HOME": os.devnull, "XDG_CONFIG_HOME": os.devnull,   # no ~/.gitconfig, ~/.config/git/*
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_SYSTEM": os.devnull,
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "",        # empty: no askpass program at all
        "GIT_PAGER": "", "GIT_EDITOR": ":", "GIT_SEQUENCE_EDITOR": ":",
        "GIT_ALLOW_PROTOCOL": "",                              # an empty list: no transport allowed
        "GIT_NO_LAZY_FETCH": "1", "GIT_OPTIONAL_LOCKS": "0", "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_LITERAL_PATHSPECS": "1",
        "LC_ALL": "C", "LANGUAGE": "C",
    })
    if extra:
        env.update(extra)
    return env


def _config_args(config: Iterable[tuple[str, str]]) -> list[str]:
    out = []
    for key, value in config:
        if "=" in key or "\n" in key or "\0" in key or "\0" in value:
            raise GitError(f"cannot pass the git setting {key!r} on the command line")
        out += ["-c", f"{key}={value}"]
    return out


def run(args: Sequence[str], *, cwd: str, env: dict[str, str] | None = None,
        config: Iterable[tuple[str, str]] = (), input: bytes | None = None, check: bool = True
        ) -> subprocess.CompletedProcess:
    """Run ``git --no-pager -c SAFE... -c config... ARGS`` in `cwd` with `safe_env(env)`;
    stdout and stderr are captured as bytes.  Raises GitError on a non-zero exit if `check`."""
    argv = [git_executable(), "--no-pager", *_config_args(SAFE_CONFIG), *_config_args(config), *args]
    try:
        proc = subprocess.run(argv, cwd=cwd, env=safe_env(env), input=input, capture_output=True,
                              stdin=None if input is not None else subprocess.DEVNULL)
    except OSError as exc:
        raise GitError(f"cannot run git: {exc}") from None
    if check and proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip()
        raise GitError(f"git {args[0] if args else ''} failed: {err or f'exit code {proc.returncode}'}",
                       err, proc.returncode)
    return proc


# ---------------------------------------------------------------------------
# reading a repository's files as data


def _read_small(path: str, limit: int) -> bytes | None:
    """A regular file's bytes (at most `limit`), or None if it is missing; never
    opens a FIFO or a device (which could block)."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not stat.S_ISREG(st.st_mode):
        raise GitError(f"{path} is not a regular file")
    if st.st_size > limit:
        raise GitError(f"{path} is larger than {limit} bytes")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise GitError(f"{path} is not a regular file")
        chunks, size = [], 0
        while size <= limit:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            chunks.append(b)
            size += len(b)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise GitError(f"{path} is larger than {limit} bytes")
    return data


def _is_gitdir(d: str) -> bool:
    return os.path.isfile(os.path.join(d, "HEAD")) and (
        os.path.isfile(os.path.join(d, "commondir"))
        or (os.path.isdir(os.path.join(d, "objects")) and os.path.isdir(os.path.join(d, "refs"))))


def find_gitdir(path: str) -> str:
    """The git directory of `path` (a work tree with `.git`, a `.git` file, or a git
    directory itself), found from the files alone and only at `path` (never above)."""
    if not os.path.exists(path):
        raise FileNotFoundError(path)
    dotgit = os.path.join(path, ".git")
    if os.path.isdir(dotgit):
        gd = dotgit
    elif os.path.isfile(dotgit):
        data = _read_small(dotgit, MAX_REF_FILE) or b""
        text = data.decode("utf-8", "surrogateescape").strip()
        if not text.startswith("gitdir:"):
            raise NotARepository(f"{path}: .git is not a git directory nor a 'gitdir:' file")
        gd = os.path.join(path, text[len("gitdir:"):].strip())
    elif _is_gitdir(path):
        gd = path
    else:
        raise NotARepository(f"{path} is not a git repository")
    gd = os.path.abspath(gd)
    if not _is_gitdir(gd):
        raise NotARepository(f"{path} is not a git repository")
    return gd


def refname_ok(name: str) -> bool:
    """A ref name as `git check-ref-format` would take it, under refs/."""
    if not name.startswith("refs/") or _BAD_REF_CHARS.search(name) or ".." in name or "@{" in name:
        return False
    if name.endswith(("/", ".")) or "//" in name:
        return False
    return all(c and not c.startswith(".") and not c.endswith(".lock") for c in name.split("/"))


def _ref_value(data: bytes) -> tuple[str, str] | None:
    """('sha', hex) or ('sym', target) from a loose ref's content; None if invalid."""
    text = data.decode("utf-8", "surrogateescape")
    if text.endswith("\n"):
        text = text[:-1]
    if "\n" in text or "\r" in text:
        return None
    if text.startswith("ref:"):
        target = text[4:].strip()
        return ("sym", target) if refname_ok(target) else None
    if _HEX.fullmatch(text):
        return ("sha", text)
    return None


class _Refs:
    """An engine's refs, read as data: name -> ('sha', hex) | ('sym', target)."""

    def __init__(self) -> None:
        self.refs: dict[str, tuple[str, str]] = {}
        self.lengths: set[int] = set()

    def add(self, name: str, value: tuple[str, str] | None) -> None:
        if value is None or not refname_ok(name):
            return
        if len(self.refs) >= MAX_REFS and name not in self.refs:
            raise GitError(f"more than {MAX_REFS} refs")
        if value[0] == "sha":
            self.lengths.add(len(value[1]))
        self.refs[name] = value

    def read_packed(self, path: str) -> None:
        data = _read_small(path, MAX_PACKED_REFS)
        if not data:
            return
        for line in data.split(b"\n"):
            if not line or line[:1] in (b"#", b"^"):
                continue
            sha, _, name = line.partition(b" ")
            sha_s, name_s = sha.decode("ascii", "replace"), name.decode("utf-8", "surrogateescape")
            if _HEX.fullmatch(sha_s):
                self.add(name_s, ("sha", sha_s))

    def read_loose(self, root: str, prefix: str = "refs") -> None:
        """Loose refs under root/refs, walked without following symlinks."""
        stack = [(os.path.join(root, prefix), prefix)]
        while stack:
            d, name = stack.pop()
            try:
                with os.scandir(d) as it:
                    entries = list(it)
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as exc:
                raise GitError(f"cannot read {d}: {exc.strerror}") from None
            for e in entries:
                full = f"{name}/{e.name}"
                if e.is_dir(follow_symlinks=False):
                    stack.append((e.path, full))
                elif e.is_file(follow_symlinks=False):
                    try:
                        data = _read_small(e.path, MAX_REF_FILE)
                    except GitError:
                        continue
                    if data is not None:
                        self.add(full, _ref_value(data))


def _check_object_dir(objects: str, depth: int = 0) -> None:
    """No FIFO, socket or device where git will open object files (it would block
    or never end); alternates are checked the same way, as git follows them."""
    if depth > 5:
        return
    if not os.path.isdir(objects):
        raise GitError(f"{objects} is not a folder")
    try:
        tops = list(os.scandir(objects))
    except OSError as exc:
        raise GitError(f"cannot read {objects}: {exc.strerror}") from None
    for top in tops:
        try:
            subs = list(os.scandir(top.path)) if top.is_dir() else [top]
        except OSError:
            continue
        for e in subs:
            try:
                if e.is_file() or e.is_dir() or (e.is_symlink() and not os.path.exists(e.path)):
                    continue    # (a dangling link: git skips it too)
            except OSError:
                continue
            raise GitError(f"{e.path} is not a regular file")
    alt = _read_small(os.path.join(objects, "info", "alternates"), 1 << 20)
    for line in (alt or b"").decode("utf-8", "surrogateescape").splitlines():
        line = line.strip()
        if line and not line.startswith("#") and not line.startswith('"'):
            _check_object_dir(os.path.normpath(os.path.join(objects, line)), depth + 1)


# ---------------------------------------------------------------------------
# an engine repository: objects only, through a private git directory


def _cleanup(private: str, procs: list) -> None:
    for p in procs:
        try:
            p.kill()
            p.wait()
        except Exception:
            pass
        for f in (p.stdin, p.stdout, p.stderr):
            try:
                if f is not None:
                    f.close()
            except Exception:
                pass
    procs.clear()
    shutil.rmtree(private, ignore_errors=True)


class _Batch:
    """A persistent `git cat-file --batch[-check]` process."""

    def __init__(self, repo: "ObjectRepo", mode: str):
        argv = [git_executable(), "--no-pager", *_config_args(SAFE_CONFIG), "cat-file", mode]
        try:
            self.proc = subprocess.Popen(argv, cwd=repo.private, env=repo._env(), stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except OSError as exc:
            raise GitError(f"cannot run git: {exc}") from None
        repo._procs.append(self.proc)

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


class ObjectRepo:
    """A git repository read as objects and refs only (an engine source).

    Git runs in a private temporary git directory (config, HEAD and refs written
    here, from the engine's refs read as data) with the engine's object folder
    as ``GIT_OBJECT_DIRECTORY``: the engine's config, hooks, attributes and index
    are never read by git.  Nothing of the engine is written."""

    def __init__(self, path: str):
        self.path = os.path.abspath(path)
        gitdir = find_gitdir(self.path)
        common = gitdir
        cd = _read_small(os.path.join(gitdir, "commondir"), MAX_REF_FILE)
        if cd is not None:
            common = os.path.normpath(os.path.join(gitdir, cd.decode("utf-8", "surrogateescape").strip()))
        self.gitdir, self.common = gitdir, common
        self.objects = os.path.join(common, "objects")
        _check_object_dir(self.objects)
        refs = _Refs()
        refs.read_packed(os.path.join(common, "packed-refs"))
        refs.read_loose(common)
        if gitdir != common:   # a linked work tree: its own per-worktree refs
            refs.read_loose(gitdir)
        head = _ref_value(_read_small(os.path.join(gitdir, "HEAD"), MAX_REF_FILE) or b"")
        pseudo = {}
        for name in _PSEUDO_REFS:
            try:
                data = _read_small(os.path.join(gitdir, name), MAX_REF_FILE * 16)
            except GitError:
                continue
            first = (data or b"").split(b"\n", 1)[0].split(b"\t", 1)[0].strip().decode("ascii", "replace")
            if _HEX.fullmatch(first):
                pseudo[name] = first
                refs.lengths.add(len(first))
        shallow = _read_small(os.path.join(common, "shallow"), MAX_PACKED_REFS)
        shallow_lines = [s for s in (shallow or b"").decode("ascii", "replace").split("\n") if _HEX.fullmatch(s)]
        reftable = os.path.isfile(os.path.join(common, "reftable", "tables.list"))
        if head is not None and head[0] == "sha":
            refs.lengths.add(len(head[1]))
        try:   # the one thing taken from the engine's config, as text: which object names it uses
            cfg_text = _read_small(os.path.join(common, "config"), 1 << 20) or b""
        except (GitError, OSError):
            cfg_text = b""
        sha256 = 64 in refs.lengths or bool(re.search(rb"(?im)^\s*objectformat\s*=\s*sha256\s*$", cfg_text))
        if sha256 and 40 in refs.lengths:
            raise GitError(f"{path}: refs of both sha1 and sha256 object names")
        self._procs: list = []
        self._check: _Batch | None = None
        self._batch: _Batch | None = None
        self.private = tempfile.mkdtemp(prefix="patchaudit-git-")
        try:
            from multiprocessing.util import Finalize

            # runs on close(), when collected, at exit and at the end of a worker process
            # (never in another process: a forked child leaves its parent's folder alone)
            self._finalizer = Finalize(self, _cleanup, args=(self.private, self._procs), exitpriority=10)
            self._write_private(refs, head, pseudo, shallow_lines, sha256, reftable)
        except BaseException:
            _cleanup(self.private, self._procs)
            raise

    # -- the private git directory
    def _write_private(self, refs: _Refs, head, pseudo: dict, shallow: list, sha256: bool, reftable: bool) -> None:
        p = self.private
        os.makedirs(os.path.join(p, "refs", "heads"))
        os.makedirs(os.path.join(p, "refs", "tags"))
        os.makedirs(os.path.join(p, "objects"))       # unused: GIT_OBJECT_DIRECTORY points at the engine's
        ext = []
        if sha256:
            ext.append("\tobjectformat = sha256\n")
        if reftable:
            ext.append("\trefstorage = reftable\n")
        with open(os.path.join(p, "config"), "w", encoding="ascii") as fh:
            fh.write("[core]\n\trepositoryformatversion = %d\n\tbare = true\n\tlogAllRefUpdates = false\n"
                     % (1 if ext else 0))
            if ext:
                fh.write("[extensions]\n" + "".join(ext))
        if head is None:
            head_text = "ref: refs/heads/patchaudit-no-head\n"
        else:
            head_text = ("ref: " + head[1] if head[0] == "sym" else head[1]) + "\n"
        with open(os.path.join(p, "HEAD"), "w", encoding="ascii") as fh:
            fh.write(head_text)
        if reftable:
            src = os.path.join(self.common, "reftable")
            os.makedirs(os.path.join(p, "reftable"))
            listing = _read_small(os.path.join(src, "tables.list"), 1 << 20) or b""
            names = [n for n in listing.decode("ascii", "replace").split("\n") if n]
            for n in names:
                if not re.fullmatch(r"[0-9a-zA-Z_-]+\.ref", n):
                    raise GitError(f"{self.path}: unexpected reftable name {n!r}")
                data = _read_small(os.path.join(src, n), MAX_PACKED_REFS)
                with open(os.path.join(p, "reftable", n), "wb") as fh:
                    fh.write(data or b"")
            with open(os.path.join(p, "reftable", "tables.list"), "w", encoding="ascii") as fh:
                fh.write("".join(n + "\n" for n in names))
        else:
            packed = sorted((name, v[1]) for name, v in refs.refs.items() if v[0] == "sha")
            packed.sort(key=lambda nv: nv[0].encode("utf-8", "surrogateescape"))   # git's (byte) order
            with open(os.path.join(p, "packed-refs"), "w", encoding="utf-8", errors="surrogateescape") as fh:
                fh.write("# pack-refs with: sorted \n")
                fh.writelines(f"{sha} {name}\n" for name, sha in packed)
            for name, v in refs.refs.items():
                if v[0] == "sym":   # (refs/remotes/origin/HEAD): a loose file
                    dest = os.path.join(p, *name.split("/"))
                    try:
                        os.makedirs(os.path.dirname(dest), exist_ok=True)
                        with open(dest, "x", encoding="utf-8", errors="surrogateescape") as fh:
                            fh.write(f"ref: {v[1]}\n")
                    except OSError:
                        continue    # a name clash with a folder of refs: git would not have it either
        for name, sha in pseudo.items():
            with open(os.path.join(p, name), "w", encoding="ascii") as fh:
                fh.write(sha + "\n")
        if shallow:
            with open(os.path.join(p, "shallow"), "w", encoding="ascii") as fh:
                fh.write("".join(s + "\n" for s in shallow))

    def _env(self) -> dict[str, str]:
        return safe_env({"GIT_DIR": self.private, "GIT_OBJECT_DIRECTORY": self.objects})

    # -- commands
    def git(self, *args: str, input: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess:
        if not self._finalizer.still_active():
            raise GitError("repository closed")
        return run(args, cwd=self.private, env={"GIT_DIR": self.private, "GIT_OBJECT_DIRECTORY": self.objects},
                   input=input, check=check)

    def resolve_commit(self, rev: str) -> str | None:
        """The commit `rev` names (a ref, tag, sha, `v2~1` ...), or None.  `rev` must not start with '-'."""
        if not rev or rev.startswith("-"):
            return None
        proc = self.git("rev-parse", "--verify", "--quiet", rev + "^{commit}", check=False)
        out = proc.stdout.decode("ascii", "replace").strip()
        return out if proc.returncode == 0 and _HEX.fullmatch(out) else None

    def info(self, name: str) -> tuple[str, str, int] | None:
        """(full sha, type, size) of an object named by a full or abbreviated sha, or None."""
        if not _HEX_PREFIX.fullmatch(name):
            return None
        if self._check is None:
            self._check = _Batch(self, "--batch-check")
        return self._check.header(name.lower())

    def read(self, sha: str) -> bytes:
        """The content of the object `sha` (a full sha)."""
        if not _HEX.fullmatch(sha):
            raise GitError(f"not an object name: {sha!r}")
        if self._batch is None:
            self._batch = _Batch(self, "--batch")
        head = self._batch.header(sha)
        if head is None:
            raise GitError(f"object {sha} is missing")
        return self._batch.body(head[2])

    def close(self) -> None:
        fin = getattr(self, "_finalizer", None)
        if fin is not None:
            fin()
        self._check = self._batch = None

    def __enter__(self) -> "ObjectRepo":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------
# the user's checkout (--diff-base)


_DUBIOUS = "dubious ownership"


def _user_safe_directories() -> list[str]:
    """The `safe.directory` entries of the user's own (system and global) config,
    to hand on with -c when git refuses a repository owned by someone else (a
    CI container); read with git config, which runs nothing."""
    env = {k: v for k, v in os.environ.items()
           if not k.upper().startswith("GIT_") or k in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
                                                        "GIT_CONFIG_NOSYSTEM")}
    env.update({"GIT_PAGER": "", "GIT_ALLOW_PROTOCOL": "", "LC_ALL": "C", "PATH": _safe_path()})
    out = []
    for scope in ("--system", "--global"):
        try:
            proc = subprocess.run([git_executable(), "--no-pager", *_config_args(SAFE_CONFIG), "config", scope,
                                   "--path", "--get-all", "safe.directory"],
                                  cwd=tempfile.gettempdir(), env=env, capture_output=True, stdin=subprocess.DEVNULL)
        except OSError:
            continue
        if proc.returncode == 0:
            out += [v for v in proc.stdout.decode("utf-8", "surrogateescape").split("\n") if v]
    return out


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
                text = (_read_small(dotgit, MAX_REF_FILE) or b"").decode("utf-8", "surrogateescape").strip()
            except (GitError, OSError):
                return None
            if not text.startswith("gitdir:"):
                return None
            return os.path.realpath(os.path.join(d, text[len("gitdir:"):].strip()))
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
            extra = [("safe.directory", d) for d in _user_safe_directories()]
            if extra:
                proc = run(args, cwd=cwd, config=extra, check=False)
        err = proc.stderr.decode("utf-8", "replace").strip()
        first = err.split("\n", 1)[0].removeprefix("fatal: ")
        if proc.returncode != 0:
            if "not a git repository" in err:
                raise NotARepository(f"{cwd} is not inside a git repository", err, proc.returncode)
            if "must be run in a work tree" in err or "bare repository" in err:
                raise GitError(f"{cwd} is not in the work tree of a git repository ({first})", err,
                               proc.returncode)
            if _DUBIOUS in err:
                raise GitError(f"git refuses the repository of {cwd}: {first} (it belongs to another user; "
                               f"if you trust it, add it to safe.directory in your git config)", err,
                               proc.returncode)
            raise GitError(first or f"git rev-parse failed in {cwd}", err, proc.returncode)
        lines = proc.stdout.decode("utf-8", "surrogateescape").split("\n")
        if len(lines) < 2 or not lines[0] or not lines[1]:
            raise GitError(f"{cwd} is not in the work tree of a git repository")
        gitdir, top = lines[0], lines[1]
        # git (older than 2.38, without safe.bareRepository) may have taken a folder that
        # only looks like a git directory: the repository must be the one a `.git` names
        named = _dotgit_above(cwd)
        if named is None or named != os.path.realpath(gitdir):
            raise GitError(f"{cwd} is not in the work tree of a git repository (git found {gitdir}, "
                           f"which no .git names)")
        wt = cls(os.path.realpath(top), gitdir, extra, [])
        wt.overrides = wt._driver_overrides()
        return wt

    def _env(self) -> dict[str, str]:
        return {"GIT_DIR": self.gitdir, "GIT_WORK_TREE": self.top}

    def _driver_overrides(self) -> list[tuple[str, str]]:
        """-c overrides for every program-running driver/helper setting in this repository's config."""
        proc = run(("config", "--list", "--name-only", "-z"), cwd=self.top, env=self._env(), config=self._extra,
                   check=False)
        if proc.returncode not in (0, 1):   # 1: no config at all
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

    def git(self, *args: str, input: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess:
        return run(args, cwd=self.top, env=self._env(), config=[*self._extra, *self.overrides], input=input,
                   check=check)

    def close(self) -> None:
        pass

    def __enter__(self) -> "WorkTree":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
