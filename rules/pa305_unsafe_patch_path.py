from __future__ import annotations

import re
from collections import deque

from patchaudit.inputs.patches import GIT_HEADER_RE, strip_git_prefix, unquote_path
from patchaudit.lint.rule import PATCH, Example, Rule
from patchaudit.model.findings import Severity

_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")

# git's verify_path() (read-cache.c) refuses every path with a component that is ".git"
# in any case, and, with core.protectHFS / core.protectNTFS (on by default where they
# matter, and the right thing to check for a patch that may be applied anywhere), the
# names HFS+ and NTFS read as ".git":
#: HFS+ ignores these code points when it compares names (git's utf8.c next_hfs_char)
_HFS_IGNORABLE = frozenset(
    [
        0x200C,
        0x200D,
        0x200E,
        0x200F,
        0x202A,
        0x202B,
        0x202C,
        0x202D,
        0x202E,
        0x206A,
        0x206B,
        0x206C,
        0x206D,
        0x206E,
        0x206F,
        0xFEFF,
    ]
)
#: NTFS: ".git" or its 8.3 short name "git~1", then trailing dots and spaces (dropped by
#: Windows), then the end or an alternate data stream (".git::$INDEX_ALLOCATION"); path.c
#: is_ntfs_dotgit().  ASCII case folding only, as git does.
_NTFS_DOTGIT = re.compile(r"(?:\.git|git~1)[. ]*(?::.*)?", re.I | re.A | re.S)
#: a symlink named .gitmodules (git reads it as the submodule config): is_ntfs_dotgitmodules()
#: adds "gitmod~1".."gitmod~4" and the hashed short names "gi7eba~N"
_NTFS_DOTGITMODULES = re.compile(
    r"(?:\.gitmodules|gitmod~[1-4]|gi7eba~[1-9]|gi7eb~[1-9]\d|gi7e~[1-9]\d{2}|gi7~[1-9]\d{3}"
    r"|gi~[1-9]\d{4}|g~[1-9]\d{5}|~[1-9]\d{6})[. ]*(?::.*)?",
    re.I | re.A | re.S,
)
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
#: symlinks followed while resolving one path (Linux's MAXSYMLINKS), and components
#: looked at in all (a hostile patch can make link targets of any length)
MAX_HOPS = 40
MAX_STEPS = 10_000


def _is_absolute(path: str) -> bool:
    return path.startswith(("/", "\\\\")) or bool(_DRIVE.match(path))


def _hfs_fold(comp: str) -> str:
    return "".join(ch for ch in comp if ord(ch) not in _HFS_IGNORABLE).translate(_ASCII_LOWER)


def is_dotgit(comp: str) -> bool:
    """Whether git refuses the path component as `.git` (any case, HFS+ and NTFS forms)."""
    folded = _hfs_fold(comp)
    return folded == ".git" or bool(_NTFS_DOTGIT.fullmatch(folded))


def is_dotgitmodules(comp: str) -> bool:
    folded = _hfs_fold(comp)
    return folded == ".gitmodules" or bool(_NTFS_DOTGITMODULES.fullmatch(folded))


def _components(path: str) -> list[str]:
    return path.replace("\\", "/").split("/")


def unsafe_reason(path: str, git_style: bool, symlink: bool = False) -> str | None:
    """Why a path from a patch header is unsafe to write to, or None."""
    if path in ("", "/dev/null"):
        return None
    if _is_absolute(path):
        return "is absolute"
    p = path.replace("\\", "/")
    if git_style:
        p = strip_git_prefix(p)
    parts = p.split("/")
    # `patch -pN` strips leading components: a `..` anywhere can be left over
    if ".." in parts:
        norm = "/".join(_lexical(parts))
        if norm == ".." or norm.startswith("../") or ".." in parts[1:]:
            return "climbs out of the tree with '..'"
    for comp in parts:
        if is_dotgit(comp):
            shown = "" if comp == ".git" else f" (git reads {comp!r} as '.git')"
            return (
                f"lies inside '.git'{shown}: git refuses it, and `patch` applies it to the "
                f"repository's own hooks and config"
            )
    if symlink:
        for comp in parts:
            if is_dotgitmodules(comp):
                return f"makes {comp!r} a symlink: git refuses a symlinked '.gitmodules'"
    return None


def _lexical(parts: list[str]) -> list[str]:
    out: list[str] = []
    for c in parts:
        if c in ("", "."):
            continue
        if c == ".." and out and out[-1] != "..":
            out.pop()
        else:
            out.append(c)
    return out


def link_trie(links: dict[str, str]) -> dict:
    """The symlinks a patch creates (path -> target) as a trie of path components,
    compared the way case-insensitive filesystems compare (ASCII case, HFS+ ignorables):
    `Pkg/passwd` goes through a link `pkg` there.  A node's `None` key holds
    (link path, target)."""
    root: dict = {}
    for path, dest in links.items():
        node = root
        for comp in path.split("/"):
            node = node.setdefault(_hfs_fold(comp), {})
        node.setdefault(None, (path, dest))
    return root


def resolve(parts: list[str], trie: dict, follow_last: bool):
    """Resolve path components through the symlinks the patch creates (`link_trie`), as
    a path resolver does: a `..` after a link climbs from where the link points.

    Returns (status, components, links followed): status is "ok", "escapes" (climbs
    above the tree), "absolute" (a link to an absolute path) or "loop" (more than
    MAX_HOPS links, or MAX_STEPS components).  Each step costs O(1)."""
    pending = deque(parts)
    out: list[str] = []
    nodes: list[dict | None] = []  # the trie node of each prefix of `out` (None: no link below)
    via: list[str] = []
    steps = 0
    while pending:
        steps += 1
        if steps > MAX_STEPS:
            return "loop", None, via
        comp = pending.popleft()
        if comp in ("", "."):
            continue
        if comp == "..":
            if not out:
                return "escapes", None, via
            out.pop()
            nodes.pop()
            continue
        parent = nodes[-1] if nodes else trie
        node = parent.get(_hfs_fold(comp)) if parent is not None else None
        out.append(comp)
        nodes.append(node)
        if not pending and not follow_last:
            break
        link = node.get(None) if node is not None else None
        if link is None:
            continue
        via.append(link[0])
        if len(via) > MAX_HOPS:
            return "loop", None, via
        out.pop()
        nodes.pop()
        if _is_absolute(link[1]):
            return "absolute", None, via
        pending.extendleft(reversed(_components(link[1])))
    return "ok", out, via


def _where(status: str, out: list[str] | None) -> str:
    if status in ("escapes", "absolute"):
        return "outside the tree"
    if status == "loop":
        return f"nowhere: the symlinks form a loop (more than {MAX_HOPS} links)"
    assert out is not None
    if any(is_dotgit(c) for c in out):
        return f"into '.git' ({'/'.join(out)!r})"
    return f"to {'/'.join(out) or '.'!r}"


def _section_names(patch, sec):
    """(label, path, has a/ b/ prefix) for every name a file section gives its file."""
    git_style = sec.git or sec.path != sec.raw_path
    names = [("source", sec.source_path, git_style), ("target", sec.target_path, git_style)]
    # the `diff --git a/X b/Y` line: the ---/+++ lines replace its names in the section
    first = patch.lines[sec.header_line - 1] if 0 < sec.header_line <= len(patch.lines) else ""
    m = GIT_HEADER_RE.match(first) if first.startswith("diff --git ") else None
    if m:
        names += [("source", unquote_path(m.group("a")), True), ("target", unquote_path(m.group("b")), True)]
    names += [
        ("rename from", sec.rename_from, False),
        ("rename to", sec.rename_to, False),
        ("copy from", sec.copy_from, False),
        ("copy to", sec.copy_to, False),
    ]
    return [(label, path, prefixed) for label, path, prefixed in names if path and path != "/dev/null"]


class UnsafePatchPath(Rule):
    """
    Flags patch paths that are absolute, climb out with `..`, lie in `.git`, or go through a symlink.

    ## What it does
    Checks every path a patch names (`---`/`+++` lines, both names of git's
    `diff --git` line, `rename from/to`, `copy from/to`, deleted files):
    absolute paths (`/etc/...`, `C:\\...`), paths with `..` components, and
    paths that git's `verify_path` refuses as `.git`: in any case (`.GIT/config`),
    at any depth (`sub/.git/`), and in the forms HFS+ and NTFS read as `.git`
    (`.g\\u200cit` with an ignorable code point, `git~1`, `.git ` or `.git.`,
    `.git::$INDEX_ALLOCATION`); a symlinked `.gitmodules`.  Git's C-quoted paths
    (`"b/\\056git/config"`) are read unquoted.

    Symlinks the patch creates or retargets (`new file mode 120000`, or a
    `120000` index line) are resolved the way a path resolver does, through each
    other (a `..` after a link climbs from where the link points), up to 40
    links: a symlink whose target ends up outside the tree or in `.git` is
    flagged, and so is every path written through a symlink the patch creates
    (with where the write lands), and a deleted path whose resolved place is
    outside the tree or in `.git`.

    ## Why is this bad?
    A patch applied in CI or in a Docker build (`patch -p1 < sglang.patch`,
    `git apply`) writes where its headers say.  GNU patch's history
    (CVE-2010-4651 `../` traversal, CVE-2018-1000156 and CVE-2019-13636
    symlink following) shows the attack: a contributed patch that writes
    outside the engine tree, into the image or the runner.  A write into
    `.git` (a hook, `core.fsmonitor` in the config) runs code at the next git
    command in that checkout; git refuses such paths, GNU patch does not.  An
    engine patch never needs either.

    ## Example
    ```diff
    --- a/../../etc/profile.d/x.sh
    +++ b/../../etc/profile.d/x.sh
    ```

    ## Use instead
    Paths relative to the engine checkout, without `..`, outside `.git`, and
    no symlinks.

    ## Incident
    GNU patch CVE-2010-4651, CVE-2018-1000156, CVE-2019-13636; git
    CVE-2014-9390 (`.GIT`, HFS+ and NTFS names of `.git`, `git~1`) and
    CVE-2019-1352 (NTFS alternate data streams).
    """

    code = "PA305"
    name = "unsafe-patch-path"
    severity = Severity.ERROR
    kinds = frozenset({PATCH})

    VALID = [
        Example(
            """\
            --- a/python/sglang/srt/x.py
            +++ b/python/sglang/srt/x.py
            @@ -1 +1 @@
            -a
            +b
            """,
            kind="patch",
        ),
        Example(
            """\
            --- /dev/null
            +++ b/python/sglang/srt/new.py
            @@ -0,0 +1 @@
            +a = 1
            """,
            kind="patch",
            title="a new file",
        ),
        Example(
            """\
            diff --git a/docs/link b/docs/link
            new file mode 120000
            --- /dev/null
            +++ b/docs/link
            @@ -0,0 +1 @@
            +../README.md
            \\ No newline at end of file
            """,
            kind="patch",
            title="a symlink that stays inside the tree",
        ),
        Example(
            """\
            --- a/.github/workflows/ci.yml
            +++ b/.github/workflows/ci.yml
            @@ -1 +1 @@
            -name: ci
            +name: CI
            --- a/docs/.gitignore
            +++ b/docs/.gitignore
            @@ -1 +1 @@
            -*.pyc
            +__pycache__/
            --- a/.gitattributes
            +++ b/.gitattributes
            @@ -1 +1 @@
            -*.py text
            +*.py text eol=lf
            --- a/.gitmodules
            +++ b/.gitmodules
            @@ -1 +1 @@
            -[submodule "x"]
            +[submodule "y"]
            --- a/.git-blame-ignore-revs
            +++ b/.git-blame-ignore-revs
            @@ -1 +1 @@
            -aaaa
            +bbbb
            """,
            kind="patch",
            title="dot-files git itself accepts",
        ),
        Example(
            """\
            --- a/vendor/foo.git/x.py
            +++ b/vendor/foo.git/x.py
            @@ -1 +1 @@
            -a
            +b
            --- a/git/hooks.py
            +++ b/git/hooks.py
            @@ -1 +1 @@
            -a
            +b
            --- a/sub/.gitx/y
            +++ b/sub/.gitx/y
            @@ -1 +1 @@
            -a
            +b
            """,
            kind="patch",
            title="names that only look like .git",
        ),
        Example(
            """\
            diff --git a/a/up b/a/up
            new file mode 120000
            --- /dev/null
            +++ b/a/up
            @@ -0,0 +1 @@
            +..
            \\ No newline at end of file
            diff --git a/a/b/sib b/a/b/sib
            new file mode 120000
            --- /dev/null
            +++ b/a/b/sib
            @@ -0,0 +1 @@
            +../up/docs
            \\ No newline at end of file
            """,
            kind="patch",
            title="a chain of symlinks that stays inside the tree",
        ),
    ]
    INVALID = [
        Example(
            """\
            --- a/../../etc/profile
            +++ b/../../etc/profile
            @@ -1 +1 @@
            -a
            +b
            """,
            kind="patch",
            line=1,
            contains="'..'",
        ),
        Example(
            """\
            --- /etc/passwd
            +++ /etc/passwd
            @@ -1 +1 @@
            -a
            +b
            """,
            kind="patch",
            line=1,
            contains="absolute",
        ),
        Example(
            """\
            diff --git a/old.py b/old.py
            similarity index 100%
            rename from old.py
            rename to ../../outside.py
            """,
            kind="patch",
            line=1,
            contains="rename",
        ),
        Example(
            """\
            diff --git a/pkg b/pkg
            new file mode 120000
            --- /dev/null
            +++ b/pkg
            @@ -0,0 +1 @@
            +/etc
            \\ No newline at end of file
            diff --git a/pkg/passwd b/pkg/passwd
            --- a/pkg/passwd
            +++ b/pkg/passwd
            @@ -1 +1 @@
            -root:x:0:0
            +root::0:0
            """,
            kind="patch",
            count=2,
            title="CVE-2019-13636 shape: a symlink out, then a write through it",
        ),
        Example(
            """\
            diff --git a/.git/hooks/pre-commit b/.git/hooks/pre-commit
            new file mode 100755
            --- /dev/null
            +++ b/.git/hooks/pre-commit
            @@ -0,0 +1,2 @@
            +#!/bin/sh
            +echo hook
            """,
            kind="patch",
            line=1,
            contains="'.git'",
            title="a new git hook",
        ),
        Example(
            """\
            --- a/.git/config
            +++ b/.git/config
            @@ -1 +1 @@
            -a
            +b
            """,
            kind="patch",
            line=1,
            contains="'.git'",
            title="the repository config",
        ),
        Example(
            """\
            --- a/.GIT/config
            +++ b/.GIT/config
            @@ -1 +1 @@
            -a
            +b
            """,
            kind="patch",
            line=1,
            contains="'.git'",
            title="upper case",
        ),
        Example(
            """\
            --- a/.Git/hooks/post-checkout
            +++ b/.Git/hooks/post-checkout
            @@ -1 +1 @@
            -a
            +b
            """,
            kind="patch",
            line=1,
            contains="'.git'",
            title="mixed case",
        ),
        Example(
            """\
            --- a/python/sglang/.git/config
            +++ b/python/sglang/.git/config
            @@ -1 +1 @@
            -a
            +b
            """,
            kind="patch",
            line=1,
            contains="'.git'",
            title="a nested repository",
        ),
        Example(
            """\
            --- a/.g\u200cit/config
            +++ b/.g\u200cit/config
            @@ -1 +1 @@
            -a
            +b
            """,
            kind="patch",
            line=1,
            contains="'.git'",
            title="HFS+ ignores a zero-width non-joiner",
        ),
        Example(
            """\
            --- a/.g\ufeffIT/hooks/pre-commit
            +++ b/.g\ufeffIT/hooks/pre-commit
            @@ -1 +1 @@
            -a
            +b
            """,
            kind="patch",
            line=1,
            contains="'.git'",
            title="HFS+ ignores a BOM",
        ),
        Example(
            """\
            --- a/git~1/config
            +++ b/git~1/config
            @@ -1 +1 @@
            -a
            +b
            """,
            kind="patch",
            line=1,
            contains="'.git'",
            title="the NTFS short name",
        ),
        Example(
            """\
            --- a/.git /config
            +++ b/.git /config
            @@ -1 +1 @@
            -a
            +b
            """,
            kind="patch",
            line=1,
            contains="'.git'",
            title="NTFS drops a trailing space",
        ),
        Example(
            """\
            --- a/.git../config
            +++ b/.git../config
            @@ -1 +1 @@
            -a
            +b
            """,
            kind="patch",
            line=1,
            contains="'.git'",
            title="NTFS drops trailing dots",
        ),
        Example(
            """\
            --- a/.git::$INDEX_ALLOCATION/config
            +++ b/.git::$INDEX_ALLOCATION/config
            @@ -1 +1 @@
            -a
            +b
            """,
            kind="patch",
            line=1,
            contains="'.git'",
            title="an NTFS stream name",
        ),
        Example(
            """\
            diff --git "a/\\056git/config" "b/\\056git/config"
            --- "a/\\056git/config"
            +++ "b/\\056git/config"
            @@ -1 +1 @@
            -a
            +b
            """,
            kind="patch",
            line=1,
            contains="'.git'",
            title="a git-quoted path with an octal escape",
        ),
        Example(
            """\
            diff --git a/tools/hook.sh b/tools/hook.sh
            similarity index 100%
            rename from tools/hook.sh
            rename to .git/hooks/pre-push
            """,
            kind="patch",
            line=1,
            contains="rename to",
            title="a rename into .git",
        ),
        Example(
            """\
            diff --git a/tools/hook.sh b/.git/hooks/pre-push
            similarity index 100%
            copy from tools/hook.sh
            copy to .git/hooks/pre-push
            """,
            kind="patch",
            line=1,
            contains="'.git'",
            title="a copy into .git",
        ),
        Example(
            """\
            --- a/.git/index
            +++ /dev/null
            @@ -1 +0,0 @@
            -a
            """,
            kind="patch",
            line=1,
            contains="source",
            title="a deletion inside .git",
        ),
        Example(
            """\
            --- a/python/sglang/srt/x.py
            +++ b/.git/config
            @@ -1 +1 @@
            -a
            +b
            """,
            kind="patch",
            line=1,
            contains="target",
            title="--- and +++ name different files",
        ),
        Example(
            """\
            diff --git a/.git/config b/.git/config
            --- a/python/sglang/srt/x.py
            +++ b/python/sglang/srt/x.py
            @@ -1 +1 @@
            -a
            +b
            """,
            kind="patch",
            line=1,
            contains="'.git'",
            title="diff --git names a file the ---/+++ lines do not",
        ),
        Example(
            """\
            diff --git a/.gitmodules b/.gitmodules
            new file mode 120000
            --- /dev/null
            +++ b/.gitmodules
            @@ -0,0 +1 @@
            +docs/modules.txt
            \\ No newline at end of file
            """,
            kind="patch",
            line=1,
            contains=".gitmodules",
            title="a symlinked .gitmodules",
        ),
        Example(
            """\
            diff --git a/a/up b/a/up
            new file mode 120000
            --- /dev/null
            +++ b/a/up
            @@ -0,0 +1 @@
            +..
            \\ No newline at end of file
            diff --git a/a/b/up2 b/a/b/up2
            new file mode 120000
            --- /dev/null
            +++ b/a/b/up2
            @@ -0,0 +1 @@
            +../up/..
            \\ No newline at end of file
            diff --git a/a/b/up2/etc/passwd b/a/b/up2/etc/passwd
            --- a/a/b/up2/etc/passwd
            +++ b/a/b/up2/etc/passwd
            @@ -1 +1 @@
            -a
            +b
            """,
            kind="patch",
            count=2,
            line=13,
            contains="points out of the tree",
            title="a chain of symlinks, each inside on paper",
        ),
        Example(
            """\
            diff --git a/a/b/up b/a/b/up
            new file mode 120000
            --- /dev/null
            +++ b/a/b/up
            @@ -0,0 +1 @@
            +../..
            \\ No newline at end of file
            diff --git a/a/b/up2 b/a/b/up2
            new file mode 120000
            --- /dev/null
            +++ b/a/b/up2
            @@ -0,0 +1 @@
            +up/../..
            \\ No newline at end of file
            diff --git a/a/b/up2/x.sh b/a/b/up2/x.sh
            --- /dev/null
            +++ b/a/b/up2/x.sh
            @@ -0,0 +1 @@
            +echo x
            """,
            kind="patch",
            count=2,
            line=13,
            contains="points out of the tree",
            title="a symlink through a symlink",
        ),
        Example(
            """\
            diff --git a/hooks b/hooks
            new file mode 120000
            --- /dev/null
            +++ b/hooks
            @@ -0,0 +1 @@
            +.git/hooks
            \\ No newline at end of file
            diff --git a/hooks/pre-commit b/hooks/pre-commit
            --- /dev/null
            +++ b/hooks/pre-commit
            @@ -0,0 +1 @@
            +echo hook
            """,
            kind="patch",
            count=2,
            line=6,
            contains="'.git'",
            title="a symlink into .git, then a write through it",
        ),
        Example(
            """\
            diff --git a/x b/x
            new file mode 120000
            --- /dev/null
            +++ b/x
            @@ -0,0 +1 @@
            +y
            \\ No newline at end of file
            diff --git a/y b/y
            new file mode 120000
            --- /dev/null
            +++ b/y
            @@ -0,0 +1 @@
            +x
            \\ No newline at end of file
            diff --git a/x/z.py b/x/z.py
            --- /dev/null
            +++ b/x/z.py
            @@ -0,0 +1 @@
            +a = 1
            """,
            kind="patch",
            line=15,
            contains="loop",
            title="a write through a symlink loop",
        ),
        Example(
            """\
            diff --git a/conf b/conf
            new file mode 120000
            --- /dev/null
            +++ b/conf
            @@ -0,0 +1 @@
            +.git/config
            \\ No newline at end of file
            diff --git a/conf b/conf
            --- a/conf
            +++ b/conf
            @@ -1 +1 @@
            -a
            +b
            """,
            kind="patch",
            count=2,
            line=6,
            title="a symlink, then the file it names is written as a regular file",
        ),
    ]

    def check_patch(self, unit) -> None:
        patch = unit.patch
        # every symlink the patch creates or retargets: path -> (target, patch line of the target)
        links: dict[str, tuple[str, int]] = {}
        for sec in patch.sections:
            if sec.is_symlink and sec.hunks:
                added = [l for h in sec.hunks for l in h.lines if l.kind == "+"]
                if added:
                    key = "/".join(_lexical(_components(sec.path)))
                    links.setdefault(key, (added[0].text, added[0].patch_line))
        targets = link_trie({k: v[0] for k, v in links.items()})
        for sec in patch.sections:
            flagged: set[str] = set()
            for label, path, prefixed in _section_names(patch, sec):
                bare = strip_git_prefix(path) if prefixed else path
                if bare in flagged:
                    continue
                reason = unsafe_reason(path, prefixed, symlink=sec.is_symlink)
                if reason:
                    flagged.add(bare)
                    self.report_at(
                        sec.header_line,
                        0,
                        sec.header_line,
                        0,
                        f"{label} path {path!r} {reason}: applying this patch writes outside the tree"
                        if "'..'" in reason or "absolute" in reason
                        else f"{label} path {path!r} {reason}",
                    )
                    continue
                if not targets:
                    continue
                # the section's own symlink, a deleted file and a rename's source are not followed
                # at their last component; content written to a path is
                reads_only = label in ("rename from", "copy from")
                follow_last = not (sec.is_symlink or sec.is_deleted or reads_only)
                status, out, via = resolve(_components(bare), targets, follow_last)
                if not via:
                    continue
                harmful = status != "ok" or any(is_dotgit(c) for c in out or ())
                if (sec.is_deleted or reads_only) and not harmful:
                    continue
                flagged.add(bare)
                link = via[0]
                self.report_at(
                    sec.header_line,
                    0,
                    sec.header_line,
                    0,
                    f"path {bare!r} goes through {link!r}, a symlink this patch creates "
                    f"(line {links[link][1]}): applying it writes {_where(status, out)}",
                )
        for rel, (dest, line) in links.items():
            if _is_absolute(dest):
                status, out, via = "absolute", None, []
            else:
                status, out, via = resolve(_components(rel)[:-1] + _components(dest), targets, follow_last=True)
            chain = f" (through {', '.join(repr(v) for v in via)})" if via else ""
            if status in ("escapes", "absolute"):
                self.report_at(
                    line,
                    0,
                    line,
                    0,
                    f"the patch creates symlink {rel!r} -> {dest!r}, which points out of the tree{chain}",
                )
            elif status == "ok" and any(is_dotgit(c) for c in out or ()):
                self.report_at(
                    line,
                    0,
                    line,
                    0,
                    f"the patch creates symlink {rel!r} -> {dest!r}, which points into '.git'{chain}: "
                    f"writes through it rewrite the repository's hooks or config",
                )
