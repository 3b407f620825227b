"""Fragment mode: Python units from what a hunk shows, without the engine.

A hunk starts and ends mid-statement: the seed case is an added line
`base_output = await self.legacy_load_mm_data(` whose arguments run past the
hunk's last context line, after two lines that close a `def` signature begun
above the hunk.  The post-image (context + added lines) is parsed in three
degrading steps, until every changed line is covered:

1. the whole post-image;
2. statement windows: the largest window around the first uncovered changed
   line that parses, after re-indenting it (synthetic `if 1:` openers make a
   deeper first line legal) and closing the brackets and blocks left open at
   its end;
3. the balanced call expression starting on an added line.

Text invented to close a window lies after `PythonUnit.real_end`, so a finding
whose node reaches into it says that the construct continues past the hunk.
Trial parses use the stdlib `ast` (about ten times faster than libcst); only
the chosen windows are parsed with libcst, once, by the runner.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import warnings
from dataclasses import dataclass

from patchaudit.inputs.pyast import over_limit
from patchaudit.units import LineInfo, PythonUnit, TextUnit

_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = set(_OPEN.values())
_SECTION_SYMBOL = re.compile(r"^\s*(?:async\s+)?(?:class|def)\s+([A-Za-z_]\w*)")
_CALL_START = re.compile(r"[A-Za-z_][\w.]*\s*\(")
#: trial parses spent looking for a window around one changed line
WINDOW_BUDGET = 300
#: characters one patch file may hand to trial parses (tokenize and `ast`) while looking
#: for windows: FRAGMENT_WORK_FACTOR times its size, at least FRAGMENT_WORK_MIN and at most
#: FRAGMENT_WORK_MAX.  The search is quadratic in a hunk's lines (cubic for call
#: expressions): a 300-line hunk of unclosed calls took three minutes.  Past the budget
#: the hunks left are not analysed, and the runner says so (PythonUnit.unanalysed).
FRAGMENT_WORK_FACTOR = 1000
FRAGMENT_WORK_MIN = 2 * 1024 * 1024
FRAGMENT_WORK_MAX = 64 * 1024 * 1024


class _OutOfWork(Exception):
    pass


def _work_budget(patch) -> list[int]:
    """The patch's trial-parse budget (one per patch file, kept on the patch)."""
    got = getattr(patch, "_fragment_work", None)
    if got is None:
        size = sum(len(l) for l in getattr(patch, "lines", ()) or ())
        got = [min(max(FRAGMENT_WORK_MIN, FRAGMENT_WORK_FACTOR * size), FRAGMENT_WORK_MAX)]
        try:
            patch._fragment_work = got
        except AttributeError:  # pragma: no cover - a patch object without a __dict__
            pass
    return got


@dataclass
class _Window:
    text: str
    first_real: int  # unit line of the first real line
    real_idx: list[int]  # post-image indexes of the real lines, in order
    real_end: tuple[int, int]
    shift: int  # columns removed by re-indenting


def _indent(s: str) -> int:
    return len(s) - len(s.lstrip(" \t"))


def _trial_parse(text: str) -> bool:
    if over_limit(text) is not None:
        return False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def _open_brackets(text: str) -> str | None:
    """The closers that the text's still-open brackets need, or None if it cannot be closed."""
    stack: list[str] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.OP:
                if tok.string in _OPEN:
                    stack.append(_OPEN[tok.string])
                elif tok.string in _CLOSE:
                    if not stack or stack[-1] != tok.string:
                        return None
                    stack.pop()
    except tokenize.TokenError as exc:
        if "statement" not in str(exc):  # EOF in a multi-line string: not closable
            return None
    except (IndentationError, SyntaxError):
        return None
    return "".join(reversed(stack))


def _build(lines: list[str]) -> tuple[str, int, int, int] | None:
    """Re-indent `lines` so they can start a module.

    Returns (text, number of synthetic opener lines, shift, last real line length).
    """
    body = [l for l in lines if l.strip()]
    if not body:
        return None
    shift = min(_indent(l) for l in body)
    if any(not l[:shift].isspace() and l[:shift] for l in lines if l.strip()):
        return None
    out = [l[shift:] if l.strip() else "" for l in lines]
    first = _indent(next(l for l in out if l.strip()))
    openers: list[str] = []
    if first:
        levels = sorted({_indent(l) for l in out if l.strip() and _indent(l) < first})
        if not levels or levels[0] != 0:
            levels = [0] + levels
        # a deeper first line needs a block opener at each enclosing level
        for lvl in levels:
            openers.append(" " * lvl + "if 1:")
    return "\n".join(openers + out), len(openers), shift, len(out[-1])


def _close(text: str, last_indent: int) -> list[str]:
    """Candidate completions of a window's text, most faithful first."""
    closers = _open_brackets(text + "\n")
    if closers is None:
        return []
    cands = []
    base = text + ("\n" + closers if closers else "")
    cands.append(base + "\n")
    cands.append(base + "\n" + " " * (last_indent + 4) + "pass\n")
    return cands


def _try_window(lines: list[str], work: list[int] | None = None) -> tuple[str, int, int, int] | None:
    if work is not None:
        cost = sum(len(l) + 1 for l in lines)
        if cost > work[0]:
            raise _OutOfWork
        work[0] -= cost
    built = _build(lines)
    if built is None:
        return None
    text, n_open, shift, _ = built
    last = next((l for l in reversed(text.split("\n")) if l.strip()), "")
    for cand in _close(text, _indent(last)):
        if _trial_parse(cand):
            return cand, n_open, shift, len(lines)
    return None


def fragment_units(patch, section, hunk, *, report_path: str) -> list[PythonUnit]:
    """Python units covering the changed lines of one hunk of a .py file."""
    post = hunk.post_image
    if not post:
        return []
    texts = [l.text for l in post]
    changed_targets = hunk.changed_target_lines
    changed = [i for i, l in enumerate(post) if l.target_line in changed_targets]
    if not changed:
        return []
    outer = None
    m = _SECTION_SYMBOL.match(hunk.section_header or "")
    if m:
        outer = m.group(1)
    units: list[PythonUnit] = []
    covered: set[int] = set()
    n = len(post)

    def make(text: str, n_open: int, shift: int, start: int, count: int, col0: int = 0) -> PythonUnit:
        lines_map: dict[int, LineInfo] = {}
        judged: set[int] = set()
        for k in range(count):
            i = start + k
            ul = n_open + k + 1
            pl = post[i]
            lines_map[ul] = LineInfo(
                pl.patch_line, 1 + shift + (col0 if k == 0 else 0), pl.target_line, pl.target_line in changed_targets
            )
            if pl.target_line in changed_targets:
                judged.add(ul)
                covered.add(i)
        last_real = n_open + count
        last_len = len(text.split("\n")[last_real - 1]) if last_real - 1 < len(text.split("\n")) else 0
        # trailing whitespace/comments do not end a construct: the real text ends at its last code char
        return PythonUnit(
            path=report_path,
            lines_map=lines_map,
            judged=frozenset(judged),
            target_path=section.path,
            patch=patch,
            section=section,
            hunk=hunk,
            mode="fragment",
            text=text,
            real_end=(last_real, last_len),
            outer_symbol=outer,
        )

    whole = "\n".join(texts)
    if over_limit(whole) is not None:
        # over the parse budget (max-parse-size): no trial parse of its windows; one unit
        # of the whole post-image, which the runner reports as too large to analyse
        return [make(whole, 0, 0, 0, n)]

    work = _work_budget(patch)
    if work[0] < 0:
        return []  # the budget ran out on an earlier hunk (reported there)
    try:
        _search(texts, changed, covered, n, units, make, work)
    except _OutOfWork:
        # the patch's search budget is spent: this hunk's lines left, and the later hunks,
        # are not analysed; one unit says so (the runner reports it)
        work[0] = -1
        rest = make(whole, 0, 0, 0, n)
        rest.unanalysed = (
            "the search for parseable Python in this patch's hunks ran out of its budget "
            "(FRAGMENT_WORK_FACTOR x the patch's size): from this hunk on, its hunks are not "
            "analysed; give --engine to analyse the patched files"
        )
        units.append(rest)
    return units


def _search(
    texts: list[str], changed: list[int], covered: set[int], n: int, units: list, make, work: list[int]
) -> None:
    # 1 + 2: windows around the first uncovered changed line, largest first
    failed: set[int] = set()
    while True:
        todo = [i for i in changed if i not in covered and i not in failed]
        if not todo:
            break
        i0 = todo[0]
        found = None
        budget = WINDOW_BUDGET
        for size in range(n, 0, -1):
            for s in range(max(0, i0 - size + 1), min(i0, n - size) + 1):
                budget -= 1
                got = _try_window(texts[s : s + size], work)
                if got:
                    found = (s, got)
                    break
                if budget <= 0:
                    break
            if found or budget <= 0:
                break
        if found is None:
            failed.add(i0)
            continue
        s, (text, n_open, shift, count) = found
        units.append(make(text, n_open, shift, s, count))

    # 3: balanced call expressions on still-uncovered added lines
    for i in [i for i in changed if i not in covered]:
        line = texts[i]
        for m in _CALL_START.finditer(line):
            col = m.start()
            tail = [line[col:]] + texts[i + 1 :]
            got = None
            for e in range(len(tail), 0, -1):
                got = _try_window(tail[:e], work)
                if got:
                    break
            if got:
                text, n_open, shift, count = got
                units.append(make(text, n_open, shift, i, count, col0=col))
                break


def patch_fragment_units(patch, report_path: str, wanted=None):
    """Fragment mode: Python units from hunks of .py files, text units from other hunks.

    `wanted(text)` is the selected Python rules' pre-filter: a hunk whose
    post-image cannot match any of them is not parsed into windows at all (a
    window's text is always part of its hunk's post-image)."""
    from patchaudit.inputs.discover import PATCH, PYTHON, classify

    py, text = [], []
    for section, hunk in patch.iter_hunks():
        if section.is_binary:
            continue
        if section.is_python:
            if wanted is None or wanted("\n".join(l.text for l in hunk.post_image)):
                py.extend(fragment_units(patch, section, hunk, report_path=report_path))
            continue
        kind = classify(section.path)
        if kind in (None, PATCH, PYTHON):
            continue
        text.append(hunk_text_unit(patch, section, hunk, kind, report_path))
    return py, text


def hunk_text_unit(patch, section, hunk, kind: str, report_path: str, target_path: str | None = None):
    """The text unit (shell, Dockerfile, YAML, .env) of what one hunk shows (fragment mode)."""
    post = hunk.post_image
    changed = hunk.changed_target_lines
    lines_map = {k + 1: LineInfo(l.patch_line, 1, l.target_line, l.target_line in changed) for k, l in enumerate(post)}
    judged = frozenset(k + 1 for k, l in enumerate(post) if l.target_line in changed)
    return TextUnit(
        path=report_path,
        lines_map=lines_map,
        judged=judged,
        target_path=target_path or section.path,
        patch=patch,
        section=section,
        hunk=hunk,
        mode="fragment",
        flavor=kind,
        lines=[l.text for l in post],
    )
