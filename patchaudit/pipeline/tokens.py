"""The audit of `patchaudit tokens`: recorded rollout ids under decode and re-encode.

Every line of a JSONL file is one sample: a JSON object holding a list of token
ids under the field (a dotted path; a line that is itself a list of ids is taken
as it is).  For each sample `Auditor` checks `encode(decode(ids)) == ids`,
which is what an engine that decodes a token-id prompt and re-tokenizes it
does, and keeps each difference as a span of the recorded ids and what it
becomes.  Files are streamed in batches (decode and encode run in the
tokenizer's threads), so memory does not grow with the file.  A line that is
not valid JSON, lacks the field or holds something other than known ids is an
`InputError` of that line; the audit goes on.  The report is rendered by
patchaudit/reporters/tokens.py; the command is patchaudit/commands/tokens.py.
"""

from __future__ import annotations

import gzip
import io
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import IO, Any, Callable, Iterator, Sequence

from patchaudit.inputs.tokenizer import TokenizerError

#: samples decoded and re-encoded together
BATCH = 256
#: the longest JSONL line read (a recorded sample of a million ids is about 8 MB): a
#: longer one, such as a gzip "line bomb" that inflates to gigabytes without a newline,
#: is reported and skipped without being gathered in memory
MAX_LINE = 64 * 1024 * 1024
#: the largest JSONL file on disk read (recorded rollouts are streamed: only one line
#: is in memory at a time)
MAX_FILE = 1 << 40
#: the most characters the samples of one batch may decode to, by the tokenizer's longest
#: piece (patchaudit/inputs/tokenizer_bounds.py): a longer sample is an error of its line,
#: and a batch is checked early when its samples reach it (memory stays bounded whatever
#: the tokenizer's tokens)
MAX_DECODED = 128 * 1024 * 1024
_BOM = b"\xef\xbb\xbf"


class InputError(Exception):
    """One line (or file) that cannot be audited."""


# --------------------------------------------------------------------------
# the audit itself


@dataclass(frozen=True)
class Difference:
    """`ids[start:end]` of the recorded sample becomes `becomes` (at `new_start` of the re-encoding)."""

    start: int
    end: int
    new_start: int
    ids: tuple[int, ...]
    becomes: tuple[int, ...]

    def to_json(self, tok) -> dict[str, Any]:
        return {
            "start": self.start,
            "end": self.end,
            "ids": list(self.ids),
            "tokens": tok.tokens(self.ids),
            "new_start": self.new_start,
            "new_end": self.new_start + len(self.becomes),
            "becomes": list(self.becomes),
            "becomes_tokens": tok.tokens(self.becomes),
        }


@dataclass
class Sample:
    path: str
    line: int
    ids: list[int]
    sample_id: str | None = None
    reencoded: list[int] | None = None
    differences: list[Difference] = field(default_factory=list)

    @property
    def drifts(self) -> bool:
        return bool(self.differences)

    def to_json(self, tok) -> dict[str, Any]:
        return {
            "path": self.path,
            "line": self.line,
            "id": self.sample_id,
            "length": len(self.ids),
            "new_length": len(self.reencoded) if self.reencoded is not None else None,
            "drifts": self.drifts,
            "differences": [d.to_json(tok) for d in self.differences],
        }


#: the farthest a re-encoding may drift from the recorded ids before they agree again (ids
#: skipped on both sides together); past it the rest of the sample is one difference
MAX_RESYNC = 256


def diff_ids(a: Sequence[int], b: Sequence[int]) -> list[Difference]:
    """The spans where `a` (recorded) and `b` (re-encoded) differ, in work linear in their
    length: a re-encoding drifts locally (two ids merge, one splits), so after a
    difference the nearest point where both agree again (an id, or both ends)
    is looked for at most `MAX_RESYNC` ids ahead, and a short block between two
    agreements is split by difflib (`MAX_REFINED`).  (difflib on the whole record was
    cubic: one 30 KB record drifting every third id took four minutes.)"""
    if a == b:
        return []
    out: list[Difference] = []
    i = j = 0
    na, nb = len(a), len(b)
    while i < na and j < nb:
        if a[i] == b[j]:
            i += 1
            j += 1
            continue
        skip = _resync(a, b, i, j)
        if skip is None:
            break
        di, dj = skip
        out.extend(_block(a, b, i, i + di, j, j + dj))
        i, j = i + di, j + dj
    if i < na or j < nb:
        out.append(Difference(i, na, j, tuple(a[i:]), tuple(b[j:])))
    return out


#: a block between two agreements this short is split as difflib would (drifts one id apart)
MAX_REFINED = 64


def _block(a: Sequence[int], b: Sequence[int], i1: int, i2: int, j1: int, j2: int) -> list[Difference]:
    """The differences of a[i1:i2] and b[j1:j2]: one, or difflib's for a short block."""
    if (i2 - i1) + (j2 - j1) > MAX_REFINED:
        return [Difference(i1, i2, j1, tuple(a[i1:i2]), tuple(b[j1:j2]))]
    out = []
    for tag, x1, x2, y1, y2 in SequenceMatcher(a=a[i1:i2], b=b[j1:j2], autojunk=False).get_opcodes():
        if tag != "equal":
            out.append(Difference(i1 + x1, i1 + x2, j1 + y1, tuple(a[i1 + x1 : i1 + x2]), tuple(b[j1 + y1 : j1 + y2])))
    return out


def _resync(a: Sequence[int], b: Sequence[int], i: int, j: int) -> tuple[int, int] | None:
    """The fewest ids (di, dj) to skip from a mismatch at a[i], b[j] to where the two agree
    again (balanced skips first: a replacement), or None within MAX_RESYNC.  The search
    costs d * d for a skip of d ids: linear in the sample for a bounded d."""
    na, nb = len(a), len(b)
    for d in range(1, MAX_RESYNC + 1):
        for di in sorted(range(d + 1), key=lambda k: (abs(2 * k - d), k)):
            x, y = i + di, j + d - di
            if x > na or y > nb:
                continue
            if x == na or y == nb:
                if x == na and y == nb:
                    return di, d - di
                continue
            if a[x] == b[y]:
                return di, d - di
    return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {dict: "an object", list: "an array", str: "a string", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )


def get_field(obj: Any, dotted: str) -> Any:
    """`obj["a"]["b"][0]` for "a.b.0"; InputError naming what is missing."""
    cur = obj
    walked: list[str] = []
    for part in dotted.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            where = f" in {'.'.join(walked)!r}" if walked else ""
            kind = _json_type(cur)
            keys = ""
            if isinstance(cur, dict) and cur:
                keys = " (keys: " + ", ".join(list(map(str, cur))[:8]) + (", ..." if len(cur) > 8 else "") + ")"
            raise InputError(f"no field {part!r}{where} of {kind}{keys}; choose one with --field")
        walked.append(part)
    return cur


class Auditor:
    """Checks samples in batches and keeps the run's counts (bounded memory)."""

    def __init__(self, tok, *, field: str = "tokens", id_field: str | None = None, batch: int = BATCH):
        self.tok = tok
        self.field = field
        self.id_field = id_field
        self.batch = max(1, batch)
        self.checked = 0
        self.drifting = 0
        self.tokens_checked = 0
        self.tokens_drifting = 0
        self.pairs: Counter[tuple[tuple[int, ...], tuple[int, ...]]] = Counter()
        self.pair_samples: Counter[tuple[tuple[int, ...], tuple[int, ...]]] = Counter()
        self._max_id = tok.max_id
        self._holes = tok.has_holes()

    # ----- one line --------------------------------------------------------
    def parse_line(self, raw: bytes | None) -> tuple[list[int], str | None] | None:
        """The ids (and sample id) of one JSONL line; None for a blank line; InputError otherwise.

        `raw` is None for a line longer than `MAX_LINE` (see `iter_lines`)."""
        if raw is None:
            raise InputError(f"line longer than {MAX_LINE} bytes: not read")
        if not raw.strip():
            return None
        try:
            obj = json.loads(raw)
        except UnicodeDecodeError as exc:
            raise InputError(f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})") from None
        except json.JSONDecodeError as exc:
            raise InputError(f"not valid JSON: {exc.msg} (column {exc.colno})") from None
        except RecursionError:
            raise InputError("not read: JSON nested too deeply") from None
        except ValueError as exc:  # a number of more than 4300 digits (Python's int-string limit)
            raise InputError(f"not read: {str(exc).split(':')[0]}") from None
        if isinstance(obj, list):
            value = obj
        elif isinstance(obj, dict):
            value = get_field(obj, self.field)
        else:
            raise InputError(f"expected a JSON object or a list of ids, got {_json_type(obj)}")
        if not isinstance(value, list):
            raise InputError(f"field {self.field!r} is {_json_type(value)}, not a list of token ids")
        if not set(map(type, value)) <= {int}:
            k, v = next((k, v) for k, v in enumerate(value) if type(v) is not int)
            raise InputError(f"field {self.field!r}: item {k} is {json.dumps(v)[:40]}, not a token id")
        if value:
            lo, hi = min(value), max(value)
            if lo < 0 or hi > self._max_id:
                bad = lo if lo < 0 else hi
                raise InputError(
                    f"field {self.field!r}: id {bad} is not in the tokenizer's vocabulary "
                    f"(ids 0..{self._max_id}); is this the model's tokenizer?"
                )
            if self._holes:
                hole = next((v for v in value if not self.tok.is_valid_id(v)), None)
                if hole is not None:
                    raise InputError(f"field {self.field!r}: id {hole} is not in the tokenizer's vocabulary")
        sample_id = None
        if self.id_field and isinstance(obj, dict):
            try:
                sid = get_field(obj, self.id_field)
                sample_id = sid if isinstance(sid, str) else json.dumps(sid)
            except InputError:
                sample_id = None
        return value, sample_id

    # ----- batches ---------------------------------------------------------
    def check_batch(self, samples: list[Sample]) -> None:
        if not samples:
            return
        texts = self.tok.decode_batch([s.ids for s in samples])
        again = self.tok.encode_batch(texts)
        for s, new in zip(samples, again):
            s.reencoded = new
            s.differences = diff_ids(s.ids, new)
            self.checked += 1
            self.tokens_checked += len(s.ids)
            if s.differences:
                self.drifting += 1
                seen = set()
                for d in s.differences:
                    key = (d.ids, d.becomes)
                    self.pairs[key] += 1
                    self.tokens_drifting += len(d.ids)
                    if key not in seen:
                        self.pair_samples[key] += 1
                        seen.add(key)

    def top_pairs(self, n: int) -> list[dict[str, Any]]:
        out = []
        for (ids, becomes), count in self.pairs.most_common(n if n > 0 else None):
            out.append(
                {
                    "ids": list(ids),
                    "tokens": self.tok.tokens(ids),
                    "becomes": list(becomes),
                    "becomes_tokens": self.tok.tokens(becomes),
                    "count": count,
                    "samples": self.pair_samples[(ids, becomes)],
                }
            )
        return out


# --------------------------------------------------------------------------
# reading files


class _Counting(io.RawIOBase):
    """Counts the bytes read from the file on disk (progress for plain and gzip files alike)."""

    def __init__(self, raw: io.BufferedIOBase | io.RawIOBase):
        self.raw = raw
        self.pos = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = self.raw.readinto(b)
        self.pos += n or 0
        return n

    def close(self) -> None:
        self.raw.close()
        super().close()


def iter_lines(path: str, on_read: Callable[[int], None] | None = None) -> Iterator[tuple[int, bytes | None]]:
    """(line number, raw line) of a JSONL file, `.gz` read on the fly; InputError for the file.

    The file is opened through the one guarded reader (a regular file: a FIFO or a
    device such as /dev/zero is refused, never read).  A line longer than `MAX_LINE`
    bytes, as a gzip line bomb inflates to, is skipped as it is read, never kept: it
    is yielded as `(n, None)`, and the lines after it are read as usual."""
    import zlib

    from patchaudit.files.reader import ReadError, open_regular
    from patchaudit.inputs.discover import read_error_message

    try:
        raw = open_regular(path, MAX_FILE)
    except ReadError as exc:
        if not os.path.lexists(path):
            raise InputError("no such file") from None
        raise InputError(read_error_message(exc)) from None
    counting = _Counting(raw)
    stream: IO[bytes] = io.BufferedReader(counting, 1 << 20)
    if path.endswith(".gz"):
        stream = io.BufferedReader(gzip.GzipFile(fileobj=stream, mode="rb"), 1 << 20)  # type: ignore[arg-type]
    n = 0
    try:
        last = 0
        while True:
            line: bytes | None = stream.readline(MAX_LINE + 1)
            if not line:
                break
            n += 1
            if len(line) > MAX_LINE and not line.endswith(b"\n"):
                while True:  # the rest of the line, in bounded pieces, dropped
                    piece = stream.readline(1 << 20)
                    if not piece or piece.endswith(b"\n"):
                        break
                line = None
            elif n == 1 and line.startswith(_BOM):
                line = line[len(_BOM) :]
            if on_read is not None and counting.pos != last:
                on_read(counting.pos - last)
                last = counting.pos
            yield n, line
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(f"cannot read{f' after line {n}' if n else ''}: {exc}") from None
    finally:
        stream.close()


# --------------------------------------------------------------------------
# the files of a run


def _checked_alone(aud: Auditor, sample: Sample, error: Callable[[str, int | None, str], None]) -> bool:
    """Check one sample of a batch the tokenizer failed on; its failure is an error of its line."""
    try:
        aud.check_batch([sample])
    except TokenizerError as exc:
        error(sample.path, sample.line, f"the tokenizer failed on this sample: {exc}")
        return False
    return True


def audit_files(
    files: Sequence[str],
    aud: Auditor,
    *,
    on_read: Callable[[int], None],
    on_error: Callable[[str, int | None, str], None],
    on_batch: Callable[[list[Sample]], None],
) -> tuple[list[dict[str, Any]], int]:
    """Audit the JSONL `files` with `aud`: each batch of checked samples goes to
    `on_batch`, each line or file that cannot be read to `on_error` (path, line or
    None, message), the bytes read to `on_read`.  Returns (per-file counts, errors)."""
    error_count = 0
    per_file: list[dict[str, Any]] = []

    def error(path: str, line: int | None, message: str) -> None:
        nonlocal error_count
        error_count += 1
        on_error(path, line, message)

    decoded = 0  # of `pending`, bounded by MAX_DECODED

    def flush(pending: list[Sample]) -> None:
        nonlocal decoded
        try:
            aud.check_batch(pending)
        except TokenizerError:  # one sample failed the tokenizer (its regex engine's retry limit, say)
            pending[:] = [s for s in pending if _checked_alone(aud, s, error)]
        on_batch(pending)
        pending.clear()
        decoded = 0

    for path in files:
        before = (aud.checked, aud.drifting)
        file_errors = error_count
        pending: list[Sample] = []
        if os.path.isdir(path):
            error(path, None, "is a directory; give JSONL files")
            continue
        try:
            for n, raw in iter_lines(path, on_read):
                try:
                    parsed = aud.parse_line(raw)
                except InputError as exc:
                    error(path, n, str(exc))
                    continue
                if parsed is None:
                    continue
                size = len(parsed[0]) * getattr(aud.tok, "max_piece", 1)
                if size > MAX_DECODED:
                    error(path, n, f"{len(parsed[0]):,} ids may decode to {size:,} characters with this tokenizer "
                                   f"(limit {MAX_DECODED:,}): not audited")  # fmt: skip
                    continue
                if decoded + size > MAX_DECODED:
                    flush(pending)
                pending.append(Sample(path, n, parsed[0], parsed[1]))
                decoded += size
                if len(pending) >= aud.batch:
                    flush(pending)
        except FileNotFoundError:
            error(path, None, "no such file")
        except OSError as exc:
            error(path, None, f"cannot read: {exc.strerror or exc}")
        except InputError as exc:
            error(path, None, str(exc))
        flush(pending)
        per_file.append(
            {
                "path": path,
                "samples": aud.checked - before[0],
                "drifting": aud.drifting - before[1],
                "errors": error_count - file_errors,
            }
        )
    return per_file, error_count
