"""`patchaudit tokens --tokenizer PATH FILE.jsonl...`: drift exposure of recorded rollout ids.

Every line of a JSONL file is one sample: a JSON object holding a list of token
ids under `--field` (a dotted path; a line that is itself a list of ids is taken
as it is).  For each sample the command checks `encode(decode(ids)) == ids`,
which is what an engine that decodes a token-id prompt and re-tokenizes it
does, and reports each difference as a span of the recorded ids and what it
becomes: `[14:16] [479, 3770] ('Ġtr', 'uly') -> [9149] ('Ġtruly')`.

Files are streamed in batches (decode and encode run in the tokenizer's
threads), so memory does not grow with the file; a progress bar is drawn on
stderr when it is a terminal.  A line that is not valid JSON, lacks the field
or holds something other than known ids is reported as `FILE:LINE: error: ...`
and skipped; the run goes on.  Exit code: 0 nothing drifts, 1 some sample
drifts, 2 a file, line or the tokenizer could not be read.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import IO, Any, Callable, Iterator, Sequence

import click

from patchaudit.model.escape import json_text, safe, safe_lines, visible

#: samples decoded and re-encoded together
BATCH = 256
#: errors kept for the JSON report (all of them go to stderr)
MAX_ERRORS_KEPT = 1000
#: the longest JSONL line read (a recorded sample of a million ids is about 8 MB): a
#: longer one, such as a gzip "line bomb" that inflates to gigabytes without a newline,
#: is reported and skipped without being gathered in memory
MAX_LINE = 64 * 1024 * 1024
#: the largest JSONL file on disk read (recorded rollouts are streamed: only one line
#: is in memory at a time)
MAX_FILE = 1 << 40
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
        return {"start": self.start, "end": self.end, "ids": list(self.ids), "tokens": tok.tokens(self.ids),
                "new_start": self.new_start, "new_end": self.new_start + len(self.becomes),
                "becomes": list(self.becomes), "becomes_tokens": tok.tokens(self.becomes)}


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
        return {"path": self.path, "line": self.line, "id": self.sample_id, "length": len(self.ids),
                "new_length": len(self.reencoded) if self.reencoded is not None else None,
                "drifts": self.drifts, "differences": [d.to_json(tok) for d in self.differences]}


def diff_ids(a: Sequence[int], b: Sequence[int]) -> list[Difference]:
    """The spans where `a` (recorded) and `b` (re-encoded) differ."""
    if a == b:
        return []
    n = min(len(a), len(b))
    p = 0
    while p < n and a[p] == b[p]:
        p += 1
    s = 0
    while s < n - p and a[len(a) - 1 - s] == b[len(b) - 1 - s]:
        s += 1
    mid_a, mid_b = a[p:len(a) - s], b[p:len(b) - s]
    out = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(a=mid_a, b=mid_b, autojunk=False).get_opcodes():
        if tag != "equal":
            out.append(Difference(p + i1, p + i2, p + j1, tuple(mid_a[i1:i2]), tuple(mid_b[j1:j2])))
    return out


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {dict: "an object", list: "an array", str: "a string", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__)


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
        except ValueError as exc:   # a number of more than 4300 digits (Python's int-string limit)
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
                raise InputError(f"field {self.field!r}: id {bad} is not in the tokenizer's vocabulary "
                                 f"(ids 0..{self._max_id}); is this the model's tokenizer?")
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
            out.append({"ids": list(ids), "tokens": self.tok.tokens(ids), "becomes": list(becomes),
                        "becomes_tokens": self.tok.tokens(becomes), "count": count,
                        "samples": self.pair_samples[(ids, becomes)]})
        return out


# --------------------------------------------------------------------------
# reading files


class _Counting(io.RawIOBase):
    """Counts the bytes read from the file on disk (progress for plain and gzip files alike)."""

    def __init__(self, raw: IO[bytes]):
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

    from patchaudit.inputs.discover import read_error_message
    from patchaudit.files.reader import ReadError, open_regular

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
                while True:   # the rest of the line, in bounded pieces, dropped
                    piece = stream.readline(1 << 20)
                    if not piece or piece.endswith(b"\n"):
                        break
                line = None
            elif n == 1 and line.startswith(_BOM):
                line = line[len(_BOM):]
            if on_read is not None and counting.pos != last:
                on_read(counting.pos - last)
                last = counting.pos
            yield n, line
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(f"cannot read{f' after line {n}' if n else ''}: {exc}") from None
    finally:
        stream.close()


# --------------------------------------------------------------------------
# output


class Progress:
    """A one-line progress bar on a terminal (stderr); `clear()` before printing other lines."""

    WIDTH = 28

    def __init__(self, total: int, stream: IO[str], enabled: bool):
        self.total = max(total, 1)
        self.done = 0
        self.stream = stream
        self.enabled = enabled
        self.note = ""
        self._shown = False

    def advance(self, n: int) -> None:
        self.done += n

    def render(self, note: str | None = None) -> None:
        if not self.enabled:
            return
        if note is not None:
            self.note = note
        frac = min(self.done / self.total, 1.0)
        fill = int(frac * self.WIDTH)
        mb = 1024 * 1024
        bar = (f"\r\x1b[K[{'#' * fill}{'-' * (self.WIDTH - fill)}] {frac * 100:5.1f}% "
               f"{self.done / mb:.1f}/{self.total / mb:.1f} MB  {safe(self.note)}")
        self.stream.write(bar)  # output-safe: numbers, and the note escaped
        self.stream.flush()
        self._shown = True

    def clear(self) -> None:
        if self.enabled and self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False


def _fmt_span(ids: Sequence[int], toks: Sequence[str]) -> str:
    return f"[{', '.join(map(str, ids))}] ({', '.join(visible(repr(t)) for t in toks)})"


def format_sample(s: Sample, tok) -> str:
    """A sample's lines of the text report; every value escaped (patchaudit/model/escape.py)."""
    who = f" (id {visible(s.sample_id)})" if s.sample_id is not None else ""
    where = f"{visible(s.path)}:{s.line}{who}"
    if not s.differences:
        return safe_lines(f"{where}: round-trips unchanged, length {len(s.ids)}")
    n = len(s.differences)
    head = (f"{where}: drifts under decode and re-encode: {n} difference{'s' * (n != 1)}, "
            f"length {len(s.ids)} -> {len(s.reencoded or [])}")
    lines = [head]
    for d in s.differences:
        lines.append(f"    [{d.start}:{d.end}] {_fmt_span(d.ids, tok.tokens(d.ids))} -> "
                     f"{_fmt_span(d.becomes, tok.tokens(d.becomes))}")
    return safe_lines("\n".join(lines))


class Writer:
    """Streams the report: text lines, or one JSON document whose sample list is written as it grows."""

    def __init__(self, out: IO[str], fmt: str, progress: Progress, clear_for_out: bool):
        self.out = out
        self.fmt = fmt
        self.progress = progress
        self.clear_for_out = clear_for_out
        self._n = 0

    def _write(self, text: str) -> None:
        if self.clear_for_out:
            self.progress.clear()
        self.out.write(text)

    def begin(self, header: dict[str, Any]) -> None:
        if self.fmt == "json":
            head = json_text(header)[:-2]  # drop the closing "\n}"
            self._write(head + ',\n  "samples": [')

    def sample(self, s: Sample, tok) -> None:
        if self.fmt == "json":
            self._write(("," if self._n else "") + "\n    " + json_text(s.to_json(tok), indent=None))
        else:
            self._write(format_sample(s, tok) + "\n")
        self._n += 1

    def end(self, summary: dict[str, Any], errors: list[dict[str, Any]], top_text: str) -> None:
        if self.fmt == "json":
            tail = json_text({"errors": errors, "summary": summary})
            self._write(("\n  " if self._n else "") + "],\n" + tail[2:] + "\n")
        else:
            self._write(safe_lines(top_text))


def summary_text(aud: Auditor, files: int, errors: int, top: int) -> str:
    pct = f" ({100.0 * aud.drifting / aud.checked:.1f}%)" if aud.checked else ""
    lines = [f"Checked {aud.checked} sample{'s' * (aud.checked != 1)} ({aud.tokens_checked} tokens) in {files} "
             f"file{'s' * (files != 1)}: {aud.drifting} would drift under decode and re-encode{pct}."]
    if errors:
        lines.append(f"{errors} line{'s' * (errors != 1)} or file{'s' * (errors != 1)} could not be read "
                     f"(see the errors above).")
    pairs = aud.top_pairs(top)
    if pairs:
        lines.append("Most frequent drifting spans:")
        for p in pairs:
            lines.append(f"  {p['count']:>6}x  {_fmt_span(p['ids'], p['tokens'])} -> "
                         f"{_fmt_span(p['becomes'], p['becomes_tokens'])}  "
                         f"(in {p['samples']} sample{'s' * (p['samples'] != 1)})")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------
# the command


def _resolve_tokenizer(tokenizer: str | None, config: str | None, files: Sequence[str]) -> str:
    if tokenizer:
        return tokenizer
    from pathlib import Path

    from patchaudit.config.settings import find_pyproject, load_pyproject

    cfg = Path(config) if config else find_pyproject(list(files))
    if cfg:
        settings = load_pyproject(cfg)
        if settings.tokenizer:
            return settings.tokenizer
    raise click.UsageError("give the model's tokenizer: --tokenizer PATH (a tokenizer.json or a model folder), "
                           "or tokenizer = \"...\" under [tool.patchaudit]")


def run_audit(files: Sequence[str], tok, *, field: str, id_field: str | None, fmt: str, out: IO[str],
              err: IO[str], top: int, all_samples: bool, summary_only: bool, progress_enabled: bool,
              out_is_terminal: bool, batch: int = BATCH) -> int:
    """Audit `files`; write the report to `out`, errors to `err`; return the exit code."""
    aud = Auditor(tok, field=field, id_field=id_field, batch=batch)
    total = 0
    for f in files:
        try:
            total += os.path.getsize(f)
        except OSError:
            pass
    progress = Progress(total, err, progress_enabled)
    writer = Writer(out, fmt, progress, clear_for_out=out_is_terminal)
    errors: list[dict[str, Any]] = []
    error_count = 0
    per_file: list[dict[str, Any]] = []

    def error(path: str, line: int | None, message: str) -> None:
        nonlocal error_count
        error_count += 1
        if len(errors) < MAX_ERRORS_KEPT:
            errors.append({"path": path, "line": line, "message": message})
        progress.clear()
        where = f"{path}:{line}" if line else path
        err.write(safe(f"{where}: error: {message}") + "\n")
        err.flush()

    def flush(pending: list[Sample]) -> None:
        aud.check_batch(pending)
        if not summary_only:
            for s in pending:
                if s.drifts or all_samples:
                    writer.sample(s, tok)
        pending.clear()
        progress.render(f"{aud.checked} samples, {aud.drifting} drifting")

    writer.begin({"tokenizer": tok.path, "field": field, "files": list(files)})
    for path in files:
        before = (aud.checked, aud.drifting)
        file_errors = error_count
        pending: list[Sample] = []
        if os.path.isdir(path):
            error(path, None, "is a directory; give JSONL files")
            continue
        try:
            for n, raw in iter_lines(path, progress.advance):
                try:
                    parsed = aud.parse_line(raw)
                except InputError as exc:
                    error(path, n, str(exc))
                    continue
                if parsed is None:
                    continue
                pending.append(Sample(path, n, parsed[0], parsed[1]))
                if len(pending) >= aud.batch:
                    flush(pending)
        except FileNotFoundError:
            error(path, None, "no such file")
        except OSError as exc:
            error(path, None, f"cannot read: {exc.strerror or exc}")
        except InputError as exc:
            error(path, None, str(exc))
        flush(pending)
        per_file.append({"path": path, "samples": aud.checked - before[0], "drifting": aud.drifting - before[1],
                         "errors": error_count - file_errors})
    progress.clear()
    summary = {"samples_checked": aud.checked, "samples_drifting": aud.drifting,
               "tokens_checked": aud.tokens_checked, "tokens_drifting": aud.tokens_drifting,
               "errors": error_count, "files": per_file, "top_pairs": aud.top_pairs(top)}
    writer.end(summary, errors, summary_text(aud, len(files), error_count, top))
    out.flush()
    if error_count:
        return 2
    return 1 if aud.drifting else 0


@click.command("tokens")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--tokenizer", type=click.Path(),
              help="The model's tokenizer.json or a folder holding one (default: tokenizer in [tool.patchaudit]).")
@click.option("--field", default="tokens", show_default=True, metavar="PATH",
              help="Where each line keeps its token ids (dotted for nested objects: response.ids).")
@click.option("--id-field", metavar="PATH", help="A field naming the sample in the report (e.g. index).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write the report to FILE.")
@click.option("--top", type=click.IntRange(min=0), default=10, show_default=True,
              help="Most frequent drifting spans to list (0: all).")
@click.option("--all-samples", is_flag=True, help="List every sample, not only those that drift.")
@click.option("--summary-only", is_flag=True, help="Print only the summary.")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: when stderr is a terminal).")
@click.option("--config", type=click.Path(exists=True, dir_okay=False), help="A pyproject.toml to read.")
def tokens(files, tokenizer, field, id_field, fmt, output, top, all_samples, summary_only, progress,
           config) -> None:
    """Audit recorded rollout token ids (JSONL) for drift under decode and re-encode."""
    from patchaudit.config.settings import ConfigError
    from patchaudit.inputs.tokenizer import TokenizerError, load_tokenizer

    try:
        tok = load_tokenizer(_resolve_tokenizer(tokenizer, config, files))
    except (TokenizerError, ConfigError) as exc:
        click.echo(safe(f"patchaudit: error: {exc}"), err=True)
        sys.exit(2)
    if progress is None:
        progress = sys.stderr.isatty()
    from patchaudit.reporters.output import AtomicFile

    # the report file is written whole or not at all (a temporary file renamed over it at the end)
    try:
        out = AtomicFile(output) if output else sys.stdout
    except OSError as exc:
        click.echo(safe(f"patchaudit: error: {output}: cannot write: {exc.strerror or exc}"), err=True)
        sys.exit(2)
    try:
        code = run_audit(list(files), tok, field=field, id_field=id_field, fmt=fmt, out=out, err=sys.stderr,
                         top=top, all_samples=all_samples, summary_only=summary_only, progress_enabled=progress,
                         out_is_terminal=output is None and sys.stdout.isatty())
    except BaseException:
        if output:
            out.discard()
        raise
    if output:
        try:
            out.commit()
        except OSError as exc:
            click.echo(safe(f"patchaudit: error: {output}: cannot write: {exc.strerror or exc}"), err=True)
            sys.exit(2)
    sys.exit(code)
