"""Rules that see the whole set of patches of a run (`Rule.check_patch_set`).

Most rules judge one file at a time (`runner.analyse_file`, cached and run in
workers).  A few questions are about the set: do two patches of one set change
the same lines (PA304)?  `run_patch_set_rules` answers them once per run,
after the per-file pass: it reads the run's patch files again (the scan is
cheap; only when such a rule is selected), groups them into sets and orders
them, calls each set rule's `check_patch_set` with all patch units, and turns
the reports into findings with the same per-file ignores, inline suppressions
and fingerprints as the per-file pass.

Sets and order: a folder holding a quilt `series` file is one set, of the
patches it lists (relative to that folder), in that order; the other patches
form one set per folder, in file name order (`0001-...`, `0002-...`).
"""

from __future__ import annotations

import os
from pathlib import Path

from patchaudit.findings import FileError, Finding, TraceStep


def _series(folder: Path, cache: dict[Path, list[str] | None]) -> list[str] | None:
    if folder not in cache:
        names = None
        f = folder / "series"
        try:
            if f.is_file():
                names = []
                for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
                    line = line.split("#", 1)[0].strip()
                    if line:
                        names.append(line.split()[0])   # quilt allows "name -p1" options
        except OSError:
            names = None
        cache[folder] = names
    return cache[folder]


def order_patch_set(paths: list[str]) -> list[tuple[str, str, int]]:
    """(path, set name, position) for each patch path, sorted by set and position."""
    cache: dict[Path, list[str] | None] = {}
    out = []
    for p in paths:
        absolute = Path(os.path.abspath(p))
        placed = None
        for folder in list(absolute.parents)[:3]:   # series may list patches in sub-folders
            names = _series(folder, cache)
            if names is None:
                continue
            rel = absolute.relative_to(folder).as_posix()
            if rel in names:
                placed = (str(folder), names.index(rel))
            else:
                placed = (str(folder), -1)      # in a quilt folder but not in its series: not applied
            break
        if placed is None:
            out.append((p, str(absolute.parent), 0))
        elif placed[1] >= 0:
            out.append((p, placed[0], placed[1]))
    out.sort(key=lambda t: (t[1], t[2], os.path.basename(t[0]), t[0]))
    return out


def _suppression_view(patch) -> list[str]:
    from patchaudit.runner import suppressible_patch_lines

    return suppressible_patch_lines(patch)


def run_patch_set_rules(files, rules, settings, result) -> None:
    """Run the selected set rules over the patches among `files`; extend `result`."""
    from patchaudit.baseline import assign_fingerprints
    from patchaudit.inputs.discover import PATCH
    from patchaudit.inputs.patches import read_patch
    from patchaudit.runner import (RunError, _context_for, _needs_met, apply_per_file_ignores,
                                   apply_suppressions, parse_suppression)
    from patchaudit.units import PatchUnit

    set_rules = [r for r in rules if r.sees_patch_set() and _needs_met(r, engine=None, tokenizer=None)]
    if not set_rules:
        return
    units = []
    for path, set_name, _ in order_patch_set([f.path for f in files if f.kind == PATCH]):
        try:
            if os.path.getsize(path) > settings.max_file_size:
                continue
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            continue  # the per-file pass has reported it
        patch = read_patch(path, data)
        unit = PatchUnit(path=path, patch=patch, problems=patch.problems)
        unit.set_name = set_name  # type: ignore[attr-defined]
        units.append(unit)
    by_path = {u.path: u for u in units}
    findings: dict[str, list[Finding]] = {}
    for r in set_rules:
        inst = r(None, _context_for(r, settings))
        try:
            inst.check_patch_set(units)
        except RunError:
            raise
        except Exception as exc:  # one rule's crash never stops the run
            where = units[0].path if units else "."
            result.errors.append(FileError(where, f"rule {r.code} crashed on the patch set: {exc!r}"))
            continue
        for unit, rep, related in inst.set_reports:
            f = unit.to_finding(r, rep)
            if f is None:
                continue
            f.trace = [TraceStep(p, line, note) for p, line, note in related]
            f.context = _hunk_context(unit.patch, f.line)
            findings.setdefault(unit.path, []).append(f)
    pa001 = any(r.code == "PA001" for r in rules)
    bare_used: set[tuple[str, int]] = set()
    for path, fs in findings.items():
        unit = by_path[path]
        fs = apply_per_file_ignores(fs, settings)
        view = _suppression_view(unit.patch)
        kept, _ = apply_suppressions(fs, view)
        if pa001:
            dropped = {f.line for f in fs} - {f.line for f in kept}
            for line in dropped:
                ok, codes = parse_suppression(view[line - 1])
                if ok and codes is None:
                    bare_used.add((path, line))
        assign_fingerprints(kept, unit.patch.lines, is_patch=True)
        result.findings.extend(kept)
    if bare_used:
        # a blanket `# patchaudit: ignore` used only by a set rule is not unused
        result.findings[:] = [f for f in result.findings
                              if not (f.code == "PA001" and (f.path, f.line) in bare_used)]


def _hunk_context(patch, line: int) -> list[str]:
    for _, hunk in patch.iter_hunks():
        if hunk.header_line <= line <= hunk.end_line:
            return patch.hunk_text(hunk)
    return []
