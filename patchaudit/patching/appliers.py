"""The command a build applies a patch with, as exact mode must model it.

A recipe (a Dockerfile ``RUN git apply --3way x.patch``, a shell script's
``patch -p1 -F3 < x.patch``, a quilt ``series``) names the tool and its options;
without a recipe exact mode models GNU ``patch`` with its defaults.  The tool
decides what happens to a hunk that does not apply cleanly: GNU ``patch`` fuzzes
(up to ``-F``, default 2) and applies the rest of the file's hunks; ``git apply``
takes no fuzz and applies a patch whole or not at all; ``git apply --3way`` merges
with the blob the ``index`` line names when the engine is a git repository.
"""

from __future__ import annotations

from dataclasses import dataclass

#: GNU patch: hunks independently, fuzz up to `fuzz` (default 2), reversed-patch
#: detection on a file's first hunk (`-R`/`-N`/`-f` change what it does with it)
GNU_PATCH = "patch"
#: git apply: no fuzz, every hunk of every file or nothing (`--3way`: merge)
GIT_APPLY = "git-apply"
#: git am: git apply's matching, one commit per mail
GIT_AM = "git-am"
TOOLS = (GNU_PATCH, GIT_APPLY, GIT_AM)


@dataclass(frozen=True)
class Applier:
    """One tool and the options of the command that applies a patch."""

    tool: str = GNU_PATCH
    #: -pN; None: not given on the command line (GNU patch: basename only; git: 1)
    strip: int | None = None
    #: GNU patch -F; None: the default (2). git takes no fuzz.
    fuzz: int | None = None
    #: git apply --3way / -3
    three_way: bool = False
    #: -R / --reverse
    reverse: bool = False
    #: git apply --check / patch --dry-run: the command changes nothing
    check_only: bool = False
    #: GNU patch -N / --forward: a reversed (already applied) patch is skipped (exit 1)
    forward: bool = False
    #: GNU patch -t / --batch: a reversed patch is assumed -R (applied in reverse)
    batch: bool = False
    #: GNU patch -f / --force: no reversed-patch check at all
    force: bool = False
    #: git apply -C n: context lines that must match (None: all of them)
    context: int | None = None
    #: git apply --unidiff-zero: hunks without context are not anchored at the file's ends
    unidiff_zero: bool = False

    def __post_init__(self) -> None:
        if self.tool not in TOOLS:
            raise ValueError(f"unknown patch tool {self.tool!r} (one of {', '.join(TOOLS)})")

    @property
    def max_fuzz(self) -> int:
        if self.tool != GNU_PATCH:
            return 0
        return 2 if self.fuzz is None else self.fuzz

    @property
    def all_or_nothing(self) -> bool:
        """git apply and git am stop at the first hunk that does not apply: nothing of the
        patch is written (and the build stops there)."""
        return self.tool != GNU_PATCH

    def describe(self) -> str:
        """The command as a user would write it: `git apply --3way`, `patch -p1 -F3`."""
        if self.tool == GNU_PATCH:
            words = ["patch"]
            if self.strip is not None:
                words.append(f"-p{self.strip}")
            if self.fuzz is not None:
                words.append(f"-F{self.fuzz}")
            words += [flag for on, flag in ((self.forward, "-N"), (self.batch, "-t"), (self.force, "-f")) if on]
        else:
            words = ["git", "am"] if self.tool == GIT_AM else ["git", "apply"]
            if self.strip is not None and self.strip != 1:
                words.append(f"-p{self.strip}")
            if self.three_way:
                words.append("--3way")
            if self.context is not None:
                words.append(f"-C{self.context}")
            if self.unidiff_zero:
                words.append("--unidiff-zero")
        if self.reverse:
            words.append("-R")
        if self.check_only:
            words.append("--dry-run" if self.tool == GNU_PATCH else "--check")
        return " ".join(words)


#: what exact mode assumes when no recipe names the tool
DEFAULT_APPLIER = Applier()


def is_default(applier: Applier) -> bool:
    """No recipe named the command: exact mode assumes GNU patch's defaults."""
    return applier == DEFAULT_APPLIER
