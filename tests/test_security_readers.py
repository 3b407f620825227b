"""Every file patchaudit opens goes through the one guarded reader
(`patchaudit/files/reader.py`); a checked tree's configuration cannot raise the
safety limits; discovery cannot hang.

A checked-out repository is someone else's data: its `.gitignore`, its
`pyproject.toml`, its quilt `series` files, the FIFOs, devices and broken links
it holds, and the cache folder it may ship.  So are the files a user names
(`--baseline`, `--tokenizer`, recorded rollouts).  Each test below plants one
hostile input and checks the outcome: an error naming the file (and the line
where there is one), exit code 2, the rest of the scan done, no traceback, no
hang and bounded memory.

Hostile fixtures (FIFOs, links to devices, symlink loops) are built in
`tmp_path`, never committed.  A test that would hang on a regression gives its
subprocess a generous `timeout=` only as a safety net; what it asserts is the
outcome, never an elapsed time.  A test that would exhaust memory on a
regression runs its subprocess under an address-space limit and checks the
child's own peak memory (`ru_maxrss`), a resource bound, not a timing.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import json
import lzma
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from patchaudit import __version__
from patchaudit.files import reader
from patchaudit.files.reader import ReadError

PA101 = "def f(prompt):\n    return legacy_load_mm_data(prompt)\n"
#: the safety net of a subprocess that would hang on a regression (never asserted on)
SAFETY_TIMEOUT = 180
#: a child that read /dev/zero or a bomb would pass this (its own peak resident memory)
MAX_RSS_KB = 512 * 1024

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX devices and symlinks")

# The command line in a child process.  `run()` ends with a hard exit, so the child
# calls click's `main` and reports its own peak memory after it; with BLOCK_RE2 set
# the re2 module cannot be imported (as on a machine without google-re2).
_CHILD = """
import os, resource, sys
if os.environ.get("PA_TEST_BLOCK_RE2"):
    sys.modules["re2"] = None
from patchaudit.cli import main
code = 0
try:
    main(args=sys.argv[1:], prog_name="patchaudit")
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
sys.stdout.flush()
sys.stderr.write("\\nMAXRSS_KB=%d\\n" % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
sys.stderr.flush()
os._exit(code)
"""


class Child:
    def __init__(self, proc: subprocess.CompletedProcess):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        err, sep, rss = proc.stderr.rpartition("\nMAXRSS_KB=")
        self.stderr = err if sep else proc.stderr
        self.maxrss_kb = int(rss.strip()) if sep and rss.strip().isdigit() else None

    def __repr__(self) -> str:
        return f"Child(rc={self.returncode}, stdout={self.stdout[-2000:]!r}, stderr={self.stderr[-3000:]!r})"


def _limit_memory() -> None:
    import resource

    limit = 3 * 1024 ** 3
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def pa(cwd: Path, *args: str, block_re2: bool = False, stdin=subprocess.DEVNULL, xdg: Path | None = None,
       limit_memory: bool = False) -> Child:
    """`patchaudit ARGS` in a child process started in `cwd` (`python -P`: nothing of
    `cwd` on sys.path)."""
    env = dict(os.environ)
    env.pop("PA_TEST_BLOCK_RE2", None)
    if block_re2:
        env["PA_TEST_BLOCK_RE2"] = "1"
    env["XDG_CACHE_HOME"] = str(xdg or (cwd / ".xdg-cache"))
    env["NO_COLOR"] = "1"
    proc = subprocess.run([sys.executable, "-P", "-c", _CHILD, *args], cwd=cwd, env=env, stdin=stdin,
                          capture_output=True, text=True, timeout=SAFETY_TIMEOUT,
                          preexec_fn=_limit_memory if limit_memory else None)
    return Child(proc)


@contextlib.contextmanager
def open_pipe():
    """The read end of a pipe whose writer stays open: reading it blocks forever."""
    r, w = os.pipe()
    try:
        yield r
    finally:
        os.close(r)
        os.close(w)


def no_traceback(res) -> None:
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout, res
    assert res.returncode >= 0, f"killed by signal {-res.returncode}: {res!r}"


# ==========================================================================
# the reader itself


def test_reader_reads_a_regular_file_and_bounds_it(tmp_path):
    p = tmp_path / "a.txt"
    p.write_bytes(b"abc\n")
    assert reader.read_bytes(str(p)) == b"abc\n"
    assert reader.read_text(str(p)) == "abc\n"
    with pytest.raises(ReadError, match="over the limit of 3") as exc:
        reader.read_bytes(str(p), limit=3)
    assert exc.value.path == str(p) and str(exc.value).startswith(f"{p}: ")


@needs_fifo
def test_reader_refuses_a_fifo_without_opening_it(tmp_path):
    fifo = tmp_path / "pipe.patch"
    os.mkfifo(fifo)
    for call in (reader.read_bytes, reader.read_text, reader.open_regular, reader.open_maybe_compressed,
                 reader.check_regular):
        with pytest.raises(ReadError, match=r"FIFO .*not a regular file") as exc:
            call(str(fifo))
        assert exc.value.path == str(fifo)


@posix_only
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null", "/dev/urandom"])
def test_reader_refuses_devices(tmp_path, device):
    if not os.path.exists(device):
        pytest.skip(f"no {device}")
    link = tmp_path / "cfg.toml"
    os.symlink(device, link)
    for path in (device, str(link)):
        with pytest.raises(ReadError, match="character device"):
            reader.read_bytes(path)
        with pytest.raises(ReadError, match="character device"):
            reader.open_maybe_compressed(path)


@posix_only
def test_reader_refuses_directories_and_sockets(tmp_path):
    import socket

    with pytest.raises(ReadError, match="directory"):
        reader.read_bytes(str(tmp_path))
    sock_path = tmp_path / "s.py"
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(sock_path))
        with pytest.raises(ReadError, match="socket"):
            reader.read_bytes(str(sock_path))
    finally:
        s.close()


@posix_only
def test_reader_names_dangling_links_and_loops(tmp_path):
    dangling = tmp_path / "d.py"
    os.symlink("nowhere.py", dangling)
    with pytest.raises(ReadError, match=r"dangling symlink \(-> nowhere.py\)"):
        reader.read_bytes(str(dangling))
    loop = tmp_path / "loop.py"
    os.symlink("loop.py", loop)
    with pytest.raises(ReadError, match="symlink loop"):
        reader.read_bytes(str(loop))
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    os.symlink("b.py", a)
    os.symlink("a.py", b)
    with pytest.raises(ReadError, match="symlink loop"):
        reader.check_regular(str(a))
    with pytest.raises(ReadError, match="cannot read"):
        reader.read_bytes(str(tmp_path / "missing.py"))


@posix_only
def test_reader_root_confinement(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    (tmp_path / "secret.py").write_text("x = 1\n")
    (root / "mine.py").write_text("y = 1\n")
    os.symlink("../secret.py", root / "out.py")
    os.symlink("mine.py", root / "in.py")
    assert reader.read_bytes(str(root / "in.py"), root=str(root)) == b"y = 1\n"
    with pytest.raises(ReadError, match="outside"):
        reader.read_bytes(str(root / "out.py"), root=str(root))
    # a sibling folder whose name starts like the root's is outside too
    sibling = tmp_path / "repo2"
    sibling.mkdir()
    (sibling / "s.py").write_text("z = 1\n")
    os.symlink("../repo2/s.py", root / "prefix.py")
    with pytest.raises(ReadError, match="outside"):
        reader.read_bytes(str(root / "prefix.py"), root=str(root))


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lzma.compress], ids=["gz", "bz2", "xz"])
def test_reader_bounds_decompression(tmp_path, compress):
    bomb = tmp_path / "bomb.jsonl.gz"
    bomb.write_bytes(compress(b"\n" * (4 * 1024 * 1024)))
    assert bomb.stat().st_size < 64 * 1024
    with reader.open_maybe_compressed(str(bomb), limit=1024 * 1024) as fh:
        with pytest.raises(ReadError, match="decompresses to more than 1048576 bytes") as exc:
            while fh.read(1 << 16):
                pass
    assert exc.value.path == str(bomb)
    # under the limit, it is the plain content; an uncompressed file is read as it is
    small = tmp_path / "small.gz"
    small.write_bytes(compress(b"a\nb\n"))
    with reader.open_maybe_compressed(str(small)) as fh:
        assert fh.read() == b"a\nb\n"
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(b"x\n")
    with reader.open_maybe_compressed(str(plain)) as fh:
        assert fh.read() == b"x\n"


def test_reader_truncated_archive_is_a_read_error(tmp_path):
    cut = tmp_path / "cut.gz"
    whole = gzip.compress(b"line\n" * 10000)
    cut.write_bytes(whole[: len(whole) // 2])
    with reader.open_maybe_compressed(str(cut)) as fh:
        with pytest.raises(ReadError, match="cannot decompress"):
            fh.read()


def test_reader_long_line_names_its_line(tmp_path):
    p = tmp_path / "rollouts.jsonl"
    p.write_bytes(b"short\n" + b"x" * 5000 + b"\nafter\n")
    with reader.open_maybe_compressed(str(p)) as fh:
        lines = reader.iter_lines(fh, str(p), max_line=1000)
        assert next(lines) == (1, b"short\n")
        with pytest.raises(ReadError, match="line longer than 1000 bytes") as exc:
            next(lines)
    assert exc.value.line == 2 and str(exc.value).startswith(f"{p}:2: ")
    # a gzip line bomb: a small file, one endless line, stopped at the bound
    bomb = tmp_path / "bomb.jsonl.gz"
    bomb.write_bytes(gzip.compress(b"[" + b" " * (8 * 1024 * 1024)))
    with reader.open_maybe_compressed(str(bomb)) as fh:
        with pytest.raises(ReadError, match="line longer than"):
            list(reader.iter_lines(fh, str(bomb), max_line=64 * 1024))


def test_reader_utf8_error_names_the_line(tmp_path):
    p = tmp_path / "a.py"
    p.write_bytes(b"x = 1\ny = '\xff'\n")
    with pytest.raises(ReadError, match="not valid UTF-8") as exc:
        reader.read_text(str(p))
    assert exc.value.line == 2


# ==========================================================================
# item 5: a .gitignore or exclude pattern that backtracks exponentially


BACKTRACK = "*a" * 25 + "b"          # against a 60-character name: never returns with Python's re
LONG_NAME = "a" * 57 + ".py"


def _backtracking_tree(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text(f"build/\n{BACKTRACK}\n*.gen.py\n")
    (tmp_path / LONG_NAME).write_text(PA101)
    (tmp_path / "x.gen.py").write_text(PA101)   # the .gitignore's other lines still apply
    return tmp_path


def test_gitignore_backtracking_pattern_with_re2(tmp_path):
    pytest.importorskip("re2")
    root = _backtracking_tree(tmp_path)
    res = pa(root, "check", "--no-cache", "-j", "1", ".")
    no_traceback(res)
    assert res.returncode == 1, res
    assert f"{LONG_NAME}:2:12: PA101" in res.stdout, res     # not ignored: the pattern needs a "b"
    assert "x.gen.py" not in res.stdout


def test_gitignore_backtracking_pattern_without_re2_is_refused(tmp_path):
    """Without re2, pathspec's Python backend would backtrack for ever: the pattern is
    refused with an error naming the .gitignore and its line, the rest of it applies."""
    root = _backtracking_tree(tmp_path)
    res = pa(root, "check", "--no-cache", "-j", "1", ".", block_re2=True)
    no_traceback(res)
    assert res.returncode == 2, res
    assert ".gitignore:2: error:" in res.stderr and "wildcards" in res.stderr and "re2" in res.stderr, res
    assert f"{LONG_NAME}:2:12: PA101" in res.stdout, res
    assert "x.gen.py" not in res.stdout


@pytest.mark.parametrize("block_re2", [False, True], ids=["re2", "no-re2"])
def test_exclude_backtracking_pattern(tmp_path, block_re2):
    if not block_re2:
        pytest.importorskip("re2")
    (tmp_path / "pyproject.toml").write_text(f'[tool.patchaudit]\nexclude = ["vendor/", "{BACKTRACK}"]\n')
    (tmp_path / LONG_NAME).write_text(PA101)
    (tmp_path / "vendor").mkdir()
    (tmp_path / "vendor" / "v.py").write_text(PA101)
    res = pa(tmp_path, "check", "--no-cache", "-j", "1", ".", block_re2=block_re2)
    no_traceback(res)
    assert f"{LONG_NAME}:2:12: PA101" in res.stdout, res
    assert "v.py" not in res.stdout    # the other exclude pattern still applies
    if block_re2:
        assert res.returncode == 2, res
        assert "pyproject.toml" in res.stderr and "exclude" in res.stderr and "wildcards" in res.stderr, res
    else:
        assert res.returncode == 1, res


def test_the_python_fallback_accepts_ordinary_patterns(monkeypatch):
    """What is refused without re2 is only what backtracks dangerously; every pattern of
    the discovery tests (and git's common ones) still compiles."""
    from patchaudit.inputs import discover as D
    from test_discover_equivalence import _PATTERNS

    monkeypatch.setattr(D, "_HAVE_RE2", False)
    ordinary = list(_PATTERNS) + ["*.py[cod]", "**/node_modules/**", "**/build/**/*.o", "*~", ".*.swp",
                                  "*.egg-info/", "a/**/b/**/c", "*a*a*b", "/docs/_build/"]
    problems: list = []
    spec = D.spec_from_lines(ordinary, source="x/.gitignore", problems=problems)
    assert problems == [] and spec.match_file("m.py.pyc")
    D.spec_from_lines(["*a*a*a*a*a*b", "ok.py", "**/a/**/b/**/c/**/d"], source="x/.gitignore",
                       problems=problems)
    assert [(p.path, p.line) for p in problems] == [("x/.gitignore", 1), ("x/.gitignore", 3)]


def test_re2_and_python_backends_agree(tmp_path, monkeypatch):
    """The re2 engine matches exactly what pathspec's Python backend matches, on the
    patterns and trees of tests/test_discover_equivalence.py (which compares discovery
    with the implementation it replaced) and on random pattern/path pairs."""
    pytest.importorskip("re2")
    import random

    from patchaudit.inputs import discover as D
    from test_discover_equivalence import _PATTERNS, _build, _random_tree

    hand = ["*.gen.py", "!keep.gen.py", "build/", "/rootonly.py", "logs/**/*.sh", "# comment", "",
            "docs", "!docs/api/", "*.tmp.sh", "trailing\\ space.py", "!*.gen.py", "*.yml", "sub/", "!sub/",
            "/deep/", "tmp*/", "!tmp_keep/", "[!a-c]*.py", "\\!bang", "a?c", "**", "*", "/", "x/**/",
            "ü*.py", "[[]brackets].py", "*.PY", "dir/*/deep"]
    rng = random.Random(5)
    names = ["a", "b.py", "build", "sub", "deep", "keep.gen.py", "x.gen.py", "ü.py", "[brackets].py",
             "trailing space.py", "docs", "api", "tmp1", "tmp_keep", "!bang", "abc", "m.PY", "logs", "r.sh"]
    paths = set()
    for _ in range(3000):
        parts = [rng.choice(names) for _ in range(rng.randint(1, 5))]
        p = "/".join(parts)
        paths.add(p)
        paths.add(p + "/")
    pool = _PATTERNS + hand
    for _ in range(300):
        lines = rng.sample(pool, rng.randint(1, 6))
        specs = []
        for backend in ("re2", "simple"):
            try:
                specs.append(D.spec_from_lines(lines, backend=backend))
            except Exception as exc:   # pathspec's ValueError; re2's Error for `[[:alpha:]]`
                specs.append(type(exc))
        fast, slow = specs
        if not hasattr(fast, "match_file") or not hasattr(slow, "match_file"):
            # a pattern pathspec refuses is refused by both; one only re2 refuses makes
            # discovery fall back to the Python backend (after the wildcard check)
            assert fast == slow or (hasattr(slow, "match_file") and fast is not ValueError), (lines, specs)
            continue
        for p in paths:
            assert fast.match_file(p) == slow.match_file(p), (lines, p)

    # whole discoveries: the hand-built tree and random trees, under each backend
    def both(paths_, exclude=None):
        out = {}
        for backend in ("re2", "simple"):
            monkeypatch.setattr(D, "_BACKEND", backend)
            out[backend] = D.discover(list(paths_), exclude)
        assert out["re2"] == out["simple"], paths_
        return out["re2"]

    outer = _build(tmp_path / "hand")
    monkeypatch.chdir(outer)
    files, _ = both(["."])
    assert "a.py" in [f.path for f in files] and "x.gen.py" not in [f.path for f in files]
    both(["pkg", "links"], ["*.py", "!pkg/**"])
    for seed in range(6):
        base = tmp_path / f"r{seed}"
        base.mkdir()
        root, _ = _random_tree(random.Random(seed), base)
        monkeypatch.chdir(root)
        both(["."])
        both(["."], [rng.choice(_PATTERNS)])


def test_fnmatch_globs_do_not_backtrack(tmp_path):
    """per-file-ignores (runner) and the rules' name patterns (dataflow) use fnmatch,
    whose translation is linear-safe since Python 3.9 (atomic groups / lookahead
    emulation): the same pattern returns at once there."""
    from patchaudit.config.settings import Settings
    from patchaudit.analysis.dataflow import matches, path_matches
    from patchaudit.model.findings import Finding, Severity
    from patchaudit.pipeline.suppression import apply_per_file_ignores

    name = "a" * 4000
    assert not matches(name, [BACKTRACK, "*x*y*z*"])
    assert not path_matches("sample." + name, [BACKTRACK])
    f = Finding(code="PA101", name="x", severity=Severity.ERROR, message="m", path=name + ".py", line=1,
                column=1)
    kept = apply_per_file_ignores([f], Settings(per_file_ignores={BACKTRACK: ["PA101"]}))
    assert kept == [f]


# ==========================================================================
# item 6: FIFOs, devices, dangling links and loops are errors, never opened, never skipped


@needs_fifo
def test_fifo_named_explicitly_is_an_error(tmp_path):
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "ok.py").write_text(PA101)
    res = pa(tmp_path, "check", "--no-cache", "-j", "1", "pipe.py", "ok.py")
    no_traceback(res)
    assert res.returncode == 2, res
    assert "pipe.py: error: " in res.stderr and "FIFO" in res.stderr, res
    assert "ok.py:2:12: PA101" in res.stdout


@posix_only
def test_device_named_explicitly_is_an_error(tmp_path):
    os.symlink("/dev/zero", tmp_path / "zero.py")
    (tmp_path / "ok.py").write_text(PA101)
    res = pa(tmp_path, "check", "--no-cache", "-j", "1", "zero.py", "/dev/null", "ok.py", limit_memory=True)
    no_traceback(res)
    assert res.returncode == 2, res
    assert "zero.py: error: " in res.stderr and "/dev/null: error: " in res.stderr, res
    assert res.stderr.count("character device") == 2, res
    assert "ok.py:2:12: PA101" in res.stdout
    assert res.maxrss_kb is not None and res.maxrss_kb < MAX_RSS_KB, res.maxrss_kb


@posix_only
def test_dangling_link_named_explicitly_is_an_error(tmp_path):
    os.symlink("gone.py", tmp_path / "dangling.py")
    (tmp_path / "ok.py").write_text(PA101)
    res = pa(tmp_path, "check", "--no-cache", "-j", "1", "dangling.py", "ok.py")
    no_traceback(res)
    assert res.returncode == 2, res
    assert "dangling.py: error: dangling symlink (-> gone.py)" in res.stderr, res
    assert "ok.py:2:12: PA101" in res.stdout


@posix_only
def test_dangling_link_in_the_walk_is_an_error(tmp_path):
    (tmp_path / "src").mkdir()
    os.symlink("gone.py", tmp_path / "src" / "dangling.py")
    os.symlink("/nonexistent/also_gone.sh", tmp_path / "src" / "abs.sh")
    os.symlink("gone.txt", tmp_path / "src" / "notes.txt")        # a name patchaudit never reads
    (tmp_path / ".gitignore").write_text("ignored_*.py\n")
    os.symlink("gone.py", tmp_path / "src" / "ignored_link.py")   # ignored: never looked at
    (tmp_path / "src" / "ok.py").write_text(PA101)
    res = pa(tmp_path, "check", "--no-cache", "-j", "1", ".")
    no_traceback(res)
    assert res.returncode == 2, res
    assert "src/dangling.py: error: dangling symlink (-> gone.py)" in res.stderr, res
    assert "src/abs.sh: error: dangling symlink" in res.stderr, res
    assert "notes.txt" not in res.stderr and "ignored_link" not in res.stderr, res
    assert "src/ok.py:2:12: PA101" in res.stdout


@posix_only
def test_symlink_loop_named_explicitly_is_an_error_not_a_traceback(tmp_path):
    os.symlink("loop.py", tmp_path / "loop.py")
    os.symlink("b.patch", tmp_path / "a.patch")
    os.symlink("a.patch", tmp_path / "b.patch")
    (tmp_path / "ok.py").write_text(PA101)
    res = pa(tmp_path, "check", "--no-cache", "-j", "1", "loop.py", "a.patch", "ok.py")
    no_traceback(res)
    assert res.returncode == 2, res
    assert "loop.py: error: symlink loop" in res.stderr and "a.patch: error: symlink loop" in res.stderr, res
    assert "ok.py:2:12: PA101" in res.stdout


@posix_only
def test_symlink_loop_met_in_the_walk_is_still_skipped(tmp_path):
    """SECURITY.md promise 4: loops met in the walk are skipped (a named one is an error)."""
    os.symlink("loop.py", tmp_path / "loop.py")
    (tmp_path / "ok.py").write_text(PA101)
    res = pa(tmp_path, "check", "--no-cache", "-j", "1", ".")
    no_traceback(res)
    assert res.returncode == 1 and "loop" not in res.stderr + res.stdout, res


def test_discovery_reports_what_it_does_not_read(tmp_path, monkeypatch):
    """In process: discover's errors for each kind of unreadable input."""
    from patchaudit.inputs.discover import discover

    monkeypatch.chdir(tmp_path)
    os.symlink("gone.py", "dangling.py")
    os.symlink("loop.py", "loop.py")
    names = ["dangling.py", "loop.py"]
    if hasattr(os, "mkfifo"):
        os.mkfifo("pipe.py")
        names.append("pipe.py")
    files, errors = discover(names)
    assert files == []
    got = {e.path: e.message for e in errors}
    assert got["dangling.py"].startswith("dangling symlink") and got["loop.py"].startswith("symlink loop")
    if "pipe.py" in names:
        assert "FIFO" in got["pipe.py"] and "not a regular file" in got["pipe.py"]


@needs_fifo
def test_fifo_patch_does_not_hang_the_patch_set_pass(tmp_path):
    """PA304 reads every patch of the run again: a FIFO named `*.patch` is reported once
    (by the per-file pass) and never opened."""
    patches = tmp_path / "patches"
    patches.mkdir()
    (patches / "0001-a.patch").write_text("--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n a = 1\n-b = 2\n+b = 3\n")
    (patches / "0002-b.patch").write_text("--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n a = 1\n-b = 2\n+b = 4\n")
    os.mkfifo(patches / "0003-c.patch")
    res = pa(tmp_path, "check", "--no-cache", "-j", "1", "--select", "PA304", ".")
    no_traceback(res)
    assert res.returncode == 2, res
    assert res.stderr.count("0003-c.patch") == 1 and "FIFO" in res.stderr, res
    assert "PA304" in res.stdout, res      # the set rule still ran on the other two


@posix_only
def test_device_patch_in_the_walk_is_reported_and_not_read(tmp_path):
    """A character device named `*.patch` in the tree (mknod; /dev/zero's numbers): the
    per-file pass reports it; the patch-set pass must not read it for ever."""
    patches = tmp_path / "patches"
    patches.mkdir()
    try:
        os.mknod(patches / "zero.patch", stat.S_IFCHR | 0o600, os.makedev(1, 5))
    except (OSError, AttributeError) as exc:
        pytest.skip(f"cannot make a device node here: {exc}")
    (patches / "0001-a.patch").write_text("--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n")
    res = pa(tmp_path, "check", "--no-cache", "-j", "1", "--select", "PA304", ".", limit_memory=True)
    no_traceback(res)
    assert res.returncode == 2, res
    assert "zero.patch: error: not a regular file" in res.stderr and "character device" in res.stderr, res
    assert res.maxrss_kb is not None and res.maxrss_kb < MAX_RSS_KB, res.maxrss_kb


@needs_fifo
def test_quilt_series_that_is_a_fifo_or_huge(tmp_path):
    """A quilt `series` file is read through the reader: a FIFO is an error naming it, a
    huge one is refused; the patches are still checked as a folder set."""
    patches = tmp_path / "patches"
    patches.mkdir()
    (patches / "0001-a.patch").write_text("--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n a = 1\n-b = 2\n+b = 3\n")
    (patches / "0002-b.patch").write_text("--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n a = 1\n-b = 2\n+b = 4\n")
    os.mkfifo(patches / "series")
    res = pa(tmp_path, "check", "--no-cache", "-j", "1", "--select", "PA304", ".")
    no_traceback(res)
    assert res.returncode == 2, res
    assert "series: error:" in res.stderr and "FIFO" in res.stderr, res
    assert "PA304" in res.stdout, res
    os.remove(patches / "series")
    with open(patches / "series", "wb") as fh:
        fh.write(b"0001-a.patch\n0002-b.patch\n")
        fh.truncate(64 * 1024 * 1024)        # sparse: 64 MiB of NULs after the two names
    res = pa(tmp_path, "check", "--no-cache", "-j", "1", "--select", "PA304", ".", limit_memory=True)
    no_traceback(res)
    assert res.returncode == 2, res
    assert "series: error:" in res.stderr and "over the limit" in res.stderr, res
    assert res.maxrss_kb is not None and res.maxrss_kb < MAX_RSS_KB, res.maxrss_kb


@needs_fifo
def test_bump_does_not_open_fifos(tmp_path):
    """bump reads the patches for its overlay and the .py files for monkey-patches
    (patchaudit/pipeline/bump.py, patchaudit/analysis/monkeypatch.py): FIFOs among them are reported."""
    for version, text in (("old", "def f(a):\n    return a\n"), ("new", "def f(a, b=0):\n    return a\n")):
        (tmp_path / version / "sglang").mkdir(parents=True)
        (tmp_path / version / "sglang" / "m.py").write_text(text)
    work = tmp_path / "work"
    work.mkdir()
    (work / "fix.patch").write_text("--- a/sglang/m.py\n+++ b/sglang/m.py\n@@ -1,2 +1,2 @@\n"
                                    " def f(a):\n-    return a\n+    return a + 1\n")
    (work / "patches.py").write_text("import sglang.m\n\ndef g(a):\n    return a\n\nsglang.m.f = g\n")
    os.mkfifo(work / "blocked.patch")
    os.mkfifo(work / "blocked.py")
    res = pa(work, "bump", ".", "--engine", "sglang", "--from", str(tmp_path / "old"),
             "--to", str(tmp_path / "new"))
    no_traceback(res)
    assert res.returncode == 2, res
    assert "blocked.patch: error: not a regular file" in res.stderr, res
    assert "blocked.py: error: not a regular file" in res.stderr, res


# ==========================================================================
# item 10: the checked tree's configuration cannot raise the safety limits


def _project(tmp_path: Path, config: str, files: dict[str, str]) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n\n[tool.patchaudit]\n" + config)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def test_config_max_nesting_above_the_hard_cap(tmp_path):
    """`max-nesting = 1000000` would let 20,000 brackets reach libcst's native parser
    (SIGSEGV): refused, naming pyproject.toml and the key; the default (200) applies."""
    root = _project(tmp_path, "max-nesting = 1000000\n",
                    {"deep.py": "x = legacy_load_mm_data(" + "(" * 20000 + "1" + ")" * 20000 + ")\n", "ok.py": PA101})
    res = pa(root, "check", "--no-cache", "-j", "1", ".")
    no_traceback(res)
    assert res.returncode == 2, res
    assert "pyproject.toml:5: error: " in res.stderr and "max-nesting" in res.stderr, res
    assert "1000" in res.stderr and "default" in res.stderr, res
    assert "deep.py:1: error: Python nested too deeply" in res.stderr and "limit of 200" in res.stderr, res
    assert "ok.py:2:12: PA101" in res.stdout


@pytest.mark.parametrize("value", [str(2 ** 63 - 1), str(300 * 1024 * 1024)])
def test_config_max_file_size_above_the_hard_cap(tmp_path, value):
    root = _project(tmp_path, f"max-file-size = {value}\n", {"ok.py": PA101})
    res = pa(root, "check", "--no-cache", "-j", "1", ".")
    no_traceback(res)
    assert res.returncode == 2, res
    assert "pyproject.toml:5: error: " in res.stderr and "max-file-size" in res.stderr, res
    assert "ok.py:2:12: PA101" in res.stdout


def test_config_limits_in_load_pyproject(tmp_path):
    from patchaudit.config.settings import HARD_MAX_FILE_SIZE, HARD_MAX_NESTING, Settings, load_pyproject

    cpus = _cpus()
    root = _project(tmp_path, f"max-nesting = 5000\nmax-file-size = {2 ** 63 - 1}\njobs = {cpus + 38}\n", {})
    s = load_pyproject(root / "pyproject.toml")
    default = Settings()
    assert (s.max_nesting, s.max_file_size, s.jobs) == (default.max_nesting, default.max_file_size, cpus)
    assert [(p.line, p.message.split()[1]) for p in s.problems] == [(5, "max-nesting"), (6, "max-file-size")]
    assert all(p.path == str(root / "pyproject.toml") for p in s.problems)
    # at the caps, and within the CPUs, the values are kept
    root = _project(tmp_path, f"max-nesting = {HARD_MAX_NESTING}\nmax-file-size = {HARD_MAX_FILE_SIZE}\n"
                              f"jobs = {cpus}\n", {})
    s = load_pyproject(root / "pyproject.toml")
    assert (s.max_nesting, s.max_file_size, s.jobs, s.problems) == (HARD_MAX_NESTING, HARD_MAX_FILE_SIZE, cpus, [])


def _cpus() -> int:
    from patchaudit.pipeline.parallel import default_jobs

    return default_jobs()


def test_config_jobs_above_the_cpus(tmp_path):
    """`jobs = 40` on a 2-core machine must not fork 40 workers: the value is
    clamped to the CPUs (a valid setting, so no error)."""
    from patchaudit.pipeline import parallel
    from patchaudit.testing import invoke_in

    cpus = _cpus()
    files = {f"m{i}.py": f"x{i} = {i}\n" for i in range(4)}
    files["ok.py"] = PA101
    root = _project(tmp_path, f"jobs = {cpus + 38}\n", files)
    res = invoke_in(root, ["check", "--no-cache", "."])
    assert res.exit_code == 1, res.output
    assert parallel.LAST_SCAN["jobs"] <= cpus
    assert "ok.py:2:12: PA101" in res.stdout
    # the command line is the user's own choice, not the checked tree's
    trusted = tmp_path / "trusted.toml"
    trusted.write_text("[tool.patchaudit]\n")
    invoke_in(root, ["check", "--no-cache", "--config", str(trusted), "-j", "3", "."])
    assert parallel.LAST_SCAN["jobs"] == 3


# ==========================================================================
# item 11: tracebacks


def test_deeply_nested_pyproject(tmp_path):
    """100,000 nested arrays: tomllib recurses (RecursionError)."""
    (tmp_path / "pyproject.toml").write_text("[tool.patchaudit]\nselect = " + "[" * 100000 + "\n")
    (tmp_path / "ok.py").write_text(PA101)
    res = pa(tmp_path, "check", "--no-cache", "-j", "1", ".")
    no_traceback(res)
    assert res.returncode == 2, res
    assert "pyproject.toml" in res.stderr and "nested too deeply" in res.stderr, res
    # found on the way up from a subfolder too (find_pyproject reads every candidate)
    (tmp_path / "sub").mkdir()
    (tmp_path / "pyproject.toml").write_text("[project]\nx = " + "{a = " * 50000 + "\n")
    res = pa(tmp_path / "sub", "check", "--no-cache", "-j", "1", ".")
    no_traceback(res)
    assert res.returncode == 2 and "nested too deeply" in res.stderr, res


def test_huge_integer_in_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.patchaudit]\njobs = " + "9" * 5000 + "\n")
    res = pa(tmp_path, "check", "--no-cache", "-j", "1", ".")
    no_traceback(res)
    assert res.returncode == 2 and "pyproject.toml" in res.stderr, res


@posix_only
def test_pyproject_symlinked_to_a_huge_file(tmp_path):
    big = tmp_path / "big.toml"
    with open(big, "w") as fh:
        fh.write('[tool.patchaudit]\nselect = ["PA101"]\n')
        fh.write(("#" * 79 + "\n") * (80 * 1024))          # 6.4 MB of comments
    repo = tmp_path / "repo"
    repo.mkdir()
    os.symlink(big, repo / "pyproject.toml")
    (repo / "ok.py").write_text(PA101)
    res = pa(repo, "check", "--no-cache", "-j", "1", ".")
    no_traceback(res)
    assert res.returncode == 2, res
    assert "pyproject.toml" in res.stderr and "over the limit" in res.stderr, res


@needs_fifo
def test_pyproject_that_is_a_fifo(tmp_path):
    os.mkfifo(tmp_path / "pyproject.toml")
    (tmp_path / "ok.py").write_text(PA101)
    res = pa(tmp_path, "check", "--no-cache", "-j", "1", ".")
    no_traceback(res)
    assert res.returncode == 2 and "pyproject.toml" in res.stderr and "FIFO" in res.stderr, res


@posix_only
def test_gitignore_symlinked_to_a_huge_file(tmp_path):
    big = tmp_path / "big"
    with open(big, "wb") as fh:
        fh.write(b"*.gen.py\n")
        fh.truncate(16 * 1024 * 1024)              # sparse: 16 MiB
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    os.symlink(big, repo / ".gitignore")
    (repo / "ok.py").write_text(PA101)
    res = pa(repo, "check", "--no-cache", "-j", "1", ".", limit_memory=True)
    no_traceback(res)
    assert res.returncode == 2, res
    assert ".gitignore: error: " in res.stderr and "over the limit" in res.stderr, res
    assert "ok.py:2:12: PA101" in res.stdout
    assert res.maxrss_kb is not None and res.maxrss_kb < MAX_RSS_KB, res.maxrss_kb


@needs_fifo
def test_gitignore_that_is_a_fifo(tmp_path):
    (tmp_path / ".git").mkdir()
    os.mkfifo(tmp_path / ".gitignore")
    (tmp_path / "ok.py").write_text(PA101)
    res = pa(tmp_path, "check", "--no-cache", "-j", "1", ".")
    no_traceback(res)
    assert res.returncode == 2, res
    assert ".gitignore: error: " in res.stderr and "FIFO" in res.stderr, res
    assert "ok.py:2:12: PA101" in res.stdout


def test_deeply_nested_baseline(tmp_path):
    (tmp_path / "ok.py").write_text(PA101)
    (tmp_path / "b.json").write_text('{"patchaudit-baseline": 1, "findings": ' + "[" * 100000)
    res = pa(tmp_path, "check", "--no-cache", "-j", "1", "--baseline", "b.json", ".")
    no_traceback(res)
    assert res.returncode == 2 and "b.json" in res.stderr and "nested too deeply" in res.stderr, res
    (tmp_path / "b.json").write_text('{"patchaudit-baseline": 1, "findings": [{"line": ' + "7" * 5000 + "}]}")
    res = pa(tmp_path, "check", "--no-cache", "-j", "1", "--baseline", "b.json", ".")
    no_traceback(res)
    assert res.returncode == 2 and "b.json" in res.stderr, res


@posix_only
def test_baseline_that_is_a_device_or_a_pipe(tmp_path):
    (tmp_path / "ok.py").write_text(PA101)
    res = pa(tmp_path, "check", "--no-cache", "-j", "1", "--baseline", "/dev/zero", ".", limit_memory=True)
    no_traceback(res)
    assert res.returncode == 2 and "/dev/zero" in res.stderr and "character device" in res.stderr, res
    assert res.maxrss_kb is not None and res.maxrss_kb < MAX_RSS_KB, res.maxrss_kb
    with open_pipe() as r:
        res = pa(tmp_path, "check", "--no-cache", "-j", "1", "--baseline", "/dev/stdin", ".", stdin=r)
    no_traceback(res)
    assert res.returncode == 2 and "/dev/stdin" in res.stderr and "not a regular file" in res.stderr, res


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    pytest.importorskip("tokenizers")
    from test_tokenizer import write_tokenizer

    folder = tmp_path_factory.mktemp("model")
    write_tokenizer(folder)
    return folder


def test_deeply_nested_tokenizer_json(tmp_path, model):
    from patchaudit.inputs.tokenizer import TokenizerError, load_tokenizer

    deep = tmp_path / "tokenizer.json"
    deep.write_text('{"model": ' + "[" * 100000)
    with pytest.raises(TokenizerError, match="nested too deeply") as exc:
        load_tokenizer(deep)
    assert str(deep) in str(exc.value)
    deep.write_text('{"model": {}, "x": ' + "1" * 5000 + "}")
    with pytest.raises(TokenizerError, match=str(deep)):
        load_tokenizer(deep)
    # a model folder's configuration files are read the same way
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "tokenizer.json").write_bytes((model / "tokenizer.json").read_bytes())
    (folder / "tokenizer_config.json").write_text('{"x": ' + "{\"a\": " * 100000)
    with pytest.raises(TokenizerError, match="tokenizer_config.json.*nested too deeply"):
        load_tokenizer(folder)


@posix_only
def test_tokenizer_that_is_a_device_or_a_pipe(tmp_path, model):
    data = tmp_path / "r.jsonl"
    data.write_text('{"tokens": [1, 2]}\n')
    (tmp_path / "ok.py").write_text(PA101)
    res = pa(tmp_path, "tokens", "--tokenizer", "/dev/zero", str(data), limit_memory=True)
    no_traceback(res)
    assert res.returncode == 2 and "/dev/zero" in res.stderr and "character device" in res.stderr, res
    assert res.maxrss_kb is not None and res.maxrss_kb < MAX_RSS_KB, res.maxrss_kb
    res = pa(tmp_path, "check", "--no-cache", "-j", "1", "--tokenizer", "/dev/zero", ".", limit_memory=True)
    no_traceback(res)
    assert res.returncode == 2 and "character device" in res.stderr, res
    with open_pipe() as r:
        res = pa(tmp_path, "tokens", "--tokenizer", "/dev/stdin", str(data), stdin=r)
    no_traceback(res)
    assert res.returncode == 2 and "/dev/stdin" in res.stderr and "not a regular file" in res.stderr, res
    # a model folder whose config file is a FIFO
    if hasattr(os, "mkfifo"):
        folder = tmp_path / "m"
        folder.mkdir()
        (folder / "tokenizer.json").write_bytes((model / "tokenizer.json").read_bytes())
        os.mkfifo(folder / "special_tokens_map.json")
        res = pa(tmp_path, "tokens", "--tokenizer", str(folder), str(data))
        no_traceback(res)
        assert res.returncode == 2 and "special_tokens_map.json" in res.stderr and "FIFO" in res.stderr, res


def _audit(files, tok):
    import io

    from patchaudit.reporters.tokens import run_audit

    out, err = io.StringIO(), io.StringIO()
    code = run_audit([str(f) for f in files], tok, field="tokens", id_field=None, fmt="text", out=out, err=err,
                     top=10, all_samples=False, summary_only=False, progress_enabled=False, out_is_terminal=False)
    return code, out.getvalue(), err.getvalue()


def test_tokens_deeply_nested_line_and_huge_integer(tmp_path, model):
    from patchaudit.inputs.tokenizer import load_tokenizer

    tok = load_tokenizer(model)
    ids = tok.encode("the tree is green")
    data = tmp_path / "r.jsonl"
    data.write_text(json.dumps({"tokens": ids}) + "\n"
                    + '{"tokens": ' + "[" * 100000 + "\n"
                    + '{"tokens": [1, ' + "9" * 5000 + "]}\n"
                    + json.dumps({"tokens": ids}) + "\n")
    code, out, err = _audit([data], tok)
    assert code == 2
    assert f"{data}:2: error: " in err and "nested too deeply" in err, err
    assert f"{data}:3: error: " in err and "4300 digits" in err, err
    assert "Checked 2 samples" in out, out


def test_tokens_gzip_line_bomb(tmp_path, model):
    from patchaudit.pipeline import tokens as T
    from patchaudit.inputs.tokenizer import load_tokenizer

    tok = load_tokenizer(model)
    ids = tok.encode("the tree is green")
    bomb = tmp_path / "r.jsonl.gz"
    line = json.dumps({"tokens": ids}).encode() + b"\n"
    bomb.write_bytes(gzip.compress(line + b'{"tokens": [' + b" " * (T.MAX_LINE + 1024 * 1024) + b"\n" + line))
    assert bomb.stat().st_size < 1024 * 1024
    code, out, err = _audit([bomb], tok)
    assert code == 2
    assert f"{bomb}:2: error: " in err and "longer than" in err, err
    assert "Checked 2 samples" in out, out     # the line after the bomb is read as usual


def test_tokens_file_that_is_a_device_or_a_fifo(tmp_path, model):
    from patchaudit.inputs.tokenizer import load_tokenizer

    tok = load_tokenizer(model)
    paths = ["/dev/zero"] if os.path.exists("/dev/zero") else []
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "pipe.jsonl")
        paths.append(str(tmp_path / "pipe.jsonl"))
    if not paths:
        pytest.skip("no device or FIFO here")
    code, out, err = _audit(paths, tok)
    assert code == 2
    for p in paths:
        assert f"{p}: error: " in err and "not a regular file" in err, err


@posix_only
@pytest.mark.parametrize("target", ["/dev/zero", "/dev/stdin"])
def test_rule_index_cache_file_that_is_a_device_or_a_pipe(tmp_path, target):
    """`rule-index.pickle` (the user's cache folder, and the checkout's cache folder a
    hostile tree can ship) is a per-user cache: a bad one is a cold index, silently."""
    repo, xdg = tmp_path / "repo", tmp_path / "xdg"
    for folder in (repo / ".patchaudit_cache" / __version__, xdg / "patchaudit" / __version__):
        folder.mkdir(parents=True)
        os.symlink(target, folder / "rule-index.pickle")
    (repo / "ok.py").write_text(PA101)
    with open_pipe() as r:
        res = pa(repo, "check", "-j", "1", ".", xdg=xdg, stdin=r, limit_memory=True)
    no_traceback(res)
    assert res.returncode == 1, res
    assert "ok.py:2:12: PA101" in res.stdout and res.stderr.strip() == "", res
    assert res.maxrss_kb is not None and res.maxrss_kb < MAX_RSS_KB, res.maxrss_kb


def test_a_pattern_re2_cannot_take_falls_back_safely(tmp_path, monkeypatch):
    """`[[:alpha:]]` compiles with Python's re but not with RE2: the .gitignore is then
    matched by the Python backend, after the wildcard check (so a backtracking pattern
    beside it is still refused, never matched)."""
    pytest.importorskip("re2")
    from patchaudit.inputs.discover import discover

    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text(f"[[:alpha:]]\n{BACKTRACK}\n*.gen.py\n")
    (tmp_path / LONG_NAME).write_text(PA101)
    (tmp_path / "x.gen.py").write_text(PA101)
    monkeypatch.chdir(tmp_path)
    import warnings

    with warnings.catch_warnings():   # re warns about the nested set the first time it compiles it
        warnings.simplefilter("ignore", FutureWarning)
        files, errors = discover(["."])
    assert [f.path for f in files] == [LONG_NAME]
    assert [(e.path, e.line) for e in errors] == [(".gitignore", 2)] and "wildcards" in errors[0].message
