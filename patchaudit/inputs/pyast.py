"""The stdlib `ast` of a Python text, parsed once for everything that reads it before libcst.

Two cheap readers look at a unit's text before libcst parses it: the dataflow
rules' second pre-filter (patchaudit/analysis/gate.py) and statement pruning for local rules
(patchaudit/units/prune.py).  Both want the same `ast.parse` of the same text,
in the same process, one right after the other; `parse` keeps the last few.
Warnings of the parse (an invalid escape in a string is a SyntaxWarning since
Python 3.12) are not the user's business here: they are silenced.

It also holds the parse budget (`max-parse-size`, SECURITY.md promise 7).
libcst costs about 600 bytes of memory per byte of source (a 5 MB file took
3 GB, a 10 MB one aborted the process at 4 GiB) and parses about 0.7 MB/s;
`ast` costs about 150 bytes per byte.  No text over the budget is handed to
either: `parse` says it cannot read it (the dataflow gate then lets it
through, pruning keeps the whole text), and `run_rules.run_python_rules` reports
the unit as too large before anything parses it.  The budget is the run's
`max-parse-size`, clamped by `HARD_MAX_PARSE_SIZE`; `analyse.analyse_file` and
`parallel.scan` set it for the process (`set_parse_limit`), so every reader
of a text, wherever it is called from, sees the same limit.
"""

from __future__ import annotations

import ast
import warnings

#: what ast.parse raises on text it cannot read (deep nesting included)
PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError)
#: `parse`'s trees, least recently asked first: kept while they hold at most
#: `_CACHE_CHARS` characters of text, and the last `_CACHE_SIZE` whatever their size (an
#: `ast` tree takes about 30 bytes a character: ~30 MB at most).  Exact mode asks about
#: an engine file as patched, its slice and its definitions in turn, a few texts apart
_CACHE: dict[str, "ast.Module | None"] = {}
_CACHE_SIZE = 4
_CACHE_CHARS = 1_000_000
_CACHED_CHARS = [0]

#: default `max-parse-size`: about 1.3-1.6 GB and a minute or two of libcst with every rule
DEFAULT_MAX_PARSE_SIZE = 2 * 1024 * 1024
#: the configured `max-parse-size` is clamped to this (about 5 GB of libcst)
HARD_MAX_PARSE_SIZE = 8 * 1024 * 1024
_LIMIT = [DEFAULT_MAX_PARSE_SIZE]


def parse_limit(settings=None) -> int:
    """The parse budget in bytes: the settings' `max-parse-size` clamped to the hard
    maximum, or, without settings, the one in force in this process."""
    if settings is None:
        return _LIMIT[0]
    value = getattr(settings, "max_parse_size", None) or DEFAULT_MAX_PARSE_SIZE
    return max(1, min(int(value), HARD_MAX_PARSE_SIZE))


def set_parse_limit(settings) -> int:
    """Put the run's budget in force in this process (returns it)."""
    _LIMIT[0] = parse_limit(settings)
    return _LIMIT[0]


def text_size(text: str) -> int:
    """The text's size in UTF-8 bytes (what `max-parse-size` counts)."""
    n = len(text)
    if text.isascii():
        return n
    return len(text.encode("utf-8", "surrogatepass"))


def over_limit(text: str, limit: int | None = None) -> int | None:
    """The text's size when it is over the budget (`limit`, else the one in force), else None."""
    limit = _LIMIT[0] if limit is None else limit
    if len(text) <= limit // 4:  # at most 4 bytes a character: surely within
        return None
    size = text_size(text)
    return size if size > limit else None


def too_large_message(size: int, limit: int | None = None) -> str:
    limit = _LIMIT[0] if limit is None else limit
    return f"too large to analyse ({size} bytes, limit {limit}, max-parse-size)"


def parse_uncached(text: str) -> ast.Module | None:
    """`ast.parse(text)`, or None when ast cannot read it or the text is over the budget."""
    if over_limit(text) is not None:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text)
    except PARSE_ERRORS:
        return None


def parse(text: str) -> ast.Module | None:
    """`ast.parse(text)`, or None when ast cannot read it; the texts asked about last are
    kept (`_CACHE`).  The tree is shared: its readers never change it."""
    if over_limit(text) is not None:
        return None  # never parsed, never kept
    if text in _CACHE:
        tree = _CACHE.pop(text)
        _CACHE[text] = tree  # the most recent again
        return tree
    tree = parse_uncached(text)
    remember(text, tree)
    return tree


def remember(text: str, tree: ast.Module | None) -> None:
    """Keep `tree`, `parse(text)`'s tree parsed earlier and kept by its caller (exact
    mode's patched file, asked about again once its unit's rules run), as the most recent."""
    if text in _CACHE:
        _CACHE.pop(text)
    else:
        _CACHED_CHARS[0] += len(text)
    _CACHE[text] = tree
    while len(_CACHE) > _CACHE_SIZE and _CACHED_CHARS[0] > _CACHE_CHARS:
        _CACHED_CHARS[0] -= len(next(iter(_CACHE)))
        _CACHE.pop(next(iter(_CACHE)))


#: fields whose values are never nodes with children worth visiting: the context and
#: operator leaves (`Load`, `Add`, `Eq`...) that name nothing, and fields that hold a
#: string or a number in every node that has them (`name` is not one: Python 3.12's
#: `TypeAlias.name` is an `ast.Name`)
_LEAF_FIELDS = frozenset({"ctx", "op", "ops", "id", "attr", "arg", "asname", "module", "level", "kind", "type_comment"})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def children(node: ast.AST) -> list[ast.AST]:
    """`ast.iter_child_nodes(node)` (the same nodes, in its order) without the context and
    operator leaves, which have no children and are never a call, name or constant."""
    t = type(node)
    fields = _CHILD_FIELDS.get(t)
    if fields is None:
        fields = _CHILD_FIELDS[t] = tuple(f for f in t._fields if f not in _LEAF_FIELDS)
    out: list[ast.AST] = []
    for f in fields:
        v = getattr(node, f, None)
        if type(v) is list:
            out.extend(x for x in v if isinstance(x, ast.AST))
        elif isinstance(v, ast.AST):
            out.append(v)
    return out


def walk(node: ast.AST):
    """`ast.walk` (the same nodes, breadth first, in its order) without the context and
    operator leaves (`ast.Load`, `ast.Add`, `ast.Eq`...): the pre-filters look for names,
    calls and constants, and a third of the nodes `ast.walk` yields are those leaves."""
    from collections import deque

    todo = deque([node])
    pop, push, node_type = todo.popleft, todo.append, ast.AST
    fields_of = _CHILD_FIELDS
    while todo:
        node = pop()
        yield node
        t = type(node)
        fields = fields_of.get(t)
        if fields is None:
            fields = fields_of[t] = tuple(f for f in t._fields if f not in _LEAF_FIELDS)
        for f in fields:
            v = getattr(node, f, None)
            if type(v) is list:
                for x in v:
                    if isinstance(x, node_type):
                        push(x)
            elif isinstance(v, node_type):
                push(v)
