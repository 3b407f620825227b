"""Hostile and broken input, property-based: nothing patchaudit reads makes it crash.

Targets: the patch reader (`read_patch` + the unidiff cross-check), the
fragment parser, the nesting scan that guards libcst, and the whole `check`
command.  Inputs are arbitrary bytes and *mutated real-shaped patches*:
`difflib.unified_diff` output (with git headers, several files, missing final
newlines) cut, spliced, re-numbered, re-encoded.  Every failure must become a
finding (PA301/PA302) or an error naming the file; "internal error" or
"rule ... crashed" errors are bugs (the runner turns an exception into those).

The number of examples comes from the hypothesis profile (tests/conftest.py):
"ci" is bounded and derandomized; `HYPOTHESIS_PROFILE=long` runs 10,000 per test.
"""

from __future__ import annotations

import ast
import difflib
import os
import tempfile
from pathlib import Path

from click.testing import CliRunner
from hypothesis import assume, example, given
from hypothesis import strategies as st

from patchaudit.config.settings import Settings
from patchaudit.inputs.discover import PATCH, PYTHON, SourceFile
from patchaudit.inputs.patches import read_patch, validate_with_unidiff
from patchaudit.pipeline.analyse import analyse_file
from patchaudit.units.fragments import patch_fragment_units
from patchaudit.units.nesting import too_deep

# --------------------------------------------------------------------------
# strategies

PY_LINES = [
    "def f(a, b=1):", "    return a + b", "class C(Base):", "    x = [1, 2,", "        3]",
    "    base_output = await self.legacy_load_mm_data(", "        prompt=prompt,",
    "        image_data=image_data,", "    )", "if x:", "else:", "    pass", "", "# comment",
    '    """doc', '    """', "    s = 'it''s'", "    y = f'{a!r:>{w}}'", "x = (", ")", "]", "    @decorator",
    "SGLANG_MM_AVOID_RETOKENIZE=0", "os.environ['SGLANG_MM_AVOID_RETOKENIZE'] = '0'",
    "\tmixed = 1", "lambda: (yield)", "import a.b.c", "try:", "except Exception:", "\x0c", "x = 1 \\",
]

#: characters that break naive readers: line boundaries other than \n, NUL, surrogates, quotes
NASTY_CHARS = st.sampled_from(list("\r\x00\x0b\x0c\x1c\x85\u2028\t\\\"'@+- \n") + ["\udcff", "é"])

def _file_text(clean: bool):
    nasty = NASTY_CHARS.filter(lambda c: c not in "\x00\udcff") if clean else NASTY_CHARS
    line = st.one_of(
        st.sampled_from(PY_LINES),
        st.text(alphabet=st.one_of(st.characters(codec="utf-8", exclude_categories=("Cs",),
                                                 exclude_characters="\x00" if clean else ""), nasty),
                max_size=30),
    )
    return st.builds(
        lambda lines, final_nl: "\n".join(lines) + ("\n" if final_nl and lines else ""),
        st.lists(line.map(lambda s: s.replace("\n", "")), max_size=25),
        st.booleans(),
    )


file_text = _file_text(clean=False)
clean_file_text = _file_text(clean=True)


def split_keep(text: str) -> list[str]:
    """Lines with their "\\n" (only "\\n" ends a line, as for diff and patch)."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def unified(a: str, b: str, path: str, n: int = 3, git: bool = False) -> str:
    """A unified diff from `a` to `b`, with GNU diff's "\\ No newline at end of file"."""
    out = []
    if a == b:
        return ""
    if git:
        out.append(f"diff --git a/{path} b/{path}\n")
        out.append("index 1111111..2222222 100644\n")
    for line in difflib.unified_diff(split_keep(a), split_keep(b), f"a/{path}", f"b/{path}", n=n):
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


@st.composite
def real_patch(draw, clean: bool = False) -> tuple[str, list[tuple[str, str, str]]]:
    """A patch of 1-3 files made by difflib, and the (path, a, b) it was made from."""
    files = []
    names = draw(st.lists(st.sampled_from(["x.py", "pkg/y.py", "run.sh", "Dockerfile", "conf.yaml", "notes.txt"]),
                          min_size=1, max_size=3, unique=True))
    git = draw(st.booleans())
    n = draw(st.integers(0, 4))
    text = draw(st.sampled_from(["", "Description: hostile\nUpstream-Status: Pending\n\n", "From 1 Mon\n"]))
    for name in names:
        a = draw(clean_file_text if clean else file_text)
        b = draw(clean_file_text if clean else file_text)
        if clean and a == b:
            b += "added\n"
        files.append((name, a, b))
        text += unified(a, b, name, n=n, git=git)
    return text, files


MUTATIONS = ("delete", "duplicate", "swap", "replace", "insert", "renumber", "truncate", "crlf", "cr",
             "nul", "latin1", "nonewline", "prefix", "bigcount")


@st.composite
def mutated_patch(draw) -> bytes:
    text, _ = draw(real_patch())
    data = text.encode("utf-8", "surrogateescape")
    for _ in range(draw(st.integers(1, 4))):
        lines = data.split(b"\n")
        k = draw(st.integers(0, max(0, len(lines) - 1)))
        op = draw(st.sampled_from(MUTATIONS))
        if op == "delete" and len(lines) > 1:
            del lines[k]
        elif op == "duplicate":
            lines.insert(k, lines[k])
        elif op == "swap" and len(lines) > 1:
            j = draw(st.integers(0, len(lines) - 1))
            lines[k], lines[j] = lines[j], lines[k]
        elif op == "replace":
            lines[k] = draw(st.binary(max_size=20))
        elif op == "insert":
            lines.insert(k, draw(st.sampled_from([b"@@ -1 +1 @@", b"@@ -0,0 +1,3 @@ def f():", b"--- a/x.py",
                                                  b"+++ b/x.py", b"diff --git a/x.py b/x.py", b"\\ No newline",
                                                  b"-- ", b"+", b"-", b" ", b"GIT binary patch",
                                                  b"rename to ../../etc/passwd", b"new file mode 120000",
                                                  b"@@ -1,2 +1,2 @@", b"@@@ -1 -1 +1 @@@"])))
        elif op == "renumber":
            digits = [i for i, c in enumerate(lines[k]) if 48 <= c <= 57]
            if digits:
                i = draw(st.sampled_from(digits))
                lines[k] = lines[k][:i] + str(draw(st.integers(0, 9))).encode() + lines[k][i + 1:]
        elif op == "truncate":
            data = data[:draw(st.integers(0, len(data)))]
            continue
        elif op == "crlf":
            lines[k] += b"\r"
        elif op == "cr":
            lines[k] = lines[k].replace(b" ", b"\r", 1)
        elif op == "nul":
            lines[k] += b"\x00"
        elif op == "latin1":
            lines[k] += b"\xe9\xff"
        elif op == "nonewline":
            lines.insert(k, b"\\ No newline at end of file")
        elif op == "prefix":
            lines[k] = draw(st.sampled_from([b"+", b"-", b" ", b"@", b"\\", b""])) + lines[k]
        elif op == "bigcount":
            lines.insert(k, b"@@ -1,99999999999999999999 +1,4294967296 @@")
        data = b"\n".join(lines)
    return data


any_patch_bytes = st.one_of(st.binary(max_size=400), mutated_patch(), real_patch().map(lambda t: t[0].encode("utf-8", "surrogateescape")))

# --------------------------------------------------------------------------
# helpers


def check_reader_invariants(patch) -> None:
    n = len(patch.lines)
    for p in patch.problems:
        assert 1 <= p.line <= max(1, n + 1), p
        assert p.message
    for sec in patch.sections:
        assert 1 <= sec.header_line <= max(1, n)
        for h in sec.hunks:
            assert sum(1 for l in h.lines if l.kind != "+") == h.source_length
            assert sum(1 for l in h.lines if l.kind != "-") == h.target_length
            prev = h.header_line
            for l in h.lines:
                assert l.kind in " -+"
                assert l.patch_line > prev
                prev = l.patch_line
                raw = patch.lines[l.patch_line - 1]
                assert raw == l.kind + l.text or (raw == "" and l.kind == " " and l.text == "")
            h.changed_target_lines  # noqa: B018 - computed without error


def assert_clean_errors(errors, paths) -> None:
    """Every error names a file of the run, and none is a caught crash."""
    for e in errors:
        assert e.path in paths, e
        assert "internal error" not in e.message, str(e)
        assert "crashed" not in e.message, str(e)


# --------------------------------------------------------------------------
# the patch reader


@given(any_patch_bytes)
@example(b"")
@example(b"\xff\xfe\x00")
@example(b"@@ -1 +1 @@\n")
@example(b"--- a\n+++ b\n@@ -1,99999999999999999999 +1 @@\n-x\n")
@example(b'diff --git "a/\\000x" "b/\\377"\n')
@example(b"--- a/x.py\n+++ b/x.py\n@@ -1,2 +0,0 @@\n-\r\n-\r\n")
@example("--- a/x\r\n+++ b/x\r\n@@ -1 +1 @@\r\n-a\x0cb\r\n+c\u2028d\r\n".encode())
def test_reader_never_raises_and_keeps_its_invariants(data):
    patch = read_patch("t.patch", data)
    check_reader_invariants(patch)
    for p in validate_with_unidiff(patch):
        assert 1 <= p.line <= max(1, len(patch.lines) + 1)


@given(real_patch(clean=True))  # no NUL, no non-UTF-8 bytes: those are reported by design
def test_reader_reads_difflib_output_exactly(case):
    text, files = case
    patch = read_patch("t.patch", text.encode("utf-8", "surrogateescape"))
    assert patch.problems == []
    assert validate_with_unidiff(patch) == []
    changed = [(name, a, b) for name, a, b in files if a != b]
    assert [s.path for s in patch.sections] == [name for name, _, _ in changed]
    for sec, (name, a, b) in zip(patch.sections, changed):
        # the hunks hold exactly the lines difflib compared, in order
        old = [l.text for h in sec.hunks for l in h.lines if l.kind != "+"]
        new = [l.text for h in sec.hunks for l in h.lines if l.kind != "-"]
        a_lines = [l.rstrip("\n") for l in split_keep(a)]
        b_lines = [l.rstrip("\n") for l in split_keep(b)]
        assert all(x in a_lines for x in old)
        assert all(x in b_lines for x in new)
        for h in sec.hunks:
            for l in h.lines:
                if l.kind != "+":
                    assert a_lines[l.source_line - 1] == l.text
                if l.kind != "-":
                    assert b_lines[l.target_line - 1] == l.text


# --------------------------------------------------------------------------
# the fragment parser


@given(st.one_of(mutated_patch(), real_patch().map(lambda t: t[0].encode("utf-8", "surrogateescape"))))
def test_fragments_never_raise_and_map_back_to_added_lines(data):
    patch = read_patch("t.patch", data)
    py, text = patch_fragment_units(patch, "t.patch")
    for u in py:
        ast.parse(u.text)  # every window chosen was parsed by a trial parse
        for ul, info in u.lines_map.items():
            raw = patch.lines[info.line - 1]
            assert raw[:1] in ("+", " ", ""), (ul, raw)
        for ul in u.judged:
            info = u.lines_map[ul]
            assert patch.lines[info.line - 1].startswith(("+", " ", "")) and info.changed
    for u in text:
        assert len(u.lines) == len(u.hunk.post_image)


# --------------------------------------------------------------------------
# the nesting scan


@st.composite
def nested_python(draw) -> str:
    """Python built by nesting constructs libcst nests (and that overflow it when deep)."""
    depth = draw(st.integers(0, 400))
    wraps = draw(st.lists(st.sampled_from(["(%s)", "[%s]", "{%s}", "f(%s)", "-%s", "not %s", "%s.b",
                                           "%s + 1", "%s[0]", "lambda: %s", "f'{%s}'", 'f"{%s!r:>{w}}"', "(1 if %s else 2)",
                                           "'x' %s", "%s and y", "{'k': %s}", "%s()"]),
                          min_size=depth, max_size=depth))
    expr = "x"
    for w in wraps:
        if w == "'x' %s":
            expr = "'x' " + (expr if expr.startswith(("'", '"')) else "'y'")
            continue
        expr = w % expr
    return f"value = {expr}\n"


@given(nested_python())
def test_nesting_estimate_is_an_upper_bound_of_the_tree_depth(src):
    """Whatever the scan accepts at limit L has a syntax tree (stdlib ast) no deeper than ~2L."""
    try:
        tree = ast.parse(src)
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return
    depth = _ast_depth(tree)
    est = too_deep(src, 10 ** 9)
    assert est is None
    # the smallest limit the scan accepts: a bisection over too_deep
    lo, hi = 0, 10 ** 6
    while lo < hi:
        mid = (lo + hi) // 2
        if too_deep(src, mid) is None:
            hi = mid
        else:
            lo = mid + 1
    # ast nests ~2 nodes per level where libcst nests ~4; the scan must not undercount levels
    assert lo * 2 + 8 >= depth, (lo, depth, src[:200])


def _ast_depth(tree) -> int:
    best = 0
    stack = [(tree, 1)]
    while stack:
        node, d = stack.pop()
        best = max(best, d)
        stack.extend((c, d + 1) for c in ast.iter_child_nodes(node))
    return best


@given(st.text(max_size=300), st.integers(0, 300))
def test_nesting_scan_never_raises(text, limit):
    r = too_deep(text, limit)
    assert r is None or (r[0] >= 1 and r[1] > limit)


# --------------------------------------------------------------------------
# the whole pipeline and the `check` command


@given(any_patch_bytes)
def test_analyse_file_reports_instead_of_crashing_on_patches(data):
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "t.patch")
        Path(p).write_bytes(data)
        fr = analyse_file(SourceFile(p, PATCH), Settings(cache=False, jobs=1))
    assert_clean_errors(fr.errors, {p})
    for f in fr.findings:
        assert f.path == p and f.line >= 1


python_bytes = st.one_of(
    st.binary(max_size=300),
    st.lists(st.sampled_from(PY_LINES), max_size=30).map(lambda ls: "\n".join(ls).encode("utf-8", "surrogateescape")),
    nested_python().map(lambda s: ("base_output = legacy_load_mm_data(x)\n" + s).encode()),
)


@given(python_bytes)
def test_analyse_file_reports_instead_of_crashing_on_python(data):
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "t.py")
        Path(p).write_bytes(data)
        fr = analyse_file(SourceFile(p, PYTHON), Settings(cache=False, jobs=1, max_nesting=60))
    assert_clean_errors(fr.errors, {p})


@given(st.lists(st.tuples(st.sampled_from(["a.patch", "b.diff", "c.py", "d.sh", "Dockerfile", "e.yaml", ".env"]),
                          st.one_of(any_patch_bytes, python_bytes)),
                min_size=1, max_size=4, unique_by=lambda t: t[0]))
def test_check_command_exits_0_1_or_2_and_names_bad_files(files):
    from patchaudit.cli import main

    with tempfile.TemporaryDirectory() as d:
        for name, data in files:
            Path(d, name).write_bytes(data)
        cwd = os.getcwd()
        os.chdir(d)
        try:
            res = CliRunner().invoke(main, ["check", "--no-cache", "-j", "1", "--format", "json", "."],
                                     catch_exceptions=True)
        finally:
            os.chdir(cwd)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    assert res.exit_code in (0, 1, 2), res.output
    out = res.output
    assert "Traceback" not in out
    assert "internal error" not in out and "crashed" not in out, out
