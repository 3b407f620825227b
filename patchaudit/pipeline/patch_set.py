"""Rules that see the whole set of patches of a run (`Rule.check_patch_set`).

Most rules judge one file at a time (`analyse.analyse_file`, cached and run in
workers).  A few questions are about the set: do two patches of one set change
the same lines (PA304)?  `run_patch_set_rules` answers them once per run,
after the per-file pass: it reads the run's patch files again (the scan is
cheap; only when such a rule is selected), groups them into sets and orders
them (patchaudit/inputs/patchset.py), calls each set rule's `check_patch_set`
with all patch units, and turns the reports into findings with the same
per-file ignores, inline suppressions and fingerprints as the per-file pass.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from patchaudit.inputs.patches import PatchFile

from patchaudit.files.observe import note
from patchaudit.inputs.patchset import order_patch_set
from patchaudit.model.findings import FileError, Finding, TraceStep
from patchaudit.pipeline.reports import to_finding
from patchaudit.pipeline.results import RunError
from patchaudit.pipeline.run_rules import context_for, needs_met
from patchaudit.pipeline.suppression import (
    apply_per_file_ignores,
    apply_suppressions,
    attach_source,
    settle_regions,
)
from patchaudit.units.suppression import parse_suppression, suppressible_patch_lines


def _read_regular(path: str, limit: int) -> bytes | None:
    """A patch file's bytes, or None: read through the one guarded reader
    (patchaudit/files/reader.py): only a regular file is opened (a FIFO named
    `x.patch` would block the run forever, a device never ends), and no more than
    `limit` (max-file-size) bytes are read, even if the file grows."""
    from patchaudit.files.reader import read_bytes

    try:
        return read_bytes(path, limit)
    except OSError:  # ReadError: the per-file pass has reported it
        return None


def _ordered_sets(paths: list[str], plan, errors: list) -> list[tuple[str, str, int, bool | str]]:
    """(path, set name, position, ordered) per patch: the sets and order the recipes give
    (pipeline/plan.py `stacks`: one set per checkout of a recipe, in the order applied, and
    its alternatives' sets per sibling folder: "recipe"), else a
    quilt `series` file's (True), else one set per folder in name order, which no
    build is known to follow (not ordered: PA304 then reports only patches that conflict
    in every order: False)."""
    out: list[tuple[str, str, int, bool | str]] = []
    placed: set[str] = set()
    wanted = {os.path.abspath(p): p for p in paths}
    from patchaudit.pipeline.plan import stacks

    for name, _, members in stacks(plan) if plan is not None else []:
        for k, absolute in enumerate(members):
            p = wanted.get(absolute)
            if p is not None and absolute not in placed:
                placed.add(absolute)
                out.append((p, name, k, "recipe"))
    rest = [p for p in paths if os.path.abspath(p) not in placed]
    for p, set_name, pos in order_patch_set(rest, errors):
        note(os.path.join(set_name, "series"))
        out.append((p, set_name, pos, os.path.isfile(os.path.join(set_name, "series"))))
    out.sort(key=lambda t: (t[1], t[2], os.path.basename(t[0]), t[0]))
    return out


def run_patch_set_rules(files, rules, settings, result, plan=None, others=()) -> None:
    """Run the selected set rules over the patches among `files`; extend `result`.
    `plan` (pipeline/plan.py) gives the sets and orders of the build's recipes; `others`
    are the project root's patches outside the run (pipeline/plan_inputs.py): a set that
    holds a patch of the run is judged whole, as the root run judges it (the caller keeps
    the findings of the run's files)."""
    from patchaudit.inputs.discover import PATCH
    from patchaudit.inputs.patches import read_patch
    from patchaudit.pipeline.baseline import assign_fingerprints
    from patchaudit.units import PatchUnit

    set_rules = [r for r in rules if r.sees_patch_set() and needs_met(r, engine=None, tokenizer=None)]
    if not set_rules:
        return
    units = []
    own = [f.path for f in files if f.kind == PATCH]
    placed = _ordered_sets(own + [f.path for f in others if f.kind == PATCH], plan, result.errors)
    wanted = {os.path.abspath(p) for p in own}
    judged = {name for path, name, _, _ in placed if os.path.abspath(path) in wanted}
    for path, set_name, _, ordered in placed:
        if set_name not in judged:
            continue
        data = _read_regular(path, settings.max_file_size)
        if data is None:
            continue  # the per-file pass has reported it
        try:
            patch = read_patch(path, data)
        except Exception as exc:  # one patch never costs the set rules the others
            result.errors.append(FileError(path, f"internal error reading the patch for the patch-set rules: {exc!r}"))
            continue
        unit = PatchUnit(path=path, patch=patch, problems=patch.problems, set_name=set_name, set_ordered=ordered)
        units.append(unit)
    by_path = {u.path: u for u in units}
    findings: dict[str, list[Finding]] = {}
    for r in set_rules:
        inst = r(None, context_for(r, settings))
        try:
            inst.check_patch_set(units)
        except RunError:
            raise
        except Exception as exc:  # one rule's crash never stops the run
            where = units[0].path if units else "."
            result.errors.append(FileError(where, f"rule {r.code} crashed on the patch set: {exc!r}"))
            continue
        hunk_index: dict[int, tuple[list[int], list]] = {}  # per patch: its hunks by line, built once
        for unit, rep, related in inst.set_reports:
            f = to_finding(unit, r, rep)
            if f is None:
                continue
            f.trace = [TraceStep(p, line, note) for p, line, note in related]
            f.context = _hunk_context(unit.patch, f.line, hunk_index)
            findings.setdefault(unit.path, []).append(f)
    reports_unused = any("unused-suppression" in r.roles for r in rules)
    bare_used: set[tuple[str, int]] = set()
    for path, fs in findings.items():
        unit = by_path[path]
        fs = apply_per_file_ignores(fs, settings)
        view = suppressible_patch_lines(unit.patch)
        kept, _ = apply_suppressions(fs, view)
        if reports_unused:
            dropped = {f.line for f in fs} - {f.line for f in kept}
            for line in dropped:
                ok, codes = parse_suppression(view[line - 1])
                if ok and codes is None:
                    bare_used.add((path, line))
        settle_regions(kept, cast("PatchFile", unit.patch).lines)  # regions end after they start
        attach_source(kept, cast("PatchFile", unit.patch).lines)  # the text report's source frame
        assign_fingerprints(kept, cast("PatchFile", unit.patch).lines, is_patch=True)
        result.findings.extend(kept)
    if bare_used:
        # a blanket `# patchaudit: ignore` used only by a set rule is not unused
        unused = {r.code for r in rules if "unused-suppression" in r.roles}
        result.findings[:] = [f for f in result.findings if not (f.code in unused and (f.path, f.line) in bare_used)]


def _hunk_context(patch, line: int, index: dict | None = None) -> list[str]:
    """The text of the hunk holding patch line `line` (found by bisection: a set rule may
    report thousands of findings in a patch of thousands of hunks)."""
    from bisect import bisect_right

    key = id(patch)
    if index is None or key not in index:
        hunks = sorted((h for _, h in patch.iter_hunks()), key=lambda h: h.header_line)
        built = ([h.header_line for h in hunks], hunks)
        if index is None:
            index = {}
        index[key] = built
    starts, hunks = index[key]
    k = bisect_right(starts, line) - 1
    if k >= 0 and hunks[k].header_line <= line <= hunks[k].end_line:
        return patch.hunk_text(hunks[k])
    return []
