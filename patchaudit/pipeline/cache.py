"""The per-file result cache (`.patchaudit_cache/`, like ruff's).

`analyse.analyse_file` is a pure function of a file's path, kind and content
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

Runs with `--engine` (exact mode) add to the key what their results depend on
outside the file (pipeline/exact_cache.py): each engine's identity (an archive's
stat, a git revision's commit) and the content of the earlier patches each patch
is stacked on; an engine without an identity (a directory, whose files can change
outside the cache's view) leaves the run uncached.

What a file's analysis read besides the file (a monkey-patch module's enclosing
`__init__.py`) is in its result, with signatures (`FileResult.reads`): the scan
takes a cached result only while those are unchanged (`parallel._reads_hold`).

A `check` run is also recorded whole (pipeline/replay.py): a re-run whose every
input has the same `stat` signature returns the recorded result, reading nothing.

Where: `--cache-dir`, else `PATCHAUDIT_CACHE_DIR`, else `cache-dir` from the
configuration, else `.patchaudit_cache/` beside the pyproject.toml that
configured the run, else in the current directory (`--no-cache` or
`PATCHAUDIT_NO_CACHE=1`: none).  The folder gets its own `.gitignore` (`*`)
and a `CACHEDIR.TAG`.  Stores are written atomically (a temporary file renamed
over the old one) and merged with what another process wrote meanwhile; an
unreadable store is a cold cache, never an error.

The checked tree may be hostile, and the cache is written inside it:
- a location the tree chooses (`cache-dir` in the pyproject.toml found by
  discovery, or the default `.patchaudit_cache/`) must stay inside the folder
  of that pyproject.toml (or the current directory): an absolute path or `..`
  that leaves it is refused;
- below its trusted start (that folder, or the folder the user named), every
  component of every path the cache uses is opened relative to its parent
  without following symlinks (`patchaudit.files.safefs`): a committed
  `.patchaudit_cache -> /elsewhere` or `.patchaudit_cache/<version> -> /elsewhere`
  is never followed;
- a refused location is an error naming the file (and the configuration key and
  line) in `settings.cache_errors`; the scan runs without the cache;
- pruning deletes only stores that carry this user's seal (`.patchaudit-store`,
  an HMAC of the store's name), and in them only the files the cache writes
  (sealed shards, its temporary files), never through a symlink.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
import re
import stat
import sys
import zlib
from pathlib import Path
from typing import Any, Iterable

from patchaudit.files.safefs import MAX_READ, TMP_PREFIX, Folder, Refused, open_folder
from patchaudit.files.usercache import LOCATIONS, Location, location_of, seal, unseal

CACHE_DIR_NAME = ".patchaudit_cache"
#: keep at most this many stores per patchaudit version (a configuration writes up to
#: four: per-file results, the pre-pass's, the replay's, the listings')
MAX_STORES = 32
#: pickles per store (a file's result lives in the one its path hashes to)
SHARDS = 64
#: Settings fields that do not change a file's result
_NOT_IN_KEY = {
    "repo",
    "jobs",
    "jobs_forced",
    "cache",
    "cache_dir",
    "cache_dir_origin",
    "cache_errors",
    "config_path",
    "select",
    "ignore",
    "extend_select",
}
#: the file that proves a store folder this user's: seal(_STORE_TAG + its name)
STORE_SEAL = ".patchaudit-store"
_STORE_TAG = b"patchaudit store\0"
_STORE_NAME = re.compile(r"[0-9a-f]{32}")
_SHARD_NAME = re.compile(r"[0-9a-f]{2}\.pickle")

_GITIGNORE = "# Automatically created by patchaudit.\n*\n"
_CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by patchaudit.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)


def digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def _shown(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel == os.pardir or rel.startswith(os.pardir + os.sep) else rel


def _refuse(settings, path: str, message: str, line: int | None = None) -> None:
    from patchaudit.model.findings import FileError

    errors = settings.cache_errors
    err = FileError(_shown(path), message, line)
    if errors is not None and all(str(e) != str(err) for e in errors):
        errors.append(err)


_HOW_ELSEWHERE = "the scan runs without the cache (give --cache-dir, or set PATCHAUDIT_CACHE_DIR, to keep it elsewhere)"


def _location(settings) -> Location | None:
    """Where the cache of a run goes, or None (refused: the reason is in cache_errors)."""
    origin = settings.cache_dir_origin
    if settings.cache_dir and origin is None:  # the user's own choice: anywhere
        return Location(os.path.abspath(settings.cache_dir))
    if settings.cache_dir:  # from the checked tree's pyproject.toml
        config, line, raw = origin
        anchor = os.path.dirname(os.path.abspath(config))
        target = os.path.normpath(os.path.join(anchor, settings.cache_dir))
        try:
            rel = os.path.relpath(target, anchor)
        except ValueError:  # another drive
            rel = os.pardir
        if rel == os.curdir or rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel):
            where = (
                "is the folder of this pyproject.toml itself"
                if rel == os.curdir
                else f"leaves the folder of this pyproject.toml ({anchor})"
            )
            _refuse(
                settings,
                config,
                f"[tool.patchaudit] cache-dir = {raw!r} {where}: a cache folder set by "
                f"the checked tree must be a folder inside it; {_HOW_ELSEWHERE}",
                line,
            )
            return None
        return Location(anchor, tuple(rel.split(os.sep)))
    if settings.config_path:
        return Location(os.path.dirname(os.path.abspath(settings.config_path)), (CACHE_DIR_NAME,))
    return Location(os.getcwd(), (CACHE_DIR_NAME,))


def cache_root(settings) -> Path | None:
    """The cache folder of a run (not created), or None when its location is refused: a
    folder set by the checked tree that leaves it, or a component of it (or of its
    `<version>` folder) that is a symlink.  The reason, naming the file and, for
    `cache-dir`, the pyproject.toml, the key and its line, goes to
    `settings.cache_errors`; the run then goes on without the cache."""
    from patchaudit import __version__

    loc = _location(settings)
    if loc is None:
        return None
    parts = loc.parts + (__version__,)
    try:
        folder = open_folder(loc.base, ()) if os.path.isdir(loc.base) else None
    except OSError:
        folder = None
    try:
        for part in parts if folder is not None else ():
            try:
                nxt = folder.sub(part)  # type: ignore[union-attr]  # the loop runs only with a folder
            except Refused as exc:
                if exc.reason != "is a symlink":
                    return None  # a file, say: no cache, as before (nothing is written through it)
                origin = settings.cache_dir_origin
                if settings.cache_dir and origin is not None and exc.path != os.path.join(loc.path, __version__):
                    config, line, raw = origin
                    _refuse(
                        settings,
                        config,
                        f"[tool.patchaudit] cache-dir = {raw!r}: {_shown(exc.path)} "
                        f"is a symlink; a cache folder set by the checked tree is never "
                        f"reached through one; {_HOW_ELSEWHERE}",
                        line,
                    )
                else:
                    _refuse(
                        settings,
                        exc.path,
                        "is a symlink: the result cache is never written through one "
                        f"(a checkout can commit it to point elsewhere); {_HOW_ELSEWHERE}",
                    )
                return None
            except OSError:
                break  # missing (made safely later) or unreadable (no cache, as before)
            folder.close()  # type: ignore[union-attr]
            folder = nxt
    finally:
        if folder is not None:
            folder.close()
    root = Path(loc.path)
    LOCATIONS[str(root)] = loc
    return root


def ensure_root(root: Path) -> bool:
    """Create the cache folder with its .gitignore and CACHEDIR.TAG; False when it cannot
    be written (or a component of it is a symlink)."""
    try:
        with location_of(str(root)).open(create=True) as f:
            for name, text in ((".gitignore", _GITIGNORE), ("CACHEDIR.TAG", _CACHEDIR_TAG)):
                if f.lstat(name) is None:
                    f.replace(name, text.encode())
            return f.writable()
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
    out: list[tuple[Any, ...]] = []
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
    dozen entries), not the results of every file of the tree.

    Every folder and file of the store is reached from the root without following
    symlinks (`location_of`, `patchaudit.files.safefs`)."""

    def __init__(self, root: Path, key: str, limit: int = MAX_READ):
        from patchaudit import __version__

        self.root = root
        #: the largest shard read (`max-file-size`): a checkout's own cache folder is not trusted
        self.limit = limit
        self.folder = root / __version__
        self.store = self.folder / key
        self.key = key
        self._loc = location_of(str(root)).child(__version__)
        self._shards: dict[int, dict[tuple[str, str], tuple[bytes, Any]]] = {}
        self._mtimes: dict[int, int | None] = {}
        self.new: dict[int, dict[tuple[str, str], tuple[bytes, Any]]] = {}
        try:
            with self._loc.open(key) as st:
                self._cold = not any(_SHARD_NAME.fullmatch(n) for n, _ in st.entries())
        except OSError:
            self._cold = True

    @classmethod
    def for_run(cls, settings, codes: Iterable[str], engines: Any = None) -> "ResultCache | None":
        """The cache of this run, or None (disabled, refused or unwritable; exact mode with
        an engine whose content has no identity, a directory: pipeline/exact_cache.py)."""
        if not settings.cache:
            return None
        key = run_key(settings, codes)
        if settings.engines:
            from patchaudit.pipeline.exact_cache import exact_run_key

            extra = exact_run_key(settings, engines)
            if extra is None:
                return None
            key = hashlib.sha256(f"{key}\0{extra}".encode()).hexdigest()[:32]
        root = cache_root(settings)
        if root is None or not ensure_root(root):
            return None
        return cls(root, key, settings.max_file_size)

    @staticmethod
    def _shard(path: str, kind: str) -> int:
        return zlib.crc32(f"{kind}\0{path}".encode("utf-8", "surrogateescape")) % SHARDS

    @staticmethod
    def _name(n: int) -> str:
        return f"{n:02x}.pickle"

    def _file(self, n: int) -> Path:
        return self.store / self._name(n)

    @staticmethod
    def _load(folder: Folder, n: int, limit: int = MAX_READ) -> tuple[dict, int | None]:
        got = folder.read(ResultCache._name(n), limit)
        if got is not None:
            try:
                raw = unseal(got[0])
                data = pickle.loads(raw) if raw is not None else None
                if isinstance(data, dict):
                    return data, got[1]
            except Exception:  # truncated or from another version: a cold shard
                pass
        return {}, None

    def _read(self, n: int) -> tuple[dict, int | None]:
        try:
            with self._loc.open(self.key) as st:
                return self._load(st, n, self.limit)
        except OSError:  # missing, or not a folder of ours: a cold shard
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
        tag = seal(_STORE_TAG + self.key.encode())
        if tag is None:
            return  # no key to prove the store ours later: keep nothing
        try:
            with self._loc.open(self.key, create=True) as st:
                if st.lstat(STORE_SEAL) is None:
                    st.replace(STORE_SEAL, tag)
                for n, new in sorted(self.new.items()):
                    name = self._name(n)
                    cur = st.lstat(name)
                    mtime = cur.st_mtime_ns if cur is not None else None
                    entries = self._shards.get(n, {})
                    if mtime != self._mtimes.get(n):
                        entries, _ = self._load(st, n, self.limit)  # another run wrote meanwhile: merge
                    entries = dict(entries)
                    entries.update(new)
                    sealed = seal(pickle.dumps(entries, protocol=pickle.HIGHEST_PROTOCOL))
                    if sealed is None:
                        return
                    st.replace(name, sealed)
                    self._shards[n] = entries
                    done = st.lstat(name)
                    self._mtimes[n] = done.st_mtime_ns if done is not None else None
                self.new = {}
                self._cold = False
                st.touch()  # the store's age, for _prune: its last write
            self._prune()
        except OSError:
            pass

    # -- pruning: only what this user's runs wrote

    @staticmethod
    def _sealed_store(version: Folder, name: str) -> bool:
        """The store folder `name` is one of this user's: it carries its seal."""
        try:
            with version.sub(name) as st:
                got = st.read(STORE_SEAL)
        except OSError:
            return False
        return got is not None and unseal(got[0]) == _STORE_TAG + name.encode()

    @staticmethod
    def _remove_store(version: Folder, name: str) -> None:
        """Delete a sealed store: its sealed shards and temporary files, then the seal, then
        the folder if that left it empty.  Anything else in it stays (and so does the folder)."""
        try:
            with version.sub(name) as st:
                for entry, info in list(st.entries()):
                    if not stat.S_ISREG(info.st_mode):
                        continue
                    if _SHARD_NAME.fullmatch(entry):
                        got = st.read(entry)
                        if got is not None and unseal(got[0]) is not None:
                            st.unlink(entry)
                    elif entry.startswith(TMP_PREFIX):
                        st.unlink(entry)
                st.unlink(STORE_SEAL)
        except OSError:
            return
        version.rmdir(name)

    def _prune(self) -> None:
        """Keep the MAX_STORES most recently written stores of this user's; delete older ones
        and the single-file stores of an earlier release that carry this user's seal."""
        try:
            with self._loc.open() as version:
                stores, single = [], []
                for name, info in version.entries():
                    if stat.S_ISDIR(info.st_mode) and _STORE_NAME.fullmatch(name):
                        stores.append((info.st_mtime_ns, name))
                    elif (
                        stat.S_ISREG(info.st_mode)
                        and name.endswith(".pickle")
                        and _STORE_NAME.fullmatch(name[: -len(".pickle")])
                    ):
                        single.append(name)
                stores.sort(reverse=True)
                ours = [name for _, name in stores if self._sealed_store(version, name)]
                for name in ours[MAX_STORES:]:
                    self._remove_store(version, name)
                for name in single:
                    got = version.read(name)
                    if got is not None and unseal(got[0]) is not None:
                        version.unlink(name)
        except OSError:
            pass
