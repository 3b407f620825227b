"""What a chat or a media argument written in the code holds, read from its syntax (`ast`).

PA102 (rules/pa102_expanded_ids_as_rollout_tokens.py) asks these questions the dataflow
layer cannot answer, because list literals are not objects it follows element by element:

- `text_only_chat(scope, call, arg)`: is the chat that `processor.apply_chat_template(arg,
  tokenize=True)` renders written in the code with text content only?  Either `arg` is a
  list literal of message dicts, or a name bound once in `scope` (the function the call is
  made in, as the interpreter's frame knows it) to such a literal and used nowhere else
  there but in the call (no alias, method call, item store, rebinding or closure).  A
  message has only text keys (`role`, `content`, `name`...) and its `content` is a string
  (literal, f-string) or a list literal of `{"type": "text", ...}` dicts.  Anything else, or anything not read for
  certain, is not text-only.  Such a chat has no image, video or audio item, so the
  processor expands no placeholder.
- `dict_literals(node)`: the dict literals an argument is written as (SGLang's
  `image_data=[{"format": "processor_output", ...}]`);
- `metadata_only(node, keys)`: is a media argument a dict literal, or a list/tuple literal
  of dict literals, whose keys are all string literals among `keys` (grid metadata such as
  `image_grid_thw`, SGLang GLM-Image's target grids): it holds no image, so there is
  nothing for the engine to expand.

No finding, no rule code: the rule decides what these facts mean.
"""

from __future__ import annotations

import ast
from typing import Any, Iterable

__all__ = ["dict_literals", "metadata_only", "text_only_chat"]


def text_only_chat(scope: Any, call: ast.Call, arg: ast.expr) -> bool:
    """`scope`: the function `call` is made in (a name is not read at module level)."""
    if isinstance(arg, ast.Name):
        bound = _bound_once(scope, arg.id, call) if scope is not None else None
        if bound is None:
            return False
        arg = bound
    return _text_chat_literal(arg)


def metadata_only(node: ast.expr, keys: Iterable[str]) -> bool:
    allowed = set(keys)
    if isinstance(node, ast.Dict):
        dicts: list[ast.expr] = [node]
    elif isinstance(node, (ast.List, ast.Tuple)) and node.elts:
        dicts = list(node.elts)
        if any(isinstance(e, ast.Starred) for e in node.elts):
            return False
    else:
        return False
    for d in dicts:
        if not isinstance(d, ast.Dict) or not d.keys:
            return False
        for key in d.keys:
            if key is None or _string(key) not in allowed:
                return False
    return True


def dict_literals(node: Any) -> list[ast.Dict]:
    """The dict literals of an argument (itself, or the elements of a list/tuple literal)."""
    if isinstance(node, ast.Dict):
        return [node]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [e for e in node.elts if isinstance(e, ast.Dict)]
    return []


def _string(node: Any) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _text_chat_literal(node: ast.expr) -> bool:
    if not isinstance(node, (ast.List, ast.Tuple)) or not node.elts:
        return False
    for el in node.elts:
        if not isinstance(el, ast.Dict):
            return False
        for key, value in zip(el.keys, el.values):
            if key is None:
                return False
            k = _string(key)
            if k not in _MESSAGE_KEYS:
                return False  # `{"role": "user", "images": [...]}`: not read as text
            if k == "content" and not _text_content(value):
                return False
    return True


#: the keys of a chat message read as text (a message with any other key is not text-only)
_MESSAGE_KEYS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id", "reasoning_content"})


def _text_content(node: ast.expr) -> bool:
    if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes))):
        return True
    if not isinstance(node, (ast.List, ast.Tuple)):
        return False
    for el in node.elts:
        if not isinstance(el, ast.Dict):
            return False
        kinds = [_string(v) for k, v in zip(el.keys, el.values) if k is not None and _string(k) == "type"]
        if kinds != ["text"] or any(k is None for k in el.keys):
            return False
    return True


def _bound_once(fn: Any, name: str, call: ast.Call) -> ast.expr | None:
    """The value `name` is assigned in `fn` when that is its only binding and `name` is used
    nowhere else in `fn` but in `call`: an alias, a method call (`messages.append(...)`), an
    item store, `+=`, another call it is passed to, a closure, a loop or `with` target, any
    of them may change it or bind it again; else None.  A binding that is not an `ast.Name`
    (a parameter of a nested function, an import, `global`, an `except ... as`) counts as a use."""
    values: list[ast.expr] = []
    allowed: set[int] = {id(n) for n in ast.walk(call) if _is(n, name)}
    uses: list[Any] = []
    for stmt in fn.body:
        for node in ast.walk(stmt):
            if _is(node, name) or _binds(node, name):
                uses.append(node)
            if isinstance(node, ast.Assign) and any(_is(t, name) for t in node.targets):
                if len(node.targets) != 1:
                    return None
                values.append(node.value)
                allowed.add(id(node.targets[0]))
    if len(values) != 1 or any(id(n) not in allowed for n in uses):
        return None
    return values[0]


def _is(node: Any, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _binds(node: Any, name: str) -> bool:
    """A name libcst writes as a `Name` node that `ast` keeps as a string."""
    if isinstance(node, ast.arg):
        return node.arg == name
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.ExceptHandler)):
        return node.name == name
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return name in node.names
    if isinstance(node, ast.alias):
        return node.asname == name or node.name.split(".")[0] == name
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] == name
    if isinstance(node, (ast.MatchAs, ast.MatchStar)):
        return node.name == name
    if isinstance(node, ast.MatchMapping):
        return node.rest == name
    return False
