"""Diff-aware runs (`--diff-base REF`): keep only findings on lines changed since REF.

The changed lines come from `git diff --unified=0 REF` between the commit REF
and the working tree (GitPython runs git; its `diff(create_patch=True)` drops
the `---`/`+++` lines, so the raw text is read here).  A file git does not
track yet (untracked, not ignored) is new as a whole.  The same rule serves
`.py` files and patch files: a finding in a `.patch` is reported at a line of
the patch file, so it is kept when that line of the patch file changed.

A finding is kept when its reported line, any line of its span, or any step
of its trace lies on a changed line: a commit that deletes `input_ids=` from a
multi-line call introduces the finding reported at the call's first line.
Removed lines count as a change of the line after them, as in the patch reader.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from patchaudit.findings import Finding

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


class DiffBaseError(Exception):
    """A --diff-base problem (not a repository, unknown revision): exit code 2."""


@dataclass
class ChangedLines:
    ref: str
    commit: str
    #: real path -> changed lines; None means the whole file is new
    files: dict[str, set[int] | None] = field(default_factory=dict)

    def lines_of(self, path: str) -> set[int] | None:
        """Changed lines of `path` (None: all of it); an empty set when nothing changed."""
        return self.files.get(os.path.realpath(path), set())

    def _hit(self, path: str, first: int, last: int) -> bool:
        lines = self.lines_of(path)
        if lines is None:
            return True
        return any(l in lines for l in range(first, last + 1))

    def touches(self, f: Finding) -> bool:
        end = f.end_line if f.end_line is not None and f.end_line >= f.line else f.line
        if self._hit(f.path, f.line, end):
            return True
        return any(self._hit(step.path, step.line, step.line) for step in f.trace)

    def filter(self, findings: list[Finding]) -> list[Finding]:
        return [f for f in findings if self.touches(f)]


def _check_ref(ref: str) -> None:
    if not ref or ref.startswith("-") or any(c in ref for c in "\0\n\r") or ref != ref.strip():
        raise DiffBaseError(f"--diff-base: {ref!r} is not a usable git revision")


def parse_unified0(text: str) -> dict[str, set[int] | None]:
    """Changed post-image lines per file from `git diff -U0 --src-prefix=a/ --dst-prefix=b/` output."""
    from patchaudit.inputs.patches import unquote_path

    out: dict[str, set[int] | None] = {}
    cur: set[int] | None = None
    for line in text.splitlines():
        if line.startswith("diff --git "):
            cur = None
            continue
        if line.startswith("+++ "):
            raw = line[4:]
            if raw == "/dev/null":
                cur = None
                continue
            p = unquote_path(raw)
            if p.startswith("b/"):
                p = p[2:]
            cur = out.setdefault(p, set())
            continue
        m = _HUNK.match(line)
        if m and cur is not None:
            start = int(m.group(1))
            count = 1 if m.group(2) is None else int(m.group(2))
            if count:
                cur.update(range(start, start + count))
            else:
                cur.add(start + 1)  # lines removed after line `start`
    return out


def changed_lines(paths: list[str], ref: str) -> ChangedLines:
    """The lines changed since `ref` in the repositories holding `paths`."""
    import git

    _check_ref(ref)
    result: ChangedLines | None = None
    by_repo: dict[str, tuple[git.Repo, list[str]]] = {}
    for p in paths or ["."]:
        start = Path(p).resolve()
        probe = start if start.is_dir() else start.parent
        try:
            repo = git.Repo(probe, search_parent_directories=True)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise DiffBaseError(f"--diff-base: {p} is not inside a git repository") from None
        if repo.bare or repo.working_tree_dir is None:
            raise DiffBaseError(f"--diff-base: {p} is in a bare git repository")
        top = os.path.realpath(repo.working_tree_dir)
        rel = os.path.relpath(os.path.realpath(start), top)
        by_repo.setdefault(top, (repo, []))[1].append(rel.replace(os.sep, "/"))
    for top, (repo, rels) in by_repo.items():
        try:
            commit = repo.git.rev_parse("--verify", "--quiet", f"{ref}^{{commit}}")
        except git.GitCommandError:
            if ref != "HEAD" or repo.head.is_valid():
                raise DiffBaseError(f"--diff-base: {ref!r} is not a commit of the repository at {top}") from None
            # the first commit of a new repository (a pre-commit hook's --diff-base HEAD): all is new
            commit = repo.git.hash_object("-t", "tree", "/dev/null")
        if result is None:
            result = ChangedLines(ref, commit)
        spec = ["--"] + (rels if "." not in rels else ["."])
        try:
            text = repo.git.diff(commit, "--no-color", "--no-ext-diff", "--no-textconv", "--unified=0",
                                 "-M", "--no-relative", "--src-prefix=a/", "--dst-prefix=b/",
                                 "--ignore-submodules", *spec)
            untracked = repo.git.ls_files("--others", "--exclude-standard", "-z", *spec)
        except git.GitCommandError as exc:
            raise DiffBaseError(f"--diff-base: git diff {ref} failed in {top}: "
                                f"{(exc.stderr or str(exc)).strip()}") from None
        for rel, lines in parse_unified0(text).items():
            result.files[os.path.realpath(os.path.join(top, rel))] = lines
        for rel in untracked.split("\0"):
            if rel:
                result.files[os.path.realpath(os.path.join(top, rel))] = None
    assert result is not None
    return result
