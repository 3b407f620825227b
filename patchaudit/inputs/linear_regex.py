"""Regular expressions a checkout chooses, run in linear time (google-re2).

A pattern from a checked tree (a recipe's `sed -E 's/(.+)+Q/.../'`, a rule option such as
`[tool.patchaudit.rules.PA105] pattern = "(a+)+b"`) must never reach Python's backtracking
`re`: one line of 42 characters can take longer than the age of the universe.  RE2 matches
in time linear in the text and bounds the memory of a compiled pattern (`MAX_PROGRAM`); it
has no back-references and no look-arounds, so a pattern that needs them is refused
(`NotLinear`, a ValueError, says why) rather than run.
"""

from __future__ import annotations

from typing import Any

#: the memory RE2 may give one compiled pattern (its default; `a{1000}{1000}` is refused)
MAX_PROGRAM = 8 << 20


class NotLinear(ValueError):
    """The pattern cannot run under RE2 (the message says why)."""


def compile_linear(pattern: str, *, ignore_case: bool = False, longest: bool = False) -> Any:
    """`pattern` compiled by RE2 (its object has `search`, `finditer`, `sub` as `re`'s has).
    `longest`: POSIX leftmost-longest matches (sed's, grep's) instead of Perl's first
    alternative.  NotLinear when RE2 refuses it or google-re2 is not installed."""
    try:
        import re2
    except ImportError:
        raise NotLinear("google-re2 is not installed: a pattern from the checkout is not run without it") from None
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = not ignore_case
    options.longest_match = longest
    options.max_mem = MAX_PROGRAM
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        raise NotLinear(_reason(exc)) from None


def _reason(exc: Exception) -> str:
    raw = exc.args[0] if exc.args else exc
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    hint = ""
    if "escape sequence: \\" in text and text.rstrip()[-1:].isdigit():
        hint = " (a back-reference)"
    elif "perl operator: (?" in text:
        hint = " (a look-around)"
    return f"RE2, the linear-time engine patterns from a checkout run under, cannot run it: {text}{hint}"


def re2_available() -> bool:
    """Whether google-re2 can be imported (a dependency; a broken install falls back safely)."""
    try:
        import re2  # noqa: F401
    except ImportError:
        return False
    return True
