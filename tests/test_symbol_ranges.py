"""A finding's symbol (`Target.symbol`, `PythonUnit.symbol_at`) comes from the `ast` tree of
the unit's text, and must be what libcst's positions gave: the same ranges, in the same
order, on every shape a definition takes; libcst answers where `ast` cannot read the text."""

from __future__ import annotations

import libcst as cst
import pytest

from patchaudit.units import PythonUnit, _cst_symbol_ranges, _symbol_ranges

SHAPES = '''\
import functools


@functools.cache
@staticmethod
def decorated(x):
    return x


class Outer(Base, metaclass=Meta):
    """doc"""

    attr = 1

    @property
    def prop(self):
        def inner():
            class Local:
                pass

            return Local
        return inner

    async def coro(self):
        async with ctx() as c:
            def in_with():
                return c
        return in_with

    if FLAG:
        def only_if(self):
            pass
    else:
        def only_else(self):
            pass

    try:
        def in_try(self):
            pass
    except ImportError:
        def in_except(self):
            pass
    else:
        def in_try_else(self):
            pass
    finally:
        def in_finally(self):
            pass

    for _ in range(2):
        def in_for(self):
            pass
    while False:
        def in_while(self):
            pass

    class Nested:
        def method(self):
            f = lambda: 1  # a lambda is no symbol
            return f
            # a trailing comment


match command:
    case [x]:
        def in_case():
            return x
    case _:
        pass


def last(
    a,
    b,
):
    return (
        a
        + b
    )
'''


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_ast_ranges_are_libcsts(newline):
    text = SHAPES.replace("\n", newline)
    module = cst.parse_module(text)
    got = _symbol_ranges(module, text)
    assert got == _cst_symbol_ranges(module)
    names = [name for _, _, name in got]
    assert "Outer.prop.inner.Local" in names and "Outer.Nested.method" in names and "in_case" in names
    assert len(names) == 19


def test_symbol_at_innermost_definition():
    unit = PythonUnit(path="m.py", text=SHAPES)
    unit.parse()
    lines = SHAPES.splitlines()
    assert unit.symbol_at(lines.index("            return Local") + 1) == "Outer.prop.inner"
    assert unit.symbol_at(lines.index("    attr = 1") + 1) == "Outer"
    assert unit.symbol_at(lines.index("@functools.cache") + 1) is None  # decorators are outside
    assert unit.symbol_at(lines.index("        + b") + 1) == "last"


def test_text_ast_cannot_read_falls_back_to_libcst():
    text = "\ufeffclass A:\n    def f(self):\n        return 1\n"  # a byte order mark: ast refuses the str
    module = cst.parse_module(text)
    assert _symbol_ranges(module, text) == _cst_symbol_ranges(module) == [(1, 3, "A"), (2, 3, "A.f")]


def test_the_engine_index_shares_the_walk_with_decorators_in():
    """A hunk's symbol (the engine index's `symbol_at`, engine/definitions.py) comes from the
    same walk, its spans starting at the decorators: a hunk on a decorator line is the
    definition's; a definition inside a `match` case is found there too."""
    from patchaudit.engine.definitions import index_module

    idx = index_module("m.py", SHAPES)
    lines = SHAPES.splitlines()
    assert idx.symbol_at(lines.index("@functools.cache") + 1) == "decorated"
    assert idx.symbol_at(lines.index("            return x") + 1) == "in_case"
    assert idx.symbol_at(lines.index("            return Local") + 1) == "Outer.prop.inner"
