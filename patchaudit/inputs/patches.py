"""Reading patch files: unidiff for the structure, our own scan for validation.

unidiff is a good reader of *well-formed* unified diffs, but (see the design's
"Known traps") it returns an empty PatchSet for garbage, swallows lines after a
finished hunk, raises UnicodeDecodeError for non-UTF-8 input and leaks `\\r`
into paths of CRLF patches.  So a patch is first scanned line by line here: the
scan splits it into file sections (counting hunk lines, so a removed line that
starts with `-- ` never looks like a file header), records everything that is
wrong with the text as `Problem`s (reported as PA301 by the malformed-patch
rule), and hands each section on its own to unidiff, with the patch-file line
numbers kept.  One broken section never hides the others.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterator, cast

from patchaudit.inputs.hunkspec import HunkLine, HunkSpec, LineKind

HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)$")
GIT_HEADER_RE = re.compile(r"^diff --git (?P<a>\"(?:[^\"\\]|\\.)*\"|\S+) (?P<b>\"(?:[^\"\\]|\\.)*\"|\S+)$")
#: the first line of each mail of `git format-patch` output (an mbox series)
_MAIL_RE = re.compile(r"^From [0-9a-f]{40} ")
_INDEX_RE = re.compile(r"^index ([0-9a-fA-F]+)\.\.([0-9a-fA-F]+)(?: (\d+))?$")


@dataclass(frozen=True)
class Problem:
    line: int
    message: str


@dataclass(frozen=True)
class PatchLine:
    kind: str  # " ", "-", "+"
    text: str  # without the leading kind character and the line end
    patch_line: int  # 1-based line in the patch file
    source_line: int | None  # line in the pre-image file
    target_line: int | None  # line in the post-image file
    no_newline: bool = False  # followed by "\ No newline at end of file"


@dataclass
class Hunk:
    index: int  # 0-based within its file section
    header_line: int  # patch line of the "@@" header
    source_start: int
    source_length: int
    target_start: int
    target_length: int
    section_header: str  # the text after the second "@@" (often the enclosing def/class)
    lines: list[PatchLine]

    @property
    def end_line(self) -> int:
        """Last patch line of the hunk."""
        return self.lines[-1].patch_line if self.lines else self.header_line

    @property
    def added(self) -> list[PatchLine]:
        return [l for l in self.lines if l.kind == "+"]

    @property
    def post_image(self) -> list[PatchLine]:
        """Context and added lines, in order: what the hunk shows of the new file."""
        return [l for l in self.lines if l.kind != "-"]

    @property
    def pre_image(self) -> list[PatchLine]:
        return [l for l in self.lines if l.kind != "+"]

    @cached_property
    def changed_target_lines(self) -> frozenset[int]:
        """Post-image lines the hunk added, plus the line after each run of removals."""
        out: set[int] = set()
        pending_removal = False
        for l in self.lines:
            if l.kind == "+":
                out.add(l.target_line)  # type: ignore[arg-type]
                pending_removal = False
            elif l.kind == "-":
                pending_removal = True
            else:
                if pending_removal and l.target_line is not None:
                    out.add(l.target_line)
                pending_removal = False
        if pending_removal:
            # removal at the end of the hunk: the next line of the file
            out.add(self.target_start + self.target_length)
        return frozenset(x for x in out if x is not None)

    def to_spec(self) -> HunkSpec:
        """The hunk as the in-memory applier takes it."""
        return HunkSpec(
            source_start=self.source_start,
            source_length=self.source_length,
            target_start=self.target_start,
            target_length=self.target_length,
            lines=tuple(HunkLine(cast(LineKind, l.kind), l.text, l.no_newline) for l in self.lines),
        )


@dataclass
class FileSection:
    header_line: int  # first patch line of the section
    source_path: str | None  # as written, minus timestamps/quotes; None for /dev/null
    target_path: str | None
    git: bool = False  # a "diff --git" section
    is_binary: bool = False
    is_new: bool = False
    is_deleted: bool = False
    rename_from: str | None = None
    rename_to: str | None = None
    copy_from: str | None = None
    copy_to: str | None = None
    old_mode: str | None = None
    new_mode: str | None = None
    index: tuple[str, str] | None = None  # (pre-image blob sha, post-image blob sha)
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def path(self) -> str:
        """The file the section changes, without git's a/ b/ prefixes."""
        p = self.target_path or self.source_path or self.rename_to or ""
        return strip_git_prefix(p) if self.git or _looks_prefixed(self) else p

    @property
    def raw_path(self) -> str:
        """The path as the patch writes it (what `patch -pN` strips)."""
        return self.target_path or self.source_path or self.rename_to or ""

    @property
    def is_symlink(self) -> bool:
        return (self.new_mode or "").startswith("120")

    @property
    def is_python(self) -> bool:
        return self.path.endswith((".py", ".pyi"))


def _looks_prefixed(section: FileSection) -> bool:
    s, t = section.source_path, section.target_path
    return bool((s is None or s.startswith("a/")) and (t is None or t.startswith("b/")) and (s or t))


def strip_git_prefix(path: str) -> str:
    if path.startswith(("a/", "b/")):
        return path[2:]
    return path


@dataclass
class PatchFile:
    path: str  # the patch file as the user named it
    lines: list[str]  # raw lines, without line ends (CRs stripped for CRLF patches)
    sections: list[FileSection]
    problems: list[Problem]
    header: list[tuple[int, str]]  # free text before the first section (DEP-3, mail headers)
    crlf: bool = False

    def iter_hunks(self) -> Iterator[tuple[FileSection, Hunk]]:
        for s in self.sections:
            for h in s.hunks:
                yield s, h

    def hunk_text(self, hunk: Hunk, limit: int = 12) -> list[str]:
        """The hunk as it stands in the patch file, for display under a finding."""
        start = hunk.header_line - 1
        end = min(hunk.end_line, start + limit)
        out = self.lines[start:end]
        if hunk.end_line - start > limit:
            out = out + ["..."]
        return out


def unquote_path(raw: str) -> str:
    """Undo git's C-style quoting of unusual paths and drop diff timestamps."""
    raw = raw.split("\t", 1)[0]
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        body = raw[1:-1]
        try:
            data = body.encode("latin-1", "backslashreplace").decode("unicode_escape")
            return data.encode("latin-1", "surrogateescape").decode("utf-8", "surrogateescape")
        except (UnicodeDecodeError, UnicodeEncodeError):
            return body
    return raw.rstrip()


def _path_or_none(raw: str) -> str | None:
    p = unquote_path(raw)
    return None if p == "/dev/null" else p


def decode_patch(data: bytes) -> tuple[str, list[Problem]]:
    """Bytes to text; non-UTF-8 bytes are kept (surrogateescape) and reported."""
    problems: list[Problem] = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        problems.append(Problem(line, f"patch is not valid UTF-8 (byte 0x{data[exc.start]:02x} at line {line})"))
        text = data.decode("utf-8", "surrogateescape")
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        problems.append(Problem(line, "patch contains a NUL byte (binary data in a text diff)"))
    return text, problems


def read_patch(path: str, data: bytes) -> PatchFile:
    text, problems = decode_patch(data)
    return parse_patch(path, text, problems)


def parse_patch(path: str, text: str, problems: list[Problem] | None = None) -> PatchFile:
    problems = list(problems or [])
    # only "\n" ends a line of a diff (GNU patch, git): str.splitlines() would also split
    # at \f, \v, \x1c-\x1e, \x85, \u2028 inside a line and shift every line number after it
    raw_lines = text.split("\n")
    if raw_lines[-1] == "":
        raw_lines.pop()
    # GNU patch strips trailing CRs from a CRLF patch; so do we, but remember it.
    # GNU patch decides it from the header lines: content lines of a CRLF *file* in an LF
    # patch end in "\r" too, and keep it
    heads = [l for l in raw_lines if l.startswith(("--- ", "+++ ", "@@ ", "diff "))]
    if heads:
        crlf = sum(l.endswith("\r") for l in heads) * 2 > len(heads)
    else:
        crlf = text.count("\r\n") > 0 and text.count("\r\n") >= text.count("\n") // 2
    if crlf:
        lines = [l[:-1] if l.endswith("\r") else l for l in raw_lines]
    else:
        lines = raw_lines
    scanner = _Scanner(lines, problems)
    scanner.run()
    if not scanner.sections:
        if not text.strip():
            problems.append(Problem(1, "empty patch file"))
        else:
            problems.append(Problem(1, "no diff found: the file holds no '---'/'+++' file header or '@@' hunk"))
    return PatchFile(
        path=path,
        lines=lines,
        sections=scanner.sections,
        problems=sorted(set(problems), key=lambda p: (p.line, p.message)),
        header=scanner.header,
        crlf=crlf,
    )


class _Scanner:
    """Line-by-line reader of a unified diff; see the module docstring."""

    def __init__(self, lines: list[str], problems: list[Problem]):
        self.lines = lines
        self.problems = problems
        self.sections: list[FileSection] = []
        self.header: list[tuple[int, str]] = []
        self.cur: FileSection | None = None
        self.cur_has_files = False  # the current section has seen its ---/+++ pair
        self.cur_headers = 0  # "@@" headers seen in the current section (broken ones too)
        self.mail = False  # a mail header ("From <sha> ...") came after the last hunk

    def problem(self, idx: int, msg: str) -> None:
        self.problems.append(Problem(idx + 1, msg))

    def run(self) -> None:
        lines = self.lines
        i, n = 0, len(lines)
        while i < n:
            line = lines[i]
            if line.startswith("diff --git ") or (line.startswith("diff ") and not self._in_git_header()):
                self._finish()
                self._start(i, git=line.startswith("diff --git "))
                m = GIT_HEADER_RE.match(line)
                if m and self.cur:
                    self.cur.source_path = _path_or_none(m.group("a"))
                    self.cur.target_path = _path_or_none(m.group("b"))
                i += 1
                continue
            if line.startswith("--- ") and i + 1 < n and lines[i + 1].startswith("+++ "):
                if self.cur is None or self.cur_has_files or self.cur.hunks:
                    self._finish()
                    self._start(i, git=False)
                assert self.cur is not None
                self.cur.source_path = _path_or_none(line[4:])
                self.cur.target_path = _path_or_none(lines[i + 1][4:])
                if self.cur.source_path is None:
                    self.cur.is_new = True
                if self.cur.target_path is None:
                    self.cur.is_deleted = True
                self.cur_has_files = True
                i += 2
                continue
            if line.startswith("@@"):
                i = self._hunk(i)
                continue
            if self.cur is not None and not self.cur.hunks:
                self._git_meta(i, line)
            elif self.cur is None:
                self.header.append((i + 1, line))
            elif _MAIL_RE.match(line):
                self.mail = True  # the next mail of a `git format-patch` series
            elif line == "---" and self.mail:
                pass  # its "---" before the diffstat, not a removed line
            elif line.startswith("+") or (line.startswith("-") and line != "--" and not line.startswith("-- ")):
                self.problem(
                    i,
                    "line outside any hunk looks like hunk content (hunk shorter than its content, "
                    "or a missing @@ header)",
                )
            i += 1
        self._finish()

    def _in_git_header(self) -> bool:
        return self.cur is not None and self.cur.git and not self.cur_has_files and not self.cur.hunks

    def _start(self, idx: int, git: bool) -> None:
        self.cur = FileSection(header_line=idx + 1, source_path=None, target_path=None, git=git)
        self.cur_has_files = False
        self.cur_headers = 0
        self.mail = False

    def _git_meta(self, idx: int, line: str) -> None:
        sec = self.cur
        assert sec is not None
        if line.startswith("rename from "):
            sec.rename_from = unquote_path(line[12:])
        elif line.startswith("rename to "):
            sec.rename_to = unquote_path(line[10:])
        elif line.startswith("copy from "):
            sec.copy_from = unquote_path(line[10:])
        elif line.startswith("copy to "):
            sec.copy_to = unquote_path(line[8:])
        elif line.startswith("new file mode "):
            sec.is_new, sec.new_mode = True, line[14:].strip()
        elif line.startswith("deleted file mode "):
            sec.is_deleted, sec.old_mode = True, line[18:].strip()
        elif line.startswith("old mode "):
            sec.old_mode = line[9:].strip()
        elif line.startswith("new mode "):
            sec.new_mode = line[9:].strip()
        elif line.startswith("index "):
            m = _INDEX_RE.match(line)
            if m:
                sec.index = (m.group(1), m.group(2))
                if m.group(3) and not sec.new_mode:
                    sec.new_mode = m.group(3)
        elif line.startswith("GIT binary patch") or (line.startswith("Binary files ") and line.endswith(" differ")):
            sec.is_binary = True

    def _hunk(self, i: int) -> int:
        lines = self.lines
        m = HUNK_RE.match(lines[i])
        if not m:
            if self.cur is not None:
                self.cur_headers += 1
            self.problem(i, f"malformed hunk header: {lines[i][:80]!r}")
            return i + 1
        if self.cur is None or not (self.cur_has_files or self.cur.git):
            self.problem(i, "hunk without a file header ('---'/'+++' lines)")
            if self.cur is None:
                self._start(i, git=False)
        assert self.cur is not None
        self.cur_headers += 1
        src_start, tgt_start = int(m.group(1)), int(m.group(3))
        src_len = int(m.group(2)) if m.group(2) is not None else 1
        tgt_len = int(m.group(4)) if m.group(4) is not None else 1
        body, j, broken = self._hunk_body(i, src_start, src_len, tgt_start, tgt_len)
        n = len(lines)
        if not broken and j < n and lines[j].startswith("\\"):
            self._no_newline(body, j)
            j += 1
        if not broken and j < n:
            nxt = lines[j]
            is_file_header = nxt.startswith("--- ") and j + 1 < n and lines[j + 1].startswith("+++ ")
            if nxt.startswith(("+", " ")) or (
                nxt.startswith("-") and not is_file_header and nxt != "--" and not nxt.startswith("-- ")
            ):
                self.problem(
                    j,
                    f"hunk line count mismatch: the hunk at line {i + 1} goes on past the "
                    f"-{src_len} +{tgt_len} lines its header announces",
                )
        hunk = Hunk(
            index=len(self.cur.hunks),
            header_line=i + 1,
            source_start=src_start,
            source_length=src_len,
            target_start=tgt_start,
            target_length=tgt_len,
            section_header=m.group(5).strip(),
            lines=body,
        )
        if self.cur.hunks:
            prev = self.cur.hunks[-1]
            if src_start < prev.source_start + prev.source_length and src_len and prev.source_length:
                self.problem(
                    i,
                    f"hunks out of order or overlapping: this hunk starts at line {src_start}, "
                    f"before the previous hunk (line {prev.header_line}) ends",
                )
        if not broken and all(l.kind == " " for l in body):
            # `@@ -1,0 +1,0 @@`, or context only: GNU patch ("malformed patch") and git refuse it
            self.problem(i, "hunk has no added or removed line (GNU patch and git refuse it as malformed)")
        if not broken:
            self.cur.hunks.append(hunk)
        return max(j, i + 1)

    def _hunk_body(
        self, i: int, src_start: int, src_len: int, tgt_start: int, tgt_len: int
    ) -> tuple[list[PatchLine], int, bool]:
        """The lines of the hunk whose header is line i, as many as the header announces:
        (lines, the index after them, broken: the hunk ended before its count, a problem)."""
        old_rem, new_rem = src_len, tgt_len
        j = i + 1
        body: list[PatchLine] = []
        s_no, t_no = src_start, tgt_start
        # a 0-length side starts "before" line 1
        if src_len == 0:
            s_no = src_start + 1
        if tgt_len == 0:
            t_no = tgt_start + 1
        broken = False
        lines, n = self.lines, len(self.lines)
        while old_rem > 0 or new_rem > 0:
            if j >= n:
                self.problem(
                    i,
                    f"hunk is truncated: the file ends after {len(body)} lines, "
                    f"the header announces -{src_len} +{tgt_len}",
                )
                broken = True
                break
            l = lines[j]
            c = l[:1]
            if c == "\\":
                self._no_newline(body, j)
                j += 1
                continue
            if c == " " or l == "":
                if old_rem == 0 or new_rem == 0:
                    self.problem(
                        j, f"hunk line count mismatch: more context than the header -{src_len} +{tgt_len} announces"
                    )
                    broken = True
                    break
                body.append(PatchLine(" ", l[1:], j + 1, s_no, t_no))
                s_no += 1
                t_no += 1
                old_rem -= 1
                new_rem -= 1
            elif c == "-":
                if old_rem == 0:
                    self.problem(
                        j,
                        f"hunk line count mismatch: more removed lines than the header -{src_len} +{tgt_len} announces",
                    )
                    broken = True
                    break
                body.append(PatchLine("-", l[1:], j + 1, s_no, None))
                s_no += 1
                old_rem -= 1
            elif c == "+":
                if new_rem == 0:
                    self.problem(
                        j, f"hunk line count mismatch: more added lines than the header -{src_len} +{tgt_len} announces"
                    )
                    broken = True
                    break
                body.append(PatchLine("+", l[1:], j + 1, None, t_no))
                t_no += 1
                new_rem -= 1
            else:
                self.problem(
                    j,
                    f"hunk ends early: {len(body)} lines where the header "
                    f"-{src_len} +{tgt_len} announces more (line {j + 1} is not a hunk line)",
                )
                broken = True
                break
            j += 1
        return body, j, broken

    def _no_newline(self, body: list[PatchLine], j: int) -> None:
        if not body:
            self.problem(j, "'\\ No newline at end of file' with no line before it")
            return
        last = body[-1]
        body[-1] = PatchLine(last.kind, last.text, last.patch_line, last.source_line, last.target_line, True)

    def _finish(self) -> None:
        sec = self.cur
        if sec is None:
            return
        if sec.git and sec.target_path is None and sec.rename_to:
            sec.target_path = "b/" + sec.rename_to
        self.sections.append(sec)
        if not sec.hunks and not self.cur_headers and not (sec.git or sec.is_binary):
            self.problem(sec.header_line - 1, "file section has no hunks")
        self.cur = None
        self.cur_has_files = False


def validate_with_unidiff(patch: PatchFile) -> list[Problem]:
    """Cross-check each section with unidiff; disagreement is a malformed patch.

    The scan above is authoritative for line numbers; unidiff is the reference
    reader the ecosystem uses, so a section it cannot read is reported even when
    our scan (which is as lenient as GNU patch) could.
    """
    import unidiff
    from unidiff.errors import UnidiffParseError

    problems: list[Problem] = []
    bounds = [s.header_line - 1 for s in patch.sections] + [len(patch.lines)]
    for k, sec in enumerate(patch.sections):
        if sec.is_binary or not sec.hunks:
            continue
        chunk = patch.lines[bounds[k] : bounds[k + 1]]
        # GNU patch reads an empty line inside a hunk as an empty context line
        body = [(" " if l == "" else l) + "\n" for l in chunk]
        try:
            ps = unidiff.PatchSet(body)  # a list of lines: unidiff must not re-split them
        except UnidiffParseError as exc:
            problems.append(Problem(sec.header_line, f"unidiff cannot read this file section: {exc}"))
            continue
        n_hunks = sum(len(f) for f in ps)
        if n_hunks != len(sec.hunks):
            problems.append(
                Problem(
                    sec.header_line,
                    f"file section: unidiff reads {n_hunks} hunks where the scan reads {len(sec.hunks)}",
                )
            )
    return problems
