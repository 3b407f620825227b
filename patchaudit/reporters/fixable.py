"""Which findings `--fix` would fix: ruff's `[*]` marker and its closing hint.

A finding is fixable when its rule offers the fix (patchaudit/pipeline/fix.py,
`effective_fix`) and the fix is safe, or unsafe and `--unsafe-fixes` is given; an
unsafe fix without `--unsafe-fixes` is a *hidden* fix, counted in the hint.
`--unfixable`/`--fixable` take the fix off a finding before this is asked
(commands/check.py).
"""

from __future__ import annotations

from typing import Any

from patchaudit.model.findings import Finding, Fix


def _rules() -> dict[str, Any]:
    from patchaudit.config.registry import all_rules

    return all_rules()


def offered_fix(f: Finding, rules: dict[str, Any] | None = None) -> Fix | None:
    """The fix `--fix` (or `--unsafe-fixes`) would apply to `f`, with its applicability."""
    if f.fix is None:
        return None
    from patchaudit.pipeline.fix import effective_fix

    return effective_fix(f, rules if rules is not None else _rules())


def fixable(f: Finding, unsafe: bool = False, rules: dict[str, Any] | None = None) -> bool:
    fx = offered_fix(f, rules)
    return fx is not None and (fx.safe or unsafe)


def counts(findings: list[Finding], unsafe: bool = False) -> tuple[int, int]:
    """(fixable, hidden): findings `--fix` fixes, and those only `--unsafe-fixes` would."""
    rules = _rules() if any(f.fix is not None for f in findings) else {}
    fixes = [fx for f in findings if (fx := offered_fix(f, rules)) is not None]
    applied = sum(1 for fx in fixes if fx.safe or unsafe)
    return applied, len(fixes) - applied


def hint(findings: list[Finding], unsafe: bool = False) -> str:
    """ruff's closing line about fixes, or "" when there is nothing to say."""
    n, hidden = counts(findings, unsafe)
    more = (
        f"{hidden} hidden fix{'es' if hidden != 1 else ''} can be enabled with the `--unsafe-fixes` option"
        if hidden
        else ""
    )
    if n:
        return f"[*] {n} fixable with the `--fix` option" + (f" ({more})." if more else ".")
    if more:
        return f"No fixes available ({more})."
    return ""
