"""`sed` substitutions (`s/A/B/[g]`) as linear-time (RE2) regular expressions.

`parse_substitution(script, extended)` reads one sed `s` command and returns a
`Substitution` (a pattern compiled by RE2, patchaudit/inputs/linear_regex.py: the script is
the checkout's, and `s/(.+)+Q/.../` under Python's backtracking `re` never ends on a long
engine line; POSIX leftmost-longest matching, as sed's; the replacement as literal parts and group
numbers, the `g` and `I` flags) or the reason it is not supported: a recipe reader
must never turn a sed it does not understand into a wrong edit.

Supported (GNU sed): any delimiter (`s|a|b|`), `\\delim` inside the parts; basic (BRE)
and, with `-E`/`-r`, extended (ERE) syntax: `.`, `*`, `^`, `$`, bracket expressions
without POSIX classes, `\\(`...`\\)` / `(`...`)` groups, `\\{m,n\\}` / `{m,n}`, GNU's
`\\+`, `\\?`, `\\|`, the escapes `\\n`, `\\t`, `\\s`, `\\S`, `\\w`, `\\W`, `\\b`; in the
replacement `&`, `\\1`-`\\9`, `\\&`, `\\n`, `\\t`; the flags
`g`, `I`/`i` and a count `N` (the Nth match only).  Not supported: an address before
the `s` (`/x/s/...`, `1,5s/...`), several commands in one script (`s/a/b/;s/c/d/`),
POSIX classes (`[[:alpha:]]`), `\\<`, `\\>`, `\\``, `\\'`, case conversion (`\\U`, `\\L`),
the flags `e`, `m`, `p`, `w`, and back-references `\\1`-`\\9` in the pattern (RE2 has none: a
linear-time engine cannot have them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from patchaudit.inputs.linear_regex import NotLinear, compile_linear


@dataclass
class Substitution:
    pattern: Any  # an RE2 pattern (search, sub, finditer as re's)
    parts: list = field(default_factory=list)  # str (literal) | int (group; 0: the whole match)
    global_: bool = False
    nth: int = 1
    source: str = ""  # the sed script

    def replacement(self, m: Any) -> str:
        return "".join(p if isinstance(p, str) else (m.group(p) or "") for p in self.parts)

    def apply_line(self, line: str) -> str:
        """One line as sed leaves it (sed works line by line: `.` never sees the newline)."""
        if self.global_:
            return self.pattern.sub(self.replacement, line)
        count = 0

        def once(m: Any) -> str:
            nonlocal count
            count += 1
            return self.replacement(m) if count == self.nth else m.group(0)

        return self.pattern.sub(once, line)

    def literal_replacement(self, pattern_literal: str | None) -> str | None:
        """The replacement text when it is known without a match: its literal parts, `&`
        and group references only when the whole pattern is a literal (else None)."""
        out = []
        for p in self.parts:
            if isinstance(p, str):
                out.append(p)
            elif p == 0 and pattern_literal is not None:
                out.append(pattern_literal)
            else:
                return None
        return "".join(out)


class Unsupported(ValueError):
    """The sed script uses syntax this reader does not translate (the message says which)."""


def split_command(script: str) -> tuple[str, str, str]:
    """(pattern, replacement, flags) of an `s` command; Unsupported otherwise."""
    s = script.strip()
    if not s.startswith("s") or len(s) < 4:
        raise Unsupported("not a single `s` command (an address, or another command)")
    delim = s[1]
    if delim in "\\\n" or delim.isalnum():
        raise Unsupported(f"delimiter {delim!r}")
    parts: list[str] = []
    cur: list[str] = []
    i = 2
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            nxt = s[i + 1]
            cur.append(nxt if nxt == delim else s[i : i + 2])
            i += 2
            continue
        if c == delim:
            parts.append("".join(cur))
            cur = []
            i += 1
            if len(parts) == 2:
                break
            continue
        cur.append(c)
        i += 1
    if len(parts) != 2:
        raise Unsupported("unterminated `s` command")
    flags = s[i:].strip()
    if not re.fullmatch(r"[gIi0-9]*", flags):
        raise Unsupported(f"flags {flags!r} (several commands, or flags e/m/p/w)")
    return parts[0], parts[1], flags


_BRE_ESCAPES = {"(": "(", ")": ")", "{": "{", "}": "}", "+": "+", "?": "?", "|": "|"}
_COMMON_ESCAPES = {"n": "\n", "t": "\t", "s": r"\s", "S": r"\S", "w": r"\w", "W": r"\W", "b": r"\b", ".": r"\.",
                   "*": r"\*", "[": r"\[", "]": r"\]", "^": r"\^", "$": r"\$", "/": "/", "\\": r"\\"}  # fmt: skip


def translate(pattern: str, extended: bool) -> str:
    """A sed BRE/ERE as an RE2 (and Python) pattern; Unsupported for what it cannot translate
    or RE2 cannot run."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            i += 2
            if nxt.isdigit() and nxt != "0":
                raise Unsupported(f"the back-reference \\{nxt} in the pattern (RE2, the linear-time engine, has none)")
            elif not extended and nxt in _BRE_ESCAPES:
                out.append(_BRE_ESCAPES[nxt])
            elif extended and nxt in "(){}+?|":
                out.append("\\" + nxt)
            elif nxt in _COMMON_ESCAPES:
                out.append(_COMMON_ESCAPES[nxt])
            else:
                raise Unsupported(f"the escape \\{nxt}")
            continue
        if c == "[":
            end = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("]", "^") else i + 1)
            if pattern[i + 1 : i + 3] == "^]":
                end = pattern.find("]", i + 3)
            if end < 0:
                raise Unsupported("an unterminated bracket expression")
            body = pattern[i + 1 : end]
            if "[:" in body or "[=" in body or "[." in body:
                raise Unsupported("a POSIX character class")
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
            continue
        if not extended and c in "(){}+?|":
            out.append("\\" + c)
        else:
            out.append(c)
        i += 1
    text = "".join(out)
    try:
        compile_linear(text)
    except NotLinear as exc:
        raise Unsupported(str(exc)) from None
    return text


def replacement_parts(replacement: str) -> list:
    out: list = []
    lit: list[str] = []
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            nxt = replacement[i + 1]
            i += 2
            if nxt.isdigit():
                out.extend(["".join(lit), int(nxt)])
                lit = []
            elif nxt in "ULEul":
                raise Unsupported(f"case conversion \\{nxt}")
            else:
                lit.append({"n": "\n", "t": "\t"}.get(nxt, nxt))
            continue
        if c == "&":
            out.extend(["".join(lit), 0])
            lit = []
        else:
            lit.append(c)
        i += 1
    out.append("".join(lit))
    return [p for p in out if p != ""]


def parse_substitution(script: str, extended: bool = False) -> Substitution:
    """The substitution of a sed script; Unsupported (a ValueError) naming what is not."""
    pattern, replacement, flags = split_command(script)
    nth = int("".join(ch for ch in flags if ch.isdigit()) or "1")
    ignore_case = "I" in flags or "i" in flags
    try:
        compiled = compile_linear(translate(pattern, extended), ignore_case=ignore_case, longest=True)
    except NotLinear as exc:
        raise Unsupported(str(exc)) from None
    parts = replacement_parts(replacement)
    missing = [p for p in parts if isinstance(p, int) and p > compiled.groups]
    if missing:  # GNU sed refuses it too ("invalid reference \\1 on `s' command's RHS")
        raise Unsupported(f"the reference \\{missing[0]} names a group the pattern does not have")
    return Substitution(compiled, parts, "g" in flags, max(nth, 1), script)


def pattern_literal(script: str, extended: bool = False) -> str | None:
    """The text a sed pattern matches when it is a plain literal (escaped metacharacters
    only: `self\\.load_mm_data(`), else None."""
    try:
        pattern, _, _ = split_command(script)
        translated = translate(pattern, extended)
    except Unsupported:
        return None
    plain = re.sub(r"\\(.)", r"\1", translated)
    if re.search(r"(?<!\\)[.*+?^$()\[\]{}|]", translated.replace("\\\\", "")):
        return None
    return plain
