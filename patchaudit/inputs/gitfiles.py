"""Reading a git repository's files as data (refs, `packed-refs`, `HEAD`, `shallow`,
the object folder): no git runs here, and every file is read by the one guarded
reader (`patchaudit.files.reader`): a regular file only, bounded."""

from __future__ import annotations

import os
import re

from patchaudit.files.observe import unstable
from patchaudit.files.reader import ReadError, TooLarge, read_bytes
from patchaudit.inputs.gitrun import GitError, NotARepository

HEX = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
HEX_PREFIX = re.compile(r"[0-9a-fA-F]{4,64}")
_BAD_REF_CHARS = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")
PSEUDO_REFS = ("ORIG_HEAD", "FETCH_HEAD", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD")
MAX_REF_FILE = 4096
MAX_PACKED_REFS = 512 * 1024 * 1024
MAX_REFS = 2_000_000


def read_small(path: str, limit: int) -> bytes | None:
    """A regular file's bytes (at most `limit`), or None if it is missing; never
    opens a FIFO or a device (which could block)."""
    try:
        return read_bytes(path, limit)
    except TooLarge:
        raise GitError(f"{path} is larger than {limit} bytes") from None
    except ReadError as exc:
        if isinstance(exc.cause, (FileNotFoundError, NotADirectoryError)):
            return None
        if isinstance(exc.cause, OSError):  # (a symlink loop, no permission): as the OS says it
            raise exc.cause from None
        raise GitError(f"{path} is not a regular file") from None


def _is_gitdir(d: str) -> bool:
    return os.path.isfile(os.path.join(d, "HEAD")) and (
        os.path.isfile(os.path.join(d, "commondir"))
        or (os.path.isdir(os.path.join(d, "objects")) and os.path.isdir(os.path.join(d, "refs")))
    )


def find_gitdir(path: str) -> str:
    """The git directory of `path` (a work tree with `.git`, a `.git` file, or a git
    directory itself), found from the files alone and only at `path` (never above)."""
    unstable("it read a git repository")  # refs and objects are not noted (files/observe.py)
    if not os.path.exists(path):
        raise FileNotFoundError(path)
    dotgit = os.path.join(path, ".git")
    if os.path.isdir(dotgit):
        gd = dotgit
    elif os.path.isfile(dotgit):
        data = read_small(dotgit, MAX_REF_FILE) or b""
        text = data.decode("utf-8", "surrogateescape").strip()
        if not text.startswith("gitdir:"):
            raise NotARepository(f"{path}: .git is not a git directory nor a 'gitdir:' file")
        gd = os.path.join(path, text[len("gitdir:") :].strip())
    elif _is_gitdir(path):
        gd = path
    else:
        raise NotARepository(f"{path} is not a git repository")
    gd = os.path.abspath(gd)
    if not _is_gitdir(gd):
        raise NotARepository(f"{path} is not a git repository")
    return gd


def refname_ok(name: str) -> bool:
    """A ref name as `git check-ref-format` would take it, under refs/."""
    if not name.startswith("refs/") or _BAD_REF_CHARS.search(name) or ".." in name or "@{" in name:
        return False
    if name.endswith(("/", ".")) or "//" in name:
        return False
    return all(c and not c.startswith(".") and not c.endswith(".lock") for c in name.split("/"))


def ref_value(data: bytes) -> tuple[str, str] | None:
    """('sha', hex) or ('sym', target) from a loose ref's content; None if invalid."""
    text = data.decode("utf-8", "surrogateescape")
    if text.endswith("\n"):
        text = text[:-1]
    if "\n" in text or "\r" in text:
        return None
    if text.startswith("ref:"):
        target = text[4:].strip()
        return ("sym", target) if refname_ok(target) else None
    if HEX.fullmatch(text):
        return ("sha", text)
    return None


class Refs:
    """An engine's refs, read as data: name -> ('sha', hex) | ('sym', target)."""

    def __init__(self) -> None:
        self.refs: dict[str, tuple[str, str]] = {}
        self.lengths: set[int] = set()

    def add(self, name: str, value: tuple[str, str] | None) -> None:
        if value is None or not refname_ok(name):
            return
        if len(self.refs) >= MAX_REFS and name not in self.refs:
            raise GitError(f"more than {MAX_REFS} refs")
        if value[0] == "sha":
            self.lengths.add(len(value[1]))
        self.refs[name] = value

    def read_packed(self, path: str) -> None:
        data = read_small(path, MAX_PACKED_REFS)
        if not data:
            return
        for line in data.split(b"\n"):
            if not line or line[:1] in (b"#", b"^"):
                continue
            sha, _, name = line.partition(b" ")
            sha_s, name_s = sha.decode("ascii", "replace"), name.decode("utf-8", "surrogateescape")
            if HEX.fullmatch(sha_s):
                self.add(name_s, ("sha", sha_s))

    def read_loose(self, root: str, prefix: str = "refs") -> None:
        """Loose refs under root/refs, walked without following symlinks."""
        stack = [(os.path.join(root, prefix), prefix)]
        while stack:
            d, name = stack.pop()
            try:
                with os.scandir(d) as it:
                    entries = list(it)
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as exc:
                raise GitError(f"cannot read {d}: {exc.strerror}") from None
            for e in entries:
                full = f"{name}/{e.name}"
                if e.is_dir(follow_symlinks=False):
                    stack.append((e.path, full))
                elif e.is_file(follow_symlinks=False):
                    try:
                        data = read_small(e.path, MAX_REF_FILE)
                    except GitError:
                        continue
                    if data is not None:
                        self.add(full, ref_value(data))


def check_object_dir(objects: str, depth: int = 0) -> None:
    """No FIFO, socket or device where git will open object files (it would block
    or never end); alternates are checked the same way, as git follows them."""
    if depth > 5:
        return
    if not os.path.isdir(objects):
        raise GitError(f"{objects} is not a folder")
    try:
        tops = list(os.scandir(objects))
    except OSError as exc:
        raise GitError(f"cannot read {objects}: {exc.strerror}") from None
    for top in tops:
        try:
            subs = list(os.scandir(top.path)) if top.is_dir() else [top]
        except OSError:
            continue
        for e in subs:
            try:
                if e.is_file() or e.is_dir() or (e.is_symlink() and not os.path.exists(e.path)):
                    continue  # (a dangling link: git skips it too)
            except OSError:
                continue
            raise GitError(f"{e.path} is not a regular file")
    alt = read_small(os.path.join(objects, "info", "alternates"), 1 << 20)
    for line in (alt or b"").decode("utf-8", "surrogateescape").splitlines():
        line = line.strip()
        if line and not line.startswith("#") and not line.startswith('"'):
            check_object_dir(os.path.normpath(os.path.join(objects, line)), depth + 1)
