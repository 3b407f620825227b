"""SECURITY.md promise 7 (limits): the in-memory applier's cost is bounded on hostile input.

The applier (patchaudit/patching/apply.py) counts its work (lines compared, candidate
positions tried, index entries built: ``apply.work_done()``); these tests assert
that the work stays under a bound linear in the input, never a wall-clock time.

* (a) a 280 KB patch of hunks whose context is 80,000 identical lines, and
* (b) 2,000 failing hunks against a 100,000-line file
  stay under 20 x (file lines + patch lines);
* hostile shapes (every candidate of a repeated line fails, periodic files, hunk
  headers that all claim line 1, huge line numbers) stay under a bound of the
  same kind with a larger constant;
* the indexed search agrees with a straightforward reference search (GNU's scan,
  position by position, kept here as the oracle: the applier's code before the
  index) on random small files and hunks made of a few repeated lines, both for
  whole ``apply_hunks`` runs and for single ``locate_hunk``/``nearest`` calls.
"""

from __future__ import annotations

from contextlib import ExitStack
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

import patchaudit.patching.apply as A
from patchaudit.patching import costs
from patchaudit.patching.matcher import Matcher
from patchaudit.patching.sides import compile_hunk
from patchaudit.inputs.patches import read_patch
from patchaudit.patching.apply import HunkLine, HunkSpec, apply_hunks


def _specs(text: str, *, in_order: bool = True) -> list[HunkSpec]:
    patch = read_patch("hostile.patch", text.encode("utf-8"))
    if in_order:
        assert patch.problems == [], patch.problems[:3]
    else:  # the reader reports hunks out of order (PA301), the applier still gets them
        assert all("out of order" in p.message for p in patch.problems), patch.problems[:3]
    return [h.to_spec() for s in patch.sections for h in s.hunks]


def _work(original: list[str], specs: list[HunkSpec], **kw) -> tuple[int, A.ApplyResult]:
    before = A.work_done()
    res = apply_hunks(original, specs, **kw)
    return A.work_done() - before, res


def _size(original: list[str], specs: list[HunkSpec]) -> int:
    return len(original) + sum(len(s.lines) for s in specs)


def _hunk(start: int, before: list[str], removed: list[str], added: list[str], after: list[str]) -> str:
    old = len(before) + len(removed) + len(after)
    new = len(before) + len(added) + len(after)
    rows = [f" {l}" for l in before] + [f"-{l}" for l in removed] + [f"+{l}" for l in added] + [f" {l}" for l in after]
    return f"@@ -{start},{old} +{start},{new} @@\n" + "".join(r + "\n" for r in rows)


HEADER = "--- a/engine.py\n+++ b/engine.py\n"


# --------------------------------------------------------------------------
# the two measured cases


def identical_lines_case(n_lines: int = 80_000, patch_bytes: int = 280_000, line: str = "        pass"):
    """(a) A file of identical lines and a patch of hunks whose context is those lines."""
    original = [line] * n_lines
    parts, size, start = [HEADER], 0, 1
    while size < patch_bytes and start + 7 <= n_lines:
        h = _hunk(start, [line] * 3, [line], ["        return None"], [line] * 3)
        parts.append(h)
        size += len(h)
        start += 10
    return original, _specs("".join(parts))


def engine_like_file(n_lines: int) -> list[str]:
    """Python-looking lines: mostly unique, a blank line every 10, some recurring lines."""
    out = []
    for i in range(n_lines):
        if i % 10 == 0:
            out.append("")
        elif i % 10 == 5:
            out.append("        )")
        elif i % 10 == 7:
            out.append("        return result")
        else:
            out.append(f"        value_{i} = compute(x_{i % 97}, flag={i % 3 == 0})")
    return out


def failing_hunks_case(n_lines: int = 100_000, n_hunks: int = 2_000):
    """(b) Hunks with the file's own context around a removed line the file lacks."""
    original = engine_like_file(n_lines)
    parts = [HEADER]
    step = n_lines // n_hunks
    for k in range(n_hunks):
        start = 1 + k * step + (k % 10)  # the context is sometimes the blank or recurring lines
        before = original[start - 1 : start + 2]  # lines start .. start + 2
        after = original[start + 3 : start + 6]  # line start + 3 changed upstream
        parts.append(_hunk(start, before, [f"        gone_{k} = 1"], [f"        new_{k} = 2"], after))
    return original, _specs("".join(parts))


def test_identical_lines_cost_is_linear():
    original, specs = identical_lines_case()
    assert len(specs) > 1_900
    work, res = _work(original, specs)
    assert {h.status for h in res.hunks} == {"clean"}
    assert work <= 20 * _size(original, specs), (work, _size(original, specs))


def test_failing_hunks_cost_is_linear():
    original, specs = failing_hunks_case()
    work, res = _work(original, specs)
    assert [h.status for h in res.hunks] == ["failed"] * 2_000
    # the near-match is the hunk's own place: all lines but the removed one
    wrong = [h for h in res.hunks if h.nearest != (h.source_line, 6, 7)]
    assert not wrong, wrong[:3]
    assert work <= 20 * _size(original, specs), (work, _size(original, specs))


# --------------------------------------------------------------------------
# hostile shapes: a suffix array gets built (O(N log hunk)), failing hunks over the
# near-match budget are looked at near their place; still a bound linear in the input,
# with a larger constant


def test_every_candidate_of_a_repeated_line_fails():
    # alternating lines: "a" is everywhere, but never twice in a row; every hunk's
    # pre-image is a run of "a" (fails at every fuzz level), its post-image has a line
    # the file lacks
    original = ["a", "b"] * 50_000
    text = HEADER + "".join(_hunk(1 + 50 * k, ["a"] * 3, ["a", "a"], ["c"], ["a"] * 3) for k in range(2_000))
    specs = _specs(text)
    work, res = _work(original, specs)
    assert {h.status for h in res.hunks} == {"failed"}
    assert work <= 40 * _size(original, specs), (work, _size(original, specs))


def test_periodic_file_defeats_no_anchor():
    # (x x x x y) repeated: the pre-images x x x x (x ...) x y x x x never occur, but all
    # their windows of up to 4 lines occur 20,000 times (no line or short run of lines is
    # a rare anchor); the hunks have 40 different lengths
    original = ["x", "x", "x", "x", "y"] * 20_000
    parts = [HEADER]
    for k in range(1_500):
        n = 6 + k % 40
        parts.append(_hunk(1 + 60 * k, ["x"] * 3, ["x"] * (n - 5) + ["x", "y"], ["z"], ["x"] * 3))
    specs = _specs("".join(parts))
    work, res = _work(original, specs)
    assert {h.status for h in res.hunks} <= {"failed", "fuzz"}
    assert work <= 40 * _size(original, specs), (work, _size(original, specs))


def test_hunks_that_all_claim_line_1():
    # every hunk says "@@ -1,7 +1,7 @@": GNU's scan then starts before the region earlier
    # hunks consumed, so most hunks match inside it ("misordered") and fail, and their
    # near-match is looked for among 80,000 equally good places
    line = "        pass"
    original = [line] * 80_000
    one = _hunk(1, [line] * 3, [line], ["        return None"], [line] * 3)
    specs = _specs(HEADER + one * 2_000, in_order=False)
    work, res = _work(original, specs)
    assert res.hunks[0].status == "clean"
    assert {h.status for h in res.hunks[1:]} == {"failed", "offset"}
    assert [h.status for h in res.hunks].count("failed") > 1_000
    assert res.hunks[2].status == "failed" and res.hunks[2].nearest == (1, 7, 7)
    assert work <= 40 * _size(original, specs), (work, _size(original, specs))


def test_huge_line_numbers_cost_nothing_extra():
    # a hunk that claims line 10**9 is found at line 2 (offset -999999998), so the later
    # hunks are expected about 10**9 lines before line 1: GNU's scan covers 2 * 10**9
    # positions there, which must not be visited one by one (also not for a pre-image
    # that is one empty line without a newline, which matches before line 1)
    original = engine_like_file(10_000) + [""]
    far = _hunk(10**9, [original[1]], [original[2]], ["changed"], [original[3]])
    near = [_hunk(20 + 10 * k, [original[18 + 10 * k]], [f"gone {k}"], ["new"], [original[20 + 10 * k]])
            for k in range(50)]
    specs = _specs(HEADER + far + "".join(near), in_order=False)
    empty_no_newline = HunkSpec(5, 1, 5, 1, (HunkLine("-", "", True), HunkLine("+", "y", False)))
    for eol in (True, False):
        hunks = specs + [empty_no_newline] * 50
        work, res = _work(original, hunks, ends_with_newline=eol)
        assert res.hunks[0].status == "offset" and res.hunks[0].source_line == 2
        assert {h.status for h in res.hunks[1:]} == {"failed"}
        assert work <= 40 * _size(original, hunks), work


# --------------------------------------------------------------------------
# the reference search: GNU's locate_hunk / patch_match, position by position, and the
# near-match computed at every position (the applier's code before the line index)


def ref_patch_match(eng, side, base: int, offset: int, prefix_fuzz: int, suffix_fuzz: int) -> bool:
    texts = side.texts
    pline = 1 + prefix_fuzz
    pat_lines = len(texts) - suffix_fuzz
    iline = base + offset + prefix_fuzz
    while pline <= pat_lines:
        if eng.ifetch(iline) != texts[pline - 1]:
            return False
        pline += 1
        iline += 1
    return True


def ref_locate_hunk(eng, side, fuzz: int, in_offset: int) -> tuple[int, int]:
    first_guess = side.first + in_offset
    pat_lines = len(side.pat)
    prefix_context = side.prefix_context
    suffix_context = side.suffix_context
    context = max(prefix_context, suffix_context)
    prefix_fuzz = fuzz + prefix_context - context
    suffix_fuzz = fuzz + suffix_context - context
    max_where = eng.input_lines - (pat_lines - suffix_fuzz) + 1
    min_where = eng.last_frozen_line + 1
    max_pos_offset = max_where - first_guess
    max_neg_offset = first_guess - min_where
    max_offset = max(max_pos_offset, max_neg_offset)
    if not pat_lines:
        return first_guess, in_offset
    if first_guess <= max_neg_offset:
        max_neg_offset = first_guess - 1
    if prefix_fuzz < 0 and side.first <= 1:
        if suffix_fuzz < 0:
            if pat_lines != eng.input_lines or prefix_context < eng.last_frozen_line:
                return 0, in_offset
        offset = 1 - first_guess
        if (eng.last_frozen_line <= prefix_context and offset <= max_pos_offset
                and ref_patch_match(eng, side, first_guess, offset, 0, suffix_fuzz)):
            return first_guess + offset, in_offset + offset
        return 0, in_offset
    elif prefix_fuzz < 0:
        prefix_fuzz = 0
    if suffix_fuzz < 0:
        offset = first_guess - (eng.input_lines - pat_lines + 1)
        if offset <= max_neg_offset and ref_patch_match(eng, side, first_guess, -offset, prefix_fuzz, 0):
            return first_guess - offset, in_offset - offset
        return 0, in_offset
    if max_pos_offset < 0:
        min_offset = first_guess - max_where
    elif max_neg_offset < 0:
        min_offset = first_guess - min_where
    else:
        min_offset = 0
    for offset in range(min_offset, max_offset + 1):
        if offset <= max_pos_offset and ref_patch_match(eng, side, first_guess, offset, prefix_fuzz, suffix_fuzz):
            return first_guess + offset, in_offset + offset
        if offset <= max_neg_offset and ref_patch_match(eng, side, first_guess, -offset, prefix_fuzz, suffix_fuzz):
            return first_guess - offset, in_offset - offset
    return 0, in_offset


def ref_nearest(eng, side, first_guess: int):
    texts = side.texts
    n = len(texts)
    if n == 0:
        return None
    best = best_key = None
    padded = eng.inp + [""] * n
    for pos in range(1, max(1, eng.input_lines - n + 1) + 1):
        count = sum(map(str.__eq__, padded[pos - 1 : pos - 1 + n], texts))
        key = (-count, abs(pos - first_guess), pos)
        if best_key is None or key < best_key:
            best_key, best = key, (pos, count, n)
    if best is None or best[1] == 0:
        return None
    return best


# --------------------------------------------------------------------------
# property tests: the indexed search == the reference search

WORDS = ["a", "a", "a", "b", "b", "c", ""]
file_lines = st.lists(st.sampled_from(WORDS), max_size=40)
hunk_row = st.tuples(st.sampled_from([" ", " ", "-", "+"]), st.sampled_from(WORDS), st.integers(0, 9))


@st.composite
def hunk_specs(draw, max_start: int = 50):
    rows = draw(st.lists(hunk_row, min_size=1, max_size=10))
    if all(kind == " " for kind, _, _ in rows):
        rows[draw(st.integers(0, len(rows) - 1))] = ("-", rows[0][1], 1)
    # "\ No newline at end of file" now and then (after the last line of a side, as in real diffs)
    lines = tuple(HunkLine(kind, text, nonl == 0) for kind, text, nonl in rows)
    old = sum(1 for l in lines if l.kind != "+")
    new = sum(1 for l in lines if l.kind != "-")
    start = draw(st.integers(0, max_start))
    return HunkSpec(start, old, draw(st.integers(0, max_start)) if old == 0 else start, new, lines)


# the search paths of the new code: always indexed (no plain scan over small spans, the
# near-match counted from the occurrence lists even in a small file), with the suffix array
# from the first candidate on, and without it; and the defaults
SEARCH_MODES = [
    {"INDEX_MIN_SPAN": -1, "NEAREST_SMALL": 0},
    {"INDEX_MIN_SPAN": -1, "NEAREST_SMALL": 0, "SCAN_LIMIT": 0, "SCAN_LIMIT_WITH_SA": 0},
    {"INDEX_MIN_SPAN": -1, "NEAREST_SMALL": 0, "SCAN_LIMIT": 10**9, "SCAN_LIMIT_WITH_SA": 10**9},
    {},
]


def _patched(mode: dict):
    stack = ExitStack()
    for name, value in mode.items():
        stack.enter_context(mock.patch.object(costs, name, value))
    return stack


def _result(original, specs, eol, max_fuzz, check):
    try:
        r = apply_hunks(original, specs, ends_with_newline=eol, max_fuzz=max_fuzz, check_applied=check)
    except ValueError as exc:
        return ("ValueError", str(exc))
    return (r.hunks, r.lines, r.ends_with_newline, r.origin)


@given(file_lines, st.booleans(), st.lists(hunk_specs(), min_size=1, max_size=5), st.integers(0, 3), st.booleans())
def test_apply_hunks_equals_reference_search(original, eol, specs, max_fuzz, check):
    with mock.patch.object(Matcher, "locate_hunk", ref_locate_hunk), \
         mock.patch.object(Matcher, "nearest", ref_nearest):
        expected = _result(original, specs, eol, max_fuzz, check)
    for mode in SEARCH_MODES:
        with _patched(mode):
            assert _result(original, specs, eol, max_fuzz, check) == expected, mode


@given(file_lines, st.booleans(), hunk_specs(max_start=60), st.integers(0, 45), st.integers(-60, 60), st.booleans())
def test_locate_hunk_and_nearest_equal_reference(original, eol, spec, frozen, in_offset, reverse):
    try:
        fwd, rev = compile_hunk(0, spec)
    except ValueError:
        return
    side = rev if reverse else fwd
    for mode in SEARCH_MODES:
        with _patched(mode):
            eng = Matcher(original, eol)
            eng.last_frozen_line = min(frozen, eng.input_lines)
            for fuzz in range(0, 4):
                assert eng.locate_hunk(side, fuzz, in_offset) == ref_locate_hunk(eng, side, fuzz, in_offset), (mode, fuzz)
            first_guess = side.first + in_offset
            assert eng.nearest(side, first_guess) == ref_nearest(eng, side, first_guess), mode


@given(st.lists(st.sampled_from(["a", "b"]), min_size=30, max_size=120), hunk_specs(max_start=120),
       st.integers(-100, 100))
def test_nearest_past_its_budget_is_a_true_near_match(original, spec, in_offset):
    """Once a file's near-match budget is spent, the near-match is looked for around the
    expected line and at the places the rarest lines point to: the line counts it reports
    are still true ones, and it is never better than the best anywhere in the file."""
    fwd, _ = compile_hunk(0, spec)
    eng = Matcher(original, True)
    eng.nearest_budget = 0
    if len(fwd.texts) > len(original):
        return  # a hunk longer than the file: always counted everywhere
    first_guess = fwd.first + in_offset
    with mock.patch.object(costs, "NEAREST_SMALL", 0):
        got = eng.nearest(fwd, first_guess)
    best = ref_nearest(eng, fwd, first_guess)
    if got is None:
        return
    pos, count, n = got
    window = (eng.inp + [""] * n)[pos - 1 : pos - 1 + n]
    assert count == sum(map(str.__eq__, window, fwd.texts)) >= 1 and n == len(fwd.texts)
    assert best is not None and count <= best[1]
