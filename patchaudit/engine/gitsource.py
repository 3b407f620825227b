"""An engine source that is a git repository at a revision, read as objects only."""

from __future__ import annotations

import os
import re
from typing import Iterable

from patchaudit.engine import limits
from patchaudit.engine.base import EngineError, EngineSource, fmt_size, member_name, norm_rel

_HEX_RE = re.compile(r"[0-9a-fA-F]{4,40}")

# git


def _check_rev(rev: str, name: str) -> None:
    if not rev:
        raise EngineError(f"engine {name!r}: empty git revision")
    if rev.startswith("-"):
        raise EngineError(f"engine {name!r}: refusing git revision {rev!r} (starts with '-')")
    if any(ord(c) < 32 or c == "\x7f" for c in rev) or " " in rev:
        raise EngineError(f"engine {name!r}: invalid git revision {rev!r}")


class GitSource(EngineSource):
    """A git repository at a revision, read as objects only (ls-tree, cat-file,
    log -L) through `patchaudit.inputs.safegit.ObjectRepo`: git runs in a
    private git directory with the repository's objects, so the repository's
    own config, hooks and attributes are never read (it may be committed in a
    hostile checkout), and its work tree and index are never read or written."""

    kind = "git"

    def identity(self) -> tuple | None:
        return (self.kind, self.path, self.sha)

    def __init__(self, path: str, rev: str, name: str = "engine", spec: str | None = None) -> None:
        _check_rev(rev, name)
        if path.startswith("-"):
            raise EngineError(f"engine {name!r}: refusing path {path!r} (starts with '-')")
        from patchaudit.inputs.safegit import GitError, NotARepository, ObjectRepo

        try:
            repo = ObjectRepo(path)
        except FileNotFoundError as e:
            raise EngineError(f"engine {name!r}: {path!r} does not exist") from e
        except NotARepository as e:
            raise EngineError(f"engine {name!r}: {path!r} is not a git repository") from e
        except (GitError, OSError) as e:
            raise EngineError(f"engine {name!r}: cannot read the git repository {path!r}: {e}") from e
        try:
            # rev never starts with '-' (checked), so git cannot read it as an option
            sha = repo.resolve_commit(rev)
        except GitError as e:
            repo.close()
            raise EngineError(f"engine {name!r}: revision {rev!r} not found in {path}: {e}") from e
        if sha is None:
            repo.close()
            raise EngineError(f"engine {name!r}: revision {rev!r} not found in {path}")
        self.path = os.path.abspath(path)
        self.rev = rev
        self.sha = sha
        self._repo = repo
        self._blobs: dict[str, str] | None = None
        super().__init__(name, spec if spec is not None else f"{path}@{rev}", f"{self.path}@{rev} ({sha[:7]})")

    def tags(self) -> list[str]:
        """The tags that point at the revision (`v0.5.15.post1`), sorted; [] when git cannot say."""
        cached = getattr(self, "_tags", None)
        if cached is None:
            from patchaudit.inputs.safegit import GitError

            try:
                out = self._repo.git("tag", "--points-at", self.sha, check=False).stdout
            except GitError:
                out = b""
            cached = self._tags = sorted(t for t in out.decode("utf-8", "replace").split("\n") if t.strip())
        return list(cached)

    def close(self) -> None:
        repo = getattr(self, "_repo", None)
        if repo is not None:
            repo.close()

    def _tree(self) -> dict[str, str]:
        if self._blobs is None:
            from patchaudit.inputs.safegit import GitError

            try:
                out = self._repo.git("ls-tree", "-r", "-z", "--full-tree", self.sha).stdout
            except GitError as e:
                raise EngineError(f"engine {self.name!r} ({self.label}): {e}") from None
            blobs: dict[str, str] = {}
            entries = out.split(b"\x00")
            if len(entries) > limits.MAX_MEMBERS + 1:
                raise EngineError(f"engine {self.name!r} ({self.label}): more than {limits.MAX_MEMBERS} files")
            for ent in entries:
                if not ent:
                    continue
                meta, _, raw = ent.partition(b"\t")
                mode, typ, sha = meta.split(b" ")
                p = raw.decode("utf-8", "surrogateescape")
                if typ != b"blob" or mode not in (b"100644", b"100755"):
                    if mode == b"120000":
                        self.skipped.append((p, "symlink"))
                    continue
                norm, reason = member_name(p)
                if norm is None:
                    if reason:
                        self.skipped.append((p, reason))
                    continue
                blobs[norm] = sha.decode("ascii")
            self._blobs = blobs
        return self._blobs

    def _list(self) -> Iterable[str]:
        return self._tree().keys()

    def _object(self, hexsha: str, what: str) -> bytes:
        from patchaudit.inputs.safegit import GitError

        try:
            info = self._repo.info(hexsha)
            if info is None:
                raise EngineError(f"engine {self.name!r} ({self.label}): {what}: object {hexsha} is missing")
            if info[2] > limits.MAX_MEMBER_BYTES:
                raise EngineError(
                    f"engine {self.name!r} ({self.label}): {what} is over the {fmt_size(limits.MAX_MEMBER_BYTES)} limit"
                )
            return self._repo.read(info[0])
        except GitError as e:
            raise EngineError(f"engine {self.name!r} ({self.label}): cannot read {what}: {e}") from None

    def _read(self, p: str) -> bytes | None:
        sha = self._tree().get(p)
        if sha is None:
            return None
        return self._object(sha, p)

    def blob(self, sha_prefix: str) -> bytes | None:
        if not isinstance(sha_prefix, str) or not _HEX_RE.fullmatch(sha_prefix):
            return None
        if set(sha_prefix) == {"0"}:  # /dev/null side of a diff
            return None
        from patchaudit.inputs.safegit import GitError

        try:
            info = self._repo.info(sha_prefix.lower())  # a missing object is never fetched
        except GitError:
            return None
        if info is None or info[1] != "blob":
            return None
        return self._object(info[0], f"blob {sha_prefix}")

    def _has_commit(self, sha: str) -> bool:
        from patchaudit.inputs.safegit import GitError

        try:
            info = self._repo.info(sha)
        except GitError:
            return False
        return info is not None and info[1] == "commit"

    def line_commits(self, path: str, start: int, end: int, since: EngineSource) -> list[dict]:
        """Commits in ``since.sha..self.sha`` that changed lines start..end
        (1-based, inclusive, numbered as in *this* revision) of path, newest
        first, via ``git log -L``.  Best effort: returns [] when ``since`` is
        not a revision of this repository, the path is not in this revision,
        the range is empty or git fails."""
        from patchaudit.inputs.safegit import GitError

        if not isinstance(since, GitSource) or not self._has_commit(since.sha):
            return []
        p = norm_rel(path)
        if p is None or p not in self._tree():
            return []
        try:
            start, end = int(start), int(end)
        except (TypeError, ValueError):
            return []
        text = self.read_text(p) or ""
        n = len(text.splitlines())
        start = max(start, 1)
        end = min(end, n)
        if start > end:
            return []
        try:
            out = self._repo.git(
                "log",
                f"-L{start},{end}:{p}",  # one argv element: the path cannot become an option
                "--no-ext-diff",
                "--no-textconv",
                "--no-color",
                "--no-show-signature",
                "--format=%x1e%H%x1f%an%x1f%aI%x1f%s",
                f"{since.sha}..{self.sha}",
            ).stdout
        except GitError:
            return []
        commits = []
        for rec in out.split(b"\x1e")[1:]:
            head = rec.split(b"\n", 1)[0].decode("utf-8", "replace")
            fields = head.split("\x1f")
            if len(fields) != 4:
                continue
            sha, author, date, summary = fields
            commits.append({"sha": sha, "summary": summary, "author": author, "date": date})
        return commits
