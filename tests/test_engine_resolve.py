"""Engines found by version (patchaudit/engine/resolve.py), with real parts: wheels and
sdists written as the standards say, a `.dist-info` that importlib.metadata reads, pip run
with `--no-index --find-links` (set the way a user configures pip: PIP_* variables) on a
folder of wheels the test built, a git clone made with GitPython.  Nothing downloads."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import git
import pytest
from enginewheels import build_sdist, build_wheel, install_dist

from patchaudit.config.settings import ConfigError, Settings, apply_engine_options, load_pyproject
from patchaudit.engine import resolve
from patchaudit.engine.resolve import ResolvedEngine, resolve_engine
from patchaudit.engine.sources import open_named_engine

FILES = {"fakeengine/__init__.py": "__version__ = '1.0'\n", "fakeengine/core.py": "def run(x):\n    return x\n"}


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    """Every test: its own user cache, no index (pip reads PIP_NO_INDEX), no memo."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.delenv("PATCHAUDIT_OFFLINE", raising=False)
    resolve.clear()
    yield
    resolve.clear()


def _settings(**kw) -> Settings:
    """`engine-packages` names the fake engine: a known engine, so it may be downloaded."""
    return Settings(cache=False, engine_packages=["fakeengine"], **kw)


def test_a_wheel_in_engine_dirs_wins_over_an_sdist_and_versions_compare_as_pep_440(tmp_path):
    d = tmp_path / "wheels"
    build_sdist(d, "fakeengine", "1.0", FILES)
    wheel = build_wheel(d, "fakeengine", "1.0.0", FILES)
    build_wheel(d, "fakeengine", "1.1", FILES)
    build_wheel(d, "otherengine", "1.0", FILES)
    got = resolve_engine("fakeengine", "1.0", _settings(engine_dirs=[str(tmp_path / "missing"), str(d)]))
    assert got == ResolvedEngine(str(wheel), "1.0", "engine-dirs")
    src = open_named_engine(got.source, "fakeengine")  # usable as --engine NAME=SOURCE
    assert "fakeengine/core.py" in src.files()
    src.close()
    # only an sdist of that version: the sdist
    sdist_only = tmp_path / "sdists"
    sd = build_sdist(sdist_only, "fakeengine", "2.0.post1", FILES)
    assert resolve_engine("fakeengine", "2.0-post1", _settings(engine_dirs=[str(sdist_only)])) == ResolvedEngine(
        str(sd), "2.0-post1", "engine-dirs"
    )


def test_engine_dirs_in_the_configuration_are_relative_to_it_and_type_checked(tmp_path):
    (tmp_path / "proj").mkdir()
    cfg = tmp_path / "proj" / "pyproject.toml"
    cfg.write_text('[tool.patchaudit]\nengine-dirs = ["../wheels"]\noffline = true\n')
    s = load_pyproject(cfg)
    assert s.engine_dirs == [str(tmp_path / "wheels")] and s.offline
    wheel = build_wheel(tmp_path / "wheels", "fakeengine", "1.0", FILES)
    assert resolve_engine("fakeengine", "1.0", s).source == str(wheel)
    cfg.write_text('[tool.patchaudit]\nengine-dirs = "../wheels"\n')
    with pytest.raises(ConfigError, match=r"pyproject.toml:2: \[tool.patchaudit\] engine-dirs: expected a list"):
        load_pyproject(cfg)
    cfg.write_text('[tool.patchaudit]\noffline = "yes"\n')
    with pytest.raises(ConfigError, match="offline: expected true or false"):
        load_pyproject(cfg)
    # --engine-dir comes first; PATCHAUDIT_OFFLINE=1 is offline
    s2 = apply_engine_options(Settings(engine_dirs=["/b"]), ["a"], environ={"PATCHAUDIT_OFFLINE": "1"})
    assert s2.engine_dirs == [os.path.abspath("a"), "/b"] and s2.offline


def test_an_installed_distribution_of_exactly_that_version(tmp_path, monkeypatch):
    # named sglang: `--engine sglang=.../site-packages/sglang` reads the package from its parent
    files = {k.replace("fakeengine", "sglang"): v for k, v in FILES.items()}
    site = install_dist(tmp_path / "site", "sglang", "0.5.15.post1", files)
    monkeypatch.syspath_prepend(str(site))
    got = resolve_engine("sglang", "0.5.15.post1", _settings(offline=True))
    assert got == ResolvedEngine(str(site / "sglang"), "0.5.15.post1", "installed")
    src = open_named_engine(got.source, "sglang")
    assert "sglang/core.py" in src.files()
    src.close()
    notes: list[str] = []
    assert resolve_engine("sglang", "0.5.15", _settings(offline=True), notes) is None  # another version
    assert len(notes) == 1


def test_pip_downloads_into_the_cache_records_the_hash_and_checks_it_on_reuse(tmp_path, monkeypatch):
    index = tmp_path / "index"
    wheel = build_wheel(index, "fakeengine", "1.0", FILES)
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))  # pip as the user configured it
    notes: list[str] = []
    got = resolve_engine("fakeengine", "1.0", _settings(), notes)
    assert got is not None and got.origin == "downloaded" and notes == []
    cached = Path(got.source)
    assert cached.parent == tmp_path / "xdg" / "patchaudit" / "engines" / "fakeengine" / "1.0"
    assert cached.read_bytes() == wheel.read_bytes()
    import hashlib

    assert (cached.parent / (cached.name + ".sha256")).read_text().split()[0] == hashlib.sha256(
        wheel.read_bytes()
    ).hexdigest()
    assert [p.name for p in cached.parent.iterdir() if p.name.startswith(".download")] == []
    # again, the index gone: the cache
    monkeypatch.delenv("PIP_FIND_LINKS")
    resolve.clear()
    assert resolve_engine("fakeengine", "1.0", _settings(offline=True)) == ResolvedEngine(str(cached), "1.0", "cache")
    # a cached file changed since: not used; offline, nothing else: the note says so
    cached.write_bytes(cached.read_bytes() + b"x")
    resolve.clear()
    notes = []
    assert resolve_engine("fakeengine", "1.0", _settings(offline=True), notes) is None
    assert "changed since it was downloaded" in notes[0] and "offline" in notes[1]
    # online again: downloaded afresh
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    resolve.clear()
    again = resolve_engine("fakeengine", "1.0", _settings())
    assert again is not None and again.origin == "downloaded" and Path(again.source).read_bytes() == wheel.read_bytes()


def test_offline_never_runs_pip_and_says_the_one_line_that_gives_the_engine(tmp_path, monkeypatch):
    index = tmp_path / "index"
    build_wheel(index, "fakeengine", "1.0", FILES)
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    monkeypatch.setenv("PATCHAUDIT_OFFLINE", "1")
    notes: list[str] = []
    assert resolve_engine("fakeengine", "1.0", _settings(), notes) is None
    (note,) = notes
    assert note.startswith("fakeengine 1.0: ")
    assert "`--engine fakeengine=PATH`" in note
    assert "`pip download --no-deps fakeengine==1.0 -d DIR`" in note and "engine-dirs" in note
    assert not (tmp_path / "xdg" / "patchaudit" / "engines").exists()
    # download=False (a caller's local-only look-up): the same note, nothing fetched
    monkeypatch.delenv("PATCHAUDIT_OFFLINE")
    notes = []
    assert resolve_engine("fakeengine", "1.0", _settings(), notes, download=False) is None
    assert notes == [note] and not (tmp_path / "xdg" / "patchaudit" / "engines").exists()


def test_a_failed_download_is_a_note_naming_pips_reason(tmp_path, monkeypatch):
    index = tmp_path / "index"
    build_wheel(index, "fakeengine", "1.0", FILES)
    build_sdist(index, "fakeengine", "3.0", FILES)  # only an sdist: never built (it would run its code)
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    for version in ("2.0", "3.0"):
        notes: list[str] = []
        assert resolve_engine("fakeengine", version, _settings(), notes) is None
        (note,) = notes
        assert f"pip download --no-deps --only-binary=:all: fakeengine=={version}` failed" in note
        assert "No matching distribution" in note or "from versions" in note
        assert f"pip download --no-deps fakeengine=={version} -d DIR" in note
    folder = tmp_path / "xdg" / "patchaudit" / "engines" / "fakeengine" / "3.0"
    assert list(folder.iterdir()) == []  # nothing half-written


def test_names_and_versions_that_could_be_options_never_reach_pip(tmp_path, monkeypatch):
    ran: list = []
    monkeypatch.setattr("patchaudit.inputs.gitrun.run_pip", lambda *a, **k: ran.append(a))
    for name, version in [
        ("-e", "1.0"),
        ("--index-url=http://x", "1.0"),
        ("fake engine", "1.0"),
        ("fakeengine", "-r/etc/passwd"),
        ("fakeengine", "1.0 --pre"),
        ("fakeengine", ""),
    ]:
        notes: list[str] = []
        assert resolve_engine(name, version, _settings(), notes) is None
        assert len(notes) == 1
    assert ran == []


def test_a_git_pin_uses_a_clone_in_engine_dirs_else_says_how_to_give_it(tmp_path):
    clones = tmp_path / "clones"
    repo = git.Repo.init(clones / "fakeengine")
    (clones / "fakeengine" / "core.py").write_text("x = 1\n")
    repo.index.add(["core.py"])
    sha = repo.index.commit("one").hexsha
    got = resolve_engine("fakeengine", sha[:12], _settings(engine_dirs=[str(clones)]))
    assert got == ResolvedEngine(f"{clones / 'fakeengine'}@{sha[:12]}", sha[:12], "engine-dirs")
    notes: list[str] = []
    assert resolve_engine("fakeengine", "0" * 12, _settings(engine_dirs=[str(clones)]), notes) is None
    assert "no clone that has it" in notes[0] and f"--engine fakeengine=PATH@{'0' * 12}" in notes[0]
    notes = []
    assert resolve_engine("fakeengine", "--output=x", _settings(engine_dirs=[str(clones)]), notes) is None
    assert "refusing" in notes[0]


def test_the_summary_line_names_each_engine_its_version_and_origin():
    line = resolve.summary(
        {
            "vllm": ResolvedEngine("/c/vllm.whl", "0.11.0", "cache"),
            "sglang": ResolvedEngine("/w/s.whl", "0.5", "engine-dirs"),
        }
    )
    assert line == "engines: sglang 0.5 (engine-dirs: /w/s.whl), vllm 0.11.0 (cache: /c/vllm.whl)"


def test_a_name_that_is_no_known_engine_is_never_downloaded(tmp_path, monkeypatch):
    index = tmp_path / "index"
    build_wheel(index, "fakeengine", "1.0", FILES)
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    told: list[str] = []
    notes: list[str] = []
    assert resolve_engine("fakeengine", "1.0", Settings(cache=False), notes, told.append) is None
    assert "not a known engine" in notes[0] and told == []
    # named in engine-packages: downloaded, and the caller is told before pip starts
    got = resolve_engine("fakeengine", "1.0", _settings(), None, told.append)
    assert got is not None and got.origin == "downloaded"
    assert told == ["downloading fakeengine==1.0 with pip (--offline: never)"]


def test_a_wheel_for_the_servers_platform_is_taken_when_none_fits_this_machine(tmp_path, monkeypatch):
    """Engines ship Linux wheels; a Mac (or an ARM laptop) still reads their Python files."""
    import platform

    other = "manylinux_2_34_aarch64" if platform.machine() != "aarch64" else "manylinux_2_34_x86_64"
    index = tmp_path / "index"
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    wheel = build_wheel(index, "fakeengine", "1.0", FILES, tag=f"{tag}-{tag}-{other}")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    got = resolve_engine("fakeengine", "1.0", _settings())
    assert got is not None and got.origin == "downloaded" and Path(got.source).name == wheel.name
