"""A finding's message as a headline and help lines, for the text report and the editor.

Every rule writes its message in one convention (CONTRIBUTING.md, "Messages"):

    <what was found>: <why it is bad>; <what to do instead>

so the headline is the text before the first `: ` and the rest are help lines,
one per `; `.  Only separators at the message's top level count: a `: ` or `; `
inside backticks (code), brackets or parentheses belongs to the part it is in
(`(certain: \\`X\\` at y.py:952 takes \\`input_ids\\`)` stays in the headline).  A
trailing note the pipeline appends in parentheses (`(call continues past the
hunk; give --engine to confirm)`) becomes a note of its own, and a long headline
(over `LONG_HEADLINE` characters) that ends in a parenthesized aside gives the
aside to the help lines.

The message itself is never changed: JSON and SARIF carry it byte for byte; this
is only how a person reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: a headline longer than this gives a parenthesized aside at its end to the help lines
LONG_HEADLINE = 80
_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = {v: k for k, v in _OPEN.items()}


@dataclass(frozen=True)
class Parts:
    headline: str
    help: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _top_level(message: str, sep: str) -> list[int]:
    """Offsets of `sep` in `message` outside backticks and balanced brackets."""
    out: list[int] = []
    stack: list[str] = []
    code = False
    i, n = 0, len(message)
    while i < n:
        ch = message[i]
        if ch == "`":
            code = not code
        elif not code:
            if ch in _OPEN:
                stack.append(ch)
            elif ch in _CLOSE and stack and stack[-1] == _CLOSE[ch]:
                stack.pop()
            elif not stack and message.startswith(sep, i):
                out.append(i)
        i += 1
    if code or stack:  # an unbalanced message: no part is certain, keep it whole
        return []
    return out


def _trailing_note(message: str, notes: tuple[str, ...]) -> tuple[str, str | None]:
    for note in notes:
        tail = f" ({note})"
        if message.endswith(tail):
            return message[: -len(tail)], note
    return message, None


def _trailing_group(text: str) -> tuple[int, str] | None:
    """(offset, inner text) of a top-level `(...)` that ends `text`, or None."""
    if not text.endswith(")"):
        return None
    depth, code = 0, False
    for i in range(len(text) - 1, -1, -1):
        ch = text[i]
        if ch == "`":
            code = not code
        elif not code and ch == ")":
            depth += 1
        elif not code and ch == "(":
            depth -= 1
            if depth == 0:
                inner = text[i + 1 : -1].strip()
                return (i, inner) if i > 0 and inner else None
    return None


def split_message(message: str, notes: tuple[str, ...] = ()) -> Parts:
    """`message` as headline, help lines and notes (`notes`: the parenthesized texts the
    pipeline appends, shown apart when the message ends with one)."""
    body, note = _trailing_note(message.strip(), notes)
    colons = _top_level(body, ": ")
    if not colons:
        return Parts(body, [], [note] if note else [])
    head, rest = body[: colons[0]].strip(), body[colons[0] + 2 :]
    helps, start = [], 0
    # a long headline that ends in a parenthesized aside: the aside is the first help line
    aside = _trailing_group(head) if len(head) > LONG_HEADLINE else None
    if aside is not None:
        head, helps = head[: aside[0]].rstrip(), [aside[1]]
    for at in _top_level(rest, "; "):
        helps.append(rest[start:at])
        start = at + 2
    helps.append(rest[start:])
    helps = [h.strip() for h in helps if h.strip()]
    return Parts(head, helps, [note] if note else [])
