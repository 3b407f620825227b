"""Reporters: findings to text, json, json lines, sarif, github annotations, markdown,
and ruff's other formats: junit, gitlab (Code Quality), pylint, rdjson (reviewdog), grouped.

`FORMATS` names each output format: its module and the options its `render` takes
(`full` and `concise` are the text module's two shapes; `text` is `full`, today's
default output, kept under its old name).  The human formats (`HUMAN_FORMATS`) also
take the view options of the run (`unsafe_fixes`: what `[*]` marks; `width`).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

FORMATS: dict[str, tuple[str, dict[str, Any]]] = {
    "text": ("patchaudit.reporters.text", {"style": "full"}),
    "full": ("patchaudit.reporters.text", {"style": "full"}),
    "concise": ("patchaudit.reporters.text", {"style": "concise"}),
    "json": ("patchaudit.reporters.json", {}),
    "json-lines": ("patchaudit.reporters.json", {"lines": True}),
    "sarif": ("patchaudit.reporters.sarif", {}),
    "github": ("patchaudit.reporters.github", {}),
    "markdown": ("patchaudit.reporters.markdown", {}),
    "junit": ("patchaudit.reporters.junit", {}),
    "gitlab": ("patchaudit.reporters.gitlab", {}),
    "pylint": ("patchaudit.reporters.pylint", {}),
    "rdjson": ("patchaudit.reporters.rdjson", {}),
    "grouped": ("patchaudit.reporters.grouped", {}),
}

#: the formats that are text for a person (a summary line, colour, `--quiet` drops the summary)
HUMAN_FORMATS = ("text", "full", "concise", "grouped")


def available_formats() -> list[str]:
    out = []
    for name, (mod, _) in FORMATS.items():
        if importlib.util.find_spec(mod) is not None:
            out.append(name)
    return out


def render(fmt: str, result, *, color: bool = False, rules=None, quiet: bool = False, **view: Any) -> str:
    """Render a run result (`RunResult` or a bump report) in `fmt`; `quiet`: the findings
    only, without the summary of a human format; `view`: options of the human formats."""
    mod, options = FORMATS[fmt]
    module = importlib.import_module(mod)
    extra = dict(options)
    if fmt in HUMAN_FORMATS:
        extra.update(view)
        if quiet:
            extra["quiet"] = True
    return module.render(result, color=color, rules=rules, **extra)


def render_statistics(fmt: str, result, unsafe_fixes: bool = False) -> str:
    """`--statistics`: the number of findings per rule, most first (JSON for the
    machine formats, else ruff's table: count, code, `[*]` when `--fix` fixes some, name,
    then ruff's hint about fixes)."""
    from patchaudit.reporters.fixable import fixable, hint

    counts: dict[str, list[Any]] = {}
    for f in result.findings:
        row = counts.setdefault(f.code, [0, f.name, f.severity.value, 0])
        row[0] += 1
        row[3] += fixable(f, unsafe_fixes)
    rows = sorted(counts.items(), key=lambda kv: (-kv[1][0], kv[0]))
    if fmt in ("json", "json-lines", "sarif", "gitlab", "rdjson"):
        from patchaudit.model.escape import json_text

        return (
            json_text([{"code": c, "name": n, "severity": s, "count": k, "fixable": x} for c, (k, n, s, x) in rows])
            + "\n"
        )
    from patchaudit.model.escape import safe_lines, visible

    width = max((len(str(k)) for _, (k, _, _, _) in rows), default=1)
    marks = any(x for _, (_, _, _, x) in rows)
    lines = [
        f"{k:>{width}}\t{visible(c)}\t{('[*] ' if x else '[ ] ') if marks else ''}{visible(n)}"
        for c, (k, n, _, x) in rows
    ]
    more = hint(result.findings, unsafe_fixes)
    return safe_lines("".join(line + "\n" for line in lines) + (more + "\n" if more else ""))
