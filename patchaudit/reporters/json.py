"""`--format json`: one JSON array of findings (the stable public shape).

Each finding is an object with code, name, severity (error/warning/info),
message, path, line, column, end_line, end_column, target ({path, line,
symbol} in the engine file for a finding in a patch, else null), trace (a list
of {path, line, note}) and fingerprint.  Lines and columns are 1-based; the
end column is exclusive (the column after the region, as SARIF counts it), and
the end is always after the start.

`--output-format json-lines` writes the same objects, one per line (JSON Lines),
and nothing for a run without findings.

Strings are exact, except that a byte of a file name that is not UTF-8 is the
text `\\xff` (so the report is valid UTF-8); characters a terminal would act
on are JSON `\\u` escapes (patchaudit/model/escape.py, `json_text`).
"""

from __future__ import annotations

from patchaudit.model.escape import json_text


def render(result, *, color: bool = False, rules=None, lines: bool = False) -> str:
    """One JSON array; `lines` (`--output-format json-lines`): one finding object per line."""
    if lines:
        return "".join(json_text(f.to_json(), indent=None) + "\n" for f in result.findings)
    return json_text([f.to_json() for f in result.findings]) + "\n"
