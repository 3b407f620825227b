"""The transcription of GNU patch 2.7.6's ``locate_hunk``/``patch_match``/``apply_hunk``/
``copy_till`` (see `patchaudit.patching.apply`), searching through the line index."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Optional

from patchaudit.patching import costs
from patchaudit.patching.nearmatch import NearMatch
from patchaudit.patching.sides import Misordered, Side, split_lines
from patchaudit.patching.suffixes import Suffixes


class Span:
    """The positions one search tries, in GNU's order: forward ones fg + o for o in
    [min_offset, fmax] (key 2 (o - min_offset)), visited upwards, and backward ones fg - o
    for o in [min_offset, bmax] (key 2 (o - min_offset) + 1), visited downwards."""

    __slots__ = ("fg", "min_offset", "has_f", "has_b", "flo", "fhi", "blo", "bhi")

    def __init__(self, fg: int, min_offset: int, fmax: int, bmax: int) -> None:
        self.fg, self.min_offset = fg, min_offset
        self.has_f = min_offset <= fmax
        self.has_b = min_offset <= bmax
        self.flo, self.fhi = fg + min_offset, fg + fmax  # forward positions, visited upwards
        self.blo, self.bhi = fg - bmax, fg - min_offset  # backward positions, visited downwards

    def key(self, pos: int) -> float:
        """The position's place in the search order (costs.NEVER: not searched)."""
        best = costs.NEVER
        if self.has_f and self.flo <= pos <= self.fhi:
            best = 2 * (pos - self.fg - self.min_offset)
        if self.has_b and self.blo <= pos <= self.bhi:
            best = min(best, 2 * (self.fg - pos - self.min_offset) + 1)
        return best

    def first(self) -> Optional[int]:
        """The first position searched (the answer when every position matches)."""
        return self.flo if self.has_f else (self.bhi if self.has_b else None)


class Matcher(NearMatch):
    """One file being patched: where each hunk goes, and the output written so far."""

    # -- output ------------------------------------------------------------
    def _write(self, s: str) -> int:
        """Write raw text; return the output line number it lands on."""
        line_no = self.nl_count + 1
        if s:
            self.chunks.append(s)
            self.nl_count += s.count("\n")
        return line_no

    def _put_newline(self) -> None:
        self._write("\n")

    def copy_till(self, lastline: int) -> None:
        lfl = self.last_frozen_line
        if lfl > lastline:
            raise Misordered
        while lfl < lastline:
            lfl += 1
            s = self.ifetch(lfl)
            if s:
                if not self.after_newline:
                    self._put_newline()
                self.out_line_of_input[lfl] = self._write(s)
                self.after_newline = s.endswith("\n")
        self.last_frozen_line = lfl

    # -- matching ----------------------------------------------------------
    def patch_match(self, side: Side, base: int, offset: int, prefix_fuzz: int, suffix_fuzz: int) -> bool:
        texts = side.texts
        pline = 1 + prefix_fuzz
        pat_lines = len(texts) - suffix_fuzz
        iline = base + offset + prefix_fuzz
        if pline > pat_lines:
            return True
        self.work += pat_lines - pline + 1
        last = iline + pat_lines - pline
        if iline >= 1 and last <= self.input_lines:  # fast path: all lines exist
            return self.inp[iline - 1 : last] == texts[pline - 1 : pat_lines]
        while pline <= pat_lines:
            if self.ifetch(iline) != texts[pline - 1]:
                return False
            pline += 1
            iline += 1
        return True

    def locate_hunk(self, side: Side, fuzz: int, in_offset: int) -> tuple[int, int]:
        """patch.c locate_hunk(); returns (where, new in_offset), where 0 = not found."""
        first_guess = side.first + in_offset
        pat_lines = len(side.pat)
        prefix_context = side.prefix_context
        suffix_context = side.suffix_context
        context = max(prefix_context, suffix_context)
        prefix_fuzz = fuzz + prefix_context - context
        suffix_fuzz = fuzz + suffix_context - context
        max_where = self.input_lines - (pat_lines - suffix_fuzz) + 1
        min_where = self.last_frozen_line + 1
        max_pos_offset = max_where - first_guess
        max_neg_offset = first_guess - min_where
        max_offset = max(max_pos_offset, max_neg_offset)

        if not pat_lines:  # null range matches always
            return first_guess, in_offset

        # Do not try lines <= 0.
        if first_guess <= max_neg_offset:
            max_neg_offset = first_guess - 1

        if prefix_fuzz < 0 and side.first <= 1:
            # Can only match start of file.
            if suffix_fuzz < 0:
                # Can only match entire file.
                if pat_lines != self.input_lines or prefix_context < self.last_frozen_line:
                    return 0, in_offset
            offset = 1 - first_guess
            if (
                self.last_frozen_line <= prefix_context
                and offset <= max_pos_offset
                and self.patch_match(side, first_guess, offset, 0, suffix_fuzz)
            ):
                return first_guess + offset, in_offset + offset
            return 0, in_offset
        elif prefix_fuzz < 0:
            prefix_fuzz = 0

        if suffix_fuzz < 0:
            # Can only match end of file.
            offset = first_guess - (self.input_lines - pat_lines + 1)
            if offset <= max_neg_offset and self.patch_match(side, first_guess, -offset, prefix_fuzz, 0):
                return first_guess - offset, in_offset - offset
            return 0, in_offset

        if max_pos_offset < 0:
            min_offset = first_guess - max_where
        elif max_neg_offset < 0:
            min_offset = first_guess - min_where
        else:
            min_offset = 0
        if max_offset - min_offset > costs.INDEX_MIN_SPAN:
            # The positions GNU tries, in its order: for offset = min_offset .. max_offset,
            # first_guess + offset (while offset <= max_pos_offset), then first_guess - offset
            # (while offset <= max_neg_offset); the first that matches wins.
            where = self._search(
                side,
                first_guess,
                prefix_fuzz,
                pat_lines - suffix_fuzz,
                min_offset,
                min(max_offset, max_pos_offset),
                min(max_offset, max_neg_offset),
            )
            if where is None:
                return 0, in_offset
            return where, in_offset + where - first_guess
        for offset in range(min_offset, max_offset + 1):
            if offset <= max_pos_offset and self.patch_match(side, first_guess, offset, prefix_fuzz, suffix_fuzz):
                return first_guess + offset, in_offset + offset
            if offset <= max_neg_offset and self.patch_match(side, first_guess, -offset, prefix_fuzz, suffix_fuzz):
                return first_guess - offset, in_offset - offset
        return 0, in_offset

    def _search(self, side: Side, fg: int, a: int, b: int, min_offset: int, fmax: int, bmax: int) -> Optional[int]:
        """The first position, in GNU's order, where texts[a:b] matches (text a at the
        position + a): forward positions fg + o for o in [min_offset, fmax] (key
        2 (o - min_offset)), backward positions fg - o for o in [min_offset, bmax] (key
        2 (o - min_offset) + 1).  Lines outside the file read as "" (GNU's ifetch)."""
        span = Span(fg, min_offset, fmax, bmax)
        m = b - a
        if m <= 0:  # nothing to compare: the first position matches
            return span.first()
        n_lines = self.input_lines
        texts = side.texts
        self.work += 1

        lead = 0  # leading and trailing "" texts: they match the lines outside the file
        while lead < m and texts[a + lead] == "":
            lead += 1
        if lead == m:
            return self._search_blank(span, a, b)
        trail = 0
        while texts[b - 1 - trail] == "":
            trail += 1

        ids, counts = self._pattern(side)
        best_key, best_pos = costs.NEVER, None
        # windows that stick out of the file: only their "" texts may lie outside
        for pos in list(range(1 - a - lead, 1 - a)) + list(range(n_lines - b + 2, n_lines - b + 2 + trail)):
            k = span.key(pos)
            if k < best_key and self._match_outside(side, pos, a, b, lead, trail):
                best_key, best_pos = k, pos
        if m > n_lines:
            return best_pos
        # windows inside the file: anchored on the pattern's rarest line
        anchor = a
        for i in range(a, b):
            if counts[i] < counts[anchor]:
                anchor = i
        self.work += m
        if counts[anchor] == 0:  # a line the file lacks: no window inside the file matches
            return best_pos
        return self._search_inside(side, span, a, b, anchor, ids, best_key, best_pos)

    def _search_blank(self, span: "Span", a: int, b: int) -> Optional[int]:
        """_search when the texts a:b are all "": every window that has no line of the file
        but "" (only the last line can be "", when it lacks its newline) matches: pos <= 1 - b,
        or pos >= bad + 1 - a where lines 1..bad are not ""."""
        n_lines = self.input_lines
        bad = n_lines - 1 if n_lines and self.inp[-1] == "" else n_lines
        if bad == 0:
            return span.first()
        low, high = 1 - b, bad + 1 - a
        found = []
        if span.has_f:
            if span.flo <= low:
                found.append(span.flo)
            elif max(span.flo, high) <= span.fhi:
                found.append(max(span.flo, high))
        if span.has_b:
            if span.bhi >= high:
                found.append(span.bhi)
            elif min(span.bhi, low) >= span.blo:
                found.append(min(span.bhi, low))
        return min(found, key=span.key) if found else None

    def _search_inside(
        self,
        side: Side,
        span: "Span",
        a: int,
        b: int,
        anchor: int,
        ids: list[int],
        best_key: float,
        best_pos: Optional[int],
    ) -> Optional[int]:
        """_search over the windows inside the file: the candidates put the pattern's
        rarest line (`anchor`) on one of its occurrences; the first, in GNU's order, that
        matches and comes before `best_key` (a window sticking out) wins."""
        fg, min_offset, m = span.fg, span.min_offset, b - a
        lo_in, hi_in = 1 - a, self.input_lines - b + 1  # positions whose window is inside the file
        f_lo, f_hi = max(span.flo, lo_in), min(span.fhi, hi_in)
        b_lo, b_hi = max(span.blo, lo_in), min(span.bhi, hi_in)
        if not span.has_f:
            f_lo, f_hi = 1, 0
        if not span.has_b:
            b_lo, b_hi = 1, 0
        order = self._order
        occ_lo, occ_hi = self._occ(ids[anchor])
        shift = anchor  # candidate position = anchor line - shift
        fi = bisect_left(order, f_lo + shift, occ_lo, occ_hi)
        f_end = bisect_right(order, f_hi + shift, occ_lo, occ_hi)
        bi = bisect_right(order, b_hi + shift, occ_lo, occ_hi) - 1
        b_end = bisect_left(order, b_lo + shift, occ_lo, occ_hi) - 1
        self.work += 4
        inp, pat = self.inp, side.texts[a:b]
        want: Optional[int] = None  # the pattern's hash, once candidates are checked by hash
        limit = costs.SCAN_LIMIT if self._sa is None else costs.SCAN_LIMIT_WITH_SA
        tried = 0
        never = costs.NEVER
        while True:
            kf = 2 * (order[fi] - shift - fg - min_offset) if fi < f_end else never
            kb = 2 * (fg - order[bi] + shift - min_offset) + 1 if bi > b_end else never
            if min(kf, kb) >= best_key:
                break
            if tried >= limit:
                # every occurrence of the rarest line so far was a miss: ask the suffix array
                # for the first whole-pattern occurrence in each direction
                f_from = order[fi] - shift if fi < f_end else None
                b_from = order[bi] - shift if bi > b_end else None
                for pos in self._sa_search(ids[a:b], a, f_from, f_hi, b_lo, b_from):
                    k = span.key(pos)
                    if k < best_key:
                        best_key, best_pos = k, pos
                break
            tried += 1
            if kf < kb:
                pos = order[fi] - shift
                fi += 1
                k = kf
            else:
                pos = order[bi] - shift
                bi -= 1
                k = kb
            x = pos + a  # the window's first line
            if tried <= costs.SLICE_CHECKS:
                # the first candidates (usually the first one matches) line by line
                self.work += m
                if inp[x - 1 : x - 1 + m] == pat:
                    best_key, best_pos = k, pos
                    break
                continue
            if want is None:
                want = self._pattern_hash(side, a, b)
            self.work += 1
            if self._window_hash(x, m) == want:
                self.work += m
                if inp[x - 1 : x - 1 + m] == pat:
                    best_key, best_pos = k, pos
                    break
        self.work += tried
        return best_pos

    def _match_outside(self, side: Side, pos: int, a: int, b: int, lead: int, trail: int) -> bool:
        """Does texts[a:b] match at pos, a window that sticks out of the file?"""
        n_lines = self.input_lines
        below = max(0, 1 - (pos + a))  # pattern lines before line 1
        above = max(0, pos + b - 1 - n_lines)  # pattern lines after the last line
        if below > lead or above > trail or below + above >= b - a:
            return False  # (a window wholly outside needs only "", handled by the caller)
        i0, i1 = a + below, b - above  # pattern lines inside the file
        x, m = pos + i0, i1 - i0  # ... at file lines x .. x + m - 1
        self.work += 1
        if self._window_hash(x, m) != self._pattern_hash(side, i0, i1):
            return False
        self.work += m
        return self.inp[x - 1 : x - 1 + m] == side.texts[i0:i1]

    def _sa_search(
        self, pat: list[int], a: int, f_from: Optional[int], f_hi: int, b_lo: int, b_from: Optional[int]
    ) -> list[int]:
        """Positions of the first whole-pattern occurrences (window inside the file) in
        [f_from, f_hi] (the lowest) and in [b_lo, b_from] (the highest)."""
        sa = self._sa
        before = sa.work if sa is not None else 0
        if sa is None or sa.depth < len(pat):
            assert self._ids is not None
            before = 0
            # sorted deep enough for every pattern of this call (a longer one re-sorts deeper)
            sa = self._sa = Suffixes(self._ids, max(len(pat), self.max_pattern, 2 * (sa.depth if sa else 0)))
            self._sa_rows.clear()
        key = tuple(pat)
        self.work += len(pat)
        rows = self._sa_rows.get(key)
        if rows is None:
            rows = self._sa_rows[key] = sa.interval(pat)
        lo, hi = rows
        out = []
        if lo < hi:
            # a window whose first line is x starts at index x - 1 of the sequence; pos = x - a
            if f_from is not None and f_from <= f_hi:
                s = sa.first_at_or_after(lo, hi, f_from + a - 1)
                if s is not None and s + 1 - a <= f_hi:
                    out.append(s + 1 - a)
            if b_from is not None and b_lo <= b_from:
                s = sa.last_at_or_before(lo, hi, b_from + a - 1)
                if s is not None and s + 1 - a >= b_lo:
                    out.append(s + 1 - a)
        self.work += sa.work - before
        return out

    # -- applying ----------------------------------------------------------
    def apply_hunk(
        self, side: Side, where: int, hunk_index: int, origin: dict[int, tuple[int, int]], emit: bool
    ) -> None:
        """patch.c apply_hunk().  emit=False: the hunk is already applied (side
        is the swapped hunk); walk it to advance last_frozen_line like
        ``patch -R`` would, but keep the file's lines.  Raises Misordered."""
        pat, repl = side.pat, side.repl
        old = 1
        lastline = len(pat)
        new = 1
        pat_end = len(repl)
        where -= 1
        while old <= lastline:
            if pat[old - 1][0] == "-":
                self.copy_till(where + old - 1)
                if emit:
                    self.last_frozen_line += 1  # skip the removed line
                else:
                    # the "removed" line is the file's own post-image line: keep it
                    self.copy_till(self.last_frozen_line + 1)
                old += 1
            elif new > pat_end:
                break
            elif repl[new - 1][0] == "+":
                self.copy_till(where + old - 1)
                if emit:
                    self._write_patch_line(repl[new - 1], hunk_index, origin)
                new += 1
            else:  # both context
                old += 1
                new += 1
        if new <= pat_end and repl[new - 1][0] == "+":
            self.copy_till(where + old - 1)
            while new <= pat_end and repl[new - 1][0] == "+":
                if emit:
                    if not self.after_newline:
                        self._put_newline()
                    self._write_patch_line(repl[new - 1], hunk_index, origin)
                new += 1
        if emit:
            self.out_offset += len(repl) - len(pat)

    def _write_patch_line(
        self, item: tuple[str, str, int], hunk_index: int, origin: dict[int, tuple[int, int]]
    ) -> None:
        _, body, idx = item
        line_no = self._write(body)
        self.after_newline = bool(body) and body.endswith("\n")
        origin.setdefault(line_no, (hunk_index, idx))

    def finish(self) -> tuple[list[str], bool]:
        if self.last_frozen_line < self.input_lines:
            self.copy_till(self.input_lines)
        return split_lines("".join(self.chunks))
