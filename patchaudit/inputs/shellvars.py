"""Shell variables of a recipe, expanded within bounds (patchaudit/inputs/recipes.py).

`expand(text, env, script_dir, cwd, ...)` expands `${VAR}`, `${VAR:-d}`, `${VAR-d}`,
`${VAR:=d}`, `${VAR:+x}` and `$VAR` outside single quotes, and the command substitutions a
recipe reader knows (`$(dirname "$0")`, `$(pwd)`); any other is `UNKNOWN`.  A hostile
script can double a value per line (`A=$A$A`: 20 lines are a million times the first), so a
reference that would make the result longer than `MAX_EXPANDED`, or that comes after a
recipe's `MAX_EXPANSIONS` references (its `Budget`), expands to `UNKNOWN` too, and the
budget says so (`too_long`): such a value names no file.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

#: what an unknown variable or command substitution expands to
UNKNOWN = "\x00UNKNOWN\x00"
#: `${A:-${B:-...}}` nested deeper than this expands to UNKNOWN
MAX_EXPANSION_DEPTH = 20
#: a reference whose value would make one expanded command longer than this expands to
#: UNKNOWN (`A=$A$A` doubles a value per line: 20 lines are 2^20 times the first)
MAX_EXPANDED = 32 * 1024
#: variable references one recipe may expand; past them every reference is UNKNOWN
MAX_EXPANSIONS = 100_000
#: characters of expanded commands one recipe may hand to the word splitter, in all
MAX_RECIPE_TEXT = 1024 * 1024


@dataclass
class Budget:
    """What one recipe's expansions may still cost (MAX_EXPANSIONS, MAX_RECIPE_TEXT)."""

    expansions: int = 0  # variable references expanded
    text: int = 0  # characters of expanded commands split into words
    too_long: bool = False  # a reference expanded to UNKNOWN for MAX_EXPANDED or MAX_EXPANSIONS


def expand(
    text: str,
    env: dict,
    script_dir: str,
    cwd: str,
    used: dict | None = None,
    origins: dict | None = None,
    depth: int = 0,
    budget: Budget | None = None,
) -> str:
    """`text` with its variables and the command substitutions we know expanded (outside
    single quotes).  `used` collects the recipe variables the expansion read (with the
    variables those were built from: `origins`, per variable).  A reference past the
    recipe's `budget` (MAX_EXPANSIONS), or whose value would make the result longer than
    MAX_EXPANDED, expands to UNKNOWN (and `budget.too_long` is set)."""
    if depth > MAX_EXPANSION_DEPTH:
        return UNKNOWN
    budget = budget if budget is not None else Budget()
    out: list[str] = []
    size = 0  # of `out`, for MAX_EXPANDED
    i, n = 0, len(text)
    quote = ""
    while i < n:
        c = text[i]
        if c == "'" and quote != '"':
            quote = "" if quote == "'" else "'"
            out.append(c)
            i += 1
            continue
        if c == '"' and quote != "'":
            quote = "" if quote == '"' else '"'
            out.append(c)
            i += 1
            continue
        if quote == "'" or c != "$":
            out.append(c)
            size += 1
            i += 1
            continue
        if text.startswith("$(", i):
            end = _matching(text, i + 1, "(", ")")
            out.append(_substitution(text[i + 2 : end], script_dir, cwd))
            size += len(out[-1])
            i = end + 1
            continue
        if text.startswith("${", i):
            end = _matching(text, i + 1, "{", "}")
            m = _BRACED.match(text[i + 2 : end])
            if m is None:
                out.append(UNKNOWN)
                i = end + 1
                continue
            name, op, arg = m.group(1), m.group(2), m.group(3) or ""
            i = end + 1
        else:
            m = _PLAIN.match(text, i + 1)
            if m is None:
                out.append(c)
                i += 1
                continue
            name, op, arg = m.group(0), None, ""
            i = m.end()
        budget.expansions += 1
        if budget.expansions > MAX_EXPANSIONS:
            budget.too_long = True
            out.append(UNKNOWN)
            continue
        value = _lookup(name, env, script_dir)
        if value is not None and used is not None and name in env:
            used[name] = value
            used.update((origins or {}).get(name, {}))
        if op:
            empty = value is None or (op.startswith(":") and value == "")
            if op.endswith(("-", "=")) and empty:
                value = expand(arg.strip('"'), env, script_dir, cwd, used, origins, depth + 1, budget)
                if op.endswith("="):
                    env[name] = value
            elif op.endswith("+"):
                value = "" if empty else expand(arg, env, script_dir, cwd, used, origins, depth + 1, budget)
        if value is not None and size + len(value) > MAX_EXPANDED:
            budget.too_long = True
            value = None
        value = UNKNOWN if value is None else value
        out.append(value)
        size += len(value)
    return "".join(out)


_BRACED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*|BASH_SOURCE\[0\]|[0-9])(?:(:?[-=+?])(.*))?$", re.S)
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]")


def _matching(text: str, i: int, opener: str, closer: str) -> int:
    """The index of the `closer` matching the `opener` at `i` (nested ones counted)."""
    depth = 0
    for k in range(i, len(text)):
        if text[k] == opener:
            depth += 1
        elif text[k] == closer:
            depth -= 1
            if depth == 0:
                return k
    return len(text) - 1


def _substitution(inner: str, script_dir: str, cwd: str) -> str:
    s = inner.strip()
    if s == "pwd":
        return cwd
    if "dirname" in s and ("BASH_SOURCE" in s or "$0" in s):
        return script_dir
    return UNKNOWN


def _lookup(name: str, env: dict, script_dir: str) -> str | None:
    if name in ("0", "BASH_SOURCE[0]"):
        return posixpath.join(script_dir, "script")
    return env.get(name)
