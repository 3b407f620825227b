"""The stdlib `ast` of a Python text, parsed once for everything that reads it before libcst.

Two cheap readers look at a unit's text before libcst parses it: the dataflow
rules' second pre-filter (rules/_gate.py) and statement pruning for local rules
(patchaudit/units/prune.py).  Both want the same `ast.parse` of the same text,
in the same process, one right after the other; `parse` keeps the last few.
Warnings of the parse (an invalid escape in a string is a SyntaxWarning since
Python 3.12) are not the user's business here: they are silenced.
"""

from __future__ import annotations

import ast
import warnings

#: what ast.parse raises on text it cannot read (deep nesting included)
PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError)
_CACHE: dict[str, "ast.Module | None"] = {}
_CACHE_SIZE = 4


def parse_uncached(text: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text)
    except PARSE_ERRORS:
        return None


def parse(text: str) -> ast.Module | None:
    """`ast.parse(text)`, or None when ast cannot read it; the last few texts are kept."""
    if text in _CACHE:
        return _CACHE[text]
    tree = parse_uncached(text)
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[text] = tree
    return tree
