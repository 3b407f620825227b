"""One file section applied as the build's command applies it (`appliers.Applier`).

`apply_section` picks the applier: GNU ``patch`` (`apply.apply_hunks`, fuzz up to
``-F``) or ``git apply``/``git am`` (`gitapply.git_apply_hunks`, no fuzz).  Either way a
hunk is "already-applied" only when its post-image is in the file *exactly* (no fuzz:
two common context lines found with fuzz 2 are no evidence), and `already_applied_actions`
says what the build's command does with such a hunk.

`merge_section` is ``git apply --3way`` on one file: the hunks applied to the base blob the
``index`` line names, merged into the engine's file (`threeway.merge`).
"""

from __future__ import annotations

from typing import Callable, Optional

from patchaudit.inputs.hunkspec import HunkLine, HunkSpec
from patchaudit.patching import apply as gnu
from patchaudit.patching.appliers import GNU_PATCH, Applier
from patchaudit.patching.apply import ApplyResult, HunkResult
from patchaudit.patching.gitapply import git_apply_hunks
from patchaudit.patching.threeway import THEIRS, MergeResult, changes, merge

#: what the build's command does with a hunk whose change is already in the file
GIT_FAILS = "git-fails"  # git apply: the hunk does not apply, the patch is not applied
MERGED = "merged"  # git apply --3way: both sides made the change, the merge takes it once
GNU_SKIPS = "gnu-skips"  # patch (no terminal) / -N: "Reversed patch detected", file skipped, exit 1
GNU_REVERTS = "gnu-reverts"  # patch -t: "Assuming -R": the upstream change is undone
GNU_FAILS = "gnu-fails"  # a later hunk or -f: no reversal check, the hunk FAILS (exit 1)
GNU_DUPLICATES = "gnu-duplicates"  # a later hunk or -f: applied again elsewhere, the code twice


def reversed_hunk(hunk: HunkSpec) -> HunkSpec:
    """The hunk as `-R` / `--reverse` applies it: its sides swapped."""
    swap = {"+": "-", "-": "+", " ": " "}
    lines = tuple(HunkLine(swap[ln.kind], ln.text, ln.no_newline) for ln in hunk.lines)  # type: ignore[arg-type]
    return HunkSpec(hunk.target_start, hunk.target_length, hunk.source_start, hunk.source_length, lines)


def apply_section(applier: Applier, lines: list[str], hunks: list[HunkSpec], eol: bool) -> ApplyResult:
    """The hunks of one file applied by the build's command (reversed-patch detection: exact;
    `-R`: the hunks reversed)."""
    if applier.reverse:
        hunks = [reversed_hunk(h) for h in hunks]
    if applier.tool == GNU_PATCH:
        return gnu.apply_hunks(lines, hunks, ends_with_newline=eol, max_fuzz=applier.max_fuzz, applied_max_fuzz=0)
    return git_apply_hunks(
        lines, hunks, ends_with_newline=eol, unidiff_zero=applier.unidiff_zero, context=applier.context
    )


def already_applied_actions(
    applier: Applier, lines: list[str], hunks: list[HunkSpec], eol: bool, applied: ApplyResult
) -> dict[int, str]:
    """For each hunk `applied` found already applied: what the build's command does with it.

    GNU patch looks for a reversed patch on a file's first hunk only (not with ``-f``):
    without a terminal it answers "Assume -R? [n]" and "Apply anyway? [n]" with no and
    skips the file (``-N``: the same without asking), ``-t`` applies it reversed.  A later
    hunk (or any with ``-f``) is applied forward, with fuzz: it fails, or lands again."""
    found = [r.index for r in applied.hunks if r.status == "already-applied"]
    if not found:
        return {}
    if applier.reverse:
        hunks = [reversed_hunk(h) for h in hunks]
    if applier.tool != GNU_PATCH:
        return {k: MERGED if applier.three_way else GIT_FAILS for k in found}
    forward: Optional[ApplyResult] = None
    out: dict[int, str] = {}
    for k in found:
        if k == 0 and not applier.force:
            out[k] = GNU_REVERTS if applier.batch else GNU_SKIPS
            continue
        if forward is None:
            forward = gnu.apply_hunks(
                lines, hunks, ends_with_newline=eol, max_fuzz=applier.max_fuzz, check_applied=False
            )
        out[k] = GNU_FAILS if forward.hunks[k].status == "failed" else GNU_DUPLICATES
    return out


def merge_section(
    applier: Applier, base: str, ours: list[str], hunks: list[HunkSpec]
) -> Optional[tuple[ApplyResult, MergeResult]]:
    """``git apply --3way`` on one file: (the hunks on the base, the merge into `ours`), or
    None when a hunk does not apply to the base itself (git then applies directly)."""
    from patchaudit.patching.sides import split_lines

    if applier.reverse:
        hunks = [reversed_hunk(h) for h in hunks]
    base_lines, base_eol = split_lines(base)
    on_base = git_apply_hunks(
        base_lines, hunks, ends_with_newline=base_eol, unidiff_zero=applier.unidiff_zero, context=applier.context
    )
    if any(r.status not in ("clean", "offset") for r in on_base.hunks):
        return None
    ranges = []
    for h, r in zip(hunks, on_base.hunks):
        start = (r.source_line or 1) - 1
        ranges.append((start, start + sum(1 for ln in h.lines if ln.kind != "+")))
    theirs = changes(base_lines, on_base.lines, THEIRS, on_base.origin, ranges)
    return on_base, merge(base_lines, ours, theirs)


def merged_result(
    applier: Applier, lines: list[str], hunks: list[HunkSpec], eol: bool, got: tuple[ApplyResult, MergeResult]
) -> tuple[ApplyResult, dict[int, str]]:
    """The ApplyResult of a 3-way merge (`merge_section`) and each hunk's action: a hunk the
    merge could not take "failed" ("conflict"), one that applies to the file directly its
    direct status, the others "merged"."""
    merge = got[1]
    direct = apply_section(applier, lines, hunks, eol)
    results: list[HunkResult] = []
    actions: dict[int, str] = {}
    for r in direct.hunks:
        if r.index in merge.conflicting:
            results.append(HunkResult(r.index, "failed", line=r.line, nearest=r.nearest, source_line=r.source_line))
            actions[r.index] = "conflict"
        elif r.status in ("clean", "offset"):
            results.append(r)
        elif r.status == "already-applied":  # both sides made the change: the merge takes it once
            results.append(r)
            actions[r.index] = MERGED
        else:
            results.append(HunkResult(r.index, "merged", source_line=r.source_line))  # type: ignore[arg-type]
            actions[r.index] = MERGED
    return ApplyResult(list(merge.lines), eol, results, dict(merge.origin)), actions


def build_apply(
    applier: Applier, lines: list[str], hunks: list[HunkSpec], eol: bool, base: Callable[[], Optional[bytes]]
) -> tuple[ApplyResult, dict[int, str]]:
    """One section as the build's command applies it, and each hunk's action: ``--3way``
    merges with `base()` (the `index` line's blob, None when the engine lacks it), any
    other command applies directly."""
    if applier.three_way:
        blob = base()
        got = merge_section(applier, blob.decode("utf-8", "surrogateescape"), lines, hunks) if blob else None
        if got is not None:
            return merged_result(applier, lines, hunks, eol, got)
    applied = apply_section(applier, lines, hunks, eol)
    return applied, already_applied_actions(applier, lines, hunks, eol, applied)
