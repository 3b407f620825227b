"""`--output-format rdjson`: reviewdog's Diagnostic Format (`reviewdog -f=rdjson`).

One `DiagnosticResult`: `source` (patchaudit and its home), and per finding a
`Diagnostic` with `message`, `location` (`path`, `range` with 1-based `start` and
exclusive `end`; columns count UTF-8 bytes, as reviewdog does, from the reported
line's text), `severity` (`ERROR`, `WARNING`, `INFO`), `code` (`value`, `url`: the
rule's documentation), `suggestions` (the finding's fix, whole lines replaced:
reviewdog posts them as suggested changes) and `related_locations` (the trace).
Strings are exact, as in the json report.
"""

from __future__ import annotations

from typing import Any

from patchaudit.model.escape import data, json_text

SEVERITY = {"error": "ERROR", "warning": "WARNING", "info": "INFO"}


def _byte_column(text: str | None, column: int) -> int:
    """A 1-based code-point column of `text` as a 1-based UTF-8 byte column."""
    if text is None:
        return column
    return len(text[: column - 1].encode("utf-8", "surrogatepass")) + 1


def _range(f) -> dict[str, Any]:
    line, column, end_line, end_column = f.region()
    source = f.source or []
    first = source[0] if source else None
    last = source[end_line - line] if 0 <= end_line - line < len(source) else None
    return {
        "start": {"line": line, "column": _byte_column(first, column)},
        "end": {"line": end_line, "column": _byte_column(last, end_column) if last is not None else end_column},
    }


def _suggestions(f) -> list[dict[str, Any]]:
    from patchaudit.reporters.fixable import offered_fix

    fx = offered_fix(f)
    if fx is None or not fx.safe:
        return []
    out = []
    for e in fx.edits:
        end = max(e.line, e.end_line + 1)
        out.append(
            {
                "range": {"start": {"line": e.line, "column": 1}, "end": {"line": end, "column": 1}},
                "text": data("".join(line + "\n" for line in e.new_lines)),
            }
        )
    return out


def diagnostic(f) -> dict[str, Any]:
    from patchaudit.reporters.json import rule_url

    out: dict[str, Any] = {
        "message": data(f.message),
        "location": {"path": data(f.path), "range": _range(f)},
        "severity": SEVERITY[f.severity.value],
        "code": {"value": f.code},
    }
    url = rule_url(f.code)
    if url:
        out["code"]["url"] = url
    suggestions = _suggestions(f)
    if suggestions:
        out["suggestions"] = suggestions
    if f.trace:
        out["related_locations"] = [
            {
                "message": data(s.note),
                "location": {"path": data(s.path), "range": {"start": {"line": max(1, s.line)}}},
            }
            for s in f.trace
        ]
    return out


def render(result, *, color: bool = False, rules=None, **_: Any) -> str:
    from patchaudit.reporters.sarif import REPOSITORY_URL

    doc = {
        "source": {"name": "patchaudit", "url": REPOSITORY_URL},
        "diagnostics": [diagnostic(f) for f in result.findings],
    }
    return json_text(doc) + "\n"
