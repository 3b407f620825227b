"""`--format json`: one JSON array of findings (the stable public shape).

Each finding is an object with code, name, severity (error/warning/info),
message, path, line, column, end_line, end_column, target ({path, line,
symbol} in the engine file for a finding in a patch, else null), trace (a list
of {path, line, note}), fingerprint, fix (as ruff: null, or {message,
applicability: "safe"|"unsafe", edits: [{line, end_line, content}]}, the edits
replacing lines `line`..`end_line` of the reported file with `content`, one
string per line; `end_line == line - 1` inserts before `line`) and url (the
rule's section of docs/rules.md, as SARIF's `helpUri`; null for a local rule).  Lines and columns are 1-based; the
end column is exclusive (the column after the region, as SARIF counts it), and
the end is always after the start.

`--output-format json-lines` writes the same objects, one per line (JSON Lines),
and nothing for a run without findings.

Strings are exact, except that a byte of a file name that is not UTF-8 is the
text `\\xff` (so the report is valid UTF-8); characters a terminal would act
on are JSON `\\u` escapes (patchaudit/model/escape.py, `json_text`).
"""

from __future__ import annotations

from typing import Any

from patchaudit.model.escape import json_text
from patchaudit.model.findings import Finding


def rule_url(code: str) -> str | None:
    """The rule's documentation page (docs/rules.md's section), or None for a local rule."""
    from patchaudit.config.local_rules import LOCAL
    from patchaudit.config.registry import pack_index
    from patchaudit.reporters.sarif import help_uri

    # the pack's static index: no rule module (nor libcst) is imported to render a report
    if code in LOCAL or code not in pack_index():
        return None
    return help_uri(code)


def finding_object(f: Finding) -> dict[str, Any]:
    """`Finding.to_json` (unchanged, byte for byte) with `fix` and `url`."""
    from patchaudit.reporters.fixable import offered_fix

    fx = offered_fix(f)
    return {**f.to_json(), "fix": fx.to_json() if fx is not None else None, "url": rule_url(f.code)}


def render(result, *, color: bool = False, rules=None, lines: bool = False, **_: Any) -> str:
    """One JSON array; `lines` (`--output-format json-lines`): one finding object per line."""
    if lines:
        return "".join(json_text(finding_object(f), indent=None) + "\n" for f in result.findings)
    return json_text([finding_object(f) for f in result.findings]) + "\n"
