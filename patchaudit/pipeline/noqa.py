"""`check --add-noqa`: a suppression comment on each reported line, as ruff's `--add-noqa`.

The comment is patchaudit's own, `# patchaudit: ignore[PA101, PA104]` (the grammar of
patchaudit/units/suppression.py): a `# noqa` is shared with flake8 and ruff, which would
read ours as theirs.  It goes on the line a finding is reported at (the line the
suppression counts on), in

- a `.py` file: at the end of the reported line, unless that line ends inside a
  string that runs on (a triple-quoted string) or in a backslash continuation, where
  a `#` would be text or a syntax error; the new file must still parse when the old
  one did;
- a `.patch`/`.diff`: on the lines the patch *adds* to a Python file (`+` lines, the
  only ones a suppression counts on), with the same checks on the added text; the
  hunk's line counts do not change.

A line that already carries our comment gets the new codes added to it (a blanket
`# patchaudit: ignore` already covers everything).  Other files (shell, YAML,
Dockerfile, .env), lines a comment cannot safely go on, and files the run reported an
error for are left as they are and named in `messages`.  Nothing is written here: the
files are written by `pipeline.fix.write_fixes` (whole or not at all), as `--fix`'s.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field

from patchaudit.inputs.discover import PATCH, PYTHON, classify
from patchaudit.model.findings import Finding
from patchaudit.patching.patchedit import split_keepends, split_source_keepends
from patchaudit.pipeline.fix import FileFix
from patchaudit.units.suppression import parse_suppression

#: our comment already on a line: its codes are extended in place
_OURS = re.compile(r"#\s*patchaudit:\s*ignore\[(?P<codes>[A-Za-z0-9_,\s]*)\]", re.I)


@dataclass
class NoqaOutcome:
    files: list[FileFix] = field(default_factory=list)
    added: int = 0  # comments added or extended
    messages: list[str] = field(default_factory=list)

    @property
    def changed(self) -> list[FileFix]:
        return [f for f in self.files if f.new != f.old]


def _takes_comment(code: str) -> str | None:
    """Why a comment cannot go at the end of this Python line, or None when it can."""
    if code.rstrip().endswith("\\"):
        return "it continues on the next line (a backslash)"
    try:
        for _ in tokenize.generate_tokens(io.StringIO(code + "\n").readline):
            pass
    except tokenize.TokenError as exc:
        if "string" in str(exc.args[0]):
            return "it ends inside a string"
    except (SyntaxError, IndentationError):
        pass
    return None


def with_codes(line: str, codes: list[str]) -> str:
    """`line` with our comment naming `codes` (added, or merged into the one it carries)."""
    ok, present = parse_suppression(line)
    if ok and present is None:
        return line  # a blanket `# patchaudit: ignore`
    want = [c for c in codes if not (present and any(c.startswith(p) for p in present))]
    if not want:
        return line
    m = _OURS.search(line)
    if m:
        old = [c.strip() for c in m.group("codes").split(",") if c.strip()]
        merged = ", ".join(dict.fromkeys(old + want))
        return line[: m.start("codes")] + merged + line[m.end("codes") :]
    body = line.rstrip()
    return f"{body}  # patchaudit: ignore[{', '.join(want)}]" + line[len(body) :]


def _comment(lines: list[str], n: int, codes: list[str], why: str | None, where: str, out: NoqaOutcome) -> int:
    """Line `n` with our comment naming `codes` (1), or why not, said in `out` (0)."""
    if why:
        out.messages.append(f"{where}: no suppression comment added: {why}")
        return 0
    raw = lines[n - 1]
    body = raw.rstrip("\r\n")
    new = with_codes(body, codes)
    if new == body:
        return 0
    lines[n - 1] = new + raw[len(body) :]
    return 1


def _python_lines(text: str, wanted: dict[int, list[str]], path: str, out: NoqaOutcome) -> str:
    # numbered as the parser numbers them ("\r\n", a lone "\r", "\n"), as the fixer does
    lines = split_source_keepends(text)
    in_strings = _string_lines(text)
    added = 0
    for n, codes in sorted(wanted.items()):
        if not 0 < n <= len(lines):
            continue
        body = lines[n - 1].rstrip("\r\n")
        why = "it ends inside a string" if n in in_strings else _takes_comment(body)
        added += _comment(lines, n, codes, why, f"{path}:{n}", out)
    new_text = "".join(lines)
    if new_text != text and _parses(text) and not _parses(new_text):
        out.messages.append(f"{path}: no suppression comments added: the file would no longer parse")
        return text
    out.added += added
    return new_text


def _string_lines(text: str) -> set[int]:
    """The lines of a Python file that end inside a string running on to a later line
    (triple-quoted strings, multi-line f-strings); tokenized once, from the file's start."""
    out: set[int] = set()
    starts: list[int] = []
    fstart = getattr(tokenize, "FSTRING_START", -1)
    fend = getattr(tokenize, "FSTRING_END", -1)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING:
                out.update(range(tok.start[0], tok.end[0]))
            elif tok.type == fstart:
                starts.append(tok.start[0])
            elif tok.type == fend and starts:
                out.update(range(starts.pop(), tok.end[0]))
    except (tokenize.TokenError, SyntaxError):
        pass
    return out


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _patch_lines(text: str, wanted: dict[int, list[str]], path: str, out: NoqaOutcome) -> str:
    from patchaudit.inputs.patches import parse_patch

    patch = parse_patch(path, text)
    added: dict[int, str] = {}  # patch line -> the target file's path, for the added lines
    for section, hunk in patch.iter_hunks():
        for pl in hunk.lines:
            if pl.kind == "+":
                added[pl.patch_line] = section.path or ""
    lines = split_keepends(text)  # a patch's lines end at "\n" only
    for n, codes in sorted(wanted.items()):
        target = added.get(n)
        if target is None or not 0 < n <= len(lines):
            out.messages.append(f"{path}:{n}: no suppression comment added: not a line the patch adds")
            continue
        if classify(target) != PYTHON:
            out.messages.append(f"{path}:{n}: no suppression comment added: {target} is not a Python file")
            continue
        out.added += _comment(lines, n, codes, _takes_comment(lines[n - 1].rstrip("\r\n")[1:]), f"{path}:{n}", out)
    return "".join(lines)


def add_noqa(findings: list[Finding], texts: dict[str, str], broken: set[str]) -> NoqaOutcome:
    """The files of `findings` with suppression comments added (`texts`: each file's text,
    as read; `broken`: files the run reported an error for, left alone)."""
    out = NoqaOutcome()
    by_path: dict[str, dict[int, list[str]]] = {}
    for f in findings:
        codes = by_path.setdefault(f.path, {}).setdefault(f.line, [])
        if f.code not in codes:
            codes.append(f.code)
    for path, wanted in by_path.items():
        kind = classify(path)
        if path in broken or path not in texts:
            out.messages.append(f"{path}: no suppression comments added: the file could not be read")
            continue
        text = texts[path]
        if kind == PYTHON:
            new = _python_lines(text, wanted, path, out)
        elif kind == PATCH:
            new = _patch_lines(text, wanted, path, out)
        else:
            out.messages.append(f"{path}: no suppression comments added: only .py files and patches take them")
            continue
        out.files.append(FileFix(path, text, new, fixed=0))
    return out
