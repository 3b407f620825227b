"""The dataflow layer's library models: what a call the module does not define returns.

Part of the interpreter of patchaudit/analysis/dataflow.py.  A call the module
defines is analysed (flow_summaries.py); any other call is judged by its name
here: a mutator (`.append`) grows its receiver, a dict method (`.update`,
`.setdefault`, `.get`) reads or writes the heap, a tensor/list method or a
wrapper (`list()`, `torch.tensor()`) carries ids, a string method or `str()`
carries text, a class called with keywords (`Output(input_ids=ids)`) is a
record whose fields can be read back.  The spec's name sets (`FlowSpec.seq_wrappers`
...) say which names are which.  Anything else gives a clean value.
"""

from __future__ import annotations

import ast
from typing import cast

from patchaudit.analysis.flow_api import Arg, FlowState
from patchaudit.analysis.flow_stores import mutate
from patchaudit.analysis.flow_structure import Frame, is_none, string_literal
from patchaudit.analysis.flow_values import (
    ALL_KINDS,
    EMPTY,
    SEQ_KINDS,
    STR_KINDS,
    At,
    Env,
    Value,
    join,
    join_all,
)


def builtin(
    fl: FlowState,
    node: ast.Call,
    name: str | None,
    receiver: Value | None,
    receiver_path: str | None,
    args: list[Arg],
    line: "int | At",
    env: Env,
    fr: Frame,
) -> Value:
    spec = fl.spec
    func = node.func
    is_method = isinstance(func, ast.Attribute)
    if name is None:
        return EMPTY
    if is_method and name in spec.mutators:
        vals = [a.value for a in args if a.keyword is None]
        if name == "insert":
            vals = vals[1:]
        added = join_all(v.flat() for v in vals)
        mutate(fl, cast(ast.Attribute, func).value, node, receiver or EMPTY, added, env, fr, line)
        return EMPTY
    if is_method and name in ("update", "setdefault") and receiver is not None and receiver.refs:
        return _dict_method(fl, node, name, receiver, args, line)
    if is_method and receiver:
        got = _method_model(fl, node, name, receiver, args)
        if got is not None:
            return got
    if is_method and name in ("format", "join", "format_map"):
        return join_all(a.value.keep(STR_KINDS, fl.kind) for a in args)
    if is_method:
        # module-qualified wrappers: torch.tensor(...), np.array(...), copy.deepcopy(...)
        if not (isinstance(cast(ast.Attribute, func).value, (ast.Name, ast.Attribute)) and not receiver):
            return EMPTY
    if name in spec.str_wrappers or (is_method and name in spec.str_functions):
        return join_all(a.value.keep(STR_KINDS, fl.kind) for a in args if a.keyword is None)
    if name in spec.seq_wrappers or name in spec.all_wrappers:
        return _wrapper(fl, node, name, args, line)
    if name[:1].isupper() and any(a.keyword is not None and a.value for a in args):
        return _record(fl, node, name, args)
    return EMPTY


def _put_keyword(fl: FlowState, ref, a: Arg) -> None:
    """`name=value` of a call stored as the field `name` of the object `ref`."""
    at = fl._at(a.node)
    fl._set_field(
        ref,
        cast(str, a.keyword),  # callers pass keyword arguments only
        a.value.with_step(at, f"put under `{a.keyword}`"),
        a.node,
        at,
        is_none(a.node.value),
    )


def _dict_method(fl: FlowState, node: ast.Call, name: str, receiver: Value, args: list[Arg], line: "int | At") -> Value:
    """`d.update(...)`, `d.setdefault(k, v)` on dicts built in the module."""
    for ref in receiver.refs:
        if name == "update":
            for a in args:
                if a.keyword is None:
                    fl._copy_fields(ref, a.value, node)
                else:
                    _put_keyword(fl, ref, a)
        else:
            pos = [a for a in args if a.keyword is None]
            key = string_literal(pos[0].node.value) if pos else None
            if len(pos) > 1 and key is not None:
                fl._set_field(ref, key, pos[1].value, pos[1].node, line, is_none(pos[1].node.value))
    if name == "setdefault":
        pos = [a for a in args if a.keyword is None]
        key = string_literal(pos[0].node.value) if pos else None
        return fl._field(receiver, key, node) if key is not None else EMPTY
    return EMPTY


def _method_model(fl: FlowState, node: ast.Call, name: str, receiver: Value, args: list[Arg]) -> Value | None:
    """A method called on a tainted receiver: its result, or None when no model knows it."""
    spec = fl.spec
    if name in spec.all_methods:
        return receiver
    if name in spec.seq_methods:
        return receiver.keep(SEQ_KINDS, fl.kind)
    if name in ("get", "pop"):
        pos = [a for a in args if a.keyword is None]
        key = string_literal(pos[0].node.value) if pos else None
        if key is not None:
            return fl._field(receiver, key, node)
        return receiver.flat() if receiver.t else EMPTY
    if name in ("values", "items") and receiver.refs:
        return join_all(fe.value for ref in sorted(receiver.refs) for fe in fl._heap[ref].fields.values()).flat()
    if name in spec.str_methods:
        out = receiver.keep(STR_KINDS, fl.kind)
        if name in ("format", "join", "format_map"):
            out = join(out, join_all(a.value.keep(STR_KINDS, fl.kind) for a in args))
        return out
    return None


def _wrapper(fl: FlowState, node: ast.Call, name: str, args: list[Arg], line: "int | At") -> Value:
    """`list(x)`, `torch.tensor(x)`, `dict(...)`, `copy.deepcopy(x)`: the spec's wrappers."""
    spec = fl.spec
    kinds = ALL_KINDS if name in spec.all_wrappers else SEQ_KINDS
    pos = [a for a in args if a.keyword is None]
    out = join_all(a.value.keep(kinds, fl.kind) for a in pos)
    if name == "dict":
        ref = fl._alloc_obj(node)
        for a in args:
            if a.keyword is not None:
                _put_keyword(fl, ref, a)
            else:
                fl._copy_fields(ref, a.value, a.node)
        out = join(out, Value({}, None, frozenset({ref})))
    elif name in ("copy", "deepcopy"):
        out = join(out, Value({}, None, join_all(a.value.flat() for a in pos).refs))
    if out and name not in ("dict", "copy", "deepcopy", "cast"):
        out = out.with_step(line, f"through `{name}(...)`")
    return out


def _record(fl: FlowState, node: ast.Call, name: str, args: list[Arg]) -> Value:
    """A class not defined here (`Output(input_ids=ids, ...)`): its keyword fields can be read back."""
    ref = fl._alloc_obj(node)
    for a in args:
        if a.keyword is not None:
            at = fl._at(a.node)
            v = a.value.with_step(at, f"passed as `{a.keyword}=` to `{name}(...)`")
            fl._set_field(ref, a.keyword, v, a.node, at, is_none(a.node.value))
    return Value({}, None, frozenset({ref}))
