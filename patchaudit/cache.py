"""The per-file result cache (`.patchaudit_cache/`, like ruff's).

`runner.analyse_file` is a pure function of a file's path, kind and content
and of the run's settings, so its result can be reused whenever those are
unchanged.  The cache keeps one store per *run key* and, inside it, one entry
per file: `(path, kind) -> (content digest, FileResult)`.  A store is a folder
of `SHARDS` pickles; an entry lives in the one its path hashes to, and a run
reads only the shards of the files it looks up (one, for a one-file pre-commit
run in a large tree) and writes only those it changed.

The run key covers everything else a result depends on:
- the patchaudit version and the Python version;
- the code: size and modification time of every source file of patchaudit and
  of its rule pack, and of libcst's and unidiff's `__init__.py` (an edited
  rule or an upgraded parser is a new key);
- the selected rule codes and every setting that reaches `analyse_file`
  (all `Settings` fields except jobs/cache/cache-dir/config path and the raw
  select/ignore lists, which the selected codes replace);
- the tokenizer's files (path, size, modification time) when one is given.

Runs with `--engine` (exact mode) do not use the cache: their results depend
on an engine source that can change outside the cache's view (a directory, a
branch of a git repository).

Where: `cache-dir` from the configuration, else `.patchaudit_cache/` beside
the pyproject.toml that configured the run, else in the current directory.
The folder gets its own `.gitignore` (`*`) and a `CACHEDIR.TAG`.  Stores are
written atomically (a temporary file renamed over the old one) and merged
with what another process wrote meanwhile; an unreadable store is a cold
cache, never an error.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
import shutil
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Any, Iterable

CACHE_DIR_NAME = ".patchaudit_cache"
#: keep at most this many stores (run keys) per patchaudit version
MAX_STORES = 16
#: pickles per store (a file's result lives in the one its path hashes to)
SHARDS = 64
#: Settings fields that do not change a file's result
_NOT_IN_KEY = {"jobs", "cache", "cache_dir", "config_path", "select", "ignore", "extend_select"}

_GITIGNORE = "# Automatically created by patchaudit.\n*\n"
_CACHEDIR_TAG = ("Signature: 8a477f597d28d172789f06886806bc55\n"
                 "# This file is a cache directory tag created by patchaudit.\n"
                 "# For information about cache directory tags see https://bford.info/cachedir/\n")


def digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


# --------------------------------------------------------------------------
# sealed pickles: the cache folder sits in the checked tree, which may be hostile

_KEY: list[bytes | None] = []


def _key_folders() -> list[str]:
    """Where this user's key may live: the user's cache folder, else a folder of the
    temporary directory that this user owns and nobody else can write."""
    from patchaudit.rule_index import user_cache_dir

    out = []
    folder = user_cache_dir()
    if folder is not None:
        out.append(os.path.dirname(folder))
    getuid = getattr(os, "getuid", None)
    if getuid is not None:
        out.append(os.path.join(tempfile.gettempdir(), f"patchaudit-{getuid()}"))
    return out


def _private(folder: str) -> bool:
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        st = os.stat(folder)
    except OSError:
        return False
    getuid = getattr(os, "getuid", None)
    return getuid is None or (st.st_uid == getuid() and not st.st_mode & 0o022)


def _secret() -> bytes | None:
    """This user's cache key: 32 random bytes in the user's cache folder (or a private
    folder of the temporary directory), created (mode 0600) on first use; None when
    there is no such place to keep it."""
    if _KEY:
        return _KEY[0]
    key = None
    for folder in _key_folders():
        if not _private(folder):
            continue
        path = os.path.join(folder, "cache-key")
        for _ in range(2):
            try:
                with open(path, "rb") as fh:
                    got = fh.read(64)
                if len(got) == 32:
                    key = got
                break
            except FileNotFoundError:
                try:
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                except FileExistsError:
                    continue   # another run created it meanwhile: read it
                except OSError:
                    break
                import secrets

                with os.fdopen(fd, "wb") as fh:
                    fh.write(secrets.token_bytes(32))
            except OSError:
                break
        if key is not None:
            break
    _KEY.append(key)
    return key


def seal(data: bytes) -> bytes | None:
    """`data` with an HMAC of this user's key in front, or None without a key."""
    import hmac

    key = _secret()
    return None if key is None else hmac.new(key, data, hashlib.sha256).digest() + data


def unseal(blob: bytes) -> bytes | None:
    """What `seal` sealed with this user's key, or None for anything else.

    A `.patchaudit_cache/` folder lives in the tree being checked; a hostile
    checkout can ship one, and unpickling its files would run its code.  Only
    pickles this user's runs wrote, proven by the HMAC, are ever unpickled."""
    import hmac

    key = _secret()
    if key is None or len(blob) < 32:
        return None
    mac, data = blob[:32], blob[32:]
    return data if hmac.compare_digest(mac, hmac.new(key, data, hashlib.sha256).digest()) else None


def atomic_write(path: str, data: bytes, mode: int = 0o644) -> None:
    folder = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, mode & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def cache_root(settings) -> Path:
    """The cache folder of a run (not created)."""
    if settings.cache_dir:
        return Path(settings.cache_dir)
    if settings.config_path:
        return Path(settings.config_path).resolve().parent / CACHE_DIR_NAME
    return Path.cwd() / CACHE_DIR_NAME


def ensure_root(root: Path) -> bool:
    """Create the cache folder with its .gitignore; False when it cannot be written."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        gi = root / ".gitignore"
        if not gi.exists():
            atomic_write(str(gi), _GITIGNORE.encode())
        tag = root / "CACHEDIR.TAG"
        if not tag.exists():
            atomic_write(str(tag), _CACHEDIR_TAG.encode())
        return os.access(root, os.W_OK)
    except OSError:
        return False


def _stat_sources(folder: str, out: list) -> None:
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return
    for name in names:
        p = os.path.join(folder, name)
        if name.endswith(".py"):
            try:
                st = os.stat(p)
            except OSError:
                continue
            out.append((p, st.st_size, st.st_mtime_ns))
        elif name not in ("__pycache__",) and not name.startswith(".") and os.path.isdir(p):
            _stat_sources(p, out)


def code_stamp() -> tuple:
    """What identifies the code that computes results (see the module docs)."""
    import patchaudit
    import patchaudit.rules as pack

    out: list = []
    _stat_sources(os.path.dirname(patchaudit.__file__), out)
    for folder in pack.__path__:
        _stat_sources(folder, out)
    import importlib.util

    for dep in ("libcst", "unidiff"):
        try:
            spec = importlib.util.find_spec(dep)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin:
            try:
                st = os.stat(spec.origin)
                out.append((spec.origin, st.st_size, st.st_mtime_ns))
            except OSError:
                pass
    return tuple(out)


def _file_stamps(path: str) -> tuple:
    out = []
    try:
        if os.path.isdir(path):
            for name in sorted(os.listdir(path)):
                p = os.path.join(path, name)
                if os.path.isfile(p):
                    st = os.stat(p)
                    out.append((name, st.st_size, st.st_mtime_ns))
        else:
            st = os.stat(path)
            out.append((path, st.st_size, st.st_mtime_ns))
    except OSError:
        out.append((path, "unreadable"))
    return tuple(out)


def run_key(settings, codes: Iterable[str]) -> str:
    from patchaudit import __version__

    parts: list[Any] = [__version__, sys.version_info[:2], sys.platform, code_stamp(), tuple(sorted(codes))]
    for f in dataclasses.fields(settings):
        if f.name in _NOT_IN_KEY:
            continue
        parts.append((f.name, repr(getattr(settings, f.name))))
    if settings.tokenizer:
        parts.append(("tokenizer-files", _file_stamps(settings.tokenizer)))
    return hashlib.sha256(repr(parts).encode("utf-8", "surrogateescape")).hexdigest()[:32]


class ResultCache:
    """One store of per-file results: a folder of `SHARDS` pickles, each loaded when a
    file of it is first looked up and written back once per run if it changed.

    A pre-commit run over one file of a large tree reads and writes one shard (a few
    dozen entries), not the results of every file of the tree."""

    def __init__(self, root: Path, key: str):
        from patchaudit import __version__

        self.root = root
        self.folder = root / __version__
        self.store = self.folder / key
        self._shards: dict[int, dict[tuple[str, str], tuple[bytes, Any]]] = {}
        self._mtimes: dict[int, int | None] = {}
        self.new: dict[int, dict[tuple[str, str], tuple[bytes, Any]]] = {}
        try:
            self._cold = not any(n.endswith(".pickle") for n in os.listdir(self.store))
        except OSError:
            self._cold = True

    @classmethod
    def for_run(cls, settings, codes: Iterable[str]) -> "ResultCache | None":
        """The cache of this run, or None (disabled, exact mode, or unwritable)."""
        if not settings.cache or settings.engines:
            return None
        root = cache_root(settings)
        if not ensure_root(root):
            return None
        return cls(root, run_key(settings, codes))

    @staticmethod
    def _shard(path: str, kind: str) -> int:
        return zlib.crc32(f"{kind}\0{path}".encode("utf-8", "surrogateescape")) % SHARDS

    def _file(self, n: int) -> Path:
        return self.store / f"{n:02x}.pickle"

    def _read(self, n: int) -> tuple[dict, int | None]:
        try:
            with open(self._file(n), "rb") as fh:
                mtime = os.fstat(fh.fileno()).st_mtime_ns
                raw = unseal(fh.read())
            data = pickle.loads(raw) if raw is not None else None
            if isinstance(data, dict):
                return data, mtime
        except Exception:  # missing, truncated or from another version: a cold shard
            pass
        return {}, None

    def _entries(self, n: int) -> dict:
        if n not in self._shards:
            if self._cold:
                self._shards[n], self._mtimes[n] = {}, None
            else:
                self._shards[n], self._mtimes[n] = self._read(n)
        return self._shards[n]

    def cold(self) -> bool:
        """No result of this run key is stored yet."""
        return self._cold

    def get(self, path: str, kind: str, content_digest: bytes):
        hit = self._entries(self._shard(path, kind)).get((path, kind))
        if hit is not None and hit[0] == content_digest:
            return hit[1]
        return None

    def put(self, path: str, kind: str, content_digest: bytes, result: Any) -> None:
        self.new.setdefault(self._shard(path, kind), {})[(path, kind)] = (content_digest, result)

    def save(self) -> None:
        if not self.new:
            return
        try:
            self.store.mkdir(parents=True, exist_ok=True)
            for n, new in sorted(self.new.items()):
                entries = self._shards.get(n, {})
                try:
                    mtime = os.stat(self._file(n)).st_mtime_ns
                except OSError:
                    mtime = None
                if mtime != self._mtimes.get(n):
                    entries, _ = self._read(n)   # another run wrote meanwhile: merge with it
                entries = dict(entries)
                entries.update(new)
                sealed = seal(pickle.dumps(entries, protocol=pickle.HIGHEST_PROTOCOL))
                if sealed is None:
                    return   # no key to prove the store ours later: keep nothing
                atomic_write(str(self._file(n)), sealed)
                self._shards[n] = entries
                self._mtimes[n] = os.stat(self._file(n)).st_mtime_ns
            self.new = {}
            self._cold = False
            os.utime(self.store)   # the store's age, for _prune: its last write
            self._prune()
        except OSError:
            pass

    def _prune(self) -> None:
        try:
            stores = sorted((p for p in self.folder.iterdir() if p.is_dir() and len(p.name) == 32),
                            key=lambda p: p.stat().st_mtime_ns, reverse=True)
            for old in stores[MAX_STORES:]:
                shutil.rmtree(old, ignore_errors=True)
            for old in self.folder.glob("*.pickle"):   # a single-file store of an earlier release
                if len(old.stem) == 32:
                    old.unlink()
        except OSError:
            pass
