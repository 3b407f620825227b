"""`patchaudit check` end to end: the foundation issue's acceptance."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchaudit.testing import cli_runner

from patchaudit.cli import main
from patchaudit.rules._seed import SEED_HUNK

REPO = Path(__file__).resolve().parents[1]

SEED = (REPO / "examples" / "patches" / "sglang.patch").read_text()



def run(args, cwd=None):
    runner = cli_runner()
    old = os.getcwd()
    if cwd:
        os.chdir(cwd)
    try:
        res = runner.invoke(main, args, catch_exceptions=False)
    finally:
        os.chdir(old)
    return res


def findings(res):
    return json.loads(res.stdout)


def test_seed_hunk_gives_one_pa101_at_the_added_line(tmp_path):
    (tmp_path / "seed.patch").write_text(SEED_HUNK)
    res = run(["check", "--format", "json", "seed.patch"], cwd=tmp_path)
    assert res.exit_code == 1
    out = findings(res)
    assert [f["code"] for f in out] == ["PA101"]
    f = out[0]
    assert f["line"] == 10 and f["path"] == "seed.patch"
    assert "continues past the hunk" in f["message"]
    assert f["target"] == {"path": "python/sglang/srt/multimodal/processors/qwen_vl.py", "line": 681,
                           "symbol": "QwenVLImageProcessor"}
    for key in ("code", "name", "severity", "message", "path", "line", "column", "end_line", "end_column",
                "target", "trace"):
        assert key in f
    assert f["severity"] == "error" and f["trace"] == []


def test_seed_hunk_with_input_ids_is_clean(tmp_path):
    fixed = SEED_HUNK.replace("@@ -678,7 +678,7 @@", "@@ -678,7 +678,8 @@").replace(
        "             prompt=input_text,\n", "             prompt=input_text,\n+            input_ids=input_ids,\n")
    (tmp_path / "seed.patch").write_text(fixed)
    res = run(["check", "seed.patch"], cwd=tmp_path)
    assert res.exit_code == 0, res.stdout
    assert "All checks passed" in res.stdout


BROKEN = {
    "garbage.patch": b"this is\nnot a patch\n",
    "truncated.patch": SEED_HUNK.encode()[:-60],
    "counts.patch": SEED_HUNK.replace("@@ -678,7 +678,7 @@", "@@ -678,5 +678,5 @@").encode(),
    "binary.patch": b"diff --git a/x.png b/x.png\nindex 1111111..2222222 100644\nGIT binary patch\nliteral 5\n"
                    b"McmZ?wbhEHb0ssI2\n\nliteral 0\nHcmV?d00001\n\n",
    "rename.patch": b"diff --git a/a.py b/b.py\nsimilarity index 100%\nrename from a.py\nrename to b.py\n",
    "crlf.patch": SEED_HUNK.replace("\n", "\r\n").encode(),
    "latin1.patch": SEED_HUNK.replace("entry_time", "entr\xe9e_time").encode("latin-1"),
}


def test_broken_inputs_never_crash_and_other_files_are_still_checked(tmp_path):
    for name, data in BROKEN.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "launch.sh").write_text("export SGLANG_MM_AVOID_RETOKENIZE=0\n")
    # copies of one patch in one folder overlap each other (PA304): not what this test is about
    res = run(["check", "--format", "json", "--ignore", "PA304", "."], cwd=tmp_path)
    assert "Traceback" not in res.stdout + res.stderr
    out = findings(res)
    by_file: dict[str, list[str]] = {}
    for f in out:
        by_file.setdefault(f["path"], []).append(f["code"])
    assert by_file["garbage.patch"] == ["PA301"]
    assert "PA301" in by_file["truncated.patch"]
    assert "PA301" in by_file["counts.patch"]
    assert "binary.patch" not in by_file and "rename.patch" not in by_file  # valid, nothing to judge
    # CRLF patches are read like GNU patch does (CRs stripped): the seed bug is still found
    assert by_file["crlf.patch"] == ["PA101"]
    assert "PA301" in by_file["latin1.patch"]
    assert any("UTF-8" in f["message"] for f in out if f["path"] == "latin1.patch")
    assert by_file["launch.sh"] == ["PA104"]
    assert res.exit_code == 1


def test_unreadable_and_missing_paths_exit_2_and_the_scan_goes_on(tmp_path):
    (tmp_path / "launch.sh").write_text("export SGLANG_MM_AVOID_RETOKENIZE=0\n")
    (tmp_path / "bad.py").write_bytes(b"x = '\xff'\n")
    # a file a rule must parse (it names the guard) and cannot be parsed
    (tmp_path / "syntax.py").write_text("import os\nos.environ['SGLANG_MM_AVOID_RETOKENIZE'] = (\n")
    res = run(["check", "launch.sh", "bad.py", "syntax.py", "missing.patch"], cwd=tmp_path)
    assert res.exit_code == 2
    assert "missing.patch: error: no such file or directory" in res.stderr
    assert "bad.py:1: error: not valid UTF-8" in res.stderr
    assert "syntax.py:" in res.stderr and "error: cannot parse Python" in res.stderr
    assert "launch.sh:1:8: PA104" in res.stdout


def test_examples_fire_every_foundation_rule():
    res = run(["check", "--format", "json", "examples/"], cwd=REPO)
    assert res.exit_code == 1
    codes = {f["code"] for f in findings(res)}
    assert {"PA101", "PA104", "PA301", "PA305"} <= codes
    paths = {f["path"] for f in findings(res)}
    # the clean counterparts stay clean
    for clean in ("examples/clean/sglang-qwen-vl.patch", "examples/clean/launch_rollout.sh",
                  "examples/clean/rollout.yaml"):
        assert clean not in paths


def test_clean_tree_exits_0(tmp_path):
    (tmp_path / "ok.sh").write_text("export SGLANG_MM_AVOID_RETOKENIZE=1\n")
    (tmp_path / "ok.py").write_text("x = 1\n")
    res = run(["check", "."], cwd=tmp_path)
    assert res.exit_code == 0


def test_output_file_and_exit_zero(tmp_path):
    (tmp_path / "a.sh").write_text("export SGLANG_MM_AVOID_RETOKENIZE=0\n")
    res = run(["check", "--exit-zero", "--format", "json", "--output", "report.json", "a.sh"], cwd=tmp_path)
    assert res.exit_code == 0 and res.stdout == ""
    data = json.loads((tmp_path / "report.json").read_text())
    assert data[0]["code"] == "PA104"


def test_select_and_ignore(tmp_path):
    (tmp_path / "a.sh").write_text("export SGLANG_MM_AVOID_RETOKENIZE=0\n")
    assert run(["check", "--ignore", "PA104", "a.sh"], cwd=tmp_path).exit_code == 0
    assert run(["check", "--select", "PA101", "a.sh"], cwd=tmp_path).exit_code == 0
    assert run(["check", "--select", "PA1", "a.sh"], cwd=tmp_path).exit_code == 1
    res = run(["check", "--select", "PA999", "a.sh"], cwd=tmp_path)
    assert res.exit_code == 2 and "unknown rule code" in res.stderr


def test_discovery_skips_git_venvs_and_gitignored(tmp_path):
    bad = "export SGLANG_MM_AVOID_RETOKENIZE=0\n"
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "hook.sh").write_text(bad)
    (tmp_path / "venv2").mkdir()
    (tmp_path / "venv2" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / "venv2" / "x.sh").write_text(bad)
    (tmp_path / "build_out").mkdir()
    (tmp_path / "build_out" / "x.sh").write_text(bad)
    (tmp_path / ".gitignore").write_text("build_out/\n*.gen.sh\n")
    (tmp_path / "a.gen.sh").write_text(bad)
    (tmp_path / "real.sh").write_text(bad)
    res = run(["check", "--format", "json", "."], cwd=tmp_path)
    assert [f["path"] for f in findings(res)] == ["real.sh"]
    # named explicitly, an ignored file is checked (as ruff does)
    res = run(["check", "--format", "json", "a.gen.sh"], cwd=tmp_path)
    assert [f["path"] for f in findings(res)] == ["a.gen.sh"]


def test_rules_and_explain():
    res = run(["rules"])
    assert res.exit_code == 0
    for code in ("PA101", "PA104", "PA301", "PA305"):
        assert code in res.stdout
    res = run(["explain", "PA101"])
    assert "## Why is this bad?" in res.stdout and "legacy_load_mm_data" in res.stdout
    res = run(["explain", "PA999"])
    assert res.exit_code == 2


def test_module_entry_point(tmp_path):
    (tmp_path / "a.sh").write_text("export SGLANG_MM_AVOID_RETOKENIZE=0\n")
    proc = subprocess.run([sys.executable, "-m", "patchaudit", "check", "a.sh"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "PA104" in proc.stdout
