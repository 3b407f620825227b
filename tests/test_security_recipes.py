"""Recipes, sed expressions and configured patterns from a hostile checkout are bounded.

A build script is read as a recipe without being run (patchaudit/inputs/recipes.py);
its variables are expanded, its commands split into words, its `sed -i` expressions
applied to engine files, its globs resolved.  Each test below plants one hostile input
and checks the outcome and the work done (counted, never timed): an error naming the
file and line, exit code 2 where the input is refused, no traceback.  The commands run
in a child process (tests/test_security_readers.py `pa`) whose own timeout is only a
safety net for a regression.
"""

from __future__ import annotations

import shlex

import pytest
from test_security_readers import MAX_RSS_KB, no_traceback, pa  # (tests/ is on sys.path)

from patchaudit.inputs import recipes, shellcmd
from patchaudit.inputs.recipes import UNKNOWN, read_recipe
from patchaudit.inputs.sedexpr import Unsupported, parse_substitution

MAX_EXPANDED = getattr(recipes, "MAX_EXPANDED", 32 * 1024)

DOUBLING = "A=xy\n" + "A=$A$A\n" * 20 + "git apply $A.patch\n"


def _count_split_chars(monkeypatch) -> list[int]:
    """The characters `words` is asked to split (shlex's work), counted."""
    seen: list[int] = []
    real = shellcmd.words

    def counting(text: str):
        seen.append(len(text))
        return real(text)

    monkeypatch.setattr(recipes, "words", counting)
    return seen


def test_doubled_variable_is_bounded_and_marked(monkeypatch):
    seen = _count_split_chars(monkeypatch)
    recipe = read_recipe("/r/build.sh", "shell", DOUBLING)
    # 2^20 times the first value unbounded: each command stays under the expansion limit
    assert max(seen) <= MAX_EXPANDED + 64
    assert sum(seen) <= 22 * (MAX_EXPANDED + 64)
    assert any("longer than" in m and line == 15 for line, m in recipe.problems), recipe.problems
    # the value past the bound is unknown: it names no file
    assert UNKNOWN in recipe.env["A"]
    assert not [s for s in recipe.steps if isinstance(s, recipes.PatchStep)]


def test_doubled_variable_in_a_dockerfile_is_bounded():
    text = "FROM base\nENV A=xy\n" + "ENV A=$A$A\n" * 24 + "RUN git apply $A.patch\n"
    recipe = read_recipe("/r/Dockerfile", "dockerfile", text)
    assert len(recipe.env["A"]) <= MAX_EXPANDED
    assert any("longer than" in m for _, m in recipe.problems)


@pytest.mark.parametrize(
    "text, problem",
    [
        ("if a; then\n" * 5000, "nested more than"),  # was a RecursionError
        ("for a in b; do\n" * 5000, "nested more than"),
        ("echo " + "x" * 200_000 + "\n", "a command longer than"),
        ("A=1\n" + ("echo " + "$A" * 5000 + "\n") * 400, "expand to more than"),
    ],
    ids=["nested-if", "nested-for", "long-word", "many-references"],
)
def test_shell_shapes_are_bounded(monkeypatch, text, problem):
    seen = _count_split_chars(monkeypatch)
    recipe = read_recipe("/r/build.sh", "shell", text)
    assert any(problem in m for _, m in recipe.problems), recipe.problems
    assert sum(seen) <= getattr(recipes, "MAX_RECIPE_TEXT", 2**20) + 64 * 1024


def test_backticks_are_scanned_in_linear_work():
    """The scanner counted the backticks of its buffer at each one (quadratic)."""
    calls = {"n": 0}

    class CountingList(list):
        def count(self, value):
            calls["n"] += len(self)
            return super().count(value)

    scanner = shellcmd._Scanner("echo " + "`a` " * 3000, 1)
    scanner.buf = CountingList()
    got = scanner.run()
    assert got and calls["n"] <= 10 * 3000


@pytest.mark.parametrize("command", ["check", "plan"])
def test_doubling_script_is_an_error_not_a_hang(tmp_path, command):
    (tmp_path / "build.sh").write_text(DOUBLING)
    res = pa(tmp_path, command, ".")
    no_traceback(res)
    assert res.returncode == 2, res
    assert "build.sh:15" in res.stderr and "longer than" in res.stderr, res
    assert res.maxrss_kb is None or res.maxrss_kb < MAX_RSS_KB


def test_words_refuses_a_long_command():
    assert shellcmd.words("x" * (64 * 1024 + 1)) is None
    assert shellcmd.words(shlex.quote("a b") + " c") == ["a b", "c"]


# ---------------------------------------------------------------------------
# sed expressions run under RE2 (linear time), never Python's backtracking re


@pytest.mark.parametrize(
    "script, extended, line",
    [
        ("s/(.+)+Q/R/", True, "x" * 3000),
        (r"s/\(a*\)*b/R/g", False, "a" * 3000),
        ("s/(a|aa)+$/R/", True, "a" * 3000 + "!"),
    ],
    ids=["nested-plus", "bre-nested-star", "alternation"],
)
def test_sed_pattern_runs_in_linear_time_like_gnu_sed(tmp_path, script, extended, line):
    import re
    import subprocess

    sub = parse_substitution(script, extended)
    assert not isinstance(sub.pattern, re.Pattern)  # never the backtracking engine
    f = tmp_path / "in.txt"
    f.write_text(line + "\n")
    subprocess.run(["sed", *(["-E"] if extended else []), "-i", script, str(f)], check=True, timeout=60)
    assert sub.apply_line(line) == f.read_text().rstrip("\n")


@pytest.mark.parametrize(
    "script, text",
    [("s/a\\|ab/X/", "abab"), ("s/\\(a*\\)\\(ab\\)*b/[\\1,\\2]/", "aabab"), ("s/x*/-/g", "abc")],
)
def test_sed_matches_gnu_sed_leftmost_longest(tmp_path, script, text):
    import subprocess

    f = tmp_path / "in.txt"
    f.write_text(text + "\n")
    subprocess.run(["sed", "-i", script, str(f)], check=True, timeout=60)
    assert parse_substitution(script).apply_line(text) == f.read_text().rstrip("\n")


def test_sed_back_reference_in_pattern_is_refused_with_a_reason():
    with pytest.raises(Unsupported, match="back-reference"):
        parse_substitution(r"s/\(a\)\1/x/")


SED_SCRIPT = """\
#!/bin/sh
SITE=/usr/lib/python3/site-packages/sglang
sed -E -i 's/(.+)+Q/R/' $SITE/srt/layer.py
sed -i 's/\\(ab\\)\\1/x/' $SITE/srt/layer.py
"""


def test_hostile_sed_on_an_engine_file_is_bounded(tmp_path):
    engine = tmp_path / "engine" / "sglang"
    (engine / "srt").mkdir(parents=True)
    (engine / "__init__.py").write_text("")
    (engine / "srt" / "layer.py").write_text("x = 1\n" + "#" + "a" * 4000 + "\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "post_install.sh").write_text(SED_SCRIPT)
    res = pa(repo, "check", ".", "--no-cache", "--engine", f"sglang={tmp_path / 'engine'}")
    no_traceback(res)
    # the back-reference is not run: said, naming the recipe and its line
    said = res.stdout + res.stderr  # the text report says it once, as a note
    assert "post_install.sh:4: sed" in said and "back-reference" in said, res


# ---------------------------------------------------------------------------
# configured patterns (rule options) run under RE2, or are refused at load


def _pa105_tree(tmp_path, pattern: str):
    pytest.importorskip("tokenizers")
    from test_tokenizer import write_tokenizer

    write_tokenizer(tmp_path / "model")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.patchaudit]\ntokenizer = "model"\n\n[tool.patchaudit.rules.PA105]\n' + f"pattern = '{pattern}'\n"
    )
    (tmp_path / "proc.py").write_text(f'image_token = "{"a" * 42}"\n')


def test_configured_pattern_runs_in_linear_time(tmp_path):
    _pa105_tree(tmp_path, "(a+)+b")
    res = pa(tmp_path, "check", "--select", "PA105", "--no-cache", "proc.py")
    no_traceback(res)
    assert res.returncode == 1 and "PA105" in res.stdout, res  # the whole value is judged


def test_configured_pattern_re2_cannot_run_is_refused_at_load(tmp_path):
    _pa105_tree(tmp_path, r"(a)\1")
    res = pa(tmp_path, "check", "--select", "PA105", "--no-cache", "proc.py")
    no_traceback(res)
    assert res.returncode == 2, res
    assert "pyproject.toml: [tool.patchaudit.rules.PA105] pattern:" in res.stderr, res
    assert "back-reference" in res.stderr, res


# ---------------------------------------------------------------------------
# a recipe's globs are resolved inside the project root only, and bounded


def _glob_tree(tmp_path):
    outside = tmp_path / "elsewhere" / "a" / "b"
    outside.mkdir(parents=True)
    (outside / "other.patch").write_text("--- a/x\n+++ b/x\n")
    repo = tmp_path / "repo"
    (repo / "patches" / "v1").mkdir(parents=True)
    (repo / "patches" / "v1" / "ours.patch").write_text("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    (repo / "up").symlink_to(tmp_path)  # a committed link out of the checkout
    (repo / "build.sh").write_text(
        "for p in /*/*/*/*/*/*/*.patch; do git apply $p; done\n"
        f"for p in {tmp_path}/*/*/*/*.patch; do git apply $p; done\n"
        'for p in "$(dirname "$0")"/../*/*/*/*.patch; do git apply $p; done\n'
        'for p in "$(dirname "$0")"/up/*/*/*/*.patch; do git apply $p; done\n'
        'for p in "$(dirname "$0")"/patches/*/*.patch; do git apply $p; done\n'
    )
    return repo


def test_recipe_globs_stay_inside_the_project_root(tmp_path, monkeypatch):
    import json
    import os

    from click.testing import CliRunner

    from patchaudit.cli import main

    repo = _glob_tree(tmp_path)
    monkeypatch.chdir(repo)
    read: list[str] = []
    real_scandir = os.scandir

    def counting(path="."):
        read.append(os.path.abspath(os.fspath(path)))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", counting)
    out = CliRunner().invoke(main, ["plan", ".", "--format", "json"])
    monkeypatch.setattr(os, "scandir", real_scandir)
    assert "Traceback" not in out.output
    outside = [p for p in read if not (p + os.sep).startswith(str(repo) + os.sep)]
    assert outside == [], outside[:10]
    assert "other.patch" not in out.output and "elsewhere" not in out.output
    got = json.loads(out.stdout)
    assert [p["patch"] for s in got["sets"] for p in s["patches"]] == ["patches/v1/ours.patch"]


def test_a_recipe_glob_reads_a_bounded_number_of_folders(tmp_path, monkeypatch):
    from patchaudit.pipeline import recipe_paths

    monkeypatch.setattr(recipe_paths, "MAX_GLOB_FOLDERS", 50)
    for i in range(30):
        for j in range(30):
            (tmp_path / f"d{i}" / f"e{j}").mkdir(parents=True)
    cut: list[str] = []
    got = recipe_paths.glob_inside(str(tmp_path / "*" / "*" / "*.patch"), str(tmp_path), cut)
    assert got == [] and cut and "more than 50 folders" in cut[0]
