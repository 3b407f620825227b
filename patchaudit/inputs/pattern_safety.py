"""Whether a gitignore-style pattern is safe for Python's backtracking `re` (pathspec's
Python backend, used where google-re2 cannot be imported; inputs/discover.py).

A pattern such as `*a*a*a...b` backtracks exponentially on a long file name; one
with more wildcards than these bounds is refused with the reason (pure).
"""

from __future__ import annotations

#: the Python backend: at most this many wildcards crossing folders (`**`, and the implicit
#: leading one of a pattern without a slash), this many `*` in one segment, and in all
MAX_DEEP_WILDCARDS, MAX_SEGMENT_WILDCARDS, MAX_WILDCARDS = 2, 3, 5


def _wildcards(pattern: str) -> tuple[int, int, int]:
    """(folder-crossing wildcards, most `*` runs in one segment, all) of a gitignore pattern."""
    body = pattern[1:] if pattern.startswith("!") else pattern
    body = body.rstrip("/") if body.rstrip("/") else body
    segments: list[list[str]] = [[]]
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            segments[-1].append("x")
            i += 2
            continue
        if c == "[":  # a class: its `*` are literal
            j = body.find("]", i + 2)
            if j > 0:
                segments[-1].append("x")
                i = j + 1
                continue
        if c == "/":
            segments.append([])
        else:
            segments[-1].append(c)
        i += 1
    deep = 0
    most = total_segment = 0
    for seg in segments:
        text = "".join(seg)
        if text and set(text) == {"*"} and len(text) >= 2:
            deep += 1
            continue
        runs = sum(1 for k, ch in enumerate(text) if ch == "*" and (k == 0 or text[k - 1] != "*"))
        most = max(most, runs)
        total_segment += runs
    anchored = "/" in body
    if not anchored and not body.startswith("**"):
        deep += 1  # pathspec matches it in any folder: `^(?:.+/)?...`
    return deep, most, deep + total_segment


def safe_for_backtracking(pattern: str) -> str | None:
    """None, or why Python's backtracking `re` must not match this pattern."""
    stripped = pattern.strip()
    if not stripped or stripped.startswith("#"):
        return None
    deep, most, total = _wildcards(pattern.rstrip())
    if deep <= MAX_DEEP_WILDCARDS and most <= MAX_SEGMENT_WILDCARDS and total <= MAX_WILDCARDS:
        return None
    shown = pattern if len(pattern) <= 80 else pattern[:77] + "..."
    return (
        f"pattern {shown!r} has {total} wildcards: too many to match safely without the re2 engine "
        f"(Python's re would backtrack exponentially; install google-re2); pattern ignored"
    )
