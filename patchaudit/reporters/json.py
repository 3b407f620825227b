"""`--format json`: one JSON array of findings (the stable public shape).

Each finding is an object with code, name, severity (error/warning/info),
message, path, line, column, end_line, end_column, target ({path, line,
symbol} in the engine file for a finding in a patch, else null), trace (a list
of {path, line, note}) and fingerprint.
"""

from __future__ import annotations

import json


def render(result, *, color: bool = False, rules=None) -> str:
    return json.dumps([f.to_json() for f in result.findings], indent=2, ensure_ascii=False) + "\n"
