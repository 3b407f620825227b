from __future__ import annotations

import posixpath
import re

from patchaudit.findings import Severity
from patchaudit.inputs.patches import strip_git_prefix
from patchaudit.rule import PATCH, Example, Rule

_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")


def unsafe_reason(path: str, git_style: bool) -> str | None:
    """Why a path from a patch header is unsafe to write to, or None."""
    if path in ("", "/dev/null"):
        return None
    if path.startswith("/") or _DRIVE.match(path) or path.startswith("\\\\"):
        return "is absolute"
    p = path.replace("\\", "/")
    if git_style:
        p = strip_git_prefix(p)
    parts = p.split("/")
    # `patch -pN` strips leading components: a `..` anywhere can be left over
    if ".." in parts:
        norm = posixpath.normpath(p)
        if norm == ".." or norm.startswith("../") or ".." in parts[1:]:
            return "climbs out of the tree with '..'"
    return None


class UnsafePatchPath(Rule):
    """
    Flags patch target paths that are absolute, climb out with `..`, or go through a symlink.

    ## What it does
    Checks every path a patch names (`---`/`+++` lines, git's `diff --git`,
    `rename from/to`, `copy from/to`): absolute paths (`/etc/...`, `C:\\...`),
    paths with `..` components, and paths that pass through a symlink the same
    patch creates (a `new file mode 120000` section), or a symlink whose target
    is absolute or climbs out of the tree.

    ## Why is this bad?
    A patch applied in CI or in a Docker build (`patch -p1 < sglang.patch`,
    `git apply`) writes where its headers say.  GNU patch's history
    (CVE-2010-4651 `../` traversal, CVE-2018-1000156 and CVE-2019-13636
    symlink following) shows the attack: a contributed patch that writes
    outside the engine tree, into the image or the runner.  An engine patch
    never needs to.

    ## Example
    ```diff
    --- a/../../etc/profile.d/x.sh
    +++ b/../../etc/profile.d/x.sh
    ```

    ## Use instead
    Paths relative to the engine checkout, without `..`, and no symlinks.

    ## Incident
    GNU patch CVE-2010-4651, CVE-2018-1000156, CVE-2019-13636.
    """

    code = "PA305"
    name = "unsafe-patch-path"
    severity = Severity.ERROR
    kinds = frozenset({PATCH})

    VALID = [
        Example("""\
            --- a/python/sglang/srt/x.py
            +++ b/python/sglang/srt/x.py
            @@ -1 +1 @@
            -a
            +b
            """, kind="patch"),
        Example("""\
            --- /dev/null
            +++ b/python/sglang/srt/new.py
            @@ -0,0 +1 @@
            +a = 1
            """, kind="patch", title="a new file"),
        Example("""\
            diff --git a/docs/link b/docs/link
            new file mode 120000
            --- /dev/null
            +++ b/docs/link
            @@ -0,0 +1 @@
            +../README.md
            \\ No newline at end of file
            """, kind="patch", title="a symlink that stays inside the tree"),
    ]
    INVALID = [
        Example("""\
            --- a/../../etc/profile
            +++ b/../../etc/profile
            @@ -1 +1 @@
            -a
            +b
            """, kind="patch", line=1, contains="'..'"),
        Example("""\
            --- /etc/passwd
            +++ /etc/passwd
            @@ -1 +1 @@
            -a
            +b
            """, kind="patch", line=1, contains="absolute"),
        Example("""\
            diff --git a/old.py b/old.py
            similarity index 100%
            rename from old.py
            rename to ../../outside.py
            """, kind="patch", line=1, contains="rename"),
        Example("""\
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
            """, kind="patch", count=2, title="CVE-2019-13636 shape: a symlink out, then a write through it"),
    ]

    def check_patch(self, unit) -> None:
        patch = unit.patch
        links: dict[str, int] = {}
        for sec in patch.sections:
            git_style = sec.git or sec.path != sec.raw_path
            seen: set[str] = set()
            flagged: set[str] = set()
            for label, path in (("source", sec.source_path), ("target", sec.target_path),
                                ("rename from", sec.rename_from), ("rename to", sec.rename_to),
                                ("copy from", sec.copy_from), ("copy to", sec.copy_to)):
                if not path or path in seen:
                    continue
                seen.add(path)
                prefixed = git_style and label in ("source", "target")
                reason = unsafe_reason(path, prefixed)
                bare = strip_git_prefix(path) if prefixed else path
                if reason and bare not in flagged:
                    flagged.add(bare)
                    self.report_at(sec.header_line, 0, sec.header_line, 0,
                                   f"{label} path {path!r} {reason}: applying this patch writes outside the tree")
            rel = sec.path
            for link, line in links.items():
                if rel.startswith(link + "/"):
                    self.report_at(sec.header_line, 0, sec.header_line, 0,
                                   f"path {rel!r} goes through {link!r}, a symlink this patch creates "
                                   f"(line {line}): applying it writes where the link points")
            if sec.is_symlink and sec.hunks:
                added = [l for h in sec.hunks for l in h.lines if l.kind == "+"]
                if added:
                    dest = added[0].text
                    links[rel] = sec.header_line
                    where = posixpath.normpath(posixpath.join(posixpath.dirname(rel), dest))
                    if dest.startswith("/") or where == ".." or where.startswith("../"):
                        self.report_at(added[0].patch_line, 0, added[0].patch_line, 0,
                                       f"the patch creates symlink {rel!r} -> {dest!r}, which points out of the tree")
