"""The cache (and every other file patchaudit writes) never writes or deletes outside
the checked tree (SECURITY.md, promise 2).

* a committed `.patchaudit_cache/<version>` symlink does not make pruning delete,
  or the run write, anything where it points;
* a `cache-dir` in the checkout's pyproject.toml that leaves the tree (absolute,
  `..`, or through a symlink), and a committed `.patchaudit_cache` symlink, are
  refused with an error naming the file and the key; the scan goes on without
  the cache and exits 2;
* the user's own choices (`--cache-dir`, `PATCHAUDIT_CACHE_DIR`, an explicit
  `--config`) may point anywhere; `--no-cache` and `PATCHAUDIT_NO_CACHE=1` write
  no cache at all;
* pruning deletes only stores the cache sealed, never a folder it did not write;
* the per-user folders (rule index, key) are not reached through symlinks planted
  by others, and `--output` / `--write-baseline` never write through a symlink.

Every hostile layout is built in tmp_path; nothing here is committed as a symlink.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

import patchaudit.pipeline.cache as pc
import patchaudit.files.usercache as uc
import patchaudit.config.registry as ri
from patchaudit import __version__
from patchaudit.testing import invoke_in

POSITIVE = "out = legacy_load_mm_data(prompt=t)\n"
HEX = "0123456789abcdef" * 2          # a 32-character name, like a store of the cache


def snapshot(root: Path, skip: Path | None = None) -> dict[str, object]:
    """Every path under `root` (not following symlinks) with its content, except under `skip`."""
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        if skip is not None and Path(dirpath) == skip.parent:
            dirnames[:] = [d for d in dirnames if Path(dirpath, d) != skip]
            filenames = [f for f in filenames if Path(dirpath, f) != skip]
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


@pytest.fixture
def world(tmp_path, monkeypatch):
    """(world, checkout): a checkout at world/a/checkout holding one PA101 positive;
    the user's cache folder (XDG_CACHE_HOME) lies outside `world`."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("PATCHAUDIT_CACHE_DIR", raising=False)
    monkeypatch.delenv("PATCHAUDIT_NO_CACHE", raising=False)
    monkeypatch.setattr(ri, "_INDEX", None)       # read and write the rule index on disk
    w = tmp_path / "world"
    checkout = w / "a" / "checkout"
    checkout.mkdir(parents=True)
    (checkout / "a.py").write_text(POSITIVE)
    return w, checkout


def _victim(folder: Path) -> Path:
    """A folder that looks like a cache version folder: 32-character folders and pickles."""
    folder.mkdir(parents=True)
    for i in range(5):
        d = folder / f"{i}{HEX[1:]}"
        d.mkdir()
        (d / "00.pickle").write_bytes(b"precious")
        (d / "notes.txt").write_text("precious")
    (folder / "x.pickle").write_bytes(b"precious")
    (folder / f"{HEX}.pickle").write_bytes(b"precious")
    (folder / "rule-index.pickle").write_bytes(b"precious")
    return folder


def check(root: Path, *args: str):
    return invoke_in(root, ["check", "-j", "1", *args, "."])


def assert_scanned(res) -> None:
    """The scan went on: the finding is reported."""
    assert "PA101" in res.stdout, (res.stdout, res.stderr)


# --------------------------------------------------------------------------
# item 3: pruning through a committed `.patchaudit_cache/<version>` symlink


def test_pruning_never_follows_a_committed_version_symlink(world, monkeypatch):
    w, checkout = world
    victim = _victim(w / "victim")
    (checkout / ".patchaudit_cache").mkdir()
    (checkout / ".patchaudit_cache" / __version__).symlink_to(victim, target_is_directory=True)
    monkeypatch.setattr(pc, "MAX_STORES", 1)      # any second store is pruned
    before = snapshot(w, skip=checkout)
    for select in ("PA101", "PA1", "ALL"):        # three run keys: pruning runs
        res = check(checkout, "--select", select)
        assert_scanned(res)
        assert res.exit_code == 2, res.stderr
        assert f".patchaudit_cache/{__version__}" in res.stderr and "symlink" in res.stderr, res.stderr
    assert snapshot(w, skip=checkout) == before
    assert os.path.islink(checkout / ".patchaudit_cache" / __version__)


def test_pruning_deletes_only_stores_the_cache_sealed(world, monkeypatch):
    """In a real cache folder: a 32-character folder and pickles the cache did not write,
    and a store that is a symlink, survive pruning; the cache's own old stores do not."""
    w, checkout = world
    monkeypatch.setattr(pc, "MAX_STORES", 1)
    assert check(checkout, "--select", "PA101").exit_code == 1
    version = checkout / ".patchaudit_cache" / __version__
    ours = [p for p in version.iterdir() if p.is_dir()]
    assert len(ours) == 1
    foreign = version / HEX
    foreign.mkdir()
    (foreign / "00.pickle").write_bytes(b"not ours")
    (foreign / "keep.txt").write_text("not ours")
    (version / f"{HEX[::-1]}.pickle").write_bytes(b"not ours")     # a 'single-file store'
    outside = _victim(w / "outside")
    (version / ("f" * 32)).symlink_to(outside, target_is_directory=True)
    for p in (foreign, foreign / "00.pickle"):
        os.utime(p, ns=(1, 1))   # older than every store: the first to go if it were ours
    before = snapshot(w, skip=checkout)
    for select in ("PA1", "ALL"):
        assert check(checkout, "--select", select).exit_code == 1
    assert snapshot(w, skip=checkout) == before
    assert (foreign / "00.pickle").read_bytes() == b"not ours" and (foreign / "keep.txt").exists()
    assert (version / f"{HEX[::-1]}.pickle").exists() and (version / ("f" * 32)).is_symlink()
    stores = [p for p in version.iterdir() if p.is_dir() and not p.is_symlink() and p != foreign]
    assert len(stores) == 1 and stores[0] != ours[0]       # the cache's own old store was pruned


def test_a_symlink_swapped_in_during_the_run_is_not_followed(world, monkeypatch):
    """The location is checked when the run starts; a `<version>` folder replaced by a
    symlink afterwards (before the results are saved) is still never followed: every
    write and delete is made relative to its folder's descriptor, without following."""
    from patchaudit.config.settings import Settings

    w, checkout = world
    victim = _victim(w / "victim")
    monkeypatch.chdir(checkout)
    monkeypatch.setattr(pc, "MAX_STORES", 1)
    root = pc.cache_root(Settings(select=["PA101"]))
    assert root is not None and pc.ensure_root(root)
    cache = pc.ResultCache(root, "a" * 32)
    cache.put("a.py", "python", b"digest", "result")
    (root / __version__).symlink_to(victim, target_is_directory=True)     # swapped in
    before = snapshot(w, skip=checkout)
    cache.save()
    ri.rule_index(str(root / __version__))
    assert snapshot(w, skip=checkout) == before


# --------------------------------------------------------------------------
# item 4: cache locations from the checked tree stay inside it


@pytest.mark.parametrize("value", ["ABS", "../..", "sub/../../../x", "."])
def test_cache_dir_in_the_checkouts_pyproject_must_stay_inside(world, value):
    w, checkout = world
    if value == "ABS":
        value = str(w / "abs")
    (checkout / "pyproject.toml").write_text(f"[tool.patchaudit]\nselect = ['PA1']\ncache-dir = {value!r}\n")
    before = snapshot(w, skip=checkout)
    res = check(checkout)
    assert_scanned(res)
    assert res.exit_code == 2
    assert "pyproject.toml:3:" in res.stderr and "cache-dir" in res.stderr, res.stderr
    assert snapshot(w, skip=checkout) == before
    assert not (checkout / ".patchaudit_cache").exists()          # the scan ran without the cache


def test_cache_dir_through_a_symlink_of_the_checkout_is_refused(world):
    w, checkout = world
    (w / "elsewhere").mkdir()
    (checkout / "build").symlink_to(w / "elsewhere", target_is_directory=True)
    (checkout / "pyproject.toml").write_text("[tool.patchaudit]\ncache-dir = 'build/pa-cache'\n")
    before = snapshot(w, skip=checkout)
    res = check(checkout)
    assert_scanned(res)
    assert res.exit_code == 2
    assert "pyproject.toml:2:" in res.stderr and "cache-dir" in res.stderr and "symlink" in res.stderr
    assert snapshot(w, skip=checkout) == before


@pytest.mark.parametrize("config", [True, False])
def test_a_committed_cache_folder_symlink_is_refused(world, config):
    w, checkout = world
    (w / "a" / "elsewhere").mkdir()
    (checkout / ".patchaudit_cache").symlink_to("../elsewhere", target_is_directory=True)
    if config:
        (checkout / "pyproject.toml").write_text("[tool.patchaudit]\nselect = ['PA1']\n")
    before = snapshot(w, skip=checkout)
    res = check(checkout)
    assert_scanned(res)
    assert res.exit_code == 2
    assert ".patchaudit_cache" in res.stderr and "symlink" in res.stderr, res.stderr
    assert snapshot(w, skip=checkout) == before


def test_a_dangling_committed_cache_symlink_creates_nothing(world):
    w, checkout = world
    (checkout / ".patchaudit_cache").symlink_to(w / "new" / "place", target_is_directory=True)
    (w / "new").mkdir()
    before = snapshot(w, skip=checkout)
    res = check(checkout)
    assert_scanned(res)
    assert snapshot(w, skip=checkout) == before


def _has_store(folder: Path) -> bool:
    version = folder / __version__
    return (folder / ".gitignore").is_file() and (folder / "CACHEDIR.TAG").is_file() and any(
        p.is_dir() and any(p.glob("*.pickle")) for p in version.iterdir())


@pytest.mark.parametrize("how", ["env", "option", "explicit-config"])
def test_the_users_own_cache_location_may_be_anywhere(world, monkeypatch, how):
    w, checkout = world
    mine = w / "mine" / "pa-cache"
    (checkout / "pyproject.toml").write_text("[tool.patchaudit]\ncache-dir = '/nowhere/pa'\n")
    args: list[str] = []
    if how == "env":
        monkeypatch.setenv("PATCHAUDIT_CACHE_DIR", str(mine))
    elif how == "option":
        args = ["--cache-dir", str(mine)]
    else:
        trusted = w / "trusted.toml"
        trusted.write_text(f"[tool.patchaudit]\ncache-dir = {str(mine)!r}\n")
        args = ["--config", str(trusted)]
    res = check(checkout, *args)
    assert res.exit_code == 1, res.stderr
    assert res.stderr == "" or "cache" not in res.stderr, res.stderr
    assert _has_store(mine)
    assert not (checkout / ".patchaudit_cache").exists()


def test_the_option_beats_the_environment(world, monkeypatch):
    w, checkout = world
    monkeypatch.setenv("PATCHAUDIT_CACHE_DIR", str(w / "env"))
    assert check(checkout, "--cache-dir", str(w / "opt")).exit_code == 1
    assert _has_store(w / "opt") and not (w / "env").exists()


@pytest.mark.parametrize("how", ["env", "option"])
def test_no_cache_writes_no_cache(world, monkeypatch, how):
    w, checkout = world
    (checkout / "pyproject.toml").write_text("[tool.patchaudit]\nselect = ['PA1']\n")
    if how == "env":
        monkeypatch.setenv("PATCHAUDIT_NO_CACHE", "1")
    before = snapshot(w)
    res = check(checkout, *(["--no-cache"] if how == "option" else []))
    assert res.exit_code == 1, res.stderr
    assert snapshot(w) == before        # nothing at all in the tree (the rule index: the user's folder)


def test_cache_dir_inside_the_checkout_still_works(world):
    w, checkout = world
    (checkout / "pyproject.toml").write_text("[tool.patchaudit]\ncache-dir = 'build/pa-cache'\n")
    before = snapshot(w, skip=checkout)
    assert check(checkout).exit_code == 1
    assert _has_store(checkout / "build" / "pa-cache")
    assert snapshot(w, skip=checkout) == before


# --------------------------------------------------------------------------
# siblings: the user's folders, the report, the baseline


def test_rule_index_is_not_written_through_a_symlink_in_the_users_folder(tmp_path, monkeypatch):
    """`$XDG_CACHE_HOME/patchaudit/<version>` planted as a symlink (a shared XDG_CACHE_HOME):
    the rule index is not written where it points."""
    xdg = tmp_path / "xdg"
    victim = tmp_path / "victim"
    victim.mkdir()
    (xdg / "patchaudit").mkdir(parents=True, mode=0o700)
    (xdg / "patchaudit" / __version__).symlink_to(victim, target_is_directory=True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    monkeypatch.setattr(ri, "_INDEX", None)
    tree = tmp_path / "tree"
    index = ri.rule_index(str(tree))
    assert "PA101" in index
    assert list(victim.iterdir()) == []
    assert (tree / "rule-index.pickle").is_file()


def test_the_key_folder_is_not_reached_through_a_planted_symlink(tmp_path, monkeypatch):
    """Without a home, the key lives in `<tmp>/patchaudit-<uid>`; another user can plant that
    name as a symlink to a folder of ours: no key is written there."""
    if not hasattr(os, "getuid"):
        pytest.skip("POSIX only")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    (tmp / f"patchaudit-{os.getuid()}").symlink_to(victim, target_is_directory=True)
    monkeypatch.setenv("HOME", "no-home")   # not absolute: no home folder
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr("tempfile.tempdir", str(tmp))
    monkeypatch.setattr(uc, "_KEY", [])
    uc._secret()
    assert list(victim.iterdir()) == []


def test_the_key_is_created_privately(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(uc, "_KEY", [])
    key = uc._secret()
    assert key is not None and len(key) == 32
    path = tmp_path / "xdg" / "patchaudit" / "cache-key"
    assert path.read_bytes() == key
    if hasattr(os, "getuid"):
        assert path.stat().st_mode & 0o077 == 0 and (path.parent.stat().st_mode & 0o077) == 0
    monkeypatch.setattr(uc, "_KEY", [])
    assert uc._secret() == key                         # read back, not replaced


@pytest.mark.parametrize("option", ["--output", "--write-baseline"])
def test_reports_are_not_written_through_a_committed_symlink(world, option):
    """`report.json` committed as a symlink to a file outside: the report or baseline
    replaces the link (or is refused), the file it points to is never written."""
    w, checkout = world
    precious = w / "precious.txt"
    precious.write_text("precious\n")
    (checkout / "report.json").symlink_to(precious)
    before = snapshot(w, skip=checkout)
    res = check(checkout, "--no-cache", option, "report.json")
    assert "Traceback" not in res.stderr
    assert snapshot(w, skip=checkout) == before
    assert precious.read_text() == "precious\n"


def test_reports_still_go_to_regular_files_and_special_files(world):
    w, checkout = world
    res = check(checkout, "--no-cache", "--format", "json", "--output", "report.json")
    assert res.exit_code == 1, res.stderr
    assert "PA101" in (checkout / "report.json").read_text()
    (checkout / "report.json").write_text("x" * 100000)
    res = check(checkout, "--no-cache", "--format", "json", "--output", "report.json")
    assert (checkout / "report.json").read_text().lstrip().startswith("[")   # truncated, rewritten
    res = check(checkout, "--no-cache", "--output", os.devnull)
    assert res.exit_code == 1, res.stderr
    res = check(checkout, "--no-cache", "--write-baseline", "base.json")
    assert res.exit_code == 0 and "PA101" in (checkout / "base.json").read_text()


def test_a_cache_shard_symlinked_elsewhere_is_not_read_or_followed(world):
    """A shard of a real store replaced by a symlink to a file outside: not read through,
    and the rewrite replaces the link, never the file it points to."""
    w, checkout = world
    assert check(checkout).exit_code == 1
    store = next(p for p in (checkout / ".patchaudit_cache" / __version__).iterdir() if p.is_dir())
    shard = next(store.glob("*.pickle"))
    outside = w / "outside.pickle"
    outside.write_bytes(shard.read_bytes())
    shard.unlink()
    shard.symlink_to(outside)
    (checkout / "a.py").write_text(POSITIVE + "# changed\n")
    before = snapshot(w, skip=checkout)
    res = check(checkout)
    assert res.exit_code == 1, res.stderr
    assert snapshot(w, skip=checkout) == before
    assert not shard.is_symlink() and shard.is_file()
    with pytest.raises(Exception):
        pickle.loads(shard.read_bytes())     # sealed, as every pickle the cache writes
