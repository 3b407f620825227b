"""One hunk, compiled for the applier: its two directions (`Side`), as GNU's pch.c holds
them, and the file's lines as GNU patch reads them (`split_lines`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from patchaudit.inputs.hunkspec import HunkSpec


def split_lines(text: str) -> tuple[list[str], bool]:
    """Split file text into lines without terminators, as GNU patch reads it.

    Only ``"\\n"`` ends a line; a ``"\\r"`` before it stays part of the line
    (GNU patch never strips CRs from the file it patches).  Returns
    ``(lines, ends_with_newline)``; an empty text is ``([], True)``.
    """
    if not text:
        return [], True
    parts = text.split("\n")
    if parts[-1] == "":
        parts.pop()
        return parts, True
    return parts, False


@dataclass
class Side:
    """One direction of a hunk, as GNU's pch.c holds it (pch_swap'ed or not)."""

    first: int  # pch_first()
    # pattern (pre-image): (char ' ' or '-', text incl. terminator, HunkSpec.lines index)
    pat: list[tuple[str, str, int]]
    # replacement (post-image): (char ' ' or '+', text incl. terminator, index)
    repl: list[tuple[str, str, int]]
    prefix_context: int
    suffix_context: int
    texts: list[str] = field(default_factory=list)  # pattern texts, for matching
    # (engine, the pattern's line ids, their counts in the file, prefix hashes): LineIndex._pattern
    index: Optional[tuple] = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.texts = [body for _, body, _ in self.pat]


def compile_hunk(index: int, hunk: HunkSpec) -> tuple[Side, Side]:
    old: list[tuple[str, str, int]] = []
    new: list[tuple[str, str, int]] = []
    prefix = -1
    run = 0
    for i, ln in enumerate(hunk.lines):
        body = ln.text if ln.no_newline else ln.text + "\n"
        if ln.kind == " ":
            old.append((" ", body, i))
            new.append((" ", body, i))
            run += 1
        elif ln.kind == "-":
            old.append(("-", body, i))
        elif ln.kind == "+":
            new.append(("+", body, i))
        else:
            raise ValueError(f"hunk {index}: bad line kind {ln.kind!r}")
        if ln.kind != " ":
            if prefix == -1:
                prefix = run
            run = 0
    if prefix == -1:
        raise ValueError(f"hunk {index}: no added or removed line (malformed for GNU patch)")
    suffix = run
    if len(old) != hunk.source_length or len(new) != hunk.target_length:
        raise ValueError(
            f"hunk {index}: header says -{hunk.source_start},{hunk.source_length} "
            f"+{hunk.target_start},{hunk.target_length} but has {len(old)} old and "
            f"{len(new)} new lines"
        )
    first = hunk.source_start + (1 if not old else 0)
    newfirst = hunk.target_start + (1 if not new else 0)
    fwd = Side(first, old, new, prefix, suffix)
    # pch_swap: the post-image becomes the pattern ('+' -> '-') and vice versa;
    # the context counts stay as they are.
    rev = Side(
        newfirst,
        [("-" if c == "+" else c, b, i) for c, b, i in new],
        [("+" if c == "-" else c, b, i) for c, b, i in old],
        prefix,
        suffix,
    )
    return fwd, rev


class Misordered(Exception):
    pass
