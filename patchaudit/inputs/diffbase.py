"""Diff-aware runs (`--diff-base REF`): keep only findings on lines changed since REF.

The changed lines come from `git diff-index -p --unified=0 REF` between the
commit REF and the working tree.  A file git does not track yet (untracked,
not ignored) is new as a whole.

The repository is the one of the current directory, as git finds it from
there (a pre-commit hook runs at the top of its repository), never one found
next to a path: a checkout can commit a folder that looks like a git
directory (`patches/HEAD`, `patches/config`, `patches/objects/` ...) whose
config runs programs.  A path outside that repository, or inside another one
nested in it, is an error.  Git runs through `patchaudit.inputs.safegit`:
no setting of the repository can make it run a program (fsmonitor, hooks,
filter and diff drivers chosen by `.gitattributes`, pager ...), and only
commands that never write the index are used.  The same rule serves
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

from patchaudit.model.findings import Finding

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


def _nested_repository(real: str, top: str) -> str | None:
    """A folder between `real` and `top` (exclusive) that holds a `.git` of its own."""
    d = real if os.path.isdir(real) else os.path.dirname(real)
    while d != top and os.path.commonpath([d, top]) == top:
        if os.path.lexists(os.path.join(d, ".git")):
            return d
        d = os.path.dirname(d)
    return None


def changed_lines(paths: list[str], ref: str) -> ChangedLines:
    """The lines changed since `ref` in the repository of the current directory,
    for `paths` (which must lie in it)."""
    from patchaudit.inputs.safegit import GitError, NotARepository, WorkTree

    _check_ref(ref)
    cwd = os.getcwd()
    try:
        wt = WorkTree.discover(cwd)
    except NotARepository:
        shown = ", ".join(paths) if paths else "."
        raise DiffBaseError(
            f"--diff-base: {shown} is not inside a git repository (the current directory {cwd} is not in one)"
        ) from None
    except GitError as exc:
        raise DiffBaseError(f"--diff-base: {exc}") from None
    top = wt.top
    rels: list[str] = []
    for p in paths or ["."]:
        real = os.path.realpath(p)
        if os.path.commonpath([real, top]) != top:
            raise DiffBaseError(
                f"--diff-base: {p} is outside the git repository of the current directory "
                f"({top}); run patchaudit from inside its repository"
            )
        nested = _nested_repository(real, top)
        if nested is not None:
            raise DiffBaseError(
                f"--diff-base: {p} is in another git repository ({nested}) than the current "
                f"directory's ({top}); run patchaudit from inside it"
            )
        rels.append(os.path.relpath(real, top).replace(os.sep, "/"))
    try:
        proc = wt.git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
        commit = proc.stdout.decode("ascii", "replace").strip()
        if proc.returncode != 0 or not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", commit):
            head = wt.git("rev-parse", "--verify", "--quiet", "HEAD", check=False)
            if ref != "HEAD" or head.returncode == 0:
                raise DiffBaseError(f"--diff-base: {ref!r} is not a commit of the repository at {top}")
            # the first commit of a new repository (a pre-commit hook's --diff-base HEAD): all is new
            commit = (
                wt.git("hash-object", "-t", "tree", "--stdin", "--no-filters", input=b"").stdout.decode("ascii").strip()
            )
        result = ChangedLines(ref, commit)
        spec = ["--"] + (rels if "." not in rels else ["."])
        text = wt.git(
            "diff-index",
            "-p",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--unified=0",
            "-M",
            "--no-relative",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            "--ignore-submodules",
            commit,
            *spec,
        ).stdout.decode("utf-8", "surrogateescape")
        untracked = wt.git("ls-files", "--others", "--exclude-standard", "-z", *spec).stdout.decode(
            "utf-8", "surrogateescape"
        )
    except GitError as exc:
        raise DiffBaseError(
            f"--diff-base: git diff {ref} failed in {top}: {(exc.stderr or str(exc)).strip()}"
        ) from None
    for rel, lines in parse_unified0(text).items():
        result.files[os.path.realpath(os.path.join(top, rel))] = lines
    for rel in untracked.split("\0"):
        if rel:
            result.files[os.path.realpath(os.path.join(top, rel))] = None
    return result
