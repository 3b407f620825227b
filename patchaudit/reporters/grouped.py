"""`--output-format grouped`: the findings grouped by file, as ruff's `grouped`.

    examples/rollout_env.py:
      9:5 PA104 `SGLANG_MM_AVOID_RETOKENIZE` set to '0'

One heading per file, then each finding as `line:col CODE [*] headline` (the
headline of its message: patchaudit/model/message.py), then the text report's
summary.  `--quiet` leaves the summary out.
"""

from __future__ import annotations

from typing import Any

from patchaudit.model.escape import safe_lines, visible
from patchaudit.model.message import split_message
from patchaudit.reporters.fixable import fixable
from patchaudit.reporters.text import closing, style, terminal_width, wrap


def render(
    result,
    *,
    color: bool = False,
    rules=None,
    quiet: bool = False,
    unsafe_fixes: bool = False,
    width: int | None = None,
    **_: Any,
) -> str:
    width = width or terminal_width()
    by_file: dict[str, list] = {}
    for f in result.findings:
        by_file.setdefault(f.path, []).append(f)
    out: list[str] = []
    for path, findings in by_file.items():
        out.append(f"{style(visible(path), color, bold=True)}:")
        at_width = max(len(f"{f.line}:{f.column}") for f in findings)
        for f in findings:
            star = " [*]" if fixable(f, unsafe_fixes) else ""
            where = f"{f.line}:{f.column}".ljust(at_width)
            text = f"{where} {visible(f.code)}{star} {visible(split_message(f.message).headline)}"
            out += wrap(text, width, "  ", " " * (at_width + 3))
        out.append("")
    body = safe_lines("".join(line + "\n" for line in out))
    if quiet:
        return body
    return body + closing(result, unsafe_fixes=unsafe_fixes, width=width)
