"""SECURITY.md promises 3 and 6 in exact mode and PA305: one bad input never loses other results.

- One oversized (or unreadable) engine file is reported once, as an error naming the
  engine file and the limit; every patch and hunk keeps its findings.
- One malformed hunk (an empty one, `@@ -1,0 +1,0 @@`, or one without a change line)
  is reported at its line; the other hunks and sections of the patch keep theirs.
- A failure inside one file section or one unit costs that section or unit only, and
  the error names the patch file and the line.
- PA305 flags what git's verify_path refuses (checked against `git apply --check`),
  and escapes through chains of symlinks the patch creates.

Engine trees are small directories in tmp_path; nothing a test writes is a live hazard
(the hostile paths only ever appear inside patch text, which is never applied).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from patchaudit.cli import main
from patchaudit.testing import cli_runner

BASE = """\
class Base:
    def legacy_load_mm_data(self, prompt, input_ids=None):
        return prompt
"""


def proc(name: str) -> str:
    return f"""\
from sglang.srt.base import Base


class {name}(Base):
    def run(self, prompt):
        out = self.load(prompt)
        return out

    def other(self, prompt):
        res = self.load(prompt)
        return res
"""


#: a hunk of proc.py / proc2.py that adds a PA101 call the rule resolves through the
#: whole engine (`functions_named`: every engine .py file is read); its call is on
#: patch line 6 of the section
PA101_HUNK = """\
@@ -5,3 +5,3 @@ class P(Base):
     def run(self, prompt):
-        out = self.load(prompt)
+        out = other.legacy_load_mm_data(prompt)
         return out
"""

#: the second hunk of proc.py: another PA101 call, in `other`
SECOND_HUNK = """\
@@ -9,3 +9,3 @@ class P(Base):
     def other(self, prompt):
-        res = self.load(prompt)
+        res = other.legacy_load_mm_data(prompt)
         return res
"""


def section(path: str, *hunks: str) -> str:
    return f"--- a/python/sglang/srt/{path}\n+++ b/python/sglang/srt/{path}\n" + "".join(hunks)


BIG = "# filler\n" * 1000 + "def legacy_load_mm_data(a):\n    pass\n"   # ~9 KB


def engine(tmp: Path, big: bool = True) -> Path:
    root = tmp / "engine"
    files = {"sglang/__init__.py": "", "sglang/srt/__init__.py": "", "sglang/srt/base.py": BASE,
             "sglang/srt/proc.py": proc("P"), "sglang/srt/proc2.py": proc("Q")}
    if big:
        files["sglang/srt/big.py"] = BIG
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def run(tmp: Path, patches: dict[str, str], engine_dir: Path | str | None, *extra: str):
    for name, text in patches.items():
        (tmp / name).write_text(text)
    args = ["check", "--no-cache", "-j", "1", "--format", "json", *extra]
    if engine_dir is not None:
        args += ["--engine", f"sglang={engine_dir}"]
    old = os.getcwd()
    os.chdir(tmp)
    try:
        res = cli_runner().invoke(main, [*args, *patches], catch_exceptions=False)
    finally:
        os.chdir(old)
    assert "Traceback" not in res.stderr, res.stderr
    findings = json.loads(res.stdout or "[]")
    errors = [l for l in res.stderr.splitlines() if ": error: " in l]
    return res, findings, errors


def codes_by_path(findings) -> dict[str, list[tuple[str, int]]]:
    out: dict[str, list[tuple[str, int]]] = {}
    for f in findings:
        out.setdefault(f["path"], []).append((f["code"], f["line"]))
    return {k: sorted(v) for k, v in out.items()}


def small_limit(tmp: Path, limit: int = 4000) -> list[str]:
    cfg = tmp / "limits.toml"
    cfg.write_text(f"[tool.patchaudit]\nmax-file-size = {limit}\n")
    return ["--config", str(cfg)]


@pytest.fixture(params=["max-file-size", "engine-cap"])
def oversized(request, tmp_path, monkeypatch):
    """Extra CLI args that make sglang/srt/big.py (9 KB) too large: the run's
    max-file-size, or the engine reader's own cap on one member."""
    if request.param == "max-file-size":
        return small_limit(tmp_path)
    import patchaudit.engine.limits as engine_limits

    monkeypatch.setattr(engine_limits, "MAX_MEMBER_BYTES", 4000)
    return []


# --------------------------------------------------------------------------
# one oversized engine file


def test_oversized_engine_file_is_reported_once_and_every_patch_keeps_its_findings(tmp_path, oversized):
    patches = {"a.patch": section("proc.py", PA101_HUNK),
               "b.patch": section("proc2.py", PA101_HUNK)}
    res, findings, errors = run(tmp_path, patches, engine(tmp_path), *oversized)
    assert codes_by_path(findings) == {"a.patch": [("PA101", 6)], "b.patch": [("PA101", 6)]}, findings
    assert all("certain" in f["message"] for f in findings), findings
    assert len(errors) == 1, res.stderr
    assert "big.py" in errors[0] and "crashed" not in errors[0] and "internal error" not in errors[0]
    assert "4000" in errors[0] or "limit" in errors[0], errors[0]
    assert res.exit_code == 2


def test_oversized_engine_file_in_a_parallel_run_is_still_reported_once(tmp_path, monkeypatch):
    import patchaudit.pipeline.parallel as parallel

    monkeypatch.setattr(parallel, "POOL_MIN_BYTES", 0)   # start the worker pool for two small patches
    patches = {f"{k}.patch": section("proc.py" if k % 2 else "proc2.py", PA101_HUNK)
               for k in range(4)}
    eng = engine(tmp_path)
    for name, text in patches.items():
        (tmp_path / name).write_text(text)
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        res = cli_runner().invoke(main, ["check", "--no-cache", "-j", "2", "--format", "json",
                                         *small_limit(tmp_path), "--engine", f"sglang={eng}", *patches],
                                  catch_exceptions=False)
    finally:
        os.chdir(old)
    assert parallel.LAST_SCAN["pool"], parallel.LAST_SCAN   # the workers did the work
    findings = json.loads(res.stdout)
    pa101 = [f for f in findings if f["code"] == "PA101"]
    assert sorted(f["path"] for f in pa101) == sorted(patches) and all("certain" in f["message"] for f in pa101)
    errors = [l for l in res.stderr.splitlines() if ": error: " in l]
    assert len(errors) == 1 and "big.py" in errors[0], res.stderr


def test_oversized_patched_file_is_reported_and_the_other_sections_keep_their_results(tmp_path, oversized):
    big_hunk = "@@ -1,3 +1,3 @@\n # filler\n-# filler\n+# changed\n # filler\n"
    patch = section("big.py", big_hunk) + section("proc.py", PA101_HUNK)
    res, findings, errors = run(tmp_path, {"fix.patch": patch}, engine(tmp_path), *oversized)
    assert [(f["code"], f["line"]) for f in findings] == [("PA101", 13)], findings
    # the engine has the file: it is not "missing" (PA201), it could not be read
    assert not any(f["code"] == "PA201" for f in findings)
    assert len(errors) == 1 and "big.py" in errors[0], res.stderr
    assert res.exit_code == 2


def test_oversized_blob_of_a_git_engine_is_reported(tmp_path, monkeypatch):
    git = pytest.importorskip("git")
    root = engine(tmp_path)
    repo = git.Repo.init(root)
    repo.index.add([str(p.relative_to(root)) for p in root.rglob("*.py")])
    repo.index.commit("engine")
    blob = repo.head.commit.tree / "sglang/srt/big.py"
    big_hunk = "@@ -1,3 +1,3 @@\n # filler\n-# filler\n+# changed\n # filler\n"
    big = "python/sglang/srt/big.py"
    patch = (f"diff --git a/{big} b/{big}\nindex {blob.hexsha[:12]}..0000000 100644\n"
             + section("big.py", big_hunk) + section("proc.py", PA101_HUNK))
    res, findings, errors = run(tmp_path, {"fix.patch": patch}, f"{root}@HEAD", *small_limit(tmp_path))
    assert [(f["code"], f["line"]) for f in findings] == [("PA101", 15)], findings
    assert len(errors) == 1 and "big.py" in errors[0], res.stderr
    assert repo.git.status("--porcelain") == ""


# --------------------------------------------------------------------------
# one malformed hunk


EMPTY_HUNKS = {
    "empty-header": {"first": "@@ -1,0 +1,0 @@\n", "last": "@@ -11,0 +11,0 @@\n"},
    "context-only": {"first": "@@ -1,1 +1,1 @@\n from sglang.srt.base import Base\n",
                     "last": "@@ -11,1 +11,1 @@\n         return res\n"},
}


@pytest.mark.parametrize("kind", EMPTY_HUNKS)
@pytest.mark.parametrize("where", ["first", "last"])
def test_a_hunk_without_changes_is_reported_and_the_other_hunks_keep_their_results(tmp_path, kind, where):
    bad = EMPTY_HUNKS[kind][where]
    hunks = (bad, PA101_HUNK, SECOND_HUNK) if where == "first" else (PA101_HUNK, SECOND_HUNK, bad)
    patch = section("proc.py", *hunks) + section("proc2.py", PA101_HUNK)
    lines = patch.splitlines()
    bad_line = next(i for i, l in enumerate(lines, 1) if l == bad.splitlines()[0])
    res, findings, errors = run(tmp_path, {"fix.patch": patch}, engine(tmp_path, big=False))
    assert not any("internal error" in e for e in errors), errors
    pa101 = sorted(f["line"] for f in findings if f["code"] == "PA101")
    assert len(pa101) == 3, findings
    # the hunk itself: PA301 at its line, or an error naming the file and the line
    reported = [f for f in findings if f["code"] == "PA301" and f["line"] == bad_line]
    reported_err = [e for e in errors if e.startswith(f"fix.patch:{bad_line}:")]
    assert reported or reported_err, (findings, errors)


def test_a_hunk_without_changes_is_reported_in_fragment_mode_too(tmp_path):
    patch = section("proc.py", EMPTY_HUNKS["context-only"]["first"], PA101_HUNK)
    _, findings, errors = run(tmp_path, {"fix.patch": patch}, None)
    assert ("PA301", 3) in [(f["code"], f["line"]) for f in findings], findings
    assert any(f["code"] == "PA101" for f in findings)


# --------------------------------------------------------------------------
# siblings: the smallest unit of failure


def test_a_crash_in_one_file_section_costs_that_section_only(tmp_path, monkeypatch):
    import patchaudit.patching.apply as apply_mod

    real = apply_mod.apply_hunks

    def flaky(lines, hunks, **kw):
        if any("class Q(Base):" in l for l in lines):
            raise RuntimeError("boom")
        return real(lines, hunks, **kw)

    monkeypatch.setattr(apply_mod, "apply_hunks", flaky)
    patch = section("proc.py", PA101_HUNK) + section("proc2.py", PA101_HUNK)
    _, findings, errors = run(tmp_path, {"fix.patch": patch}, engine(tmp_path, big=False))
    # proc.py is judged in exact mode, proc2.py (whose section crashed) in fragment mode
    assert sorted(f["line"] for f in findings if f["code"] == "PA101") == [6, 13], findings
    assert len(errors) == 1 and errors[0].startswith("fix.patch:8:") and "boom" in errors[0], errors


def test_a_crash_in_one_unit_costs_that_unit_only(tmp_path, monkeypatch):
    import patchaudit.pipeline.analyse as runner   # analyse_file runs the rules (was pipeline.runner)

    real = runner.run_python_rules

    def flaky(unit, *args, **kw):
        if "class Q(Base):" in unit.text:
            raise RuntimeError("boom")
        return real(unit, *args, **kw)

    monkeypatch.setattr(runner, "run_python_rules", flaky)
    traversal = "--- a/../../etc/x.py\n+++ b/../../etc/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    patch = section("proc.py", PA101_HUNK) + section("proc2.py", PA101_HUNK) + traversal
    _, findings, errors = run(tmp_path, {"fix.patch": patch}, engine(tmp_path, big=False))
    got = sorted((f["code"], f["line"]) for f in findings)
    assert ("PA101", 6) in got and ("PA305", 15) in got, got
    assert len(errors) == 1 and errors[0].startswith("fix.patch:") and "boom" in errors[0], errors
    assert errors[0].split(":")[1].isdigit(), errors   # names a line


def test_a_crash_while_choosing_the_engine_falls_back_to_fragment_mode(tmp_path, monkeypatch):
    from patchaudit.units.engines import EngineSet

    def broken(self, patch):
        raise RuntimeError("engine boom")

    monkeypatch.setattr(EngineSet, "for_patch", broken)
    patch = section("proc.py", PA101_HUNK) + "--- a/../../etc/x.py\n+++ b/../../etc/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    _, findings, errors = run(tmp_path, {"fix.patch": patch}, engine(tmp_path, big=False))
    assert sorted((f["code"], f["line"]) for f in findings) == [("PA101", 6), ("PA305", 8)], findings
    assert len(errors) == 1 and "engine boom" in errors[0] and errors[0].startswith("fix.patch"), errors


def test_deep_nesting_in_an_exact_mode_file_names_the_patch_line(tmp_path):
    root = engine(tmp_path, big=False)
    chain = "x = " + " + ".join(["1"] * 300) + "\n"   # ast reads it; libcst would not survive a longer one
    (root / "sglang/srt/proc.py").write_text(proc("P") + chain)
    _, _, errors = run(tmp_path, {"fix.patch": section("proc.py", PA101_HUNK)}, root)
    assert len(errors) == 1 and "nested too deeply" in errors[0], errors
    assert errors[0].startswith("fix.patch:6:"), errors   # the unit's first patch line, not none


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_named_like_a_patch_never_blocks_the_patch_set_rules(tmp_path):
    import sys

    (tmp_path / "ok.patch").write_text(section("proc.py", PA101_HUNK))
    os.mkfifo(tmp_path / "evil.patch")
    # in a child process, so that a regression fails here instead of blocking the test run
    proc_ = subprocess.run([sys.executable, "-m", "patchaudit", "check", "--no-cache", "-j", "1", "."],
                           cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc_.returncode == 2, proc_.stdout + proc_.stderr
    assert "evil.patch" in proc_.stderr and "PA101" in proc_.stdout


# --------------------------------------------------------------------------
# PA305 against git itself


GIT_REFUSES = [".git/config", ".GIT/config", ".Git/hooks/x", "sub/.git/config", ".g\u200cit/config",
               ".g\u200dIT/hooks/x", "\ufeff.git/config", "git~1/config", "GIT~1/hooks/x", ".git /config",
               ".git../config", ".git. . /config", ".git::$INDEX_ALLOCATION/config", "a/.git:stream/x"]
GIT_ACCEPTS = [".github/workflows/ci.yml", "foo.git/x", "docs/.gitignore", ".gitattributes", ".gitmodules",
               ".git-blame-ignore-revs", "git~2/x", ".gitx/y", "git/hooks.py", "a.git", ".gi t/x", "x/git~1x"]


def _new_file_patch(path: str) -> str:
    return f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+x\n"


def _git_refuses(tmp: Path, patch: str) -> bool:
    repo = tmp / "oracle"
    if not (repo / ".git").exists():
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (tmp / "oracle.diff").write_text(patch)
    # --check never writes; protectHFS/NTFS are what git enforces on those filesystems
    proc = subprocess.run(["git", "-c", "core.protectHFS=true", "-c", "core.protectNTFS=true", "apply",
                           "--check", str(tmp / "oracle.diff")], cwd=repo, capture_output=True)
    return proc.returncode != 0


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.parametrize("path", GIT_REFUSES + GIT_ACCEPTS)
def test_pa305_flags_exactly_the_dotgit_paths_git_refuses(tmp_path, path):
    from patchaudit.rules.pa305_unsafe_patch_path import unsafe_reason

    patch = _new_file_patch(path)
    refused = _git_refuses(tmp_path, patch)
    assert refused == (path in GIT_REFUSES), f"git apply --check: refused={refused} for {path!r}"
    assert (unsafe_reason("b/" + path, True) is not None) == refused
    _, findings, _ = run(tmp_path, {"x.patch": patch}, None, "--select", "PA305")
    assert len(findings) == (1 if refused else 0), findings


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_pa305_flags_a_symlinked_gitmodules_as_git_does(tmp_path):
    link = ("diff --git a/.gitmodules b/.gitmodules\nnew file mode 120000\n"
            "--- /dev/null\n+++ b/.gitmodules\n@@ -0,0 +1 @@\n+docs/m.txt\n\\ No newline at end of file\n")
    plain = link.replace("new file mode 120000", "new file mode 100644")
    assert _git_refuses(tmp_path, link) and not _git_refuses(tmp_path, plain)
    _, findings, _ = run(tmp_path, {"x.patch": link}, None, "--select", "PA305")
    assert len(findings) == 1 and ".gitmodules" in findings[0]["message"]
    _, findings, _ = run(tmp_path, {"x.patch": plain}, None, "--select", "PA305")
    assert findings == []


def test_pa305_windows_separators_and_quoted_escapes(tmp_path):
    patches = {
        "backslash.patch": "--- a/sub\\.git\\hooks\\x\n+++ b/sub\\.git\\hooks\\x\n@@ -1 +1 @@\n-a\n+b\n",
        "quoted.patch": ('diff --git "a/\\342\\200\\214.git/x" "b/.g\\342\\200\\214it/config"\n'
                         'new file mode 100644\n--- /dev/null\n+++ "b/.g\\342\\200\\214it/config"\n'
                         "@@ -0,0 +1 @@\n+x\n"),
    }
    _, findings, _ = run(tmp_path, patches, None, "--select", "PA305")
    assert sorted({f["path"] for f in findings}) == ["backslash.patch", "quoted.patch"], findings


def _link(path: str, target: str) -> str:
    return (f"diff --git a/{path} b/{path}\nnew file mode 120000\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1 @@\n+{target}\n\\ No newline at end of file\n")


def _write(path: str) -> str:
    return f"diff --git a/{path} b/{path}\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+x\n"


def test_pa305_resolves_long_chains_with_a_bound(tmp_path):
    # l0 -> l1 -> ... -> l38 -> ..   (39 links, each lexically inside the tree): the write escapes
    n = 39
    chain = "".join(_link(f"l{k}", f"l{k + 1}" if k + 1 < n else "..") for k in range(n))
    _, findings, _ = run(tmp_path, {"chain.patch": chain + _write("l0/x")}, None, "--select", "PA305")
    msgs = [f["message"] for f in findings]
    assert any("'l0/x' goes through 'l0'" in m and "outside the tree" in m for m in msgs), msgs
    # past the bound (more links than a resolver follows): reported, never resolved forever
    n = 60
    chain = "".join(_link(f"l{k}", f"l{k + 1}" if k + 1 < n else "..") for k in range(n))
    _, findings, _ = run(tmp_path, {"chain.patch": chain + _write("l0/x")}, None, "--select", "PA305")
    assert any("'l0/x'" in f["message"] and "loop" in f["message"] for f in findings), findings


def test_pa305_deleting_through_a_symlink_out_is_flagged_but_inside_is_not(tmp_path):
    out = _link("up", "../..") + "diff --git a/up/etc/x b/up/etc/x\ndeleted file mode 100644\n" \
        "--- a/up/etc/x\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"
    inside = _link("docs/v", "../src") + "diff --git a/docs/v/x b/docs/v/x\ndeleted file mode 100644\n" \
        "--- a/docs/v/x\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"
    _, findings, _ = run(tmp_path, {"out.patch": out, "inside.patch": inside}, None, "--select", "PA305")
    assert sorted((f["path"], f["line"]) for f in findings) == [("out.patch", 6), ("out.patch", 8)], findings
