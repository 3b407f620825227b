"""What a chat or a media argument written in the code holds, read from its syntax (libcst).

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

from typing import Iterable

import libcst as cst

from patchaudit.inputs.cst import string_literal, walk

__all__ = ["dict_literals", "metadata_only", "text_only_chat"]


def text_only_chat(scope: cst.FunctionDef | None, call: cst.Call, arg: cst.BaseExpression) -> bool:
    """`scope`: the function `call` is made in (a name is not read at module level)."""
    if isinstance(arg, cst.Name):
        bound = _bound_once(scope, arg.value, call) if scope is not None else None
        if bound is None:
            return False
        arg = bound
    return _text_chat_literal(arg)


def metadata_only(node: cst.BaseExpression, keys: Iterable[str]) -> bool:
    allowed = set(keys)
    if isinstance(node, cst.Dict):
        dicts: list[cst.BaseExpression] = [node]
    elif isinstance(node, (cst.List, cst.Tuple)) and node.elements:
        dicts = [e.value for e in node.elements]
        if any(isinstance(e, cst.StarredElement) for e in node.elements):
            return False
    else:
        return False
    for d in dicts:
        if not isinstance(d, cst.Dict) or not d.elements:
            return False
        for el in d.elements:
            if not isinstance(el, cst.DictElement) or string_literal(el.key) not in allowed:
                return False
    return True


def dict_literals(node: cst.CSTNode) -> list[cst.Dict]:
    """The dict literals of an argument (itself, or the elements of a list/tuple literal)."""
    if isinstance(node, cst.Dict):
        return [node]
    if isinstance(node, (cst.List, cst.Tuple)):
        return [e.value for e in node.elements if isinstance(e.value, cst.Dict)]
    return []


def _text_chat_literal(node: cst.BaseExpression) -> bool:
    if not isinstance(node, (cst.List, cst.Tuple)) or not node.elements:
        return False
    for el in node.elements:
        if isinstance(el, cst.StarredElement) or not isinstance(el.value, cst.Dict):
            return False
        for item in el.value.elements:
            if not isinstance(item, cst.DictElement):
                return False
            key = string_literal(item.key)
            if key not in _MESSAGE_KEYS:
                return False  # `{"role": "user", "images": [...]}`: not read as text
            if key == "content" and not _text_content(item.value):
                return False
    return True


#: the keys of a chat message read as text (a message with any other key is not text-only)
_MESSAGE_KEYS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id", "reasoning_content"})


def _text_content(node: cst.BaseExpression) -> bool:
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return True
    if not isinstance(node, (cst.List, cst.Tuple)):
        return False
    for el in node.elements:
        if isinstance(el, cst.StarredElement) or not isinstance(el.value, cst.Dict):
            return False
        kinds = [
            string_literal(i.value)
            for i in el.value.elements
            if isinstance(i, cst.DictElement) and string_literal(i.key) == "type"
        ]
        if kinds != ["text"] or any(not isinstance(i, cst.DictElement) for i in el.value.elements):
            return False
    return True


def _bound_once(fn: cst.FunctionDef, name: str, call: cst.Call) -> cst.BaseExpression | None:
    """The value `name` is assigned in `fn` when that is its only binding and `name` is used
    nowhere else in `fn` but in `call`: an alias, a method call (`messages.append(...)`), an
    item store, `+=`, another call it is passed to, a closure, a loop or `with` target, any
    of them may change it or bind it again; else None."""
    values: list[cst.BaseExpression] = []
    allowed: set[int] = {id(n) for n in walk(call) if _is(n, name)}
    uses: list[cst.Name] = []
    for node in walk(fn.body):
        if isinstance(node, cst.Name) and node.value == name:
            uses.append(node)
        elif isinstance(node, cst.Attribute):
            allowed.add(id(node.attr))  # `x.messages`: another name
        elif isinstance(node, cst.Arg) and node.keyword is not None:
            allowed.add(id(node.keyword))  # `f(messages=...)`: a keyword
        elif isinstance(node, cst.Assign) and any(_is(t.target, name) for t in node.targets):
            if len(node.targets) != 1:
                return None
            values.append(node.value)
            allowed.add(id(node.targets[0].target))
    if len(values) != 1 or any(id(n) not in allowed for n in uses):
        return None
    return values[0]


def _is(node: cst.CSTNode, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name
