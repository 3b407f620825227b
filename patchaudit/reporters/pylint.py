"""`--output-format pylint`: pylint's parseable format, one line per finding, as ruff writes it.

    path:line: [CODE] message

The line editors' and CI problem matchers' pylint patterns read (`%f:%l: [%t%n] %m`
in errorformat).  Values are shown with `visible()`, so a finding is always one line.
"""

from __future__ import annotations

from typing import Any

from patchaudit.model.escape import safe_lines, visible


def render(result, *, color: bool = False, rules=None, **_: Any) -> str:
    lines = [f"{visible(f.path)}:{f.line}: [{visible(f.code)}] {visible(f.message)}" for f in result.findings]
    return safe_lines("".join(line + "\n" for line in lines))
