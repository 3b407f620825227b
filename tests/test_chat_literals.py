"""analysis/chat_literals.py: a chat written with text only, media written as grid metadata."""

from __future__ import annotations

import textwrap

import ast

import pytest

from patchaudit.analysis.chat_literals import metadata_only, text_only_chat


def _call_and_arg(source: str) -> tuple[ast.FunctionDef | None, ast.Call, ast.expr]:
    """The call of `apply_chat_template` in `source`, the function it is made in, its argument
    (the analysis reads the standard library's `ast`)."""
    module = ast.parse(textwrap.dedent(source))
    found: list[tuple[ast.FunctionDef | None, ast.Call]] = []

    def visit(node: ast.AST, scope: ast.FunctionDef | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, ast.FunctionDef) else scope
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) \
                    and child.func.attr == "apply_chat_template":
                found.append((scope, child))
            visit(child, inner)

    visit(module, None)
    ((scope, call),) = found
    return scope, call, call.args[0]


TEXT = '[{"role": "system", "content": "be brief"}, {"role": "user", "content": [{"type": "text", "text": p}]}]'


@pytest.mark.parametrize(
    "body",
    [
        f"processor.apply_chat_template({TEXT}, tokenize=True)",
        f"m = {TEXT}\n    processor.apply_chat_template(m, tokenize=True)",
        'm = [{"role": "user", "content": f"say {p}"}]\n    processor.apply_chat_template(m, tokenize=True)',
        f"m = {TEXT}\n    state.m = None\n    log(m=1)\n    processor.apply_chat_template(m, tokenize=True)",
    ],
)
def test_a_chat_written_with_text_only(body: str) -> None:
    scope, call, arg = _call_and_arg(f"def f(processor, p, image):\n    {body}\n")
    assert text_only_chat(scope, call, arg)


@pytest.mark.parametrize(
    "body",
    [
        # an image item, a content that is not written here, a chat not written here
        'm = [{"role": "user", "content": [{"type": "image", "image": image}]}]',
        'm = [{"role": "user", "content": parts}]',
        "m = history",
        # written as text, then changed (or possibly changed) before the call
        f"m = {TEXT}\n    m.append({{'role': 'user', 'content': [{{'type': 'image'}}]}})",
        f"m = {TEXT}\n    m[0]['content'].append(image)",
        f"m = {TEXT}\n    add_image(m, image)",
        f"m = {TEXT}\n    m += extra",
        f"m = {TEXT}\n    if image:\n        m = history",
        f"m = {TEXT}\n    def later():\n        m.append(image)",
        f"m, n = {TEXT}, None",
        f"m = [*history, {TEXT}]",
        'm = [{"role": "user", "content": "describe", "images": [image]}]',
        f"m = {TEXT}\n    alias = m\n    alias.append(image)",
        f"m = {TEXT}\n    with open(p) as m:\n        pass",
        f"m = {TEXT}\n    for m in history:\n        pass",
    ],
)
def test_not_a_text_chat(body: str) -> None:
    scope, call, arg = _call_and_arg(
        f"def f(processor, p, image, parts, history, extra):\n    {body}\n    processor.apply_chat_template(m, tokenize=True)\n"
    )
    assert not text_only_chat(scope, call, arg)


def test_a_name_at_module_level_is_not_read() -> None:
    scope, call, arg = _call_and_arg(f"m = {TEXT}\nprocessor.apply_chat_template(m, tokenize=True)\n")
    assert not text_only_chat(scope, call, arg)


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ('[{"image_grid_thw": g}]', True),
        ('({"image_grid_thw": g}, {"video_grid_thw": v})', True),
        ('{"image_grid_thw": g}', True),
        ('[{"image_grid_thw": g, "image": img}]', False),
        ('[{"image_grid_thw": g}, img]', False),
        ('[*grids]', False),
        ("[{}]", False),
        ("[]", False),
        ("grids", False),
        ('[{key: g}]', False),
    ],
)
def test_media_written_as_grid_metadata(expr: str, expected: bool) -> None:
    node = ast.parse(expr, mode="eval").body
    assert metadata_only(node, ["image_grid_thw", "video_grid_thw"]) is expected
