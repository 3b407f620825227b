"""The user's own cache folder, and reaching cache files without following symlinks.

What the rule index (patchaudit/config/registry.py) and the result cache
(patchaudit/pipeline/cache.py) both keep on disk goes through here:
- `user_cache_dir`: the per-user folder for what depends on the installed
  patchaudit alone, as black keeps its cache;
- `seal`/`unseal`: pickles carry an HMAC of this user's key (kept in that folder,
  or in a private folder of the temporary directory), and only sealed ones are
  ever unpickled: a cache folder in a hostile checkout could ship any pickle;
- `Location`, `location_of`, `atomic_write`, `read_file`: every component below a
  trusted base is opened without following symlinks (patchaudit/files/safefs.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import tempfile
from pathlib import Path

from patchaudit.files.safefs import Folder, open_folder


def user_cache_dir() -> str | None:
    """The per-user folder for what depends on the installed patchaudit alone (the rule
    index), as black keeps its cache: `$XDG_CACHE_HOME/patchaudit/<version>`, else
    `~/.cache/patchaudit/<version>`; None without a home."""
    from patchaudit import __version__

    base = os.environ.get("XDG_CACHE_HOME") or ""
    if not os.path.isabs(base):
        home = os.path.expanduser("~")
        if home == "~" or not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    return os.path.join(base, "patchaudit", __version__)


def engine_cache_dir() -> str | None:
    """Where engines downloaded by version are kept (patchaudit/engine/resolve.py):
    `$XDG_CACHE_HOME/patchaudit/engines`, else `~/.cache/patchaudit/engines` (a wheel does
    not depend on patchaudit's version: shared by every version); None without a home."""
    base = _user_base()
    return None if base is None else os.path.join(base, "patchaudit", "engines")


# --------------------------------------------------------------------------
# sealed pickles: the cache folder sits in the checked tree, which may be hostile

_KEY: list[bytes | None] = []


def _user_base() -> str | None:
    """`$XDG_CACHE_HOME`, else `~/.cache` (the folder `user_cache_dir` is in)."""
    folder = user_cache_dir()
    return None if folder is None else os.path.dirname(os.path.dirname(folder))


def _key_folders() -> list["Location"]:
    """Where this user's key may live: the user's cache folder, else a folder of the
    temporary directory that this user owns and nobody else can write.  The base
    (`$XDG_CACHE_HOME`, the temporary directory) is trusted; the folder in it is
    never a symlink (another user could plant one in a shared one)."""
    out = []
    base = _user_base()
    if base is not None:
        out.append(Location(base, ("patchaudit",), private=True))
    getuid = getattr(os, "getuid", None)
    if getuid is not None:
        out.append(Location(tempfile.gettempdir(), (f"patchaudit-{getuid()}",), private=True))
    return out


def _secret() -> bytes | None:
    """This user's cache key: 32 random bytes in the user's cache folder (or a private
    folder of the temporary directory), created (mode 0600) on first use; None when
    there is no such place to keep it."""
    if _KEY:
        return _KEY[0]
    key = None
    for loc in _key_folders():
        try:
            with loc.open(create=True) as folder:
                for _ in range(2):
                    got = folder.read("cache-key")
                    if got is not None:
                        key = got[0] if len(got[0]) == 32 else None
                        break
                    if folder.lstat("cache-key") is not None:
                        break  # there, and not a regular file of ours: not a key
                    import secrets

                    if folder.create("cache-key", secrets.token_bytes(32), 0o600):
                        continue  # read back what was written
                    # another run created it meanwhile: read it
        except OSError:
            continue
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


# --------------------------------------------------------------------------
# where the cache lives


@dataclasses.dataclass(frozen=True)
class Location:
    """A folder of the cache: `base` is trusted (opened as it is); each of `parts` below
    it is a real folder, never a symlink (created when missing)."""

    base: str
    parts: tuple[str, ...] = ()
    private: bool = False  # the user's own folders: owned by this user, mode 0700

    @property
    def path(self) -> str:
        return os.path.join(self.base, *self.parts)

    def child(self, *more: str) -> "Location":
        return Location(self.base, self.parts + tuple(more), self.private)

    def open(self, *more: str, create: bool = False) -> Folder:
        return open_folder(
            self.base,
            self.parts + tuple(more),
            create=create,
            mode=0o700 if self.private else 0o777,
            private=self.private,
        )


#: cache roots checked by `cache_root`, by path: how to reach them safely
LOCATIONS: dict[str, Location] = {}


def location_of(folder: str) -> Location:
    """How to reach `folder`: below a root `cache_root` checked, or in the user's cache
    folder; any other folder is the caller's own (trusted as it is)."""
    known = dict(LOCATIONS)
    base = _user_base()
    if base is not None:
        user = Location(base, ("patchaudit",), private=True)
        known[str(Path(user.path))] = user
    cur = Path(folder)
    rest: list[str] = []
    while True:
        loc = known.get(str(cur))
        if loc is not None:
            return loc.child(*reversed(rest))
        if cur.parent == cur or not cur.name:
            break
        rest.append(cur.name)
        cur = cur.parent
    return Location(str(folder))


def atomic_write(path: str, data: bytes, mode: int = 0o644) -> None:
    """Write `path` whole (a temporary file renamed over it), its folders reached and
    made as `location_of` says: never through a symlink below a trusted base."""
    folder, name = os.path.split(path)
    with location_of(folder).open(create=True) as f:
        f.replace(name, data, mode)


def read_file(path: str) -> bytes | None:
    """The regular file `path`, reached as `atomic_write` writes it; None for anything else."""
    folder, name = os.path.split(path)
    try:
        with location_of(folder).open() as f:
            got = f.read(name)
    except OSError:
        return None
    return None if got is None else got[0]
