"""What patchaudit promises about untrusted input (SECURITY.md), tested.

* nothing it reads is imported or executed: code planted in every input kind
  writes a marker file if run, and no marker appears;
* it writes nothing but the report it is asked for (and its cache): the whole
  temp tree is compared before and after a run over hostile patches;
* PA305 flags unsafe target paths; symlinks are not followed out of the scanned
  roots; FIFOs are never opened;
* `--engine` values that look like options never reach git; archives are read
  in memory, never extracted.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from patchaudit.cli import main

MARKER = "PWNED_MARKER"


def payload(marker: Path, tag: str) -> str:
    """Python that leaves a marker file behind if it is ever imported or run."""
    return (f"import os, pathlib\npathlib.Path({str(marker)!r}).joinpath({tag!r}).write_text('ran')\n"
            f"os.system('touch {marker}/{tag}-shell')\n")


def snapshot(root: Path) -> dict[str, bytes | str]:
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_file():
                out[rel] = p.read_bytes()
            else:
                out[rel] = "dir"
    return out


def run_check(args, cwd: Path):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, ["check", *args], catch_exceptions=False)
    finally:
        os.chdir(old)


@pytest.fixture
def hostile_tree(tmp_path):
    """A repository whose every file tries to run code, next to a marker folder."""
    marker = tmp_path / "markers"
    marker.mkdir()
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    code = payload(marker, "module")
    # Python files, including the names Python imports by itself
    for name in ("pkg/__init__.py", "pkg/rollout.py", "setup.py", "conftest.py", "sitecustomize.py",
                 "usercustomize.py", "click.py", "libcst.py", "unidiff.py", "git.py", "tokenize.py"):
        (repo / name).write_text(code + "legacy_load_mm_data(prompt)\n")
    (repo / "pkg" / "evil.pth").write_text(f"import os; os.system('touch {marker}/pth')\n")
    # a patch adding the same code, an ed script with shell escapes, shell and Dockerfile
    added = "".join("+" + l + "\n" for l in code.splitlines())
    n = len(code.splitlines())
    (repo / "add.patch").write_text(f"--- /dev/null\n+++ b/python/sglang/evil.py\n@@ -0,0 +1,{n} @@\n{added}")
    (repo / "ed.patch").write_text(f"1a\nimport os\n.\n!touch {marker}/ed\nw\nq\n")
    (repo / "run.sh").write_text(f"#!/bin/sh\ntouch {marker}/sh\nexport SGLANG_MM_AVOID_RETOKENIZE=0\n")
    (repo / "Dockerfile").write_text(f"FROM scratch\nRUN touch {marker}/docker\n")
    (repo / "conf.yaml").write_text(f"cmd: !!python/object/apply:os.system ['touch {marker}/yaml']\n")
    (repo / ".env").write_text(f"X=$(touch {marker}/env)\n")
    (repo / "pyproject.toml").write_text("[tool.patchaudit]\nselect = ['PA']\n")
    return repo, marker


def test_nothing_read_is_imported_or_executed(hostile_tree):
    repo, marker = hostile_tree
    before = set(sys.modules)
    res = run_check(["--no-cache", "-j", "1", "."], repo)
    assert res.exit_code in (1, 2), res.output
    assert "PA101" in res.output            # the files were read and analysed...
    assert list(marker.iterdir()) == []     # ...and none of their code ran
    planted = {"pkg", "pkg.rollout", "setup", "conftest", "sitecustomize", "usercustomize", "evil"}
    assert not planted & (set(sys.modules) - before)


def test_the_command_in_a_hostile_checkout_imports_nothing_from_it(hostile_tree):
    """The console script, run from inside the repository, with worker processes."""
    repo, marker = hostile_tree
    exe = shutil.which("patchaudit")
    if exe is None:
        pytest.skip("the patchaudit console script is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP")}
    r = subprocess.run([exe, "check", "--no-cache", "-j", "2", "."], cwd=repo, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode in (1, 2), r.stderr
    assert "PA101" in r.stdout
    assert list(marker.iterdir()) == [], r.stderr
    # `python -P -m patchaudit` (3.11+) is the safe module form: -P keeps the cwd off sys.path
    r = subprocess.run([sys.executable, "-P", "-m", "patchaudit", "check", "--no-cache", "-j", "1", "."],
                       cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode in (1, 2), r.stderr
    assert list(marker.iterdir()) == [], r.stderr


class _Boom:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}/pickle",))


def test_a_cache_folder_shipped_by_the_checkout_is_never_unpickled(hostile_tree, tmp_path, monkeypatch):
    """`.patchaudit_cache/` lives in the checked tree: a hostile checkout can commit one.
    Its pickles (result shards, rule index) would run code when loaded; only pickles
    sealed with this user's key are loaded, so planted ones are a cold cache."""
    import pickle

    import patchaudit.config.registry

    repo, marker = hostile_tree
    monkeypatch.setattr(patchaudit.config.registry, "_INDEX", None)   # read and write the index on disk
    first = run_check(["-j", "1", "--format", "json", "."], repo)
    assert first.exit_code in (1, 2) and "PA101" in first.output
    stores = list((repo / ".patchaudit_cache").rglob("*.pickle"))
    assert any(p.name == "rule-index.pickle" for p in stores) and len(stores) > 2
    evil = pickle.dumps(_Boom(marker))
    for p in stores:
        p.write_bytes(evil)
    probe = tmp_path / "probe"
    probe.mkdir()
    pickle.loads(pickle.dumps(_Boom(probe)))   # the payload does run when unpickled
    assert [p.name for p in probe.iterdir()] == ["pickle"]

    monkeypatch.setattr(patchaudit.config.registry, "_INDEX", None)   # read it from disk again
    again = run_check(["-j", "1", "--format", "json", "."], repo)
    assert list(marker.iterdir()) == []
    assert again.exit_code == first.exit_code and again.output == first.output


def test_writes_nothing_but_the_report_it_was_asked_for(hostile_tree, tmp_path):
    repo, marker = hostile_tree
    corpus = Path(__file__).parent / "corpus"
    for name in ("traversal_dotdot.patch", "absolute_path.patch", "symlink_escape.patch", "rename_escape.patch"):
        shutil.copy(corpus / name, repo / name)
    before = snapshot(tmp_path)
    res = run_check(["--no-cache", "-j", "1", "--format", "json", "--output", "report.json", "."], repo)
    assert res.exit_code in (1, 2)
    after = snapshot(tmp_path)
    assert set(after) - set(before) == {"repo/report.json"}
    assert {k: v for k, v in after.items() if k != "repo/report.json"} == before
    assert b"PA305" in after["repo/report.json"]
    # with the cache on, the only other new files are under the cache folder
    res = run_check(["-j", "1", "--format", "json", "--output", "report.json", "."], repo)
    new = set(snapshot(tmp_path)) - set(after)
    assert new and all(k.startswith("repo/.patchaudit_cache") for k in new), new


@pytest.mark.parametrize("name,count", [("traversal_dotdot.patch", 1), ("absolute_path.patch", 1),
                                        ("windows_absolute.patch", 1), ("rename_escape.patch", 1),
                                        ("symlink_escape.patch", 2)])
def test_path_traversal_is_reported_as_pa305(tmp_path, name, count):
    corpus = Path(__file__).parent / "corpus"
    shutil.copy(corpus / name, tmp_path / name)
    res = run_check(["--no-cache", "--select", "PA305", "--format", "json", name], tmp_path)
    assert res.exit_code == 1
    assert res.output.count('"code": "PA305"') == count


def test_symlinks_are_not_followed_out_of_the_scanned_root(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("legacy_load_mm_data(prompt)\n")
    (outside / "secret.patch").write_text("@@ -1 +1 @@\n-a\n+b\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "mine.py").write_text("legacy_load_mm_data(prompt)\n")
    os.symlink(outside / "secret.py", repo / "link.py")
    os.symlink(outside, repo / "linkdir")
    os.symlink("/etc/passwd", repo / "passwd.patch")
    os.symlink(repo / "loop.py", repo / "loop.py")           # a loop
    os.symlink(repo / "mine.py", repo / "alias.py")          # inside: read once
    res = run_check(["--no-cache", "-j", "1", "--format", "json", "."], tmp_path / "repo")
    assert res.exit_code == 1, res.output
    assert '"path": "mine.py"' in res.output or '"path": "alias.py"' in res.output   # one file, read once
    for name in ("secret", "linkdir", "passwd", "loop"):
        assert name not in res.output, res.output
    assert res.output.count('"code": "PA101"') == 1


def test_a_fifo_is_reported_never_opened(tmp_path):
    os.mkfifo(tmp_path / "blocked.py")
    (tmp_path / "ok.py").write_text("legacy_load_mm_data(prompt)\n")
    r = subprocess.run([sys.executable, "-P", "-m", "patchaudit", "check", "--no-cache", "-j", "1", "."],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r
    assert "blocked.py: error: not a regular file" in r.stderr
    assert "ok.py:1:1: PA101" in r.stdout


@pytest.mark.parametrize("value", ["--output=pwned.txt", "sglang=--output=pwned.txt", "-p1=repo",
                                   "sglang=repo@--output=pwned.txt", "sglang=repo@-n"])
def test_option_like_engine_values_never_reach_git(tmp_path, value):
    import git

    repo = tmp_path / "repo"
    r = git.Repo.init(repo)
    (repo / "x.py").write_text("x = 1\n")
    r.index.add(["x.py"])
    r.index.commit("one")
    (tmp_path / "a.patch").write_text("--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n")
    res = run_check(["--no-cache", "--engine", value, "a.patch"], tmp_path)
    assert res.exit_code == 2, res.output
    assert "refusing" in res.output, res.output
    assert not list(tmp_path.rglob("pwned.txt")) and not (repo / "pwned.txt").exists()


def _hostile_wheel(path: Path, marker: Path) -> None:
    code = payload(marker, "wheel")
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("sglang/__init__.py", code)
        zf.writestr("sglang/srt/x.py", "x = 1\n" + code)
        zf.writestr("../../escape.py", code)
        zf.writestr("/abs.py", code)
        zf.writestr("sglang-0.1.dist-info/RECORD", "")
        zf.writestr("evil.pth", f"import os; os.system('touch {marker}/pth')\n")


def _hostile_sdist(path: Path, marker: Path) -> None:
    code = payload(marker, "sdist").encode()
    with tarfile.open(path, "w:gz") as tf:
        for name in ("sglang-0.1/setup.py", "sglang-0.1/python/sglang/srt/x.py", "../escape.py", "/abs.py"):
            data = (b"x = 1\n" + code) if name.endswith("x.py") else code
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("sglang-0.1/python/sglang/srt/link.py")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        tf.addfile(link)


@pytest.mark.parametrize("kind", ["wheel", "sdist"])
def test_engine_archives_are_read_in_memory_never_extracted_or_run(tmp_path, kind):
    marker = tmp_path / "markers"
    marker.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    archive = work / ("sglang-0.1-py3-none-any.whl" if kind == "wheel" else "sglang-0.1.tar.gz")
    (_hostile_wheel if kind == "wheel" else _hostile_sdist)(archive, marker)
    (work / "a.patch").write_text("--- a/python/sglang/srt/x.py\n+++ b/python/sglang/srt/x.py\n"
                                  "@@ -1 +1 @@\n-x = 1\n+x = 2\n")
    before = snapshot(tmp_path)
    res = run_check(["--no-cache", "-j", "1", "--engine", f"sglang={archive.name}", "a.patch"], work)
    assert res.exit_code in (0, 1, 2), res.output
    assert "internal error" not in res.output
    assert snapshot(tmp_path) == before          # nothing extracted, nothing written
    assert list(marker.iterdir()) == []          # nothing run
    assert "sglang" not in sys.modules or not hasattr(sys.modules["sglang"], "__file__") \
        or str(tmp_path) not in str(sys.modules["sglang"].__file__)
