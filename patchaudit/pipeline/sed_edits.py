"""The rules on the `sed -i` edits build scripts make to engine files (units/sed.py).

`run_sed_rules` runs once per run, after the per-file pass, in this process: for each
script (shell or Dockerfile) whose recipe steps include an in-place sed of a Python file
(pipeline/plan.py `Plan.seds`), it builds the sed units (with the run's engines when
given: the edit applied to the engine file; else the replacement text), runs the
selected Python rules on them and reports their findings at the script's line, with the
same per-file ignores, inline suppressions (a `# patchaudit: ignore[PA101]` on the sed's
line) and fingerprints as the per-file pass.  The per-file pass sees the script as text
only, so no finding comes twice.
"""

from __future__ import annotations

from typing import Any

from patchaudit.model.findings import FileError, Finding
from patchaudit.pipeline.results import FileResult


def run_sed_rules(plan, rules: list, settings, engines: Any, tokenizer: Any, result) -> None:
    from patchaudit.config.registry import PYTHON as K_PYTHON
    from patchaudit.files.reader import ReadError, read_text
    from patchaudit.inputs import source_lines
    from patchaudit.inputs.discover import classify
    from patchaudit.pipeline.baseline import assign_fingerprints
    from patchaudit.pipeline.plan import MAX_RECIPE_FILE
    from patchaudit.pipeline.run_rules import run_python_rules
    from patchaudit.pipeline.suppression import (
        apply_per_file_ignores,
        apply_suppressions,
        attach_source,
        dedupe_findings,
        settle_regions,
    )
    from patchaudit.units.sed import sed_units

    py_rules = [r for r in rules if K_PYTHON in r.kinds]
    scripts = list(dict.fromkeys(step.recipe for step, _ in plan.seds if any(f.endswith(".py") for f in step.files)))
    if not py_rules or not scripts:
        return
    for path in scripts:
        kind = classify(path) or "shell"
        try:
            text = read_text(path, min(settings.max_file_size, MAX_RECIPE_FILE))  # as the plan read it
        except (ReadError, OSError, UnicodeDecodeError):
            continue  # the per-file pass reports a script it cannot read
        fr = FileResult(path)
        findings: list[Finding] = []
        try:
            units = sed_units(path, kind, text, engines)
        except Exception as exc:  # one script never costs the run
            result.errors.append(FileError(path, f"internal error reading its sed edits: {exc!r}"))
            continue
        for unit in units:
            try:
                findings += run_python_rules(unit, py_rules, settings, fr, tokenizer)
            except Exception as exc:
                line = next(iter(unit.lines_map.values())).line if unit.lines_map else None
                fr.errors.append(FileError(path, f"internal error on a sed edit: {exc!r}", line))
        lines = source_lines(text)
        kept, _ = apply_suppressions(apply_per_file_ignores(dedupe_findings(findings), settings), lines)
        settle_regions(kept, lines)  # regions end after they start
        attach_source(kept, lines)  # the text report's source frame
        assign_fingerprints(kept, lines, is_patch=False)
        result.findings.extend(kept)
        result.errors.extend(fr.errors)
