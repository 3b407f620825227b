"""The hunk applier, property-based: round trips and hostile hunks.

* a patch made by `difflib.unified_diff` from A to B, read by the patch reader
  (`Hunk.to_spec()`), applies to A giving exactly B (the final newline too),
  every hunk "clean";
* reversed (`+` and `-` swapped, counts swapped), it gives A back from B;
* arbitrary hunks against arbitrary files: a result or the documented
  ValueError (malformed hunk), never another exception.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from patchaudit.inputs.patches import read_patch
from patchaudit.patching.apply import HunkLine, HunkSpec, apply_hunks, split_lines

from test_hostile_properties import clean_file_text, unified  # noqa: E402  (tests/ is on sys.path)


def _specs(patch_text: str):
    patch = read_patch("t.patch", patch_text.encode("utf-8", "surrogateescape"))
    assert patch.problems == [], patch.problems
    assert len(patch.sections) <= 1
    return [h.to_spec() for s in patch.sections for h in s.hunks]


def _reverse(spec: HunkSpec) -> HunkSpec:
    flip = {"+": "-", "-": "+", " ": " "}
    return HunkSpec(spec.target_start, spec.target_length, spec.source_start, spec.source_length,
                    tuple(HunkLine(flip[l.kind], l.text, l.no_newline) for l in spec.lines))


def _apply(text: str, specs) -> str:
    lines, eol = split_lines(text)
    res = apply_hunks(lines, specs, ends_with_newline=eol)
    assert all(h.status == "clean" for h in res.hunks), res.hunks
    out = "\n".join(res.lines)
    if res.lines and res.ends_with_newline:
        out += "\n"
    return out


@given(clean_file_text, clean_file_text, st.integers(0, 4))
def test_difflib_patch_applies_and_reverses(a, b, n):
    # difflib and the reader split lines at "\n" only; a lone "\r" stays in its line
    if a == b:
        b += "added\n"
    specs = _specs(unified(a, b, "f.py", n=n))
    assert _apply(a, specs) == b
    assert _apply(b, [_reverse(s) for s in specs]) == a


hunk_line = st.builds(HunkLine, st.sampled_from([" ", "-", "+"]), st.sampled_from(["a", "b", "", "c\r", "x"]),
                      st.booleans())


@given(st.lists(st.sampled_from(["a", "b", "", "c\r", "x"]), max_size=12), st.booleans(),
       st.lists(st.tuples(st.integers(0, 15), st.lists(hunk_line, max_size=8), st.integers(0, 2)), max_size=4))
def test_arbitrary_hunks_never_crash_the_applier(original, eol, raw_hunks):
    specs = []
    for start, lines, skew in raw_hunks:
        old = sum(1 for l in lines if l.kind != "+")
        new = sum(1 for l in lines if l.kind != "-")
        # skew 0: counts that match the lines; otherwise a malformed header
        specs.append(HunkSpec(start, old + (skew == 1), start, new + (skew == 2), tuple(lines)))
    try:
        res = apply_hunks(original, specs, ends_with_newline=eol)
    except ValueError as exc:
        assert "hunk" in str(exc)
        return
    assert len(res.hunks) == len(specs)
    for h in res.hunks:
        assert h.status in ("clean", "offset", "fuzz", "failed", "already-applied")
    for line_no, (k, idx) in res.origin.items():
        assert 1 <= line_no <= len(res.lines) and 0 <= k < len(specs) and 0 <= idx < len(specs[k].lines)


def test_an_added_empty_line_without_newline_leaves_no_origin_past_the_end():
    """Found by the 10,000-example run: adding "" + "\\ No newline" to an empty file gives an
    empty file (GNU patch writes 0 bytes); origin must not name a line 1 the result lacks."""
    res = apply_hunks([], [HunkSpec(0, 0, 1, 1, (HunkLine("+", "", True),))], ends_with_newline=False)
    assert res.lines == [] and res.origin == {}
