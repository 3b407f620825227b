"""Finding fingerprints and baselines (`--write-baseline FILE`, `--baseline FILE`).

A fingerprint names a finding without naming its line number, so that it
survives edits above it and a patch regenerated with new hunk offsets:

    <primary>-<context>-<occurrence>

- *primary* (16 hex digits) hashes the rule code, the text of the reported
  line (whitespace-normalised; in a patch without its `+`/`-`/` ` column, and
  with the numbers of an `@@` header dropped) and the message (numbers
  dropped: messages quote line numbers and counts);
- *context* (8 hex digits) hashes the nearest non-blank line above and below,
  normalised the same way: it tells two copies of the same line apart;
- *occurrence* counts findings with the same primary in the file, in line
  order (it keeps fingerprints unique within a file, as SARIF wants).

The path is not part of the fingerprint; a baseline stores it beside it,
relative to the baseline file's folder, so a baseline works from any working
directory.

Matching a run against a baseline is by count: for each (path, primary) the
run may have as many findings as the baseline recorded and they are all old.
When it has more, the extra ones are new: baseline entries are paired first
with findings of the same context, then in line order, and what is left over
is reported.  So a finding that moved stays hidden, and a second copy of the
same problem is reported.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from patchaudit.files.atomic import write_atomic
from patchaudit.inputs import source_lines
from patchaudit.model.escape import data, json_text
from patchaudit.model.findings import Finding

VERSION = 1
#: a baseline (or a file fingerprinted) larger than this is not read
MAX_BASELINE_FILE = 256 * 1024 * 1024
_DIGITS = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")


class BaselineError(Exception):
    """A baseline file that cannot be read or written (exit code 2)."""


# --------------------------------------------------------------------------
# fingerprints


def _norm_line(text: str, is_patch: bool) -> str:
    if is_patch:
        if text.startswith("@@"):
            # a regenerated patch has new offsets: keep only the section text
            text = _DIGITS.sub("N", text)
        elif text[:1] in ("+", "-", " ") and not text.startswith(("+++ ", "--- ")):
            text = text[1:]
    return _SPACE.sub(" ", text).strip()


def _h(*parts: str, n: int) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:n]


def _neighbours(lines: list[str], index: int, is_patch: bool) -> tuple[str, str]:
    """The nearest non-blank line above and below lines[index] (normalised)."""
    above = below = ""
    for k in range(index - 1, -1, -1):
        t = _norm_line(lines[k], is_patch)
        if t:
            above = t
            break
    for k in range(index + 1, len(lines)):
        t = _norm_line(lines[k], is_patch)
        if t:
            below = t
            break
    return above, below


def assign_fingerprints(findings: Iterable[Finding], lines: list[str], is_patch: bool) -> None:
    """Fill `Finding.fingerprint` for findings of one file whose text is `lines`.

    `lines` are the file's lines as the findings' line numbers count them.
    Findings that already have a fingerprint keep it.
    """
    todo = sorted((f for f in findings if f.fingerprint is None), key=Finding.sort_key)
    seen: dict[str, int] = {}
    for f in todo:
        idx = f.line - 1
        text = _norm_line(lines[idx], is_patch) if 0 <= idx < len(lines) else ""
        primary = _h(f.code, text, _DIGITS.sub("N", f.message), n=16)
        above, below = _neighbours(lines, idx, is_patch) if 0 <= idx < len(lines) else ("", "")
        context = _h(above, below, n=8)
        k = seen.get(primary, 0)
        seen[primary] = k + 1
        f.fingerprint = f"{primary}-{context}-{k}"


def ensure_fingerprints(findings: list[Finding]) -> None:
    """Fingerprint findings that have none (the runner fingerprints what it
    reports; this covers anything else), reading their files once."""
    from patchaudit.inputs.discover import PATCH, classify

    todo: dict[str, list[Finding]] = {}
    for f in findings:
        if f.fingerprint is None:
            todo.setdefault(f.path, []).append(f)
    from patchaudit.files.reader import read_bytes

    for path, fs in todo.items():
        try:  # the one guarded reader: a regular file, bounded
            lines = source_lines(read_bytes(path, MAX_BASELINE_FILE).decode("utf-8", "surrogateescape"))
        except OSError:  # ReadError too
            lines = []
        assign_fingerprints(fs, lines, is_patch=classify(path) == PATCH)


def split_fingerprint(fp: str) -> tuple[str, str]:
    """(primary, context) of a fingerprint."""
    parts = fp.split("-")
    if len(parts) != 3:
        raise ValueError(fp)
    return parts[0], parts[1]


# --------------------------------------------------------------------------
# baseline files


@dataclass(frozen=True)
class Entry:
    path: str  # relative to the baseline's folder, with "/"
    code: str
    line: int
    message: str
    fingerprint: str


def _rel(path: str, base: Path) -> str:
    absolute = Path(os.path.abspath(path))
    try:
        return os.path.relpath(absolute, base).replace(os.sep, "/")
    except ValueError:  # another drive (Windows)
        return absolute.as_posix()


def write_baseline(path: str, findings: list[Finding]) -> int:
    """Record `findings` in `path`; returns the number written."""
    base = Path(os.path.abspath(path)).parent
    entries = []
    for f in findings:
        if f.fingerprint is None:
            raise BaselineError(f"{f.path}:{f.line}: finding without a fingerprint (internal error)")
        # a byte of a file name that is not UTF-8 is stored as the `\\xff` text every report uses
        # (patchaudit/model/escape.py); filter_new compares in the same form
        entries.append(
            {
                "path": data(_rel(f.path, base)),
                "code": f.code,
                "line": f.line,
                "message": data(f.message),
                "fingerprint": f.fingerprint,
            }
        )
    entries.sort(key=lambda e: (e["path"], e["line"], e["code"], e["fingerprint"]))
    doc = {
        "patchaudit-baseline": VERSION,
        "comment": "Findings accepted as they are; `patchaudit check --baseline` reports only new ones. "
        "Regenerate with `patchaudit check --write-baseline FILE`.",
        "findings": entries,
    }
    try:
        write_atomic(path, json_text(doc) + "\n")  # whole or not at all
    except OSError as exc:
        raise BaselineError(f"{path}: cannot write the baseline: {exc.strerror or exc}") from None
    return len(entries)


def read_baseline(path: str) -> list[Entry]:
    from patchaudit.files.reader import ReadError, read_bytes

    try:  # a regular file (never /dev/zero or a FIFO), bounded
        raw = read_bytes(path, MAX_BASELINE_FILE)
    except ReadError as exc:
        reason = exc.reason[len("cannot read: ") :] if exc.reason.startswith("cannot read: ") else exc.reason
        raise BaselineError(f"{path}: cannot read the baseline: {reason}") from None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise BaselineError(f"{path}:{line}: baseline is not valid UTF-8") from None
    except json.JSONDecodeError as exc:
        raise BaselineError(f"{path}:{exc.lineno}: baseline is not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise BaselineError(f"{path}: baseline is not read: JSON nested too deeply") from None
    except ValueError as exc:  # a number of more than 4300 digits (Python's int-string limit)
        raise BaselineError(f"{path}: baseline is not read: {str(exc).split(':')[0]}") from None
    if not isinstance(doc, dict) or "patchaudit-baseline" not in doc:
        raise BaselineError(
            f"{path}: not a patchaudit baseline (no 'patchaudit-baseline' version key); write one with --write-baseline"
        )
    if doc["patchaudit-baseline"] != VERSION:
        raise BaselineError(
            f"{path}: baseline version {doc['patchaudit-baseline']!r} is not supported "
            f"(this patchaudit writes version {VERSION}); regenerate it with --write-baseline"
        )
    items = doc.get("findings")
    if not isinstance(items, list):
        raise BaselineError(f"{path}: 'findings' must be a list")
    out = []
    for k, item in enumerate(items):
        try:
            fp = item["fingerprint"]
            split_fingerprint(fp)
            out.append(
                Entry(str(item["path"]), str(item["code"]), int(item.get("line", 0)), str(item.get("message", "")), fp)
            )
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError):  # "line": Infinity
            try:
                shown = repr(item)
            except (ValueError, RecursionError):  # pragma: no cover - json.loads refused those
                shown = f"a {type(item).__name__}"
            shown = shown if len(shown) <= 200 else shown[:197] + "..."
            raise BaselineError(
                f"{path}: findings[{k}]: expected an object with 'path', 'code' and a "
                f"fingerprint 'PRIMARY-CONTEXT-N', got {shown}"
            ) from None
    return out


def filter_new(findings: list[Finding], entries: list[Entry], baseline_path: str) -> tuple[list[Finding], int]:
    """The findings not covered by the baseline, and how many were hidden."""
    base = Path(os.path.abspath(baseline_path)).parent
    old: dict[tuple[str, str], list[Entry]] = {}
    for e in entries:
        old.setdefault((e.path, split_fingerprint(e.fingerprint)[0]), []).append(e)
    groups: dict[tuple[str, str], list[Finding]] = {}
    loose: list[Finding] = []
    for f in findings:
        if f.fingerprint is None:
            loose.append(f)
            continue
        groups.setdefault((data(_rel(f.path, base)), split_fingerprint(f.fingerprint)[0]), []).append(f)
    new: list[Finding] = list(loose)
    hidden = 0
    for key, cur in groups.items():
        recorded = old.get(key, [])
        if len(cur) <= len(recorded):
            hidden += len(cur)
            continue
        cur = sorted(cur, key=Finding.sort_key)
        left_old = sorted(recorded, key=lambda e: e.line)
        matched: set[int] = set()
        # 1. same neighbours: the same place in the file
        for e in list(left_old):
            ctx = split_fingerprint(e.fingerprint)[1]
            for i, f in enumerate(cur):
                if i not in matched and split_fingerprint(f.fingerprint)[1] == ctx:  # type: ignore[arg-type]
                    matched.add(i)
                    left_old.remove(e)
                    break
        # 2. the rest in line order
        for i, _f in enumerate(cur):
            if not left_old:
                break
            if i not in matched:
                matched.add(i)
                left_old.pop(0)
        hidden += len(matched)
        new.extend(f for i, f in enumerate(cur) if i not in matched)
    new.sort(key=Finding.sort_key)
    return new, hidden
