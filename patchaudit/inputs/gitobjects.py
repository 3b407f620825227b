"""An engine repository read as objects and refs only, through a private git directory
(see `patchaudit.inputs.safegit`)."""

from __future__ import annotations

import os
import re

from patchaudit.files import tempdirs
from patchaudit.inputs.gitfiles import (
    HEX,
    HEX_PREFIX,
    MAX_PACKED_REFS,
    MAX_REF_FILE,
    PSEUDO_REFS,
    Refs,
    check_object_dir,
    find_gitdir,
    read_small,
    ref_value,
)
from patchaudit.inputs.gitrun import Batch, CompletedProcess, GitError, run, safe_env


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
    tempdirs.remove(private)


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
        cd = read_small(os.path.join(gitdir, "commondir"), MAX_REF_FILE)
        if cd is not None:
            common = os.path.normpath(os.path.join(gitdir, cd.decode("utf-8", "surrogateescape").strip()))
        self.gitdir, self.common = gitdir, common
        self.objects = os.path.join(common, "objects")
        check_object_dir(self.objects)
        refs = Refs()
        refs.read_packed(os.path.join(common, "packed-refs"))
        refs.read_loose(common)
        if gitdir != common:  # a linked work tree: its own per-worktree refs
            refs.read_loose(gitdir)
        head = ref_value(read_small(os.path.join(gitdir, "HEAD"), MAX_REF_FILE) or b"")
        pseudo = {}
        for name in PSEUDO_REFS:
            try:
                data = read_small(os.path.join(gitdir, name), MAX_REF_FILE * 16)
            except GitError:
                continue
            first = (data or b"").split(b"\n", 1)[0].split(b"\t", 1)[0].strip().decode("ascii", "replace")
            if HEX.fullmatch(first):
                pseudo[name] = first
                refs.lengths.add(len(first))
        shallow = read_small(os.path.join(common, "shallow"), MAX_PACKED_REFS)
        shallow_lines = [s for s in (shallow or b"").decode("ascii", "replace").split("\n") if HEX.fullmatch(s)]
        reftable = os.path.isfile(os.path.join(common, "reftable", "tables.list"))
        if head is not None and head[0] == "sha":
            refs.lengths.add(len(head[1]))
        try:  # the one thing taken from the engine's config, as text: which object names it uses
            cfg_text = read_small(os.path.join(common, "config"), 1 << 20) or b""
        except (GitError, OSError):
            cfg_text = b""
        sha256 = 64 in refs.lengths or bool(re.search(rb"(?im)^\s*objectformat\s*=\s*sha256\s*$", cfg_text))
        if sha256 and 40 in refs.lengths:
            raise GitError(f"{path}: refs of both sha1 and sha256 object names")
        self._procs: list = []
        self._check: Batch | None = None
        self._batch: Batch | None = None
        # removed by close(), at the end of the run's scope on every path (files/tempdirs.py)
        self.private = tempdirs.private_dir("patchaudit-git-")
        try:
            from multiprocessing.util import Finalize

            # runs on close(), when collected, at exit and at the end of a worker process
            # (never in another process: a forked child leaves its parent's folder alone)
            self._finalizer = Finalize(self, _cleanup, args=(self.private, self._procs), exitpriority=10)
            tempdirs.on_cleanup(self.close)
            self._write_private(refs, head, pseudo, shallow_lines, sha256, reftable)
        except BaseException:
            _cleanup(self.private, self._procs)
            raise

    # -- the private git directory
    def _write_private(self, refs: Refs, head, pseudo: dict, shallow: list, sha256: bool, reftable: bool) -> None:
        p = self.private
        os.makedirs(os.path.join(p, "refs", "heads"))
        os.makedirs(os.path.join(p, "refs", "tags"))
        os.makedirs(os.path.join(p, "objects"))  # unused: GIT_OBJECT_DIRECTORY points at the engine's
        ext = []
        if sha256:
            ext.append("\tobjectformat = sha256\n")
        if reftable:
            ext.append("\trefstorage = reftable\n")
        with open(os.path.join(p, "config"), "w", encoding="ascii") as fh:
            fh.write(
                "[core]\n\trepositoryformatversion = %d\n\tbare = true\n\tlogAllRefUpdates = false\n"
                % (1 if ext else 0)
            )
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
            listing = read_small(os.path.join(src, "tables.list"), 1 << 20) or b""
            names = [n for n in listing.decode("ascii", "replace").split("\n") if n]
            for n in names:
                if not re.fullmatch(r"[0-9a-zA-Z_-]+\.ref", n):
                    raise GitError(f"{self.path}: unexpected reftable name {n!r}")
                data = read_small(os.path.join(src, n), MAX_PACKED_REFS)
                with open(os.path.join(p, "reftable", n), "wb") as fh:
                    fh.write(data or b"")
            with open(os.path.join(p, "reftable", "tables.list"), "w", encoding="ascii") as fh:
                fh.write("".join(n + "\n" for n in names))
        else:
            packed = sorted((name, v[1]) for name, v in refs.refs.items() if v[0] == "sha")
            packed.sort(key=lambda nv: nv[0].encode("utf-8", "surrogateescape"))  # git's (byte) order
            with open(os.path.join(p, "packed-refs"), "w", encoding="utf-8", errors="surrogateescape") as fh:
                fh.write("# pack-refs with: sorted \n")
                fh.writelines(f"{sha} {name}\n" for name, sha in packed)
            for name, v in refs.refs.items():
                if v[0] == "sym":  # (refs/remotes/origin/HEAD): a loose file
                    dest = os.path.join(p, *name.split("/"))
                    try:
                        os.makedirs(os.path.dirname(dest), exist_ok=True)
                        with open(dest, "x", encoding="utf-8", errors="surrogateescape") as fh:
                            fh.write(f"ref: {v[1]}\n")
                    except OSError:
                        continue  # a name clash with a folder of refs: git would not have it either
        for name, sha in pseudo.items():
            with open(os.path.join(p, name), "w", encoding="ascii") as fh:
                fh.write(sha + "\n")
        if shallow:
            with open(os.path.join(p, "shallow"), "w", encoding="ascii") as fh:
                fh.write("".join(s + "\n" for s in shallow))

    def _env(self) -> dict[str, str]:
        return safe_env({"GIT_DIR": self.private, "GIT_OBJECT_DIRECTORY": self.objects})

    # -- commands
    def git(self, *args: str, input: bytes | None = None, check: bool = True) -> CompletedProcess:
        if not self._finalizer.still_active():
            raise GitError("repository closed")
        return run(
            args,
            cwd=self.private,
            env={"GIT_DIR": self.private, "GIT_OBJECT_DIRECTORY": self.objects},
            input=input,
            check=check,
        )

    def resolve_commit(self, rev: str) -> str | None:
        """The commit `rev` names (a ref, tag, sha, `v2~1` ...), or None.  `rev` must not start with '-'."""
        if not rev or rev.startswith("-"):
            return None
        proc = self.git("rev-parse", "--verify", "--quiet", rev + "^{commit}", check=False)
        out = proc.stdout.decode("ascii", "replace").strip()
        return out if proc.returncode == 0 and HEX.fullmatch(out) else None

    def info(self, name: str) -> tuple[str, str, int] | None:
        """(full sha, type, size) of an object named by a full or abbreviated sha, or None."""
        if not HEX_PREFIX.fullmatch(name):
            return None
        if self._check is None:
            self._check = Batch(self.private, self._env(), self._procs, "--batch-check")
        return self._check.header(name.lower())

    def read(self, sha: str) -> bytes:
        """The content of the object `sha` (a full sha)."""
        if not HEX.fullmatch(sha):
            raise GitError(f"not an object name: {sha!r}")
        if self._batch is None:
            self._batch = Batch(self.private, self._env(), self._procs, "--batch")
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
