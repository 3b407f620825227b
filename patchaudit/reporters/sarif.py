"""`--format sarif`: SARIF 2.1.0 for GitHub code scanning and other viewers.

One run, with the rule pack as `tool.driver.rules` (short and full
descriptions, the whole rule documentation as help text and markdown, default
level and whether the rule is on by default, `helpUri`: the rule's section of
docs/rules.md), `driver.informationUri` (the project), one result per finding:

- `locations`: the reported file and region (1-based lines and columns, in
  Unicode code points, never zero-width: `Finding.region`), relative to
  `%SRCROOT%` (the working directory);
  the enclosing engine symbol of a finding in a patch as a logical location;
- `relatedLocations`: where a finding in a patch lands in the engine file
  (relative to `ENGINEROOT`), and places in other files a finding names
  (PA304's other patch);
- `codeFlows`: the trace of a dataflow rule (PA102, PA103) as one thread flow, each
  step at its own file's location (a whole-repository trace crosses modules);
- `partialFingerprints["patchaudit/v1"]`: the finding's fingerprint (see
  patchaudit/pipeline/baseline.py), stable across line moves;
- `fixes`: the finding's fix, when its rule offers one (`--fix`, or `--unsafe-fixes`
  for an unsafe one, says so in the description): one artifact change of the
  reported file, its line edits as replacements of whole lines.

Files that could not be read become `toolExecutionNotifications` and make
`executionSuccessful` false.  The output validates against the official
schema (tests/test_sarif.py).

URIs percent-encode the bytes of the file name, so a name that is not UTF-8 is
exact (`x%FF.py`); texts are as in the json report: exact, but an undecodable
byte is the text `\\xff` (patchaudit/model/escape.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from patchaudit.model.escape import json_text, path_bytes

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
#: the project's home: `driver.informationUri`, and the base of each rule's `helpUri`
REPOSITORY_URL = "https://github.com/patchaudit/patchaudit"
#: the rule reference generated from the rule docs (`patchaudit rules --format markdown`)
RULES_DOC = f"{REPOSITORY_URL}/blob/main/docs/rules.md"


def help_uri(code: str) -> str:
    """The rule's section of docs/rules.md (its heading is the code: anchor `#pa101`)."""
    return f"{RULES_DOC}#{code.lower()}"


FINGERPRINT_KEY = "patchaudit/v1"
_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def _quote(path: str) -> str:
    """A relative URI reference for `path`: its bytes percent-encoded."""
    return quote(path_bytes(path), safe="/")


def _file_uri(path: str) -> str:
    try:
        return Path(path).as_uri()
    except (UnicodeEncodeError, ValueError):
        posix = Path(path).as_posix()
        return "file://" + ("" if posix.startswith("/") else "/") + _quote(posix)


def _uri(path: str) -> dict[str, Any]:
    """An artifactLocation for a reported path (relative to %SRCROOT% when it can be)."""
    p = Path(path)
    if p.is_absolute():
        return {"uri": _file_uri(path)}
    posix = path.replace(os.sep, "/")
    while posix.startswith("./"):
        posix = posix[2:]
    if posix.startswith("../"):
        return {"uri": _file_uri(os.path.abspath(path))}
    return {"uri": _quote(posix), "uriBaseId": "%SRCROOT%"}


def _region(
    line: int, column: int | None = None, end_line: int | None = None, end_column: int | None = None
) -> dict[str, Any]:
    line = max(1, int(line))
    region: dict[str, Any] = {"startLine": line}
    if column is not None:
        region["startColumn"] = max(1, int(column))
    if end_line is not None:
        region["endLine"] = max(line, int(end_line))
        if end_column is not None:
            end_column = max(1, int(end_column))
            if region["endLine"] == line and column is not None and end_column <= region["startColumn"]:
                end_column = region["startColumn"] + 1  # never a zero-width region
            region["endColumn"] = end_column
    return region


def _section(doc: str, heading: str) -> str:
    marker = f"## {heading}"
    if marker not in doc:
        return ""
    body = doc.split(marker, 1)[1]
    body = body.split("\n## ", 1)[0]
    return " ".join(body.split())


def rule_descriptor(rule) -> dict[str, Any]:
    doc = rule.docs()
    summary = rule.summary() or rule.name
    tags = ["patchaudit"] + sorted(rule.needs)
    if rule.code.startswith("PA1"):
        tags.append("token-in-token-out")
    out: dict[str, Any] = {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": summary},
        "fullDescription": {"text": _section(doc, "What it does") or summary},
        "help": {"text": doc or summary, "markdown": f"# {rule.code} {rule.name}\n\n{doc}" if doc else summary},
        "defaultConfiguration": {"enabled": bool(rule.default_enabled), "level": _LEVEL[rule.severity.value]},
        "properties": {"tags": tags},
    }
    if rule.__module__.startswith("patchaudit.rules."):  # a local rule has no section in docs/rules.md
        out["helpUri"] = help_uri(rule.code)
    return out


def _physical(
    path: str, line: int, column: int | None = None, end_line: int | None = None, end_column: int | None = None
) -> dict[str, Any]:
    return {"physicalLocation": {"artifactLocation": _uri(path), "region": _region(line, column, end_line, end_column)}}


def result_object(f, rule_index: dict[str, int]) -> dict[str, Any]:
    location = _physical(f.path, *f.region())
    related: list[dict[str, Any]] = []
    if f.target is not None:
        if f.target.symbol:
            location["logicalLocations"] = [{"fullyQualifiedName": f.target.symbol, "kind": "function"}]
        where = f.target.path + (f":{f.target.line}" if f.target.line else "")
        sym = f" in {f.target.symbol}" if f.target.symbol else ""
        rel: dict[str, Any] = {
            "physicalLocation": {
                "artifactLocation": {
                    "uri": _quote(f.target.path.replace(os.sep, "/").lstrip("/")),
                    "uriBaseId": "ENGINEROOT",
                }
            }
        }
        if f.target.line:
            rel["physicalLocation"]["region"] = _region(f.target.line)
        rel["message"] = {"text": f"in the engine: {where}{sym}"}
        related.append(rel)
    # the whole trace is the thread flow, each step at its own file's location (a dataflow
    # rule's trace crosses the repository's modules); steps elsewhere are also related locations
    flow_steps = list(f.trace)
    for s in f.trace:
        if s.path != f.path:
            rel = _physical(s.path, s.line)
            rel["message"] = {"text": s.note}
            related.append(rel)
    out: dict[str, Any] = {
        "ruleId": f.code,
        "level": _LEVEL[f.severity.value],
        "message": {"text": f.message},
        "locations": [location],
    }
    if f.code in rule_index:
        out["ruleIndex"] = rule_index[f.code]
    if related:
        for k, rel in enumerate(related, 1):
            rel["id"] = k
        out["relatedLocations"] = related
    if f.fingerprint:
        out["partialFingerprints"] = {FINGERPRINT_KEY: f.fingerprint}
    fixes = _fixes(f)
    if fixes:
        out["fixes"] = fixes
    if flow_steps:
        steps = []
        for k, s in enumerate(flow_steps):
            loc = _physical(s.path, s.line)
            loc["message"] = {"text": s.note}
            steps.append({"location": loc, "executionOrder": k + 1})
        out["codeFlows"] = [{"message": {"text": f"trace of {f.code}"}, "threadFlows": [{"locations": steps}]}]
    return out


def _replacement(edit) -> dict[str, Any]:
    """Lines `line`..`end_line` replaced by `new_lines` (an insertion before `line` when
    `end_line == line - 1`): the deleted region runs from the start of `line` to the start
    of the line after `end_line`, so the inserted text ends with its line break."""
    deleted = {"startLine": edit.line, "startColumn": 1, "endLine": max(edit.line, edit.end_line + 1), "endColumn": 1}
    text = "".join(line + "\n" for line in edit.new_lines)
    return {"deletedRegion": deleted, "insertedContent": {"text": text}}


def _fixes(f) -> list[dict[str, Any]]:
    from patchaudit.reporters.fixable import offered_fix

    fx = offered_fix(f)
    if fx is None:
        return []
    how = "safe: --fix" if fx.safe else "unsafe: --fix --unsafe-fixes"
    change = {"artifactLocation": _uri(f.path), "replacements": [_replacement(e) for e in fx.edits]}
    return [{"description": {"text": f"{fx.description} ({how})"}, "artifactChanges": [change]}]


def to_sarif(result, rules=None) -> dict[str, Any]:
    from patchaudit import __version__
    from patchaudit.config.registry import all_rules

    rule_list = list(rules) if rules is not None else list(all_rules().values())
    known = {r.code for r in rule_list}
    registry = all_rules()
    for f in result.findings:  # findings of a rule not in `rules` still get a descriptor
        if f.code not in known and f.code in registry:
            rule_list.append(registry[f.code])
            known.add(f.code)
    rule_list.sort(key=lambda r: r.code)
    rule_index = {r.code: k for k, r in enumerate(rule_list)}
    errors = list(result.errors)
    notifications = []
    for e in errors:
        n: dict[str, Any] = {"level": "error", "message": {"text": e.message}}
        if e.path and e.path != ".":
            n["locations"] = [
                _physical(e.path, e.line) if e.line else {"physicalLocation": {"artifactLocation": _uri(e.path)}}
            ]
        notifications.append(n)
    invocation: dict[str, Any] = {"executionSuccessful": not errors}
    if notifications:
        invocation["toolExecutionNotifications"] = notifications
    cwd = _file_uri(os.getcwd())
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "patchaudit",
                        "informationUri": REPOSITORY_URL,
                        "version": __version__,
                        "semanticVersion": __version__,
                        "rules": [rule_descriptor(r) for r in rule_list],
                    }
                },
                "invocations": [invocation],
                "originalUriBaseIds": {
                    "%SRCROOT%": {
                        "uri": cwd.rstrip("/") + "/",
                        "description": {"text": "the folder patchaudit was run in"},
                    },
                    "ENGINEROOT": {"description": {"text": "the root of the engine source given with --engine"}},
                },
                "columnKind": "unicodeCodePoints",
                "results": [result_object(f, rule_index) for f in result.findings],
            }
        ],
    }


def render(result, *, color: bool = False, rules=None, **_: Any) -> str:
    return json_text(to_sarif(result, rules)) + "\n"
