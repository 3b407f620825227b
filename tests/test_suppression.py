"""Inline suppression `# patchaudit: ignore[...]` and the opt-in PA001 unused-suppression rule."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from patchaudit.cli import main
from patchaudit.testing import cli_runner, invoke_in

CALL = "out = legacy_load_mm_data(prompt=text)"




def run(root: Path, *args: str) -> list[tuple[str, int, str]]:
    res = invoke_in(root, ["check", "--format", "json", "--no-cache", *args])
    assert res.exit_code in (0, 1), res.stderr
    return [(f["path"], f["line"], f["code"]) for f in json.loads(res.stdout)]


def write(root: Path, name: str, text: str) -> str:
    p = root / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return name


@pytest.mark.parametrize("comment,suppressed", [
    ("# patchaudit: ignore[PA101]", True),
    ("# patchaudit: ignore", True),
    ("# patchaudit: ignore[PA104, PA101]", True),
    ("# patchaudit: ignore[PA1]", True),
    ("#patchaudit:ignore[pa101]", True),
    ("# patchaudit: ignore[PA104]", False),
    ("# patchaudit: ignore[]", False),
    ("# noqa: PA101", True),            # flake8/ruff's grammar, with our code
    ("# noqa:PA101,E501", True),
    ("# NOQA: pa104, PA101", True),
    ("# noqa: PA1", True),              # a prefix, as in `ignore[PA1]`
    ("# noqa", False),                  # bare: other tools', never ours
    ("# noqa: E501", False),            # ruff's code, not ours
    ("# noqa: PA104", False),
])
def test_python_same_line(tmp_path, comment, suppressed):
    write(tmp_path, "a.py", f"{CALL}  {comment}\n")
    assert run(tmp_path, "a.py") == ([] if suppressed else [("a.py", 1, "PA101")])


def test_comment_on_another_line_does_not_suppress(tmp_path):
    write(tmp_path, "a.py", f"# patchaudit: ignore[PA101]\n{CALL}\n")
    assert run(tmp_path, "a.py") == [("a.py", 2, "PA101")]


def test_only_the_named_finding_on_the_line_is_suppressed(tmp_path):
    write(tmp_path, "a.py", f"{CALL}; os.environ['SGLANG_MM_AVOID_RETOKENIZE'] = '0'  # patchaudit: ignore[PA104]\n")
    assert run(tmp_path, "a.py") == [("a.py", 1, "PA101")]


def test_shell_yaml_and_dockerfile_comments(tmp_path):
    write(tmp_path, "run.sh", "export SGLANG_MM_AVOID_RETOKENIZE=0  # patchaudit: ignore[PA104]\n"
                              "export SGLANG_MM_AVOID_RETOKENIZE=false\n")
    write(tmp_path, "Dockerfile", "FROM python:3.11\nENV SGLANG_MM_AVOID_RETOKENIZE=0  # patchaudit: ignore\n")
    assert run(tmp_path, ".") == [("run.sh", 2, "PA104")]


PATCH = """\
--- a/python/sglang/srt/x.py
+++ b/python/sglang/srt/x.py
@@ -1,4 +1,4 @@
 def f(text):
-    out = self.load_mm_data(prompt=text)
+    out = self.legacy_load_mm_data(prompt=text){comment}
     return out
 # trailing context
"""


def test_added_patch_line(tmp_path):
    write(tmp_path, "a.patch", PATCH.format(comment=""))
    assert run(tmp_path, "a.patch") == [("a.patch", 6, "PA101")]
    write(tmp_path, "a.patch", PATCH.format(comment="  # patchaudit: ignore[PA101]"))
    assert run(tmp_path, "a.patch") == []


def test_comment_in_a_context_or_removed_line_of_a_patch_does_not_count(tmp_path):
    # the comment is on a context line of the hunk: it is the engine's text, not ours
    text = PATCH.format(comment="").replace(" # trailing context", " # patchaudit: ignore")
    text = text.replace("-    out = self.load_mm_data(prompt=text)",
                        "-    out = self.load_mm_data(prompt=text)  # patchaudit: ignore[PA101]")
    write(tmp_path, "a.patch", text)
    assert run(tmp_path, "--extend-select", "PA001", "a.patch") == [("a.patch", 6, "PA101")]


def test_exact_mode_finding_is_suppressed_in_the_added_line(tmp_path):
    from patchaudit.rules.pa101_legacy_loader_drops_input_ids import BASE_WITH_PARAM, EXACT_PATCH, _engine

    for rel, text in _engine(BASE_WITH_PARAM).items():
        write(tmp_path / "engine", rel, text)
    write(tmp_path, "p.patch", EXACT_PATCH)
    found = run(tmp_path, "--engine", "sglang=engine", "--select", "PA101", "p.patch")
    assert [c for _, _, c in found] == ["PA101"]
    line = found[0][1]
    lines = EXACT_PATCH.splitlines()
    lines[line - 1] += "  # patchaudit: ignore[PA101]"
    write(tmp_path, "p.patch", "\n".join(lines) + "\n")
    assert run(tmp_path, "--engine", "sglang=engine", "--select", "PA101", "p.patch") == []


# ----- PA001 unused-suppression ------------------------------------------------


def test_pa001_is_off_by_default(tmp_path):
    write(tmp_path, "a.py", "x = 1  # patchaudit: ignore\n")
    assert run(tmp_path, "a.py") == []


def test_pa001_reports_unused_comments_only(tmp_path):
    write(tmp_path, "a.py", "\n".join([
        f"{CALL}  # patchaudit: ignore[PA101]",        # used
        "x = 1  # patchaudit: ignore",                  # unused blanket
        "y = 2  # patchaudit: ignore[PA101]",           # unused code
        "z = 3  # patchaudit: ignore[PA888]",           # unknown code
        f"{CALL}  # patchaudit: ignore[PA101, PA104]",  # PA104 unused
        "w = 4  # patchaudit: ignore[PA201]",           # needs an engine: not judged without one
    ]) + "\n")
    found = run(tmp_path, "--extend-select", "PA001", "a.py")
    assert found == [("a.py", 2, "PA001"), ("a.py", 3, "PA001"), ("a.py", 4, "PA001"), ("a.py", 5, "PA001")]


def test_pa001_messages_and_columns(tmp_path):
    write(tmp_path, "a.py", "z = 3  # patchaudit: ignore[PA888]\n")
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        res = cli_runner().invoke(main, ["check", "--format", "json", "--no-cache", "--select", "PA001", "a.py"])
    finally:
        os.chdir(old)
    (f,) = json.loads(res.stdout)
    assert f["column"] == 8 and "unknown rule code PA888" in f["message"]


def test_pa001_does_not_judge_codes_of_rules_not_selected(tmp_path):
    write(tmp_path, "a.py", "y = 2  # patchaudit: ignore[PA101]\n")
    assert run(tmp_path, "--select", "PA001,PA104", "a.py") == []
    assert run(tmp_path, "--select", "PA001,PA101", "a.py") == [("a.py", 1, "PA001")]


def test_pa001_in_patches_and_per_file_ignores(tmp_path):
    write(tmp_path, "a.patch", PATCH.format(comment="").replace("legacy_load_mm_data", "load_mm_data")
          .replace("(prompt=text)\n     return", "(prompt=text)  # patchaudit: ignore\n     return", 1))
    assert run(tmp_path, "--extend-select", "PA001", "a.patch") == [("a.patch", 6, "PA001")]
    write(tmp_path, "pyproject.toml", '[tool.patchaudit]\nextend-select = ["PA001"]\n'
                                      '[tool.patchaudit.per-file-ignores]\n"*.patch" = ["PA001"]\n')
    assert run(tmp_path, "a.patch") == []


FIRST = """\
--- a/x.py
+++ b/x.py
@@ -1,3 +1,3 @@
 a = 1
-b = 2
+b = 3
 c = 4
"""
# written on the original too: both patches rewrite `b = 2`, a conflict in every order
SECOND = """\
--- a/x.py
+++ b/x.py
@@ -1,3 +1,3 @@
 a = 1
-b = 2
+b = 4{comment}
 c = 4
"""


@pytest.mark.parametrize("comment", ["  # patchaudit: ignore[PA304]", "  # patchaudit: ignore"])
def test_whole_set_findings_are_suppressed_and_not_reported_unused(tmp_path, comment):
    write(tmp_path, "p/0001-a.patch", FIRST)
    write(tmp_path, "p/0002-b.patch", SECOND.format(comment=""))
    assert run(tmp_path, "p") == [(os.path.join("p", "0002-b.patch"), 6, "PA304")]
    write(tmp_path, "p/0002-b.patch", SECOND.format(comment=comment))
    assert run(tmp_path, "--extend-select", "PA001", "p") == []


# ----- `# noqa: PA...` and PA001 (issue 20) ----------------------------------


def test_noqa_in_an_added_patch_line(tmp_path):
    write(tmp_path, "a.patch", PATCH.format(comment="  # noqa: PA101"))
    assert run(tmp_path, "a.patch") == []
    write(tmp_path, "a.patch", PATCH.format(comment="  # noqa: E501"))
    assert run(tmp_path, "a.patch") == [("a.patch", 6, "PA101")]


def test_pa001_treats_noqa_like_our_own_comment(tmp_path):
    """A `# noqa: PA101` that suppresses nothing is unused (PA001), like
    `# patchaudit: ignore[PA101]`; a bare `# noqa` and `# noqa: E501` belong to other
    tools and are never reported; a used one is kept."""
    write(tmp_path, "a.py", "\n".join([
        f"{CALL}  # noqa: PA101",          # used
        "x = 1  # noqa",                    # another tool's blanket: not ours
        "y = 2  # noqa: E501",              # another tool's code: not ours
        "z = 3  # noqa: PA101",             # ours, unused
        "w = 4  # noqa: E501, PA888",       # ours: an unknown code
        f"{CALL}  # noqa: E501, PA101",     # used; E501 is not judged
    ]) + "\n")
    found = run(tmp_path, "--extend-select", "PA001", "a.py")
    assert found == [("a.py", 4, "PA001"), ("a.py", 5, "PA001")]
    res = invoke_in(tmp_path, ["check", "--format", "json", "--no-cache", "--extend-select", "PA001", "a.py"])
    by_line = {f["line"]: f for f in json.loads(res.stdout)}
    assert "unknown rule code PA888" in by_line[5]["message"]
    assert by_line[4]["column"] == len("z = 3  ") + 1  # at the noqa comment


def test_parse_suppression_grammar():
    from patchaudit.units.suppression import parse_suppression

    assert parse_suppression("x  # noqa: PA101") == (True, ("PA101",))
    assert parse_suppression("x  # noqa: E501,PA101 because") == (True, ("PA101",))
    assert parse_suppression("x  # noqa") == (False, None)
    assert parse_suppression("x  # noqa: E501, W291") == (False, None)
    assert parse_suppression("x  # patchaudit: ignore") == (True, None)
    assert parse_suppression("x  # noqa: PA104  # patchaudit: ignore[PA101]") == (True, ("PA104", "PA101"))
