"""patchaudit.patching.apply against GNU patch 2.7.6 (differential test) plus unit tests.

The differential test generates ~300 file/patch pairs (tests/applier_corpus.py)
and runs /usr/bin/patch on each:

* ``patch --dry-run --verbose -f``: GNU's forward decision for every hunk
  (``-f`` = never guess "reversed").  Compared with
  ``apply_hunks(..., check_applied=False)``: status, offset, fuzz, line.
* ``patch -f`` for real: the patched file, compared with ApplyResult.lines and
  ends_with_newline (also when some hunks fail: GNU keeps the file's lines there).
* ``patch --dry-run --verbose -N -t``: GNU's "Reversed (or previously applied)
  patch detected!" decision, which it makes for the first hunk only.  Compared
  with hunk 0 of ``apply_hunks(...)`` (default, per-hunk detection).
* ``patch --dry-run --verbose -R -f`` when GNU detected a reversed patch: every
  hunk's reversed match, compared with the "already-applied" hunks
  (offset, fuzz, and the line in the original file).
* Later hunks of the default mode are compared with the ``-f`` run until the
  first hunk that only the per-hunk detection calls "already-applied" (GNU
  does not check those); such hunks are counted and checked for consistency.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from applier_corpus import FILE_NAME, Case, make_cases, original_lines  # noqa: E402

from patchaudit.patching.apply import (  # noqa: E402
    ApplyResult,
    HunkLine,
    HunkResult,
    HunkSpec,
    apply_hunks,
    split_lines,
)

PATCH = "/usr/bin/patch"
N_CASES = 300

# --------------------------------------------------------------------------
# running GNU patch

_HUNK_MSG = re.compile(
    r"^Hunk #(\d+) (succeeded|FAILED|ignored) at (-?\d+)"
    r"(?: with fuzz (\d+))?(?: \(offset (-?\d+) lines?\))?(?: \(different line endings\))?\.$"
)


@dataclass
class GnuHunk:
    status: str  # succeeded / FAILED / ignored
    line: int
    fuzz: int
    offset: int


@dataclass
class GnuRun:
    hunks: dict[int, GnuHunk]
    reversed_detected: bool
    misordered: bool
    output: str
    aborted: bool = False  # patch died (assertion, "write error") before deciding


def _parse(out: str) -> GnuRun:
    hunks: dict[int, GnuHunk] = {}
    for row in out.splitlines():
        m = _HUNK_MSG.match(row)
        if m:
            hunks[int(m.group(1)) - 1] = GnuHunk(
                m.group(2), int(m.group(3)), int(m.group(4) or 0), int(m.group(5) or 0)
            )
    return GnuRun(
        hunks,
        # the second is the file-level form of the same decision, made when
        # a patch that deletes everything meets an empty file
        "Reversed (or previously applied) patch detected!" in out
        or ("which is already empty!" in out and "Skipping patch." in out),
        "misordered hunks" in out,
        out,
        "Assertion" in out or "**** " in out,
    )


def _run_patch(workdir: str, flags: list[str], max_fuzz: int) -> GnuRun:
    proc = subprocess.run(
        [PATCH, *flags, f"-F{max_fuzz}", "-p0", "--no-backup-if-mismatch", "-i", "case.patch"],
        cwd=workdir,
        env={**os.environ, "LC_ALL": "C"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=30,
    )
    out = proc.stdout.decode("latin-1") + proc.stderr.decode("latin-1")
    return _parse(out)


@dataclass
class Oracle:
    forward: GnuRun  # --dry-run --verbose -f
    detect: GnuRun  # --dry-run --verbose -N -t
    reverse: GnuRun | None  # --dry-run --verbose -R -f (only when reversed detected)
    patched: bytes  # file after a real `patch -f`


def run_gnu(case: Case) -> Oracle:
    tmp = tempfile.mkdtemp(prefix="applyoracle-")
    try:
        f = os.path.join(tmp, FILE_NAME)
        with open(os.path.join(tmp, "case.patch"), "wb") as fh:
            fh.write(case.patch.encode())
        with open(f, "wb") as fh:
            fh.write(case.original.encode())
        fz = case.max_fuzz
        fwd = _run_patch(tmp, ["--dry-run", "--verbose", "-f"], fz)
        det = _run_patch(tmp, ["--dry-run", "--verbose", "-N", "-t"], fz)
        rev = _run_patch(tmp, ["--dry-run", "--verbose", "-R", "-f"], fz) if det.reversed_detected else None
        _run_patch(tmp, ["-f", "-s"], fz)
        with open(f, "rb") as fh:
            patched = fh.read()
        return Oracle(fwd, det, rev, patched)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------
# comparison


def _same_forward(mine: HunkResult, gnu: GnuHunk | None) -> str | None:
    """None if `mine` says what GNU's forward run says, else a description."""
    if gnu is None:
        return "GNU printed nothing for this hunk"
    if gnu.status == "FAILED":
        if mine.status != "failed" or mine.line != gnu.line:
            return f"GNU: FAILED at {gnu.line}; mine: {mine}"
        return None
    if gnu.status != "succeeded":
        return f"GNU: {gnu}; mine: {mine}"
    want = "fuzz" if gnu.fuzz else ("offset" if gnu.offset else "clean")
    if (mine.status, mine.offset, mine.fuzz, mine.line) != (want, gnu.offset, gnu.fuzz, gnu.line):
        return f"GNU: {want} at {gnu.line} fuzz {gnu.fuzz} offset {gnu.offset}; mine: {mine}"
    return None


@dataclass
class Tally:
    cases: int = 0
    gnu_aborted: int = 0
    hunks: int = 0  # forward decisions (patch -f)
    agree: int = 0
    d_hunks: int = 0  # decisions with per-hunk already-applied detection
    d_agree: int = 0
    detect_checked: int = 0
    detect_reversed: int = 0
    reversed_checked: int = 0
    content_checked: int = 0
    content_agree: int = 0
    extension_only: int = 0
    by_design: int = 0


def compare_case(case: Case, gnu: Oracle, tally: Tally) -> list[str]:
    problems: list[str] = []
    if any(run.aborted for run in (gnu.forward, gnu.detect, gnu.reverse) if run):
        # e.g. patch.c:1436 assert(outstate->after_newline) when a hunk listed
        # after one that ended the file without a newline goes before it
        tally.gnu_aborted += 1
        return problems
    lines, eol = original_lines(case)
    n = len(case.hunks)

    # 1. forward decisions, every hunk (GNU -f)
    mine_f = apply_hunks(lines, case.hunks, ends_with_newline=eol, max_fuzz=case.max_fuzz, check_applied=False)
    for k in range(n):
        tally.hunks += 1
        err = _same_forward(mine_f.hunks[k], gnu.forward.hunks.get(k))
        if err:
            problems.append(f"hunk {k} forward: {err}")
        else:
            tally.agree += 1

    # 2. the real run's file content
    want_lines, want_eol = split_lines(gnu.patched.decode())
    tally.content_checked += 1
    if (mine_f.lines, mine_f.ends_with_newline) == (want_lines, want_eol):
        tally.content_agree += 1
    else:
        problems.append(
            f"content differs:\n GNU : {want_lines!r} eol={want_eol}\n mine: {mine_f.lines!r} eol={mine_f.ends_with_newline}"
        )

    # 3./4./5. default mode: per-hunk "already-applied"
    mine = apply_hunks(lines, case.hunks, ends_with_newline=eol, max_fuzz=case.max_fuzz)
    tally.detect_checked += 1
    if gnu.detect.reversed_detected:
        assert gnu.reverse is not None
        tally.detect_reversed += 1
        tally.d_hunks += 1
        if mine.hunks[0].status != "already-applied":
            problems.append(f"GNU -N detected a reversed patch; mine hunk 0: {mine.hunks[0]}")
        else:
            tally.d_agree += 1
        shift = 0  # what `patch -R` has added to its "succeeded at" numbers so far
        for k in range(n):
            g = gnu.reverse.hunks.get(k)
            h = case.hunks[k]
            got = mine.hunks[k]
            if g is None or g.status != "succeeded":
                break  # -R run and per-hunk run diverge from here on
            if got.status in ("clean", "offset", "fuzz") and got.fuzz <= g.fuzz:
                # per hunk, the forward direction is tried first at each fuzz
                # level (a -U0 insertion, or a pre-image that also occurs
                # nearby, applies forward); `patch -R` knows no such hunk-level
                # choice, so the two runs part here.
                tally.by_design += 1
                break
            tally.d_hunks += 1
            tally.reversed_checked += 1
            where = g.line - shift
            if (got.status, got.offset, got.fuzz, got.source_line) != ("already-applied", g.offset, g.fuzz, where):
                problems.append(
                    f"hunk {k} -R: GNU reversed match at {where} fuzz {g.fuzz} offset {g.offset}; mine: {got}"
                )
            else:
                tally.d_agree += 1
            shift += h.source_length - h.target_length
    else:
        for k in range(n):
            got = mine.hunks[k]
            if got.status == "already-applied" and k > 0:
                # only the per-hunk check says so: GNU never looks at hunk >= 2.
                tally.extension_only += 1
                g = mine_f.hunks[k]
                if g.status != "failed" and not g.fuzz > got.fuzz:
                    problems.append(f"hunk {k}: already-applied though it applies forward: {g} / {got}")
                post = [ln.text for ln in case.hunks[k].lines if ln.kind != "-"]
                start = (got.source_line or 1) - 1
                if got.fuzz == 0 and lines[start : start + len(post)] != post:
                    problems.append(f"hunk {k}: post-image not at line {got.source_line}: {got}")
                break
            tally.d_hunks += 1
            err = _same_forward(got, gnu.detect.hunks.get(k) if k == 0 else gnu.forward.hunks.get(k))
            if err:
                problems.append(f"hunk {k} default mode: {err}")
            else:
                tally.d_agree += 1
    tally.cases += 1
    return problems


@pytest.fixture(scope="module")
def corpus_results():
    if not os.path.exists(PATCH):
        pytest.skip("GNU patch is not installed at /usr/bin/patch")
    cases = make_cases(count=N_CASES)
    with ThreadPoolExecutor(max_workers=max(2, (os.cpu_count() or 2) * 2)) as pool:
        oracles = list(pool.map(run_gnu, cases))
    return cases, oracles


def test_applier_agrees_with_gnu_patch(corpus_results):
    cases, oracles = corpus_results
    tally = Tally()
    failures = []
    for case, gnu in zip(cases, oracles):
        problems = compare_case(case, gnu, tally)
        if problems:
            failures.append(f"--- {case.name}\n" + "\n".join(problems) + f"\npatch:\n{case.patch}\nGNU -f said:\n{gnu.forward.output}")
    print(
        f"\napplier agrees with GNU patch on {tally.agree}/{tally.hunks} hunks in {tally.cases} cases"
        f" (forward decisions vs patch -f; patched file contents {tally.content_agree}/{tally.content_checked})"
        f"\nwith per-hunk already-applied detection: {tally.d_agree}/{tally.d_hunks} hunk decisions agree"
        f" ({tally.reversed_checked} already-applied hunks checked against patch -R,"
        f" {tally.detect_checked} first-hunk reversed-patch decisions against patch -N"
        f" of which {tally.detect_reversed} say reversed,"
        f" {tally.extension_only} hunks only the per-hunk check calls already-applied,"
        f" {tally.by_design} hunks where per-hunk and whole-file reversal part by design,"
        f" {tally.gnu_aborted} cases not compared because GNU patch aborted)"
    )
    assert not failures, f"{len(failures)} cases disagree:\n" + "\n\n".join(failures[:5])
    assert tally.agree == tally.hunks and tally.d_agree == tally.d_hunks
    assert tally.gnu_aborted <= len(cases) // 50


def test_corpus_covers_all_outcomes(corpus_results):
    cases, oracles = corpus_results
    seen: dict[str, int] = {}
    for case, gnu in zip(cases, oracles):
        for k, g in gnu.forward.hunks.items():
            key = g.status if g.status != "succeeded" else ("fuzz%d" % g.fuzz if g.fuzz else ("offset" if g.offset else "clean"))
            seen[key] = seen.get(key, 0) + 1
        if gnu.detect.reversed_detected:
            seen["reversed"] = seen.get("reversed", 0) + 1
        if len(case.hunks) > 1 and any(g.status == "FAILED" for g in gnu.forward.hunks.values()) and any(
            g.status == "succeeded" for g in gnu.forward.hunks.values()
        ):
            seen["partial"] = seen.get("partial", 0) + 1
    print("\ncorpus outcomes (GNU -f):", dict(sorted(seen.items())))
    for key in ("clean", "offset", "fuzz1", "fuzz2", "FAILED", "reversed", "partial"):
        assert seen.get(key, 0) >= 5, (key, seen)
    assert len(cases) >= 200


# --------------------------------------------------------------------------
# unit tests


def H(a: int, b: int, c: int, d: int, *rows: str) -> HunkSpec:
    """Hunk from unified rows; a row ending in '\\\\' has no newline."""
    lines = []
    for r in rows:
        nonl = r.endswith("\\")
        lines.append(HunkLine(r[0], r[1:-1] if nonl else r[1:], nonl))  # type: ignore[arg-type]
    return HunkSpec(a, b, c, d, tuple(lines))


BASE = [f"line {i}" for i in range(1, 21)]
# line 5 -> FIVE, context 3
H5 = H(2, 7, 2, 7, " line 2", " line 3", " line 4", "-line 5", "+FIVE", " line 6", " line 7", " line 8")
# insert after line 15
H15 = H(13, 6, 13, 7, " line 13", " line 14", " line 15", "+new", " line 16", " line 17", " line 18")


def statuses(res: ApplyResult) -> list[tuple[str, int, int, int | None]]:
    return [(h.status, h.offset, h.fuzz, h.line) for h in res.hunks]


def test_clean():
    res = apply_hunks(BASE, [H5, H15])
    assert statuses(res) == [("clean", 0, 0, 2), ("clean", 0, 0, 13)]
    assert res.lines[4] == "FIVE" and res.lines[15] == "new" and len(res.lines) == 21
    assert res.ends_with_newline


def test_offset_carries_and_line_is_in_output_coordinates():
    orig = ["x", "y"] + BASE
    res = apply_hunks(orig, [H5, H15])
    # both hunks sit two lines lower; GNU reports "offset 2 lines" for both
    assert statuses(res) == [("offset", 2, 0, 4), ("offset", 2, 0, 15)]
    assert [h.source_line for h in res.hunks] == [4, 15]
    # a hunk after one that added a line: "succeeded at" counts the added line
    h18 = H(17, 3, 17, 3, " line 17", "-line 18", "+EIGHTEEN", " line 19")
    res = apply_hunks(BASE, [H15, h18])
    assert statuses(res) == [("clean", 0, 0, 13), ("clean", 0, 0, 18)]
    assert res.hunks[1].source_line == 17


def test_search_goes_further_before_nearer():
    # the pre-image occurs 3 lines above and 3 lines below the expected place
    h = H(10, 3, 10, 3, " b", "-c", "+C", " d")
    orig = ["z"] * 6 + ["b", "c", "d"] + ["z"] * 3 + ["b", "c", "d"] + ["z"] * 3
    res = apply_hunks(orig, [h])
    assert statuses(res) == [("offset", 3, 0, 13)]


def test_fuzz_1_keeps_the_files_context_line():
    orig = list(BASE)
    orig[1] = "line 2 (edited)"  # first leading context line
    res = apply_hunks(orig, [H5])
    assert statuses(res) == [("fuzz", 0, 1, 2)]
    assert res.lines[1] == "line 2 (edited)" and res.lines[4] == "FIVE"


def test_fuzz_2_and_max_fuzz():
    orig = list(BASE)
    orig[1] = "line 2 (edited)"
    orig[2] = "line 3 (edited)"
    assert statuses(apply_hunks(orig, [H5])) == [("fuzz", 0, 2, 2)]
    res = apply_hunks(orig, [H5], max_fuzz=1)
    assert res.hunks[0].status == "failed"
    assert res.lines == orig


def test_less_leading_context_must_match_at_file_start():
    # a hunk at the top of the file has no leading context: with fuzz it may
    # only match at line 1 (GNU's "can only match start of file")
    h = H(1, 3, 1, 3, "-line 1", "+ONE", " line 2", " line 3")
    assert statuses(apply_hunks(BASE, [h])) == [("clean", 0, 0, 1)]
    # one line lower: fuzz 0 and 1 insist on line 1; at fuzz 2 the leading
    # side is no longer "short" and the hunk is searched for normally
    # (GNU: "Hunk #1 succeeded at 2 with fuzz 2 (offset 1 line).")
    assert statuses(apply_hunks(["x"] + BASE, [h])) == [("fuzz", 1, 2, 2)]
    assert statuses(apply_hunks(["x"] + BASE, [h], max_fuzz=1))[0][0] == "failed"


def test_whitespace_difference_is_a_difference():
    orig = list(BASE)
    orig[4] = "line 5 "  # trailing blank on the removed line
    res = apply_hunks(orig, [H5])
    assert res.hunks[0].status == "failed"
    assert res.hunks[0].nearest == (2, 6, 7)
    assert res.lines == orig


def test_failed_hunk_reports_nearest_and_later_hunks_still_apply():
    orig = list(BASE)
    orig[4] = "line 5 changed upstream"
    res = apply_hunks(orig, [H5, H15])
    failed, ok = res.hunks
    assert (failed.status, failed.line, failed.source_line) == ("failed", 2, 2)
    assert failed.nearest == (2, 6, 7)
    assert (ok.status, ok.line) == ("clean", 13)
    assert res.lines[4] == "line 5 changed upstream" and res.lines[15] == "new"


def test_failed_line_is_header_line_plus_output_shift():
    h_add = H(1, 2, 1, 4, " line 1", "+a", "+b", " line 2")
    h_bad = H(10, 3, 12, 3, " line 10", "-nope", "+NOPE", " line 12")
    res = apply_hunks(BASE, [h_add, h_bad])
    assert res.hunks[1].status == "failed"
    assert res.hunks[1].line == 12  # GNU: "Hunk #2 FAILED at 12."


def test_already_applied():
    patched = apply_hunks(BASE, [H5, H15]).lines
    res = apply_hunks(patched, [H5, H15])
    assert [h.status for h in res.hunks] == ["already-applied", "already-applied"]
    assert [h.source_line for h in res.hunks] == [2, 13]
    assert res.lines == patched
    # GNU -f never guesses "reversed"
    res = apply_hunks(patched, [H5, H15], check_applied=False)
    assert [h.status for h in res.hunks] == ["failed", "failed"]


def test_already_applied_per_hunk_and_mixed():
    half = apply_hunks(BASE, [H15]).lines  # only the second hunk is in
    res = apply_hunks(half, [H5, H15])
    assert [h.status for h in res.hunks] == ["clean", "already-applied"]
    assert res.lines == apply_hunks(BASE, [H5, H15]).lines


def test_already_applied_fuzz_limit():
    patched = apply_hunks(BASE, [H5]).lines
    patched[1] = "line 2 (edited)"
    res = apply_hunks(patched, [H5])
    assert (res.hunks[0].status, res.hunks[0].fuzz) == ("already-applied", 1)
    res = apply_hunks(patched, [H5], applied_max_fuzz=0)
    assert res.hunks[0].status == "failed"


def test_no_newline_at_end_of_file():
    orig = ["a", "b"]
    # "b" had no newline; the patch adds "c" (also without newline)
    h = H(1, 2, 1, 3, " a", "-b\\", "+b", "+c\\")
    res = apply_hunks(orig, [h], ends_with_newline=False)
    assert statuses(res) == [("clean", 0, 0, 1)]
    assert (res.lines, res.ends_with_newline) == (["a", "b", "c"], False)
    # the same hunk against a file whose "b" HAS a newline: the "-b" line
    # differs (terminators are compared) -> no fuzz possible on a changed line
    res = apply_hunks(orig, [h], ends_with_newline=True)
    assert res.hunks[0].status == "failed"
    # adding the missing newline
    h2 = H(2, 1, 2, 1, "-b\\", "+b")
    res = apply_hunks(orig, [h2], ends_with_newline=False)
    assert (res.lines, res.ends_with_newline) == (["a", "b"], True)


def test_empty_file_and_hunk_at_start():
    create = H(0, 0, 1, 2, "+x", "+y")
    res = apply_hunks([], [create])
    assert statuses(res) == [("clean", 0, 0, 1)]
    assert (res.lines, res.ends_with_newline) == (["x", "y"], True)
    # an empty pre-image always "matches" at the expected place
    res = apply_hunks(["a", "b"], [create])
    assert res.lines == ["x", "y", "a", "b"]
    delete_all = H(1, 2, 0, 0, "-a", "-b")
    res = apply_hunks(["a", "b"], [delete_all])
    assert (res.lines, res.hunks[0].status) == ([], "clean")
    # deleting from an already empty file: the (empty) post-image is there
    assert apply_hunks([], [delete_all]).hunks[0].status == "already-applied"


def test_hunk_at_end_with_less_trailing_context_must_match_at_end():
    h = H(18, 3, 18, 3, " line 18", " line 19", "-line 20", "+TWENTY")
    assert statuses(apply_hunks(BASE, [h])) == [("clean", 0, 0, 18)]
    res = apply_hunks(BASE + ["more"], [h])
    # at fuzz 0 and 1 the missing trailing context means "end of file"; at
    # fuzz 2 only "line 20" is compared, and it is where the hunk says
    assert statuses(res) == [("fuzz", 0, 2, 18)]
    assert statuses(apply_hunks(BASE + ["more"], [h], max_fuzz=1))[0][0] == "failed"


def test_crlf_file_vs_lf_hunks():
    lines, eol = split_lines("a\r\nb\r\nc\r\n")
    assert lines == ["a\r", "b\r", "c\r"] and eol
    h = H(1, 3, 1, 3, " a", "-b", "+B", " c")
    assert apply_hunks(lines, [h]).hunks[0].status == "failed"
    h_cr = H(1, 3, 1, 3, " a\r", "-b\r", "+B\r", " c\r")
    assert apply_hunks(lines, [h_cr]).lines == ["a\r", "B\r", "c\r"]


def test_split_lines():
    assert split_lines("") == ([], True)
    assert split_lines("\n") == ([""], True)
    assert split_lines("a\nb") == (["a", "b"], False)
    assert split_lines("a\n\nb\n") == (["a", "", "b"], True)


def test_origin_map():
    orig = ["x", "y"] + BASE
    res = apply_hunks(orig, [H5, H15])
    # H5 matched at original line 4: its lines 0..2 are context (file lines 4..6),
    # 3 is "-line 5", 4 is "+FIVE" (output line 7), 5..7 context (8..10)
    for out_line, hunk_line in [(4, 0), (5, 1), (6, 2), (7, 4), (8, 5), (9, 6), (10, 7)]:
        assert res.origin[out_line] == (0, hunk_line)
        assert res.lines[out_line - 1] == H5.lines[hunk_line].text
    # H15: "+new" lands after line 15 (output line 18)
    assert res.origin[18] == (1, 3) and res.lines[17] == "new"
    assert res.origin[15] == (1, 0) and res.origin[21] == (1, 6)
    assert 1 not in res.origin and 12 not in res.origin and len(res.origin) == 14
    # fuzzed context line: mapped, but the file's text is kept
    fz = list(BASE)
    fz[1] = "line 2 (edited)"
    res = apply_hunks(fz, [H5])
    assert res.origin[2] == (0, 0) and res.lines[1] == "line 2 (edited)"
    # already-applied: the post-image lines in the file map to the hunk
    res = apply_hunks(apply_hunks(BASE, [H5]).lines, [H5])
    assert res.origin[5] == (0, 4)


def test_malformed_hunks_raise():
    with pytest.raises(ValueError):
        apply_hunks(BASE, [H(1, 2, 1, 2, " line 1", " line 2")])
    with pytest.raises(ValueError):
        apply_hunks(BASE, [H(1, 3, 1, 2, " line 1", "-line 2")])


def test_indexed_search_equals_plain_scan(monkeypatch):
    """The line-index shortcut in locate_hunk must not change any decision."""
    from patchaudit.patching import costs

    from applier_corpus import make_cases as _make

    cases = _make(seed=7, count=150)
    runs = []
    for span in (10**9, -1):
        monkeypatch.setattr(costs, "INDEX_MIN_SPAN", span)
        out = []
        for case in cases:
            lines, eol = original_lines(case)
            for check in (False, True):
                r = apply_hunks(lines, case.hunks, ends_with_newline=eol, max_fuzz=case.max_fuzz, check_applied=check)
                out.append((r.hunks, r.lines, r.ends_with_newline, r.origin))
        runs.append(out)
    assert runs[0] == runs[1]
