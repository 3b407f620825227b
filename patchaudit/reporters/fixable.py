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


class _Declared:
    """A rule's declared `fix` (ruff's FixAvailability), as `effective_fix` reads it."""

    def __init__(self, fix: Any):
        self.fix = fix


_DECLARED: dict[str, Any] = {}


def _declared(code: str) -> Any:
    """The `fix` a rule class declares, read from its source (no rule module, and so no
    libcst, is imported to render a report: a replayed run stays light); the imported
    class when the source does not say it plainly."""
    if code in _DECLARED:
        return _DECLARED[code]
    import ast
    import importlib.util

    from patchaudit.config.local_rules import LOCAL
    from patchaudit.config.registry import all_rules, pack_index

    fix: Any = ...
    meta = pack_index().get(code)
    if code in LOCAL:
        fix = getattr(LOCAL[code], "fix", None)
    elif meta is not None:
        try:
            spec = importlib.util.find_spec(meta.module)
            if spec is None or not spec.origin:
                raise ImportError(meta.module)
            with open(spec.origin, encoding="utf-8") as fh:  # the pack's own source
                tree = ast.parse(fh.read())
            for node in tree.body:
                if isinstance(node, ast.ClassDef) and node.name == meta.cls:
                    for stmt in node.body:
                        if (
                            isinstance(stmt, ast.Assign)
                            and [getattr(t, "id", None) for t in stmt.targets] == ["fix"]
                            and isinstance(stmt.value, ast.Constant)
                        ):
                            fix = stmt.value.value
        except (OSError, SyntaxError, ValueError, AttributeError, ImportError):
            fix = ...
    if fix is ...:  # inherited or computed: ask the class
        fix = getattr(all_rules().get(code), "fix", None)
    _DECLARED[code] = fix
    return fix


def _rules(codes: set[str] | None = None) -> dict[str, Any]:
    """The rules of `codes`, each as its declared fix (all the pack's when None)."""
    if codes is None:
        from patchaudit.config.registry import pack_index

        codes = set(pack_index())
    return {c: _Declared(_declared(c)) for c in codes}


def offered_fix(f: Finding, rules: dict[str, Any] | None = None) -> Fix | None:
    """The fix `--fix` (or `--unsafe-fixes`) would apply to `f`, with its applicability."""
    if f.fix is None:
        return None
    from patchaudit.pipeline.fix import effective_fix

    return effective_fix(f, rules if rules is not None else _rules({f.code}))


def fixable(f: Finding, unsafe: bool = False, rules: dict[str, Any] | None = None) -> bool:
    fx = offered_fix(f, rules)
    return fx is not None and (fx.safe or unsafe)


def counts(findings: list[Finding], unsafe: bool = False) -> tuple[int, int]:
    """(fixable, hidden): findings `--fix` fixes, and those only `--unsafe-fixes` would."""
    rules = _rules({f.code for f in findings if f.fix is not None})
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
