"""patchaudit/patching/patchedit.py: edits of a patch keep it byte-identical where untouched
and applying (git apply --check, GNU patch --dry-run before and after), with hunk
headers recounted; property tests on patches difflib writes."""

from __future__ import annotations

import difflib
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from patchaudit.inputs.patches import parse_patch
from patchaudit.model.findings import Edit
from patchaudit.patching.apply import apply_hunks, split_lines
from patchaudit.patching.patchedit import (
    PatchEditError,
    apply_line_edits,
    drop_hunk,
    edit_patch,
    hunk_at,
    refresh_hunk,
    revert_pair,
)

ORIGINAL = "".join(f"line {i}\n" for i in range(1, 41))

PATCH = """\
From 0123456789abcdef0123456789abcdef01234567 Mon Sep 17 00:00:00 2001
Subject: [PATCH] two files

---
diff --git a/f.txt b/f.txt
index 1111111..2222222 100644
--- a/f.txt
+++ b/f.txt
@@ -2,3 +2,4 @@ first
 line 2
 line 3
+added A
 line 4
@@ -10,3 +11,3 @@
 line 10
-line 11
+line eleven
 line 12
@@ -20,3 +21,5 @@
 line 20
+added B
+added C
 line 21
 line 22
diff --git a/g.txt b/g.txt
--- a/g.txt
+++ b/g.txt
@@ -1,2 +1,2 @@
-g1
+G1
 g2
--\x20
2.34.1
"""


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    root.mkdir()
    (root / "f.txt").write_text(ORIGINAL)
    (root / "g.txt").write_text("g1\ng2\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def _applies(root: Path, text: str, tmp_path: Path) -> tuple[bool, bool]:
    """(git apply --check, patch -p1 --dry-run) accept `text` in `root`."""
    p = tmp_path / "x.patch"
    p.write_bytes(text.encode())
    git = subprocess.run(["git", "apply", "--check", str(p)], cwd=root, capture_output=True)
    gnu = subprocess.run(["patch", "-p1", "--dry-run", "-s", "-i", str(p)], cwd=root, capture_output=True)
    return git.returncode == 0, gnu.returncode == 0


needs_tools = pytest.mark.skipif(not (shutil.which("git") and shutil.which("patch")), reason="git and GNU patch")


def test_unidiff_does_not_round_trip_a_patch_byte_for_byte():
    """Why patchedit edits the patch's own lines: unidiff rewrites what it does not change."""
    import unidiff

    text = "--- a/g.txt\n+++ b/g.txt\n@@ -1 +1 @@\n-g1\n+G1\n"
    assert "@@ -1,1 +1,1 @@" in str(unidiff.PatchSet(text))
    mail = str(unidiff.PatchSet(PATCH))
    assert mail.startswith("diff --git") and mail.endswith(" g2\n")  # the mail header and signature are gone
    crlf = text.replace("@@ -1 +1 @@", "@@ -1,1 +1,1 @@").replace("\n", "\r\n")
    assert "@@ -1,1 +1,1 @@ \r\n" in str(unidiff.PatchSet(crlf))
    for t in (text, PATCH, crlf):
        assert edit_patch(t, []) == t


def test_no_edit_keeps_every_byte():
    for text in (PATCH, PATCH.replace("\n", "\r\n"), PATCH.replace(" g2\n", " g2\n\\ No newline at end of file\n")):
        assert edit_patch(text, []) == text


@needs_tools
def test_dropping_a_hunk_moves_the_later_new_side_starts(tmp_path):
    root = _tree(tmp_path)
    assert _applies(root, PATCH, tmp_path) == (True, True)
    pf = parse_patch("p", PATCH)
    first = pf.sections[0].hunks[0]
    out = edit_patch(PATCH, [drop_hunk(pf, first)])
    assert "@@ -2,3 +2,4 @@" not in out
    assert "@@ -10,3 +10,3 @@\n" in out and "@@ -20,3 +20,5 @@\n" in out
    assert out.startswith(PATCH[: PATCH.index("@@")]) and out.endswith("--\x20\n2.34.1\n")
    assert not parse_patch("p", out).problems
    assert _applies(root, out, tmp_path) == (True, True)


@needs_tools
def test_a_hunk_turned_no_op_goes_and_so_does_its_section(tmp_path):
    root = _tree(tmp_path)
    pf = parse_patch("p", PATCH)
    g = pf.sections[1].hunks[0]
    edit = revert_pair(pf, g, g.lines[0].patch_line, g.lines[1].patch_line)
    assert edit is not None and edit.new_lines == (" g1",)
    out = edit_patch(PATCH, [edit])
    assert "g.txt" not in out and out.endswith(" line 22\n--\x20\n2.34.1\n")
    assert _applies(root, out, tmp_path) == (True, True)
    (root / "f.txt").write_text(ORIGINAL)


def test_revert_keeps_both_sides_in_order():
    text = "--- a/f\n+++ b/f\n@@ -1,4 +1,4 @@\n ctx\n-a\n-x = load(1)\n+A\n+x = legacy_load(1)\n ctx2\n"
    pf = parse_patch("p", text)
    h = pf.sections[0].hunks[0]
    edit = revert_pair(pf, h, 6, 8)
    out = edit_patch(text, [edit])
    new = parse_patch("p", out).sections[0].hunks[0]
    assert [l.text for l in new.pre_image] == [l.text for l in h.pre_image]
    assert [l.text for l in new.post_image] == ["ctx", "A", "x = load(1)", "ctx2"]


def test_crlf_patch_stays_crlf():
    text = PATCH.replace("\n", "\r\n")
    pf = parse_patch("p", text)
    line = next(l for _, h in pf.iter_hunks() for l in h.lines if l.text == "added A")
    out = edit_patch(text, [Edit(line.patch_line, line.patch_line, ("+added a",))])
    assert "+added a\r\n" in out and out.count("\r\n") == text.count("\r\n")
    assert out.replace("+added a", "+added A") == text


def test_no_newline_marker_is_kept():
    text = (
        "--- a/g\n+++ b/g\n@@ -1,2 +1,2 @@\n g1\n-g2\n\\ No newline at end of file\n+G2\n\\ No newline at end of file\n"
    )
    pf = parse_patch("p", text)
    out = edit_patch(text, [Edit(7, 7, ("+G3",))])
    assert out == text.replace("+G2", "+G3")
    assert revert_pair(pf, pf.sections[0].hunks[0], 5, 7) is None  # markers inside: no revert


def test_refused_edits():
    pf = parse_patch("p", PATCH)
    h = pf.sections[0].hunks[1]
    with pytest.raises(PatchEditError, match="part of the hunk"):
        edit_patch(PATCH, [Edit(h.header_line, h.header_line + 1, ())])
    with pytest.raises(PatchEditError, match="non-hunk line"):
        edit_patch(PATCH, [Edit(h.header_line + 2, h.header_line + 2, ("oops",))])
    with pytest.raises(PatchEditError, match="file header"):
        edit_patch(PATCH, [Edit(7, 7, ("--- a/other",))])
    with pytest.raises(PatchEditError, match="file header"):
        edit_patch(PATCH, [Edit(9, 8, ("junk between +++ and @@",))])
    assert edit_patch(PATCH, [Edit(3, 2, ("A note.",))]).split("\n")[2] == "A note."  # free text is free
    with pytest.raises(PatchEditError, match="overlap"):
        edit_patch(PATCH, [Edit(12, 12, ()), Edit(12, 13, ())])


@needs_tools
def test_refresh_makes_a_fuzzed_hunk_apply_with_git(tmp_path):
    root = _tree(tmp_path)
    engine = ORIGINAL.replace("line 12\n", "line twelve\n")
    (root / "f.txt").write_text("prelude\n" * 3 + engine)
    text = "--- a/f.txt\n+++ b/f.txt\n@@ -9,4 +9,4 @@\n line 9\n line 10\n-line 11\n+line eleven\n line 12\n"
    assert _applies(root, text, tmp_path) == (False, True)  # GNU patch: fuzz 1; git: refuses
    pf = parse_patch("p", text)
    hunk = pf.sections[0].hunks[0]
    lines, eol = split_lines((root / "f.txt").read_text())
    res = apply_hunks(lines, [hunk.to_spec()], ends_with_newline=eol).hunks[0]
    assert res.status == "fuzz"
    edit = refresh_hunk(pf, hunk, lines, res.source_line, eol)
    out = edit_patch(text, [edit])
    assert out == "--- a/f.txt\n+++ b/f.txt\n@@ -13,3 +13,3 @@\n line 10\n-line 11\n+line eleven\n line twelve\n"
    assert _applies(root, out, tmp_path) == (True, True)
    assert apply_hunks(lines, [parse_patch("p", out).sections[0].hunks[0].to_spec()]).hunks[0].status == "clean"


def test_plain_line_edits():
    assert apply_line_edits("a\nb\nc", [Edit(3, 3, ("C",))]) == "a\nb\nC"
    assert apply_line_edits("a\r\nb\r\n", [Edit(2, 1, ("x",))]) == "a\r\nx\r\nb\r\n"
    assert apply_line_edits("a\nb\n", [Edit(1, 1, ())]) == "b\n"
    with pytest.raises(PatchEditError):
        apply_line_edits("a\n", [Edit(3, 3, ("x",))])


# ----- properties -------------------------------------------------------------------

words = st.sampled_from(["alpha", "beta", "gamma", "delta", "", "x = 1", "return y"])


@st.composite
def file_and_patch(draw):
    old = draw(st.lists(words, min_size=3, max_size=40))
    new = list(old)
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["insert", "delete", "change"]))
        k = draw(st.integers(0, max(len(new) - 1, 0)))
        if op == "insert":
            new.insert(k, draw(words) + " new")
        elif new and op == "delete":
            del new[k]
        elif new:
            new[k] = new[k] + " changed"
    a = "".join(l + "\n" for l in old)
    b = "".join(l + "\n" for l in new)
    diff = "".join(
        difflib.unified_diff(a.splitlines(True), b.splitlines(True), "a/f", "b/f", n=draw(st.integers(0, 3)))
    )
    return a, diff


def _hunks_apply_cleanly(original: str, text: str) -> tuple[bool, str]:
    pf = parse_patch("p", text)
    assert not pf.problems, pf.problems
    hunks = [h for _, h in pf.iter_hunks()]
    for h in hunks:  # the header counts match the lines
        assert sum(l.kind != "+" for l in h.lines) == h.source_length
        assert sum(l.kind != "-" for l in h.lines) == h.target_length
    lines, eol = split_lines(original)
    res = apply_hunks(lines, [h.to_spec() for h in hunks], ends_with_newline=eol)
    return all(r.status == "clean" for r in res.hunks), "".join(l + "\n" for l in res.lines)


def _expected(original: str, hunks, drop: set[int], line_edits: dict[int, str | None]) -> str:
    """What the edited patch must make: the original hunks, those in `drop` left out, their
    added lines edited (`line_edits`: patch line -> new text, None: removed), applied."""
    from dataclasses import replace

    from patchaudit.inputs.hunkspec import HunkLine

    specs = []
    for k, h in enumerate(hunks):
        if k in drop:
            continue
        lines = []
        for l in h.lines:
            new = line_edits.get(l.patch_line, l.text)
            if new is not None:
                lines.append(HunkLine(l.kind, new, l.no_newline))  # type: ignore[arg-type]
        spec = replace(
            h.to_spec(),
            lines=tuple(lines),
            source_length=sum(x.kind != "+" for x in lines),
            target_length=sum(x.kind != "-" for x in lines),
        )
        if any(x.kind != " " for x in lines):
            specs.append(spec)
    src, eol = split_lines(original)
    res = apply_hunks(src, specs, ends_with_newline=eol)
    return "".join(l + "\n" for l in res.lines)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(file_and_patch(), st.data())
def test_dropping_hunks_and_editing_added_lines_keeps_the_patch_valid(fp, data):
    original, text = fp
    pf = parse_patch("p", text)
    hunks = [h for _, h in pf.iter_hunks()]
    if not hunks:
        return
    drop = data.draw(st.sets(st.integers(0, len(hunks) - 1), max_size=len(hunks) - 1))
    edits = [drop_hunk(pf, hunks[k]) for k in sorted(drop)]
    line_edits: dict[int, str | None] = {}
    for k, h in enumerate(hunks):
        added = [l for l in h.lines if l.kind == "+"]
        if k in drop or not added:
            continue
        l = data.draw(st.sampled_from(added))
        new = l.text + " edited" if data.draw(st.booleans()) else None
        line_edits[l.patch_line] = new
        edits.append(Edit(l.patch_line, l.patch_line, () if new is None else ("+" + new,)))
    try:
        out = edit_patch(text, edits)
    except PatchEditError as exc:  # only when nothing is left of the patch
        assert "no hunk would be left" in str(exc)
        assert all(
            k in drop or all(l.kind == " " or line_edits.get(l.patch_line, 1) is None for l in h.lines)
            for k, h in enumerate(hunks)
        )
        return
    clean, result = _hunks_apply_cleanly(original, out)
    assert clean
    assert result == _expected(original, hunks, drop, line_edits)


@settings(max_examples=40, deadline=None)
@given(file_and_patch())
def test_reverting_every_change_leaves_nothing(fp):
    """Each hunk dropped one by one: the patch stays valid at every step."""
    original, text = fp
    while True:
        pf = parse_patch("p", text)
        hunks = [h for _, h in pf.iter_hunks()]
        if len(hunks) <= 1:
            break
        text = edit_patch(text, [drop_hunk(pf, hunks[0])])
        assert _hunks_apply_cleanly(original, text)[0]
    assert hunk_at(parse_patch("p", text), 10**6) is None


@needs_tools
def test_renumbered_hunks_stay_in_order_and_apply(tmp_path):
    from patchaudit.patching.patchedit import renumber_hunk

    root = _tree(tmp_path)
    (root / "f.txt").write_text("top\n" * 30 + ORIGINAL)  # every hunk of f.txt is 30 lines lower
    pf = parse_patch("p", PATCH)
    edits = [renumber_hunk(pf, h, h.source_start + 30) for h in pf.sections[0].hunks]
    out = edit_patch(PATCH, [e for e in edits if e is not None])
    assert "@@ -32,3 +32,4 @@ first\n" in out and "@@ -40,3 +41,3 @@\n" in out and "@@ -50,3 +51,5 @@\n" in out
    assert _applies(root, out, tmp_path) == (True, True)
    assert renumber_hunk(pf, pf.sections[0].hunks[0], 2) is None  # already there


@needs_tools
def test_a_line_added_in_the_trailing_context_keeps_the_hunk_clean(tmp_path):
    root = _tree(tmp_path)
    head = "--- a/f.txt\n+++ b/f.txt\n"
    text = head + "@@ -8,7 +8,7 @@\n line 8\n line 9\n line 10\n-line 11\n+line eleven\n line 12\n line 13\n line 14\n"
    pf = parse_patch("p", text)
    line13 = next(l for l in pf.sections[0].hunks[0].lines if l.text == "line 13")
    out = edit_patch(text, [Edit(line13.patch_line + 1, line13.patch_line, ("+line 13b",))])
    want = "@@ -10,5 +10,6 @@\n line 10\n-line 11\n+line eleven\n line 12\n line 13\n+line 13b\n line 14\n"
    assert out == head + want
    assert _applies(root, out, tmp_path) == (True, True)
    gnu = subprocess.run(["patch", "-p1", "--dry-run", "-F0"], cwd=root, input=out.encode(), capture_output=True)
    assert gnu.returncode == 0, gnu.stdout
    line14 = next(l for l in pf.sections[0].hunks[0].lines if l.text == "line 14")
    with pytest.raises(PatchEditError, match="without trailing context"):
        edit_patch(text, [Edit(line14.patch_line + 1, line14.patch_line, ("+line 15",))])
