"""What `--fix` and `--diff` do with the text of a hostile file (issue 40, "wrong output"):

* lines are counted by the fixer as the parser counts them (`\\r\\n`, a lone `\\r`, `\\n`),
  so a fix edits the line its finding names (PA001's fix after a lone `\\r` deleted the
  next line, and the re-check passed, so the corruption was written);
* `--diff` prints the file's own lines escaped: a context line starting with `::` would
  be a GitHub workflow command, and a lone `\\r` starts one mid-line in a CI log; the
  `\\r` of a CRLF line end is kept, so the diff of a CRLF file still applies;
* every other human renderer of text from the checkout (plan's JSON here; the others are
  tests/test_security_output.py's) escapes the same."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from patchaudit.model.findings import Edit
from patchaudit.patching.patchedit import apply_line_edits
from patchaudit.testing import invoke_in, write_tree

PA001 = ["check", "--no-cache", "--extend-select", "PA001"]


def _write(root: Path, name: str, data: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    path = root / name
    path.write_bytes(data.encode())
    return path


def test_fix_after_a_lone_carriage_return_edits_the_line_the_finding_names(tmp_path):
    path = _write(tmp_path, "t.py", "a = 1\rb = 1\n# patchaudit: ignore[PA999]\nkeep = 2\n")
    res = invoke_in(tmp_path, [*PA001, "--fix", "t.py"])
    assert path.read_bytes() == b"a = 1\rb = 1\nkeep = 2\n", res.stderr
    assert "(1 fixed, 0 remaining)" in res.stdout


def test_a_span_fix_after_a_lone_carriage_return(tmp_path):
    """PA104's fix replaces a span of line 3 (Python's count): before, the fixer's line 3 was
    another line, the fixed text did not parse and the fix was dropped."""
    var = "SGLANG_MM_AVOID_RETOKENIZE"
    path = _write(tmp_path, "e.py", f'import os\rb = 2\nos.environ["{var}"] = "0"\nkeep = 3\n')
    res = invoke_in(tmp_path, ["check", "--no-cache", "--fix", "--unsafe-fixes", "e.py"])
    assert path.read_bytes() == f'import os\rb = 2\nos.environ["{var}"] = "1"\nkeep = 3\n'.encode(), res.stderr


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_line_edits_count_lines_as_the_parser(eol):
    text = eol.join(["a", "b", "c", "d"]) + eol
    assert apply_line_edits(text, [Edit(2, 2, ())]) == eol.join(["a", "c", "d"]) + eol
    assert apply_line_edits(text, [Edit(3, 3, ("C",))]) == eol.join(["a", "b", "C", "d"]) + eol
    mixed = "a\rb\r\nc\nd"
    assert apply_line_edits(mixed, [Edit(3, 3, ("C",)), Edit(4, 4, ("D",))]) == "a\rb\r\nC\nD"


_COMMAND = re.compile(r"^[^\S\n]*::", re.M)


def test_diff_escapes_workflow_commands_and_lone_carriage_returns(tmp_path):
    _write(tmp_path, "h.py", "x = 1\n::error file=a.py::pwned\ny = 2  # patchaudit: ignore[PA999]\nz = 3\r::warning::m\n")
    res = invoke_in(tmp_path, [*PA001, "--diff", "h.py"])
    assert res.exit_code == 1 and "-y = 2  # patchaudit: ignore[PA999]\n+y = 2\n" in res.stdout, res.stderr
    assert not _COMMAND.search(res.stdout), res.stdout
    assert b"\r" not in res.stdout_bytes and " z = 3\\r::warning::m\n" in res.stdout
    assert " \\x3a:error file=a.py::pwned\n" in res.stdout


@pytest.mark.skipif(not shutil.which("git"), reason="git")
def test_diff_of_a_crlf_file_still_applies(tmp_path):
    data = "x = 1\r\ny = 2  # patchaudit: ignore[PA999]\r\nz = 3\r\n"
    _write(tmp_path / "repo", "c.py", data)
    res = invoke_in(tmp_path / "repo", [*PA001, "--diff", "c.py"])
    out = res.stdout_bytes  # click's `stdout` turns "\r\n" into "\n"
    assert b"-y = 2  # patchaudit: ignore[PA999]\r\n+y = 2\r\n" in out
    copy = tmp_path / "copy"
    _write(copy, "c.py", data)
    (tmp_path / "fix.diff").write_bytes(out)
    subprocess.run(["git", "apply", str(tmp_path / "fix.diff")], cwd=copy, check=True)
    assert (copy / "c.py").read_bytes() == b"x = 1\r\ny = 2\r\nz = 3\r\n"


def test_plan_json_escapes_legacy_workflow_commands(tmp_path):
    name = "p##[stop-commands]x.patch"
    write_tree(tmp_path, {name: "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n", "build.sh": f"git apply {name}\n"})
    res = invoke_in(tmp_path, ["plan", "--format", "json", "."])
    assert "##[" not in res.stdout, res.stdout
    assert json.loads(res.stdout)["sets"][0]["patches"][0]["patch"] == name  # the same value for a reader
