"""Version gates: the conditions around a monkey-patch (`if
version.parse(sglang.__version__) >= ...`, `if hasattr(X, "f")`), compiled to a
small tree (`Cond`) and evaluated against an engine's versions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from patchaudit.engine.versions import Version

# --------------------------------------------------------------------------
# version gates: the conditions around a patch, compiled to a small tree


@dataclass(frozen=True)
class Cond:
    """A compiled condition: op in {"ver", "lit", "parse", "base", "cmp",
    "not", "and", "or", "unknown"}."""

    op: str
    args: tuple = ()

    def evaluate(self, versions: dict[str, str], has: Callable[[str], bool | None] | None = None) -> Any:
        """True/False, a value (for "ver"/"lit"/...), or None when unknown.
        `has(dotted)` answers `hasattr` conditions from the engine source."""
        op = self.op
        if op == "has":
            return has(self.args[0]) if has is not None else None
        if op == "lit":
            return self.args[0]
        if op == "ver":
            return versions.get(self.args[0])
        if op == "parse":
            inner = self.args[0].evaluate(versions, has)
            return Version.parse(inner) if isinstance(inner, (str, Version)) else None
        if op == "base":
            inner = self.args[0].evaluate(versions, has)
            v = Version.parse(inner) if isinstance(inner, (str, Version)) else None
            return v.base_version if v is not None else None
        if op == "not":
            inner = self.args[0].evaluate(versions, has)
            return None if not isinstance(inner, bool) else not inner
        if op in ("and", "or"):
            vals = [a.evaluate(versions, has) for a in self.args]
            bools = [v if isinstance(v, bool) else None for v in vals]
            if op == "and":
                if any(v is False for v in bools):
                    return False
                return True if all(v is True for v in bools) else None
            if any(v is True for v in bools):
                return True
            return False if all(v is False for v in bools) else None
        if op == "cmp":
            cmp_op, left, right = self.args
            a, b = left.evaluate(versions, has), right.evaluate(versions, has)
            if a is None or b is None:
                return None
            try:
                if cmp_op in ("in", "not in"):
                    if not isinstance(b, tuple):
                        return None
                    hit = any(_eq(a, x) for x in b)
                    return hit if cmp_op == "in" else not hit
                if isinstance(a, Version) or isinstance(b, Version):
                    a2, b2 = Version.parse(a), Version.parse(b)
                    if a2 is None or b2 is None:
                        return None
                    a, b = a2, b2
                return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[cmp_op]
            except (TypeError, KeyError):
                return None
        return None

    def packages(self) -> set[str]:
        if self.op == "ver":
            return {self.args[0]}
        out: set[str] = set()
        for a in self.args:
            if isinstance(a, Cond):
                out |= a.packages()
        return out


def _eq(a: Any, b: Any) -> bool:
    if isinstance(a, Version) or isinstance(b, Version):
        va, vb = Version.parse(a), Version.parse(b)
        return va is not None and vb is not None and va == vb
    return a == b


UNKNOWN = Cond("unknown")


@dataclass(frozen=True)
class Gate:
    cond: Cond
    polarity: bool  # True: the patch runs when cond is true
    text: str  # the condition as written (for reports)

    def evaluate(self, versions: dict[str, str], has: Callable[[str], bool | None] | None = None) -> bool | None:
        v = self.cond.evaluate(versions, has)
        if not isinstance(v, bool):
            return None
        return v if self.polarity else not v

    def describe(self) -> str:
        return self.text if self.polarity else f"not ({self.text})"
