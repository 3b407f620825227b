"""`--format github`: one workflow-command annotation line per finding, with file and line."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path


from patchaudit.testing import invoke_in
from patchaudit.model.findings import FileError, Finding, Severity, Target, TraceStep
from patchaudit.reporters import render
from patchaudit.reporters.github import escape_property
from patchaudit.pipeline.results import RunResult

LINE = re.compile(r"^::(error|warning|notice) (?P<props>[^:]*)::(?P<msg>.*)$")




def cli(root: Path, *args: str):
    return invoke_in(root, ["check", "--no-cache", *args])


def props(line: str) -> dict[str, str]:
    m = LINE.match(line)
    assert m, line
    return dict(p.split("=", 1) for p in m.group("props").split(","))


PATCH = """\
--- a/python/sglang/srt/x.py
+++ b/python/sglang/srt/x.py
@@ -1,3 +1,3 @@
 def f(text):
-    out = self.load_mm_data(prompt=text)
+    out = self.legacy_load_mm_data(prompt=text)
     return out
"""


def test_one_line_per_finding_with_file_and_line(tmp_path):
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "sglang.patch").write_text(PATCH)
    (tmp_path / "rollout.py").write_text("a = legacy_load_mm_data(prompt=t)\nb = legacy_load_mm_data(prompt=t)\n")
    (tmp_path / "run.sh").write_text("export SGLANG_MM_AVOID_RETOKENIZE=0\n")
    as_json = json.loads(cli(tmp_path, "--format", "json", ".").stdout)
    res = cli(tmp_path, "--format", "github", ".")
    assert res.exit_code == 1
    lines = res.stdout.splitlines()
    assert len(lines) == len(as_json) == 4
    for line, f in zip(lines, as_json):
        p = props(line)
        assert p["file"] == f["path"].replace(os.sep, "/")
        assert int(p["line"]) == f["line"] and int(p["col"]) == f["column"]
        assert p["title"] == f"{f['code']} {f['name']}"
        assert line.startswith("::error ") and LINE.match(line).group("msg").startswith(f["message"][:20])


def test_clean_run_prints_nothing(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    res = cli(tmp_path, "--format", "github", ".")
    assert res.exit_code == 0 and res.stdout == ""


def test_escaping_keeps_each_annotation_on_one_line():
    f = Finding(code="PA101", name="legacy-loader-drops-input-ids", severity=Severity.WARNING,
                message="100% wrong:\nsecond line\r", path="odd, name:1.patch", line=3, column=2,
                end_line=3, end_column=9,
                target=Target("sglang/srt/x.py", 681, "Q.process"),
                trace=[TraceStep("odd, name:1.patch", 2, "source")])
    out = render("github", RunResult(findings=[f]))
    assert out.count("\n") == 1
    p = props(out.rstrip("\n"))
    assert p["file"] == "odd%2C name%3A1.patch" == escape_property("odd, name:1.patch")
    assert p["endColumn"] == "9" and "endLine" not in p
    msg = LINE.match(out.rstrip("\n")).group("msg")
    assert msg.startswith("100%25 wrong:%0Asecond line%0D")
    assert "engine: sglang/srt/x.py:681 in Q.process" in msg
    assert "trace:%0A  1. odd, name:1.patch:2: source" in msg


def test_severities_and_multi_line_spans():
    fs = [Finding(code="PA208", name="hunk-already-applied", severity=Severity.INFO, message="m", path="a.patch",
                  line=4, column=1, end_line=9, end_column=1)]
    out = render("github", RunResult(findings=fs, errors=[FileError("b.py", "not valid UTF-8", 3)]))
    first, second = out.splitlines()
    assert first.startswith("::notice ") and props(first)["endLine"] == "9"
    assert second == "::error file=b.py,line=3,title=patchaudit::not valid UTF-8"
