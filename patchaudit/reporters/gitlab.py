"""`--output-format gitlab`: GitLab Code Quality, a JSON array of issues (the subset of
the CodeClimate spec GitLab reads, as ruff writes it).

Each finding is `{description, check_name, fingerprint, severity, location: {path,
lines: {begin, end}}}`: `check_name` is the rule code, `severity` one of GitLab's
(`error` -> `major`, `warning` -> `minor`, `info` -> `info`), `fingerprint` an MD5 that
is unique in the report and stable across line moves (the finding's baseline
fingerprint, patchaudit/pipeline/baseline.py, with a counter for repeats), and `path`
relative to the folder the check ran in (GitLab resolves it from the repository
root: run from there).  Strings are exact, as in the json report.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from patchaudit.model.escape import data, json_text

SEVERITY = {"error": "major", "warning": "minor", "info": "info"}


def _path(path: str) -> str:
    p = path.replace(os.sep, "/")
    while p.startswith("./"):
        p = p[2:]
    if os.path.isabs(p):
        rel = os.path.relpath(p)
        p = rel.replace(os.sep, "/") if not rel.startswith("..") else p
    return p


def issue(f, seen: dict[str, int]) -> dict[str, Any]:
    line, _, end_line, _ = f.region()
    key = f.fingerprint or f"{f.line}:{f.column}:{f.message}"
    raw = f"{f.code}\0{data(f.path)}\0{key}"
    seen[raw] = seen.get(raw, 0) + 1
    digest = hashlib.md5(f"{raw}\0{seen[raw]}".encode("utf-8", "surrogateescape"), usedforsecurity=False)
    return {
        "description": f"{f.code} {f.message}",
        "check_name": f.code,
        "fingerprint": digest.hexdigest(),
        "severity": SEVERITY[f.severity.value],
        "location": {"path": data(_path(f.path)), "lines": {"begin": line, "end": end_line}},
    }


def render(result, *, color: bool = False, rules=None, **_: Any) -> str:
    seen: dict[str, int] = {}
    return json_text([issue(f, seen) for f in result.findings]) + "\n"
