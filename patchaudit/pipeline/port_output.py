"""The files `patchaudit port` writes: each ported patch (a unified diff of the new
release as the earlier patches left it to the same with this patch's ported hunks),
the `.rej` files of the conflicts, written atomically (`files/atomic.py`).

Each file section keeps its header lines (`diff --git`, modes, `new file`, the
`---`/`+++` names), with its `index` line dropped (the blobs it named were the old
release's); hunks are recomputed from the texts (`difflib`, no junk heuristic, three
lines of context), so their headers count what they hold and `git apply` takes them
in the recipe's order.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field

from patchaudit.inputs.patches import FileSection, PatchFile

CONTEXT = 3


@dataclass
class PatchOut:
    """What one input patch becomes."""

    source: str  # the input patch
    name: str  # its file name in the output folder
    text: str = ""
    rejects: list[str] = field(default_factory=list)  # .rej text (conflicts), one block per hunk


def _range(start: int, count: int) -> str:
    if count == 0:
        return f"{start},0"
    return f"{start + 1}" if count == 1 else f"{start + 1},{count}"


def unified_hunks(before: list[str], after: list[str], before_eol: bool, after_eol: bool) -> list[str]:
    """The hunks (header and body lines) of the diff before -> after."""
    out: list[str] = []
    sm = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for group in sm.get_grouped_opcodes(CONTEXT):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        out.append(f"@@ -{_range(i1, i2 - i1)} +{_range(j1, j2 - j1)} @@")
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                out += [" " + t for t in before[a1:a2]]
                _eof(out, a2 == len(before) and not before_eol and b2 == len(after) and not after_eol)
                continue
            out += ["-" + t for t in before[a1:a2]]
            _eof(out, a2 > a1 and a2 == len(before) and not before_eol)
            out += ["+" + t for t in after[b1:b2]]
            _eof(out, b2 > b1 and b2 == len(after) and not after_eol)
    return out


def _eof(out: list[str], missing_newline: bool) -> None:
    if missing_newline:
        out.append("\\ No newline at end of file")


def section_header(patch: PatchFile, sec: FileSection, end: int) -> list[str]:
    """The section's header lines as the patch wrote them (up to its first hunk, or `end`,
    the next section's first line), without its `index` line."""
    stop = sec.hunks[0].header_line if sec.hunks else end
    return [raw for raw in patch.lines[sec.header_line - 1 : stop - 1] if not raw.startswith("index ")]


def header_for(path: str) -> list[str]:
    """The header of a section for a file the patch did not name (a hunk followed there)."""
    return [f"diff --git a/{path} b/{path}", f"--- a/{path}", f"+++ b/{path}"]


def write_outputs(outs: list[PatchOut], folder: str) -> list[str]:
    """Write each patch (and its .rej, when there are conflicts) into `folder`, each file
    whole or not at all; the paths written."""
    from patchaudit.files.atomic import write_atomic

    os.makedirs(folder, exist_ok=True)
    written: list[str] = []
    for o in outs:
        dest = os.path.join(folder, o.name)
        write_atomic(dest, o.text)
        written.append(dest)
        rej = dest + ".rej"
        if o.rejects:
            write_atomic(rej, "\n".join(o.rejects) + "\n")
            written.append(rej)
    return written


def write_in_place(outs: list[PatchOut]) -> list[str]:
    """`--write`: each input patch replaced by its port (atomically), its .rej beside it."""
    from patchaudit.files.atomic import write_atomic

    written: list[str] = []
    for o in outs:
        write_atomic(o.source, o.text)
        written.append(o.source)
        if o.rejects:
            write_atomic(o.source + ".rej", "\n".join(o.rejects) + "\n")
            written.append(o.source + ".rej")
    return written
