"""Generator of (file, patch) cases for the differential test of
patchaudit.patching.apply against GNU patch (tests/test_apply_oracle.py).

Each case: a random file, random edits turned into a unified diff by
difflib.unified_diff (context 0-3), and then the file the patch is applied to,
which is the diff's source (or, for "already applied" cases, its target),
perturbed: lines inserted/removed between hunks (offsets), context lines
changed at hunk edges (fuzz 1/2 or failure), lines inside hunks changed
(failure), whitespace-only changes, hunks at the file start/end, missing final
newlines, empty files, several hunks of which some fail.
"""

from __future__ import annotations

import difflib
import random
import re
from dataclasses import dataclass

from patchaudit.patching.apply import HunkLine, HunkSpec, split_lines

FILE_NAME = "f"
_DATE = "2020-01-01 00:00:00.000000000 +0000"

_WORDS = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi "
    "omicron pi rho sigma tau upsilon phi chi psi omega"
).split()
# short lines that recur, so that a pattern can match in several places
_COMMON = ["", "}", "{", "    return x;", "\t}", "#endif", "end", "    pass"]


@dataclass
class Case:
    name: str
    kinds: tuple[str, ...]
    original: str  # text of the file the patch is applied to
    patch: str  # unified diff text
    hunks: list[HunkSpec]
    max_fuzz: int = 2  # patch -F


def _rand_line(rng: random.Random) -> str:
    if rng.random() < 0.15:
        return rng.choice(_COMMON)
    indent = rng.choice(["", "", "    ", "\t", "        "])
    return f"{indent}{rng.choice(_WORDS)} {rng.randrange(400)}"


def _mutate(rng: random.Random, line: str) -> str:
    r = rng.random()
    if r < 0.3:
        return line + " changed"
    if r < 0.5:
        return line + " "  # whitespace-only: trailing blank
    if r < 0.6 and " " in line:
        return line.replace(" ", "\t", 1)  # whitespace-only: space -> tab
    if r < 0.7:
        return "  " + line  # whitespace-only: indentation
    new = _rand_line(rng)
    return new if new != line else line + "!"


def _join(lines: list[str], eol: bool) -> str:
    if not lines:
        return ""
    return "\n".join(lines) + ("\n" if eol else "")


def _keepends(lines: list[str], eol: bool) -> list[str]:
    out = [s + "\n" for s in lines]
    if out and not eol:
        out[-1] = out[-1][:-1]
    return out


def make_diff(a: list[str], a_eol: bool, b: list[str], b_eol: bool, context: int) -> str:
    out = []
    for line in difflib.unified_diff(
        _keepends(a, a_eol), _keepends(b, b_eol), FILE_NAME, FILE_NAME, _DATE, _DATE, n=context
    ):
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _range(start: int, length: int) -> str:
    return str(start) if length == 1 else f"{start},{length}"


def render(hunks: list[HunkSpec]) -> str:
    """Unified diff text (headers as difflib writes them) for `hunks`, in the given order."""
    out = [f"--- {FILE_NAME}\t{_DATE}\n", f"+++ {FILE_NAME}\t{_DATE}\n"]
    for h in hunks:
        out.append(f"@@ -{_range(h.source_start, h.source_length)} +{_range(h.target_start, h.target_length)} @@\n")
        for ln in h.lines:
            out.append(f"{ln.kind}{ln.text}\n")
            if ln.no_newline:
                out.append("\\ No newline at end of file\n")
    return "".join(out)


_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def parse_unified(text: str) -> list[HunkSpec]:
    """Minimal unified-diff parser (one file) producing HunkSpec objects."""
    rows = text.split("\n")
    hunks: list[HunkSpec] = []
    i = 0
    while i < len(rows):
        m = _HUNK_RE.match(rows[i])
        i += 1
        if not m:
            continue
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) is not None else 1
        c = int(m.group(3))
        d = int(m.group(4)) if m.group(4) is not None else 1
        old = new = 0
        lines: list[HunkLine] = []
        while old < b or new < d or (i < len(rows) and rows[i].startswith("\\")):
            row = rows[i]
            i += 1
            if row.startswith("\\"):
                last = lines[-1]
                lines[-1] = HunkLine(last.kind, last.text, True)
                continue
            kind, body = row[:1], row[1:]
            if kind == " ":
                old += 1
                new += 1
            elif kind == "-":
                old += 1
            elif kind == "+":
                new += 1
            else:
                raise ValueError(f"bad hunk line {row!r}")
            lines.append(HunkLine(kind, body))  # type: ignore[arg-type]
        hunks.append(HunkSpec(a, b, c, d, tuple(lines)))
    return hunks


def _edit(rng: random.Random, base: list[str], edges: bool) -> list[str]:
    tgt = list(base)
    for _ in range(rng.choice([1, 1, 2, 2, 3, 4])):
        n = len(tgt)
        if edges and rng.random() < 0.6:
            pos = rng.choice([0, 1, max(0, n - 1), max(0, n - 2), n])
        else:
            pos = rng.randrange(n + 1)
        pos = min(pos, n)
        op = rng.choice(["replace", "replace", "insert", "delete"]) if n else "insert"
        k = rng.choice([1, 1, 1, 2, 3])
        if op == "insert" or pos == n:
            tgt[pos:pos] = [_rand_line(rng) for _ in range(k)]
        elif op == "delete":
            del tgt[pos:pos + k]
        else:
            tgt[pos:pos + k] = [_mutate(rng, s) for s in tgt[pos:pos + k]]
    return tgt


def _regions(hunks: list[HunkSpec], applied: bool) -> list[tuple[int, list[tuple[str, int]]]]:
    """For each hunk: (0-based start in the file, [(kind, 0-based file index)]) of
    the lines the hunk expects in the file (pre-image, or post-image if applied)."""
    out = []
    for h in hunks:
        want = " +" if applied else " -"
        start = (h.target_start if applied else h.source_start) - 1
        n = h.target_length if applied else h.source_length
        if n == 0:
            start += 1
        idx = start
        rows = []
        for ln in h.lines:
            if ln.kind in want:
                rows.append((ln.kind, idx))
                idx += 1
        out.append((start, rows))
    return out


def _perturb(rng: random.Random, lines: list[str], hunks: list[HunkSpec], applied: bool, kinds: set[str]) -> list[str]:
    lines = list(lines)
    regs = _regions(hunks, applied)
    # collect edits as (file index, action) and apply bottom-up
    edits: list[tuple[int, str, int]] = []  # (index, action, amount)
    for hi, (start, rows) in enumerate(regs):
        ctx_idx = [i for k, i in rows if k == " "]
        chg_idx = [i for k, i in rows if k != " "]
        lead = []
        for k, i in rows:
            if k != " ":
                break
            lead.append(i)
        trail = []
        for k, i in reversed(rows):
            if k != " ":
                break
            trail.append(i)
        r = rng.random()
        if "fuzz" in kinds and r < 0.5 and (lead or trail):
            side = lead if (lead and (not trail or rng.random() < 0.5)) else trail
            depth = rng.choice([1, 1, 2, 3])
            for i in side[:depth]:
                if rng.random() < 0.85:
                    edits.append((i, "mutate", 0))
        elif "inside" in kinds and r < 0.4 and (chg_idx or ctx_idx):
            i = rng.choice(chg_idx or ctx_idx)
            edits.append((i, "mutate", 0))
        elif "ws" in kinds and r < 0.4 and rows:
            i = rng.choice(rows)[1]
            edits.append((i, "ws", 0))
        if "offset" in kinds and rng.random() < 0.6:
            prev_end = regs[hi - 1][0] + len(regs[hi - 1][1]) if hi else 0
            lo, hi_ = prev_end, start
            if hi_ >= lo:
                pos = rng.randint(lo, hi_)
                if rng.random() < 0.65 or hi_ == lo:
                    edits.append((pos, "insert", rng.choice([1, 1, 2, 3, 5, 8])))
                else:
                    amount = min(rng.choice([1, 1, 2, 3]), hi_ - pos)
                    if amount > 0:
                        edits.append((pos, "delete", amount))
    if "random" in kinds and lines:
        edits.append((rng.randrange(len(lines)), "mutate", 0))
    edits.sort(key=lambda e: e[0], reverse=True)
    for i, action, amount in edits:
        if action == "insert":
            lines[i:i] = [_rand_line(rng) for _ in range(amount)]
        elif i >= len(lines):
            continue
        elif action == "delete":
            del lines[i:i + amount]
        elif action == "mutate":
            lines[i] = _mutate(rng, lines[i])
        elif action == "ws":
            s = lines[i]
            lines[i] = rng.choice([s + " ", s + "\t", " " + s, s.replace(" ", "  ", 1) if " " in s else s + " "])
    return lines


_KIND_MENU = [
    ("clean",),
    ("offset",),
    ("fuzz",),
    ("fuzz", "offset"),
    ("inside",),
    ("inside", "offset"),
    ("ws",),
    ("edges",),
    ("edges", "fuzz"),
    ("edges", "offset"),
    ("noeol",),
    ("noeol", "edges"),
    ("noeol", "fuzz"),
    ("applied",),
    ("applied", "offset"),
    ("applied", "fuzz"),
    ("applied", "edges"),
    ("multi", "inside"),
    ("multi", "inside", "offset"),
    ("multi", "fuzz", "offset"),
    ("empty",),
    ("random", "offset", "fuzz"),
    ("multi", "shuffled"),
    ("multi", "shuffled", "offset", "fuzz"),
    ("fuzz", "F0"),
    ("fuzz", "offset", "F1"),
    ("fuzz", "F3"),
]


def make_cases(seed: int = 20240607, count: int = 300) -> list[Case]:
    rng = random.Random(seed)
    cases: list[Case] = []
    attempt = 0
    while len(cases) < count:
        attempt += 1
        kinds = _KIND_MENU[len(cases) % len(_KIND_MENU)]
        kset = set(kinds)
        if "empty" in kset:
            if rng.random() < 0.5:
                base: list[str] = []
                tgt = [_rand_line(rng) for _ in range(rng.randint(1, 5))]
            else:
                base = [_rand_line(rng) for _ in range(rng.randint(1, 5))]
                tgt = []
        else:
            size = rng.choice([1, 2, 3, 5, 8, 12, 20, 30, 45, 60])
            base = [_rand_line(rng) for _ in range(size)]
            tgt = _edit(rng, base, "edges" in kset)
            if "multi" in kset:
                while len(tgt) < 25:
                    base = base + [_rand_line(rng) for _ in range(20)]
                    tgt = _edit(rng, base, False)
                for _ in range(2):
                    tgt = _edit(rng, tgt, False)
        base_eol = tgt_eol = True
        if "noeol" in kset:
            base_eol = rng.random() < 0.5
            tgt_eol = rng.random() < 0.5 if not base_eol else False
        elif rng.random() < 0.05:
            base_eol = tgt_eol = False
        # an empty last line without a newline does not exist in a real file
        if base and base[-1] == "":
            base_eol = True
        if tgt and tgt[-1] == "":
            tgt_eol = True
        ctx = rng.choice([0, 1, 2, 3, 3, 3])
        if "multi" in kset:
            ctx = rng.choice([1, 2, 3, 3])
        patch = make_diff(base, base_eol, tgt, tgt_eol, ctx)
        if not patch:
            continue
        hunks = parse_unified(patch)
        if "shuffled" in kset:
            if len(hunks) < 2:
                continue
            # hunks out of order: GNU looks for a later hunk before the
            # region an earlier one has consumed ("misordered hunks")
            order = list(range(len(hunks)))
            while order == sorted(order):
                rng.shuffle(order)
            patch = render([hunks[i] for i in order])
            assert parse_unified(patch) == [hunks[i] for i in order]
        applied = "applied" in kset
        subject, subject_eol = (tgt, tgt_eol) if applied else (base, base_eol)
        lines = _perturb(rng, subject, hunks, applied, kset)
        eol = subject_eol
        if "noeol" in kset and rng.random() < 0.3:
            eol = not eol
        if lines and lines[-1] == "":
            eol = True
        original = _join(lines, eol)
        max_fuzz = next((int(k[1:]) for k in kinds if k.startswith("F")), 2)
        cases.append(
            Case(f"case{len(cases):03d}-{'-'.join(kinds)}-U{ctx}", kinds, original, patch, parse_unified(patch), max_fuzz)
        )
    return cases


def original_lines(case: Case) -> tuple[list[str], bool]:
    return split_lines(case.original)
