"""What `check --fix`, `-o`/`--output-file` and `--also FORMAT:FILE` write, in a hostile
checkout (SECURITY.md, promise 2): nothing outside the project root, never through a
symlink (not even one swapped in between the read and the write), never into a FIFO or
a device, never over a read-only file; a file not written is named and counts no fix.

Each tree is built here: a project folder and, beside it, an `outside` folder the
checkout's symlinks point at, whose bytes must never change."""

from __future__ import annotations

import re

import os
import stat
from pathlib import Path

import pytest

from patchaudit.testing import invoke_in, write_tree

#: a file with one safe fix: PA001 removes an unknown code's suppression comment
FIXABLE = "x = 1  # patchaudit: ignore[PA999]\n"
FIXED = "x = 1\n"
FIX = ["check", "--no-cache", "--extend-select", "PA001", "--fix"]



def _nothing_fixed(res) -> bool:
    """The summary counts no fix (the report's summary, ruff's shape: "Found 1 finding")."""
    out = res.stdout + res.stderr
    return "Found 1 finding" in out and re.search(r"\b[1-9][0-9]* fixed", out) is None

def _trees(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "project", tmp_path / "outside"
    write_tree(root, {"pyproject.toml": "[project]\nname = 'p'\n", "sub/t.py": FIXABLE})
    write_tree(outside, {"t.py": FIXABLE})
    return root, outside


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_fix_of_a_committed_symlink_to_a_folder_outside_writes_nothing_there(tmp_path):
    root, outside = _trees(tmp_path)
    (root / "vendor").symlink_to(outside, target_is_directory=True)
    before = _snapshot(outside)
    res = invoke_in(root, [*FIX, "vendor"])
    assert _snapshot(outside) == before
    assert "vendor/t.py: not fixed" in res.stderr and "symlink" in res.stderr, res.stderr
    assert _nothing_fixed(res)


def test_fix_of_a_symlinked_file_in_the_tree_keeps_the_link(tmp_path):
    root, _ = _trees(tmp_path)
    (root / "link.py").symlink_to("sub/t.py")
    res = invoke_in(root, [*FIX, "link.py"])
    assert (root / "link.py").is_symlink() and (root / "sub/t.py").read_text() == FIXABLE
    assert "link.py: not fixed" in res.stderr and "symlink" in res.stderr, res.stderr
    assert _nothing_fixed(res) and res.exit_code == 1


def test_fix_refuses_a_read_only_file(tmp_path):
    root, _ = _trees(tmp_path)
    target = root / "sub/t.py"
    target.chmod(0o444)
    res = invoke_in(root, [*FIX, "sub/t.py"])
    assert target.read_text() == FIXABLE and stat.S_IMODE(target.stat().st_mode) == 0o444
    assert "sub/t.py: error: cannot write the fixed file: is read-only" in res.stderr, res.stderr
    assert _nothing_fixed(res) and res.exit_code == 2


def test_fix_in_a_read_only_folder_names_the_file_and_counts_nothing(tmp_path):
    root, _ = _trees(tmp_path)
    (root / "sub").chmod(0o555)
    try:
        res = invoke_in(root, [*FIX, "sub/t.py"])
    finally:
        (root / "sub").chmod(0o755)
    assert (root / "sub/t.py").read_text() == FIXABLE
    assert "sub/t.py: error: cannot write the fixed file" in res.stderr and "read-only" in res.stderr, res.stderr
    assert "?" not in res.stderr and _nothing_fixed(res)
    assert sorted(p.name for p in (root / "sub").iterdir()) == ["t.py"]  # no temporary file left


def _nothing_in(fifo: int) -> bool:
    """Nothing was written into the FIFO open for reading (without blocking) as `fifo`."""
    try:
        return os.read(fifo, 100) == b""
    except BlockingIOError:  # a writer still has it open, and wrote nothing
        return True


def _swap_before_write(monkeypatch, swap):
    """Run `swap()` after the fixes are computed (the file read), before they are written."""
    from patchaudit.pipeline import fix

    real = fix.write_fixes

    def swapped(outcome, *args, **kwargs):
        swap()
        return real(outcome, *args, **kwargs)

    monkeypatch.setattr(fix, "write_fixes", swapped)


def test_fix_folder_swapped_for_a_symlink_between_read_and_write(tmp_path, monkeypatch):
    root, outside = _trees(tmp_path)
    before = _snapshot(outside)

    def swap():
        (root / "sub").rename(root / "moved")
        (root / "sub").symlink_to(outside, target_is_directory=True)

    _swap_before_write(monkeypatch, swap)
    res = invoke_in(root, [*FIX, "sub/t.py"])
    assert _snapshot(outside) == before
    assert (root / "moved/t.py").read_text() == FIXABLE
    assert "sub/t.py: error: cannot write the fixed file" in res.stderr and "symlink" in res.stderr, res.stderr
    assert _nothing_fixed(res) and res.exit_code == 2


def test_fix_folder_renamed_between_read_and_write_is_not_written(tmp_path, monkeypatch):
    root, _ = _trees(tmp_path)
    write_tree(root, {"other/t.py": FIXABLE})

    def swap():  # another real folder in its place: the file there is not the one read
        (root / "sub").rename(root / "moved")
        (root / "other").rename(root / "sub")

    _swap_before_write(monkeypatch, swap)
    res = invoke_in(root, [*FIX, "sub/t.py"])
    assert (root / "sub/t.py").read_text() == FIXABLE and (root / "moved/t.py").read_text() == FIXABLE
    assert "changed since it was read" in res.stderr and _nothing_fixed(res), res.stderr


@pytest.mark.parametrize("kind", ["symlink out", "fifo", "dev/null"])
def test_fix_file_swapped_between_read_and_write(tmp_path, monkeypatch, kind):
    root, outside = _trees(tmp_path)
    before = _snapshot(outside)
    target = root / "sub/t.py"
    reader = None

    def swap():
        nonlocal reader
        target.unlink()
        if kind == "symlink out":
            target.symlink_to(outside / "t.py")
        elif kind == "fifo":
            os.mkfifo(target)
            reader = os.open(target, os.O_RDONLY | os.O_NONBLOCK)  # a writer would not block: it must not write
        else:
            target.symlink_to(os.devnull)

    _swap_before_write(monkeypatch, swap)
    try:
        res = invoke_in(root, [*FIX, "sub/t.py"])
        if reader is not None:
            assert _nothing_in(reader)
    finally:
        if reader is not None:
            os.close(reader)
    assert _snapshot(outside) == before
    assert "sub/t.py: error: cannot write the fixed file" in res.stderr, res.stderr
    assert _nothing_fixed(res)
    assert res.exit_code == 2


def test_fix_writes_the_file_it_read(tmp_path):
    """The ordinary case still works: the file is replaced in place, its mode kept."""
    root, _ = _trees(tmp_path)
    (root / "sub/t.py").chmod(0o640)
    res = invoke_in(root, [*FIX, "sub"])
    assert (root / "sub/t.py").read_text() == FIXED and "(1 fixed, 0 remaining)" in res.stdout
    assert stat.S_IMODE((root / "sub/t.py").stat().st_mode) == 0o640
    assert sorted(p.name for p in (root / "sub").iterdir()) == ["t.py"]


# --------------------------------------------------------------------------
# -o / --output-file / --also: a committed symlink to a FIFO or a device


@pytest.mark.parametrize("option", ["-o", "--also"])
def test_report_path_committed_as_a_symlink_to_a_fifo_outside(tmp_path, option):
    root, outside = _trees(tmp_path)
    fifo = outside / "pipe"
    os.mkfifo(fifo)
    (root / "report.json").symlink_to(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a writer would not block: it must not write
    try:
        arg = ["-o", "report.json"] if option == "-o" else ["--also", "json:report.json"]
        res = invoke_in(root, ["check", "--no-cache", *arg, "sub"])
        assert _nothing_in(reader)
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    # the link is replaced by the report, never written through
    assert not (root / "report.json").is_symlink() and (root / "report.json").read_text().strip()
    assert res.exit_code == 0, res.stderr


@pytest.mark.parametrize("option", ["-o", "--also"])
def test_report_path_that_is_a_fifo_is_refused(tmp_path, option):
    root, _ = _trees(tmp_path)
    os.mkfifo(root / "report.json")
    reader = os.open(root / "report.json", os.O_RDONLY | os.O_NONBLOCK)
    try:
        arg = ["-o", "report.json"] if option == "-o" else ["--also", "json:report.json"]
        res = invoke_in(root, ["check", "--no-cache", *arg, "sub"])
        assert _nothing_in(reader)
    finally:
        os.close(reader)
    assert res.exit_code == 2 and "report.json: cannot write: is a FIFO" in res.stderr, res.stderr


def test_report_to_standard_output_with_a_dash(tmp_path):
    root, _ = _trees(tmp_path)
    res = invoke_in(root, ["check", "--no-cache", "--output-format", "json", "-o", "-", "sub"])
    assert res.exit_code == 0 and res.stdout.startswith("[") and not (root / "-").exists()


def test_report_into_a_committed_symlinked_folder_is_refused(tmp_path):
    root, outside = _trees(tmp_path)
    (root / "reports").symlink_to(outside, target_is_directory=True)
    before = _snapshot(outside)
    res = invoke_in(root, ["check", "--no-cache", "-o", "reports/t.py", "sub"])
    assert _snapshot(outside) == before
    assert res.exit_code == 2 and "reports" in res.stderr and "symlink" in res.stderr, res.stderr
