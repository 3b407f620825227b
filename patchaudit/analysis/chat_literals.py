"""What a chat or a media argument written in the code holds, read from its syntax (libcst).

PA102 (rules/pa102_expanded_ids_as_rollout_tokens.py) asks these questions the dataflow
layer cannot answer, because list literals are not objects it follows element by element:

- `text_only_chat(scope, call, arg)`: is the chat that `processor.apply_chat_template(arg,
  tokenize=True)` renders written in the code with text content only?  Either `arg` is a
  list literal of message dicts, or a name bound once in `scope` (the function the call is
  made in, as the interpreter's frame knows it) to such a literal and never changed there
  (no method call on it, no item or augmented assignment, not passed to another call).  A
  message's `content` is a string (literal, f-string) or a list literal of
  `{"type": "text", ...}` dicts.  Anything else, or anything not read for
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

from patchaudit.inputs.cst import string_literal

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
            if key is None:
                return False
            if key == "content" and not _text_content(item.value):
                return False
    return True


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
    """The value `name` is assigned in `fn`, when that is its only binding and nothing in
    `fn` may change it (a method call on it, an item store, `+=`, passing it to a call
    other than `call`); else None."""
    values: list[cst.BaseExpression] = []
    todo: list[cst.CSTNode] = [fn.body]
    while todo:
        node = todo.pop()
        if isinstance(node, cst.Assign):
            for t in node.targets:
                if _names(t.target, name):
                    if not isinstance(t.target, cst.Name) or len(node.targets) != 1:
                        return None
                    values.append(node.value)
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For, cst.AsName, cst.NamedExpr, cst.Del)):
            target = node.name if isinstance(node, cst.AsName) else node.target
            if _names(target, name):
                return None
        elif isinstance(node, cst.Attribute) and _is(node.value, name):
            return None  # `messages.append(...)`, `messages.extend(...)`: it may change
        elif isinstance(node, cst.Subscript) and _is(node.value, name):
            return None  # `messages[0] = ...` (a read is refused too: simpler, rare)
        elif isinstance(node, cst.Call) and node is not call:
            if any(_is(a.value, name) for a in node.args):
                return None
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and node is not fn:
            if _mentions(node, name):
                return None  # a closure may change it
            continue
        todo.extend(node.children)
    return values[0] if len(values) == 1 else None


def _is(node: cst.CSTNode, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name


def _names(node: cst.CSTNode, name: str) -> bool:
    """Whether the target `node` binds `name` (itself, or inside a tuple/list target)."""
    if isinstance(node, cst.Name):
        return node.value == name
    return any(_names(c, name) for c in node.children)


def _mentions(node: cst.CSTNode, name: str) -> bool:
    todo = [node]
    while todo:
        n = todo.pop()
        if _is(n, name):
            return True
        todo.extend(n.children)
    return False
