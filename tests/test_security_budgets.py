"""Every per-file analysis has a memory and a time budget (SECURITY.md, promise 7).

- a Python text over `max-parse-size` is never handed to libcst (nor to `ast`):
  it is reported, and the other files' findings remain;
- in worker processes (`--jobs` > 1) a file that kills its worker (an
  out-of-memory abort, a signal) or runs over the time budget is reported and
  the run goes on with the other files in a new worker; workers have an
  address-space limit; they never outnumber the cores unless the command line
  asks, and they die with their parent;
- engine archives: a zip member whose header lies about its size, a huge
  member, a member compressed with a method that can inflate without bound, a
  tar member with a huge GNU long name or pax header are refused with a warning
  (never buffered) and the archive's other files still work;
- PA304 on thousands of patches of the same lines gives a bounded number of
  findings.

Hostile inputs are built here, in tmp_path.  Whatever could take much memory
before the fix runs in a child process under an address-space limit.  No test
asserts a time.
"""

from __future__ import annotations

import gzip
import io
import os
import signal
import struct
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from patchaudit.pipeline import parallel
from patchaudit.config.settings import EngineSpec, Settings
from patchaudit.engine import sources as E
from patchaudit.inputs.discover import PYTHON, SourceFile
from patchaudit.engine.sources import EngineError, open_engine
from patchaudit.pipeline.analyse import analyse_file
from patchaudit.pipeline.runner import run_check

LINUX = sys.platform.startswith("linux")

POSITIVE = """\
class P:
    async def f(self, text, imgs):
        out = await self.legacy_load_mm_data(prompt=text, image_data=imgs)
        return out
"""
FILLER = """\
class Proc{i}:
    def process(self, image_data, input_ids, **kw):
        x = self.legacy_load_mm_data(image_data, input_ids=input_ids)
        return {{"input_ids": input_ids, "x": x, "n": {i}}}

"""


def big_python(size: int) -> str:
    """About `size` bytes of valid Python that PA101 can fire on (so it would be parsed)."""
    parts, n, i = [POSITIVE], len(POSITIVE), 0
    while n < size:
        s = FILLER.format(i=i)
        parts.append(s)
        n += len(s)
        i += 1
    return "".join(parts)


def _tree(root: Path, n: int = 4) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (root / f"m{i}.py").write_text(POSITIVE.replace("text", f"text{i}"))
    (root / "clean.py").write_text("value = 1\n")
    return root


def _paths(findings) -> list[str]:
    return sorted(os.path.basename(f.path) for f in findings)


# --------------------------------------------------------------------------
# the parse budget


def test_python_over_the_parse_budget_is_reported_and_the_rest_goes_on(tmp_path, monkeypatch):
    root = _tree(tmp_path / "t")
    (root / "huge.py").write_text(big_python(20_000))
    monkeypatch.chdir(root)
    res = run_check(["."], Settings(select=["ALL"], jobs=1, cache=False, max_parse_size=10_000))
    assert _paths(res.findings) == ["m0.py", "m1.py", "m2.py", "m3.py"]
    errs = [e for e in res.errors if os.path.basename(e.path) == "huge.py"]
    assert len(errs) == 1, res.errors
    size = len((root / "huge.py").read_bytes())
    assert f"too large to analyse ({size} bytes, limit 10000, max-parse-size)" in errs[0].message
    assert res.parsed == 4          # the four small files, not huge.py
    assert res.exit_code == 2


def test_a_file_no_rule_can_fire_on_is_not_reported_for_its_size(tmp_path, monkeypatch):
    root = tmp_path / "t"
    root.mkdir()
    (root / "data.py").write_text("x = 1\n" * 5000)
    monkeypatch.chdir(root)
    res = run_check(["."], Settings(select=["ALL"], jobs=1, cache=False, max_parse_size=1000))
    assert not res.errors and not res.findings


def test_default_limit_refuses_a_10_mb_file_without_parsing_it(tmp_path, monkeypatch):
    import ast

    import libcst

    path = tmp_path / "ten.py"
    path.write_text(big_python(10 * 1024 * 1024))

    def no_parse(*a, **k):
        raise AssertionError("a 10 MB text reached a parser")

    real_ast_parse = ast.parse
    monkeypatch.setattr(libcst, "parse_module", no_parse)
    monkeypatch.setattr(ast, "parse", lambda text, *a, **k: no_parse() if len(text) > 1 << 20
                        else real_ast_parse(text, *a, **k))
    settings = Settings(select=["ALL"], jobs=1, cache=False)
    assert settings.max_parse_size == 2 * 1024 * 1024
    fr = analyse_file(SourceFile(str(path), PYTHON), settings)
    assert fr.parsed == 0 and not fr.findings
    assert len(fr.errors) == 1
    assert "too large to analyse" in fr.errors[0].message and "max-parse-size" in fr.errors[0].message


def test_the_parse_limit_is_clamped_by_a_hard_maximum(tmp_path):
    from patchaudit.inputs import pyast

    assert pyast.parse_limit(Settings(max_parse_size=1 << 40)) == pyast.HARD_MAX_PARSE_SIZE
    assert pyast.parse_limit(Settings(max_parse_size=5000)) == 5000
    cfg = tmp_path / "pyproject.toml"
    cfg.write_text("[tool.patchaudit]\nmax-parse-size = 4096\n")
    from patchaudit.config.settings import ConfigError, load_pyproject

    assert load_pyproject(cfg).max_parse_size == 4096
    cfg.write_text("[tool.patchaudit]\nmax-parse-size = 0\n")
    with pytest.raises(ConfigError, match="max-parse-size"):
        load_pyproject(cfg)
    cfg.write_text("[tool.patchaudit]\nmax-parse-size = 1099511627776\n")
    refused = load_pyproject(cfg)     # the checked tree cannot raise it past the hard maximum
    assert refused.max_parse_size == pyast.DEFAULT_MAX_PARSE_SIZE
    assert any("max-parse-size" in p.message for p in refused.problems)


def _engine_tree(root: Path, big: str) -> Path:
    eng = root / "engine"
    (eng / "sglang" / "srt").mkdir(parents=True)
    (eng / "sglang" / "__init__.py").write_text("")
    (eng / "sglang" / "srt" / "small.py").write_text("def f(x):\n    return x\n")
    (eng / "sglang" / "srt" / "big.py").write_text(big)
    return eng


def _add_line_patch(path: str, after: str, line_no: int, added: str) -> str:
    return (f"--- a/{path}\n+++ b/{path}\n@@ -{line_no},1 +{line_no},2 @@\n"
            f" {after}\n+{added}\n")


def test_exact_mode_patched_engine_file_over_the_budget_is_reported(tmp_path, monkeypatch):
    big = "def g(y):\n    return y\n" + "z = 1\n" * 2000
    eng = _engine_tree(tmp_path, big)
    patches = tmp_path / "patches"
    patches.mkdir()
    call = "    out = obj.legacy_load_mm_data(prompt=p)"
    (patches / "small.patch").write_text(_add_line_patch("python/sglang/srt/small.py", "def f(x):", 1, call))
    (patches / "big.patch").write_text(_add_line_patch("python/sglang/srt/big.py", "def g(y):", 1, call))
    monkeypatch.chdir(tmp_path)
    res = run_check(["patches"], Settings(select=["PA101"], jobs=1, cache=False, max_parse_size=5000,
                                          engines=[EngineSpec("sglang", str(eng))]))
    assert _paths(res.findings) == ["small.patch"]
    errs = [e for e in res.errors if "too large to analyse" in e.message]
    assert len(errs) == 1 and os.path.basename(errs[0].path) == "big.patch", res.errors
    assert "sglang/srt/big.py" in errs[0].message
    assert not [f for f in res.findings if f.code == "PA302"]   # too large is not a syntax error


def test_fragment_mode_hunk_over_the_budget_is_reported(tmp_path, monkeypatch):
    lines = "".join(f"+x{i} = {i}\n" for i in range(1500))
    patch = ("--- a/pkg/m.py\n+++ b/pkg/m.py\n@@ -1,1 +1,1502 @@\n import os\n"
             "+out = obj.legacy_load_mm_data(prompt=p)\n" + lines)
    (tmp_path / "big.patch").write_text(patch)
    (tmp_path / "small.patch").write_text(
        "--- a/pkg/n.py\n+++ b/pkg/n.py\n@@ -1,1 +1,2 @@\n import os\n+out = obj.legacy_load_mm_data(prompt=p)\n")
    monkeypatch.chdir(tmp_path)
    res = run_check(["."], Settings(select=["PA101"], jobs=1, cache=False, max_parse_size=5000))
    assert _paths(res.findings) == ["small.patch"]
    errs = [e for e in res.errors if "too large to analyse" in e.message]
    assert len(errs) == 1 and os.path.basename(errs[0].path) == "big.patch"


def test_fragment_search_has_a_work_budget(tmp_path, monkeypatch):
    """Hunks whose Python never parses (unclosed calls) made the window search cubic in
    their lines: 300 lines took three minutes.  Past its budget the patch's remaining
    hunks are reported, not searched; the other patches keep their findings."""
    from patchaudit.units import fragments

    monkeypatch.setattr(fragments, "FRAGMENT_WORK_MIN", 50_000, raising=False)
    monkeypatch.setattr(fragments, "FRAGMENT_WORK_FACTOR", 1, raising=False)
    n = 80     # lines of calls that no closing bracket makes valid
    body = "".join(f"+x{i} = legacy_load_mm_data(a b\n" for i in range(n))
    (tmp_path / "calls.patch").write_text(f"--- a/pkg/m.py\n+++ b/pkg/m.py\n@@ -1,1 +1,{n + 1} @@\n import os\n"
                                          + body)
    (tmp_path / "small.patch").write_text(
        "--- a/pkg/n.py\n+++ b/pkg/n.py\n@@ -1,1 +1,2 @@\n import os\n+out = obj.legacy_load_mm_data(prompt=p)\n")
    monkeypatch.chdir(tmp_path)
    res = run_check(["."], Settings(select=["PA101"], jobs=1, cache=False))
    assert "small.patch" in _paths(res.findings)
    errs = [e for e in res.errors if "budget" in e.message]
    assert len(errs) == 1 and os.path.basename(errs[0].path) == "calls.patch" and errs[0].line == 3, res.errors


# --------------------------------------------------------------------------
# worker processes

_REAL_WORKER_RUN = parallel._worker_run


def _killing_worker(i, src, data):
    if os.path.basename(src.path) == "boom.py":
        os.kill(os.getpid(), signal.SIGKILL)
    return _REAL_WORKER_RUN(i, src, data)


def _hogging_worker(i, src, data):
    if os.path.basename(src.path) == "boom.py":
        hog = bytearray(3 << 30)     # over the worker's address-space budget
        hog[-1] = 1
    return _REAL_WORKER_RUN(i, src, data)


def _sleeping_worker(i, src, data):
    if os.path.basename(src.path) == "boom.py":
        time.sleep(120)
    return _REAL_WORKER_RUN(i, src, data)


@pytest.mark.skipif(not LINUX, reason="the pool forks on Linux only")
@pytest.mark.parametrize("hook,expect", [(_killing_worker, "worker"), (_hogging_worker, "out of memory")])
def test_a_file_that_kills_its_worker_is_reported_and_the_run_goes_on(tmp_path, monkeypatch, hook, expect):
    root = _tree(tmp_path / "t", n=6)
    (root / "boom.py").write_text(POSITIVE)
    monkeypatch.chdir(root)
    monkeypatch.setattr(parallel, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "WORKER_MEMORY", 1 << 30, raising=False)
    monkeypatch.setattr(parallel, "_worker_run", hook)
    # a budget of 1 GiB (it grows with max-parse-size: 1,500 bytes a byte)
    res = run_check(["."], Settings(select=["ALL"], jobs=2, cache=False, max_parse_size=100_000))
    assert parallel.LAST_SCAN["pool"]
    assert _paths(res.findings) == [f"m{i}.py" for i in range(6)]
    errs = [e for e in res.errors if os.path.basename(e.path) == "boom.py"]
    assert len(errs) == 1 and expect in errs[0].message, res.errors
    assert len(res.errors) == 1


@pytest.mark.skipif(not LINUX, reason="the pool forks on Linux only")
def test_a_file_over_the_time_budget_is_reported_and_its_worker_replaced(tmp_path, monkeypatch):
    root = _tree(tmp_path / "t", n=6)
    (root / "boom.py").write_text(POSITIVE)
    monkeypatch.chdir(root)
    monkeypatch.setattr(parallel, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "FILE_TIME_BUDGET", 3.0, raising=False)
    monkeypatch.setattr(parallel, "_worker_run", _sleeping_worker)
    res = run_check(["."], Settings(select=["ALL"], jobs=2, cache=False))
    assert _paths(res.findings) == [f"m{i}.py" for i in range(6)]
    errs = [e for e in res.errors if os.path.basename(e.path) == "boom.py"]
    assert len(errs) == 1 and "time budget" in errs[0].message, res.errors


@pytest.mark.skipif(not LINUX, reason="the pool forks on Linux only")
def test_a_worker_that_cannot_start_leaves_the_work_to_this_process(tmp_path, monkeypatch):
    root = _tree(tmp_path / "t", n=6)
    monkeypatch.chdir(root)
    serial = run_check(["."], Settings(select=["ALL"], jobs=1, cache=False))
    monkeypatch.setattr(parallel, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "_worker_init", lambda *a: os._exit(3))
    pooled = run_check(["."], Settings(select=["ALL"], jobs=2, cache=False))
    assert parallel.LAST_SCAN["pool"]
    assert _paths(pooled.findings) == _paths(serial.findings) and not pooled.errors


def test_workers_never_outnumber_the_cores_unless_forced(tmp_path, monkeypatch):
    cores = parallel.default_jobs()
    root = _tree(tmp_path / "t", n=6)
    monkeypatch.chdir(root)
    monkeypatch.setattr(parallel, "POOL_MIN_BYTES", 0)
    res = run_check(["."], Settings(select=["ALL"], jobs=40, cache=False))
    assert parallel.LAST_SCAN["jobs"] == min(40, cores)
    assert _paths(res.findings) == [f"m{i}.py" for i in range(6)]
    run_check(["."], Settings(select=["ALL"], jobs=1000, jobs_forced=True, cache=False))
    assert parallel.LAST_SCAN["jobs"] == min(1000, 4 * cores)
    from patchaudit.testing import invoke_in

    out = invoke_in(root, ["check", "--no-cache", "--jobs", "1000", "."])
    assert out.exit_code == 1
    assert parallel.LAST_SCAN["jobs"] == 4 * cores


def _children_in_group(pgid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:     # state, ppid, pgrp
            out.append(int(name))
    return out


def _children_of(pid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(name))
    return out


PARENT = """\
import sys, time
from patchaudit.pipeline import parallel
parallel.POOL_MIN_BYTES = 0
{extra}
def busy(i, src, data):
    time.sleep(300)
parallel._worker_run = busy
from patchaudit.cli import main
main(["check", "--no-cache", "--jobs", "2", sys.argv[1]])
"""


@pytest.mark.skipif(not LINUX, reason="/proc and fork")
@pytest.mark.parametrize("extra", ["", "parallel._set_parent_death_signal = lambda: None  # the fallback"])
def test_workers_die_with_their_parent(tmp_path, extra):
    root = _tree(tmp_path / "t", n=8)
    script = tmp_path / "parent.py"
    script.write_text(PARENT.format(extra=extra))
    proc = subprocess.Popen([sys.executable, str(script), str(root)], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pgid = proc.pid
    try:
        deadline = time.monotonic() + 60
        while len(_children_of(proc.pid)) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert len(_children_of(proc.pid)) >= 2, "the workers did not start"
        time.sleep(0.5)        # the workers are past their start-up, waiting in the hook
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 10
        left = _children_in_group(pgid)
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = _children_in_group(pgid)
        assert not left, f"workers survived their parent: {left}"
    finally:
        try:
            os.killpg(pgid, signal.SIGKILL)   # what the test started, if anything is left
        except ProcessLookupError:
            pass


# --------------------------------------------------------------------------
# engine archives


def _patch_sizes(raw: bytearray, name: bytes, size: int) -> None:
    """Make the local header and central directory of member `name` claim `size` bytes."""
    for sig, off_n, off_name, off_size in ((b"PK\x03\x04", 26, 30, 22), (b"PK\x01\x02", 28, 46, 24)):
        i = raw.find(sig)
        while i >= 0:
            n = struct.unpack_from("<H", raw, i + off_n)[0]
            if raw[i + off_name:i + off_name + n] == name:
                struct.pack_into("<I", raw, i + off_size, size)
            i = raw.find(sig, i + 4)


def _wheel(path: Path, members: dict[str, bytes], method=zipfile.ZIP_DEFLATED, lie: dict | None = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("sglang-1.0.dist-info/METADATA", "Name: sglang\n")
        zf.writestr("sglang/__init__.py", "")
        zf.writestr("sglang/ok.py", "def f(x):\n    return x\n")
        for name, data in members.items():
            zf.writestr(zipfile.ZipInfo(name), data, compress_type=method)
    if lie:
        raw = bytearray(path.read_bytes())
        for name, size in lie.items():
            _patch_sizes(raw, name.encode(), size)
        path.write_bytes(raw)
    return path


def test_zip_member_whose_header_lies_about_its_size_is_refused(tmp_path):
    whl = _wheel(tmp_path / "sglang-1.0-py3-none-any.whl", {"sglang/lie.py": b"x = 1\n" * 100_000},
                 lie={"sglang/lie.py": 100})
    src = open_engine(str(whl))
    assert src.read_text("sglang/ok.py") == "def f(x):\n    return x\n"
    with pytest.raises(EngineError, match="header"):
        src.read_bytes("sglang/lie.py")
    assert src.read_text("sglang/ok.py") == "def f(x):\n    return x\n"


LIMITED = """\
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
from patchaudit.engine.sources import open_engine
src = open_engine(sys.argv[1])
print(sorted(src.files()))
print(src.read_text({ok!r}) is not None)
print(src.read_bytes({bad!r}) if {bad!r} in src.files() else "refused")
for w in src.warnings():
    print("warning:", w[:300])
"""


def _limited(archive: Path, ok: str, bad: str, limit: int = 700 << 20):
    code = LIMITED.format(limit=limit, ok=ok, bad=bad)
    return subprocess.run([sys.executable, "-c", code, str(archive)], capture_output=True, text=True,
                          timeout=600)


def _bzip2_bomb(path: Path, claimed: int = 100, size: int = 1 << 30) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("sglang-1.0.dist-info/METADATA", "Name: sglang\n")
        zf.writestr("sglang/ok.py", "ok = 1\n")
        info = zipfile.ZipInfo("sglang/bomb.py")
        info.compress_type = zipfile.ZIP_BZIP2
        with zf.open(info, "w", force_zip64=True) as fh:
            chunk = b"\0" * (1 << 24)
            for _ in range(size >> 24):
                fh.write(chunk)
    raw = bytearray(path.read_bytes())
    _patch_sizes(raw, b"sglang/bomb.py", claimed)
    path.write_bytes(raw)
    return path


def test_zip_member_that_would_inflate_without_bound_is_refused(tmp_path):
    """A 1 KB wheel whose bzip2 member claims 100 bytes and inflates to 1 GiB at the first
    read: zipfile inflates a bzip2 or lzma chunk whole, so it is never read."""
    whl = _bzip2_bomb(tmp_path / "sglang-1.0-py3-none-any.whl")
    assert whl.stat().st_size < 10_000
    out = _limited(whl, "sglang/ok.py", "sglang/bomb.py")
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert "sglang/bomb.py" not in lines[0] and "sglang/ok.py" in lines[0]
    assert lines[1] == "True" and lines[2] == "refused"
    assert any("sglang/bomb.py" in l and "compression" in l for l in lines[3:]), out.stdout


def test_zip_member_over_the_member_limit_is_refused_with_a_warning(tmp_path):
    """A wheel of about 60 KB with one member of 60 MiB."""
    whl = _wheel(tmp_path / "sglang-1.0-py3-none-any.whl", {"sglang/huge.py": b"\n" * (60 << 20)})
    assert whl.stat().st_size < 200_000
    src = open_engine(str(whl))
    assert "sglang/huge.py" not in src.files() and src.read_bytes("sglang/huge.py") is None
    assert "limit" in dict(src.skipped)["sglang/huge.py"]
    assert any("sglang/huge.py" in w for w in src.warnings())
    assert src.read_text("sglang/ok.py") == "def f(x):\n    return x\n"


def test_zip_with_too_many_members_is_refused_before_its_directory_is_read(tmp_path, monkeypatch):
    whl = _wheel(tmp_path / "sglang-1.0-py3-none-any.whl", {f"sglang/m{i}.py": b"" for i in range(50)})
    monkeypatch.setattr(E.limits, "MAX_MEMBERS", 10)
    real = zipfile.ZipFile._RealGetContents

    def no_directory(self):
        raise AssertionError("the central directory was read")

    monkeypatch.setattr(zipfile.ZipFile, "_RealGetContents", no_directory)
    with pytest.raises(EngineError, match="members"):
        open_engine(str(whl))
    monkeypatch.setattr(zipfile.ZipFile, "_RealGetContents", real)


def _tar_header(name: str, size: int, type_: bytes) -> bytes:
    ti = tarfile.TarInfo(name)
    ti.size = size
    ti.type = type_
    return ti.tobuf(format=tarfile.USTAR_FORMAT)


def _hostile_sdist(path: Path, kind: str, size: int) -> Path:
    """An sdist whose member `evil-1.0/python/sglang/evil.py` carries a `size`-byte GNU long
    name or pax path; written by streaming, so it never exists in memory here."""
    ok = b"def f(x):\n    return x\n"
    with gzip.open(path, "wb", compresslevel=1) as gz:
        def member(name: str, data: bytes) -> None:
            gz.write(_tar_header(name, len(data), tarfile.REGTYPE))
            gz.write(data + b"\0" * (-len(data) % 512))

        member("evil-1.0/python/sglang/__init__.py", b"")
        member("evil-1.0/python/sglang/ok.py", ok)
        if kind == "longname":
            gz.write(_tar_header("././@LongLink", size, tarfile.GNUTYPE_LONGNAME))
            body_prefix = b""
        else:   # a pax extended header with one huge "path" record
            digits = len(str(size))
            body_prefix = f"{size} path=".encode()
            assert len(body_prefix) == digits + 6
            gz.write(_tar_header("././@PaxHeader", size, tarfile.XHDTYPE))
        gz.write(body_prefix)
        left = size - len(body_prefix) - (1 if kind == "pax" else 0)
        chunk = b"a" * (1 << 20)
        while left > 0:
            gz.write(chunk[:left])
            left -= min(left, len(chunk))
        if kind == "pax":
            gz.write(b"\n")
        gz.write(b"\0" * (-size % 512))
        member("evil-1.0/python/sglang/evil.py", b"evil = 1\n")
        member("evil-1.0/python/sglang/after.py", b"after = 1\n")
        gz.write(b"\0" * 1024)
    return path


@pytest.mark.parametrize("kind", ["longname", "pax"])
def test_sdist_member_with_a_huge_long_name_is_refused_with_a_warning(tmp_path, kind):
    sd = _hostile_sdist(tmp_path / "evil-1.0.tar.gz", kind, 256 << 20)
    assert sd.stat().st_size < 4 << 20
    out = _limited(sd, "evil-1.0/python/sglang/ok.py", "evil-1.0/python/sglang/evil.py", limit=500 << 20)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert "evil-1.0/python/sglang/ok.py" in lines[0] and "evil-1.0/python/sglang/after.py" in lines[0]
    assert "evil.py" not in lines[0]
    assert lines[1] == "True" and lines[2] == "refused"
    assert any("name" in l or "header" in l for l in lines[3:]), out.stdout


def test_small_long_names_still_work(tmp_path):
    sd = tmp_path / "sglang-1.0.tar.gz"
    long_dir = "sglang-1.0/python/sglang/" + "d" * 150 + "/"
    with tarfile.open(sd, "w:gz", format=tarfile.GNU_FORMAT) as tf:
        for name, data in ((long_dir + "m.py", b"m = 1\n"), ("sglang-1.0/python/sglang/ok.py", b"ok = 1\n")):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    with tarfile.open(tmp_path / "pax-1.0.tar.gz", "w:gz", format=tarfile.PAX_FORMAT) as tf:
        ti = tarfile.TarInfo(long_dir + "p.py")
        ti.size = 6
        tf.addfile(ti, io.BytesIO(b"p = 1\n"))
    assert open_engine(str(sd)).read_text(long_dir + "m.py") == "m = 1\n"
    assert open_engine(str(tmp_path / "pax-1.0.tar.gz")).read_text(long_dir + "p.py") == "p = 1\n"


def test_engine_warnings_reach_the_command_line(tmp_path):
    whl = _wheel(tmp_path / "sglang-1.0-py3-none-any.whl", {"sglang/huge.py": b"\n" * (20 << 20)})
    (tmp_path / "fix.patch").write_text(_add_line_patch("python/sglang/ok.py", "def f(x):", 1,
                                                        "    out = obj.legacy_load_mm_data(prompt=p)"))
    from patchaudit.testing import invoke_in

    out = invoke_in(tmp_path, ["check", "--no-cache", "--jobs", "1", "--select", "PA101",
                               "--engine", f"sglang={whl}", "fix.patch"])
    assert out.exit_code == 1, out.output
    assert "PA101" in out.stdout
    # said once: in the text report's notes (stderr carries it for the machine formats)
    assert "note: engine 'sglang'" in out.stdout and "sglang/huge.py" in out.stdout
    assert "sglang/huge.py" not in out.stderr
    js = invoke_in(tmp_path, ["check", "--no-cache", "--jobs", "1", "--select", "PA101", "--output-format", "json",
                              "--engine", f"sglang={whl}", "fix.patch"])
    assert "warning" in js.stderr and "sglang/huge.py" in js.stderr


# --------------------------------------------------------------------------
# PA304 on a large set


def test_thousands_of_patches_on_the_same_lines_give_bounded_findings(tmp_path, monkeypatch):
    from patchaudit.config.registry import rule_index

    n = 3000
    folder = tmp_path / "patches"
    folder.mkdir()
    # a quilt series applies them in name order; each was written against the original
    # line (`b = 0`), without the earlier patches' change: every later one overlaps them
    for i in range(n):
        (folder / f"{i:04}-p.patch").write_text(
            "--- a/pkg/m.py\n+++ b/pkg/m.py\n@@ -10,3 +10,3 @@\n a = 1\n"
            f"-b = 0\n+b = {i + 1}\n c = 3\n")
    (folder / "series").write_text("".join(f"{i:04}-p.patch\n" for i in range(n)))
    monkeypatch.chdir(tmp_path)
    limit = rule_index()["PA304"].load().MAX_PATCHES_PER_FILE
    res = run_check(["patches"], Settings(select=["PA304"], jobs=1, cache=False))
    pa304 = [f for f in res.findings if f.code == "PA304"]
    per_patch = {}
    for f in pa304:
        per_patch.setdefault(os.path.basename(f.path), []).append(f)
    # each later patch: its two nearest earlier patches, then one summary of the rest, and
    # the patch past the limit says once that it and the later ones are compared only with
    # the first `limit` patches
    assert len(per_patch["0001-p.patch"]) == 1
    assert len(per_patch["0002-p.patch"]) == 2
    assert len(pa304) == 1 + 2 + 3 * (n - 3) + 1
    assert sum("PA304's limit" in f.message for f in per_patch[f"{limit:04}-p.patch"]) == 1
    within = per_patch[f"{limit - 1:04}-p.patch"]
    assert any(f"{limit - 2:04}-p.patch" in f.message for f in within)
    assert any(f"{limit - 3:04}-p.patch" in f.message for f in within)
    last = per_patch[f"{n - 1:04}-p.patch"]
    assert any(f"{limit - 1:04}-p.patch" in f.message for f in last)  # the most recent it is compared with
    summary = [f for f in last if "more" in f.message]
    assert len(summary) == 1 and f"{limit - 2:,} more patches" in summary[0].message
    assert "0000-p.patch" in summary[0].message     # the first of them is named


def _write_patches(folder: Path, bodies: list[str]) -> None:
    """The patches, and a quilt series that applies them in this order."""
    folder.mkdir()
    for i, body in enumerate(bodies):
        (folder / f"{i:04}-p.patch").write_text(body)
    (folder / "series").write_text("".join(f"{i:04}-p.patch\n" for i in range(len(bodies))))


def test_an_earlier_patch_is_named_once_per_file_however_many_hunks_overlap_it(tmp_path, monkeypatch):
    first = ("--- a/pkg/m.py\n+++ b/pkg/m.py\n@@ -10,3 +10,3 @@\n a = 1\n-b = 1\n+b = 2\n c = 3\n"
             "@@ -40,3 +40,3 @@\n d = 1\n-e = 1\n+e = 2\n f = 3\n")
    # written against the original too (not on top of the first): both hunks overlap it
    second = first.replace("+b = 2", "+b = 3").replace("+e = 2", "+e = 3")
    _write_patches(tmp_path / "patches", [first, second])
    monkeypatch.chdir(tmp_path)
    res = run_check(["patches"], Settings(select=["PA304"], jobs=1, cache=False))
    assert [(os.path.basename(f.path), f.line) for f in res.findings] == [("0001-p.patch", 6)]


def test_pa304_stops_comparing_past_its_limit_and_says_so(tmp_path, monkeypatch):
    from patchaudit.config.registry import rule_index

    monkeypatch.setattr(rule_index()["PA304"].load(), "MAX_PATCHES_PER_FILE", 3)
    body = "--- a/pkg/m.py\n+++ b/pkg/m.py\n@@ -10,3 +10,3 @@\n a = 1\n-b = {i}\n+b = {j}\n c = 3\n"
    _write_patches(tmp_path / "patches", [body.format(i=0, j=i + 1) for i in range(6)])
    monkeypatch.chdir(tmp_path)
    res = run_check(["patches"], Settings(select=["PA304"], jobs=1, cache=False))
    limit = [f for f in res.findings if "limit" in f.message]
    assert [os.path.basename(f.path) for f in limit] == ["0003-p.patch"]
    # the later patches are still compared with the first three
    assert {os.path.basename(f.path) for f in res.findings} == {f"{i:04}-p.patch" for i in range(1, 6)}


@pytest.mark.skipif(not LINUX, reason="the pool forks on Linux only")
def test_a_module_over_the_time_budget_in_the_pre_pass_is_reported_not_done_again(tmp_path, monkeypatch):
    """The whole-repository pre-pass's workers have the scan's time budget: a summary that
    runs over it is stopped, the module exports nothing, the run says so and goes on (the
    module is not summarised again in this process, nor cached)."""
    from patchaudit.pipeline import repo_index

    root = tmp_path / "t"
    root.mkdir()
    (root / "pyproject.toml").write_text("[tool.patchaudit]\n")
    source = "def build(processor, image, prompt):\n    return processor(text=prompt, images=image)['input_ids']\n"
    (root / "ds.py").write_text(source)
    (root / "ds2.py").write_text(source.replace("build", "build2"))
    (root / "send.py").write_text(
        "import requests\nfrom ds import build\nfrom ds2 import build2\n\n"
        "def send(processor, image, prompt):\n"
        "    ids = build(processor, image, prompt)\n"
        "    return requests.post('http://e/generate', json={'input_ids': ids, 'image_data': image})\n\n"
        "def send2(processor, image, prompt):\n"
        "    ids = build2(processor, image, prompt)\n"
        "    return requests.post('http://e/generate', json={'input_ids': ids, 'image_data': image})\n"
    )
    main_pid = os.getpid()
    real = repo_index._summarise

    def slow(rule, key, e, view, settings):
        if key.endswith("/ds.py") and os.getpid() != main_pid:
            time.sleep(60)
        return real(rule, key, e, view, settings)

    monkeypatch.chdir(root)
    monkeypatch.setattr(repo_index, "LEVEL_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "FILE_TIME_BUDGET", 1.0, raising=False)
    monkeypatch.setattr(repo_index, "_summarise", slow)
    res = run_check(["."], Settings(select=["PA102"], jobs=2, cache=False))
    errs = [e for e in res.errors if os.path.basename(e.path) == "ds.py"]
    assert len(errs) == 1 and "time budget" in errs[0].message and "whole-repository" in errs[0].message, res.errors
    lines = sorted(f.line for f in res.findings if f.path.endswith("send.py"))
    assert lines == [11], res.findings  # send2's flow through ds2; send's through ds is not followed
    monkeypatch.setattr(repo_index, "_summarise", real)
    res = run_check(["."], Settings(select=["PA102"], jobs=2, cache=False))
    assert sorted(f.line for f in res.findings if f.path.endswith("send.py")) == [7, 11] and not res.errors
