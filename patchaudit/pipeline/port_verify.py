"""The rules pass of `patchaudit port`: PA204 (the calls of the ported code against the
new signatures) and the TITO rules (PA101-PA107), run by `bump`'s real pipeline on the
new release with the ported set applied, in a temporary folder.

A finding is the port's doing when it is on a line a ported hunk added and the same
rule did not say the same of that line on the old release with the old set (the
baseline, `bump` OLD -> OLD): those hunks are flagged with the finding.
"""

from __future__ import annotations

import copy
import os
import tempfile
from typing import Any

from patchaudit.model.findings import Finding
from patchaudit.pipeline.port_hunks import HunkPort


def port_check_codes() -> list[str]:
    """The rules the pass runs: those whose role is "port-check" (`Rule.roles`): the
    call-signature check and the token-in/token-out family."""
    from patchaudit.config.registry import codes_with_role

    return list(codes_with_role("port-check"))


def _settings(settings: Any) -> Any:
    codes = port_check_codes()
    s = copy.copy(settings)
    s.select = list(codes)
    s.extend_select = []
    s.ignore = [c for c in getattr(settings, "ignore", []) or [] if c not in codes]
    return s


def _keys(findings: list[Finding], texts: dict[str, list[str]]) -> dict[tuple[str, str], Finding]:
    """(code, the stripped text of the patch line) -> finding, for findings on added lines."""
    out: dict[tuple[str, str], Finding] = {}
    for f in findings:
        lines = texts.get(os.path.abspath(f.path))
        if lines is None or not (0 < f.line <= len(lines)):
            continue
        raw = lines[f.line - 1]
        if raw.startswith("+"):
            out.setdefault((f.code, raw[1:].strip()), f)
    return out


def _bump(paths: list[str], engine: str, specs: tuple[str, str], settings: Any, strip: int | None) -> list[Finding]:
    from patchaudit.pipeline.bump import run_bump

    report = run_bump(paths, engine, specs[0], specs[1], _settings(settings), strip=strip)
    return list(report.findings)


def rules_pass(
    rows: list[HunkPort],
    outs: list[tuple[str, str]],
    old_paths: list[str],
    engine: str,
    specs: tuple[str, str],
    settings: Any,
    strip: int | None,
) -> dict[tuple[str, int], str]:
    """(patch, @@ line) -> the reason, for every ported hunk a rule of `port_check_codes()` finds fault
    with that it did not on the old release.  `outs`: (input patch, ported text)."""
    texts: dict[str, list[str]] = {}
    owner: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="patchaudit-port-") as tmp:
        paths = []
        for k, (src, text) in enumerate(outs):
            p = os.path.join(tmp, f"{k:03d}-{os.path.basename(src)}")
            with open(p, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
            paths.append(p)
            texts[os.path.abspath(p)] = text.split("\n")
            owner[os.path.abspath(p)] = src
        # OLD -> NEW: PA204 judges the calls against NEW's signatures and what changed since OLD
        new_findings = _bump(paths, engine, specs, settings, strip) if paths else []
    old_texts: dict[str, list[str]] = {}
    for p in old_paths:
        with open(p, encoding="utf-8", errors="surrogateescape") as fh:
            old_texts[os.path.abspath(p)] = fh.read().split("\n")
    base = _keys(_bump(old_paths, engine, (specs[0], specs[0]), settings, strip), old_texts) if old_paths else {}
    fresh = {k: f for k, f in _keys(new_findings, texts).items() if k not in base}
    return _blame(rows, fresh, owner)


def _blame(rows: list[HunkPort], fresh: dict[tuple[str, str], Finding], owner: dict[str, str]) -> dict:
    """The ported hunks that added the lines the fresh findings are on."""
    out: dict[tuple[str, int], str] = {}
    for (code, text), f in fresh.items():
        src = owner.get(os.path.abspath(f.path))
        for r in rows:
            if r.patch == src and r.ported and r.status != "dropped" and text in r.added_texts:
                out.setdefault((r.patch, r.header_line), f"rules\t{code}: {f.message}")
    return out


__all__ = ["port_check_codes", "rules_pass"]
