"""One hunk of `patchaudit port`: placed on the new release, or merged, or followed
where its code moved, or dropped as upstream, then verified; else flagged.

The order of attempts (the first that succeeds wins):

1. the recipe's applier on the new file as the earlier patches and hunks left it
   (`git apply`: exact context, then an offset; GNU `patch`: its fuzz too);
2. the hunk's post-image is already there (PA208's test): dropped;
3. the new release holds the change in another form (`analysis/port_checks.upstream_form`):
   dropped, saying how and where;
4. the three-way merge of `git apply --3way` (`patching/threeway.merge`, checked against
   `git merge-file`), the old file as the common ancestor of the new file and the old
   file with the hunk;
5. where the hunk's code moved (`bump`'s relocation by symbol), applied there.

A placed hunk is then verified (`check_port`) and only kept when every check passes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from patchaudit.analysis.port_checks import (
    duplicate_definitions,
    imports_from,
    parse_error,
    top_level_names,
    undefined_names,
    upstream_form,
    vanished_usages,
)
from patchaudit.inputs.patches import Hunk
from patchaudit.patching.apply import apply_hunks
from patchaudit.patching.gitapply import git_apply_hunks
from patchaudit.patching.threeway import THEIRS, changes, merge

#: statuses of a hunk the port carried (or dropped as upstream)
PORTED = ("clean", "offset", "fuzz", "merged", "moved", "dropped")


@dataclass
class Check:
    name: str  # parse, names, signatures, duplicates, tito
    ok: bool
    detail: str = ""


@dataclass
class HunkPort:
    patch: str
    hunk: int  # 1-based within the patch
    header_line: int
    path: str  # the engine file the hunk targets
    status: str = "flagged"  # clean offset fuzz merged moved dropped flagged
    detail: str = ""
    where: tuple[str, int] | None = None  # (NEW file, line) of the port, the drop or the nearest place
    checks: list[Check] = field(default_factory=list)
    # the added lines (1-based, in the ported file) and the file, for the rules pass
    added_lines: list[int] = field(default_factory=list)
    # a conflict: a copy of the region with git's markers (the .rej block)
    conflict: list[str] = field(default_factory=list)
    # the hunk's added lines, stripped (to match a rule's finding on the ported patch)
    added_texts: set[str] = field(default_factory=set)
    # the hunk's added import lines (as written)
    added_imports: set[str] = field(default_factory=set)

    @property
    def ported(self) -> bool:
        return self.status in PORTED

    def flag(self, reason: str, where: tuple[str, int] | None = None) -> None:
        self.status, self.detail = "flagged", reason
        if where is not None:
            self.where = where

    def to_json(self) -> dict:
        return {
            "patch": self.patch,
            "hunk": self.hunk,
            "line": self.header_line,
            "path": self.path,
            "status": self.status,
            "detail": self.detail,
            "where": {"path": self.where[0], "line": self.where[1]} if self.where else None,
            "checks": [{"check": c.name, "ok": c.ok, "detail": c.detail} for c in self.checks],
        }


@dataclass
class Text:
    """A file's lines (no terminators) and whether it ends with a newline."""

    lines: list[str]
    eol: bool = True


def place(lines: Text, hunk: Hunk, fuzz: int) -> tuple[str, Text, int, int]:
    """(status, result, line in the result, offset) of the hunk on `lines` by the recipe's
    applier (`fuzz` 0: git apply's placement)."""
    spec = hunk.to_spec()
    if fuzz:
        res = apply_hunks(lines.lines, [spec], ends_with_newline=lines.eol, max_fuzz=fuzz)
    else:
        res = git_apply_hunks(lines.lines, [spec], ends_with_newline=lines.eol)
    r = res.hunks[0]
    line = r.line or r.source_line or 1
    if r.status == "failed":
        near = r.nearest[0] if r.nearest else line
        return "failed", lines, near, 0
    return r.status, Text(res.lines, res.ends_with_newline), line, r.offset


#: lines of the old file around the hunk's change the merge looks at (and twice as many of
#: the new file): the merge of a window is spliced back into the whole file
WINDOW = 80


def merge3(base: Text, base_after: Text, ours: Text, near: int) -> Text | None:
    """The hunk's change (base -> base_after) merged into `ours` as `git merge-file` does,
    or None on a conflict.  The merge runs on a window of each file around the change (and
    around `near`, the nearest match in `ours`); what it makes there is spliced into the
    whole of `ours` (the window's own changes are ours, so the rest is kept as it is)."""
    lo, hi_base, hi_after = changed_span(base.lines, base_after.lines)
    near = map_line(base.lines, ours.lines, lo) or near
    b0, b1 = max(0, lo - WINDOW), min(len(base.lines), hi_base + WINDOW)
    span = hi_base - lo
    o0 = max(0, near - 1 - 2 * WINDOW - span)
    o1 = min(len(ours.lines), near - 1 + 2 * WINDOW + 2 * span)
    window = base.lines[b0:b1]
    window_after = base.lines[b0:lo] + base_after.lines[lo:hi_after] + base.lines[hi_base:b1]
    theirs = changes(window, window_after, THEIRS)
    res = merge(window, ours.lines[o0:o1], theirs)
    if res.conflicting:
        return None
    return Text(ours.lines[:o0] + res.lines + ours.lines[o1:], ours.eol)


def map_line(base: list[str], ours: list[str], at: int) -> int | None:
    """Where line `at` (0-based) of `base` is in `ours` (1-based), by the lines near it
    that each file holds once (patience diff's anchors): the median of their shifts."""
    lo, hi = max(0, at - WINDOW), min(len(base), at + WINDOW)
    wanted = {t for t in base[lo:hi] if t.strip()}
    seen_base: dict[str, int] = {}
    for i, t in enumerate(base):
        if t in wanted:
            seen_base[t] = -1 if t in seen_base else i
    seen_ours: dict[str, int] = {}
    for j, t in enumerate(ours):
        if t in wanted:
            seen_ours[t] = -1 if t in seen_ours else j
    shifts = sorted(
        seen_ours[t] - i for t, i in seen_base.items() if i >= 0 and lo <= i < hi and seen_ours.get(t, -1) >= 0
    )
    if not shifts:
        return None
    return at + shifts[len(shifts) // 2] + 1


def changed_span(before: list[str], after: list[str]) -> tuple[int, int, int]:
    """(start, end in before, end in after) of the one region where two texts differ
    (their common prefix and suffix left out)."""
    n = min(len(before), len(after))
    lo = 0
    while lo < n and before[lo] == after[lo]:
        lo += 1
    hb, ha = len(before), len(after)
    while hb > lo and ha > lo and before[hb - 1] == after[ha - 1]:
        hb, ha = hb - 1, ha - 1
    return lo, hb, ha


def conflict_region(base: Text, base_after: Text, ours: Text, near: int) -> list[str]:
    """A copy of the region around `near` in `ours` with git's conflict markers: ours
    (the new release), the base (the old release), theirs (the old release with the hunk)."""
    lo, hi, bhi = changed_span(base.lines, base_after.lines)
    blo = lo
    ctx = 3
    start = max(0, near - 1 - ctx)
    mine = ours.lines[start : min(len(ours.lines), near - 1 + (hi - lo) + ctx)]
    return (
        ["<<<<<<< ours (new release)"]
        + mine
        + ["||||||| base (old release)"]
        + base.lines[max(0, lo - ctx) : hi + ctx]
        + ["======="]
        + base_after.lines[max(0, blo - ctx) : bhi + ctx]
        + [">>>>>>> theirs (the patch)"]
    )


def added_lines(before: Text, after: Text) -> set[int]:
    """1-based lines of `after` that are new (the region where it differs from `before`:
    one hunk's change)."""
    lo, _hb, ha = changed_span(before.lines, after.lines)
    return set(range(lo + 1, ha + 1))


def exactly() -> str:
    """How a report names a hunk whose post-image the new release holds: as the rule
    whose role is "already-applied" (PA208) finds it."""
    from patchaudit.config.registry import codes_with_role

    return f"exactly ({'/'.join(codes_with_role('already-applied'))})"


def already_there(hunk: Hunk, old: Text | None, new: Text) -> tuple[str, int] | None:
    """(how, line) when the new file already holds the hunk's change, exactly (its post-image:
    the rule whose role is "already-applied") or in another form."""
    add = [ln.text for ln in hunk.lines if ln.kind == "+"]
    rem = [ln.text for ln in hunk.lines if ln.kind == "-"]
    post = [ln.text for ln in hunk.lines if ln.kind != "-"]
    if add and post:
        n = len(post)
        for i in range(0, len(new.lines) - n + 1):
            if new.lines[i : i + n] == post:
                return exactly(), i + 1
    if old is not None and add:
        return upstream_form(add, rem, old.lines, new.lines)
    return None


#: (module, level, name) -> whether the new release (as ported so far) defines it; None: not the engine's
Resolver = Callable[[str, int, str, str], "bool | None"]


def check_port(
    path: str,
    before: Text,
    after: Text,
    resolve: Resolver,
    released: tuple[Text | None, Text | None] | None = None,
    pending: frozenset[str] = frozenset(),
) -> tuple[list[Check], set[int]]:
    """The checks of a placed hunk on the file it changed: it parses, the names its added
    code uses exist (the module's own and the engine's `from X import Y`), and it defines
    no name twice.  (Signatures and the TITO rules: the rules pass, `port_verify.py`.)"""
    added = added_lines(before, after)
    checks: list[Check] = []
    if not path.endswith(".py"):
        return checks, added
    err = parse_error(after.lines)
    if err is not None and parse_error(before.lines) is None:
        checks.append(Check("parse", False, f"the ported file does not parse: {err.name} (line {err.line})"))
        return checks, added
    checks.append(Check("parse", True))
    missing = [
        f"`{p.name}` (line {p.line})"
        for p in undefined_names(after.lines, added, before.lines)
        if p.name not in pending
    ]
    for module, level, name, line in imports_from(after.lines, added):
        if resolve(path, level, module, name) is False:
            missing.append(f"`{name}` from `{'.' * level}{module}` (line {line})")
    checks.append(
        Check("names", not missing, ("not defined in the new release: " + ", ".join(missing)) if missing else "")
    )
    old, new = released if released is not None else (None, None)
    if old is not None and new is not None:
        gone = vanished_usages([after.lines[n - 1] for n in sorted(added)], old.lines, new.lines)
        checks.append(
            Check(
                "upstream-usage",
                not gone,
                ("upstream no longer uses " + ", ".join(f"`{g}`" for g in gone) + " in this file") if gone else "",
            )
        )
    dups = duplicate_definitions(before.lines, after.lines, added)
    checks.append(
        Check(
            "duplicates",
            not dups,
            ("defined twice: " + ", ".join(f"`{d.name}` (line {d.line})" for d in dups)) if dups else "",
        )
    )
    return checks, added


def module_defines(lines: list[str] | None, name: str) -> bool | None:
    """Whether a module's text binds `name` at its top level (None: unknown)."""
    if lines is None:
        return None
    names = top_level_names(lines)
    return None if names is None else name in names
