"""Fragment mode: Python units from what a hunk shows."""

from __future__ import annotations

import textwrap

from patchaudit.inputs.patches import parse_patch
from patchaudit.units.fragments import fragment_units


def units_of(body: str):
    text = "--- a/pkg/m.py\n+++ b/pkg/m.py\n" + textwrap.dedent(body)
    patch = parse_patch("m.patch", text)
    assert not patch.problems, patch.problems
    out = []
    for section, hunk in patch.iter_hunks():
        out.extend(fragment_units(patch, section, hunk, report_path="m.patch"))
    return patch, out


def covered_patch_lines(units) -> set[int]:
    return {u.lines_map[l].line for u in units for l in u.judged}


def test_seed_shape_is_one_window_closed_at_the_end():
    patch, units = units_of("""\
        @@ -678,6 +678,6 @@ class QwenVLImageProcessor(SGLangBaseProcessor):
                 **kwargs,
             ):
                 entry_time = time.perf_counter()
        -        base_output = await self.load_mm_data(
        +        base_output = await self.legacy_load_mm_data(
                     prompt=input_text,
                     image_data=image_data,
        """)
    assert len(units) == 1
    u = units[0]
    assert u.text.startswith("entry_time = time.perf_counter()\n")
    assert u.text.rstrip().endswith(")")          # the open call was closed
    assert covered_patch_lines(units) == {8}
    assert u.outer_symbol == "QwenVLImageProcessor"
    # the invented ")" lies after the real text
    assert u.real_end == (4, len("    image_data=image_data,"))
    # columns map back into the patch line ("+" and the removed indentation)
    assert u.lines_map[2].col_shift == 1 + 8


def test_deeper_first_line_gets_synthetic_openers():
    _, units = units_of("""\
        @@ -10,6 +10,6 @@ class A:
                     return x
                 else:
                     y = 1
        -        return y
        +        return legacy(y)
             def other(self):
                 pass
        """)
    assert covered_patch_lines(units) == {8}
    u = units[0]
    # whatever the window, it parses and maps the added line to its patch line
    import ast
    ast.parse(u.text)


def test_added_line_inside_a_block_that_ends_in_the_hunk():
    _, units = units_of("""\
        @@ -1,4 +1,5 @@
         def f(a):
             if a:
        +        a = g(a)
                 return a
             return None
        """)
    assert covered_patch_lines(units) == {6}
    assert len(units) == 1


def test_hunk_starting_inside_a_string_still_covers_the_added_code():
    _, units = units_of('''\
        @@ -3,4 +3,6 @@ def f():
             text of a docstring
             """
             x = 1
        +    y = call(x,
        +             2)
             return x
        ''')
    assert covered_patch_lines(units) == {7, 8}


def test_unparseable_context_falls_back_to_the_call_on_the_added_line():
    _, units = units_of("""\
        @@ -1,3 +1,3 @@
         x = [1, 2,
              3]]]
        -y = f(a)
        +y = legacy_load_mm_data(prompt=a,
        """)
    assert covered_patch_lines(units) == {7}
    assert any("legacy_load_mm_data(prompt=a," in u.text for u in units)


def test_only_removals_judge_the_following_line():
    _, units = units_of("""\
        @@ -1,4 +1,3 @@
         out = self.legacy_load_mm_data(
             prompt=text,
        -    input_ids=ids,
         )
        """)
    # removing the argument is judged on the line after the removal, inside the call
    assert covered_patch_lines(units) == {7}


def test_fragment_never_raises_on_odd_text():
    odd = [
        "@@ -1,3 +1,3 @@\n \tif x:\n-\t\ty\n+\t\tz(\n \t    w\n",
        "@@ -1,2 +1,2 @@\n '''\n-a\n+b'''\n",
        "@@ -1,2 +1,2 @@\n )))\n-a\n+(((\n",
        "@@ -1,1 +1,1 @@\n-a\n+\\\n",
        "@@ -1,2 +1,2 @@\n x = 1\n-y\n+    " + "(" * 300 + "\n",
    ]
    for body in odd:
        patch = parse_patch("m.patch", "--- a/m.py\n+++ b/m.py\n" + body)
        for section, hunk in patch.iter_hunks():
            fragment_units(patch, section, hunk, report_path="m.patch")
