"""The report of `patchaudit tokens`: text lines or one JSON document, streamed.

`run_audit` drives the audit of patchaudit/pipeline/tokens.py over the files and
writes what it finds as it goes: a sample's lines of the text report
(`[14:16] [479, 3770] ('Ġtr', 'uly') -> [9149] ('Ġtruly')`), or the JSON
document whose sample list is written as it grows, then the summary.  Errors go
to the error stream as `FILE:LINE: error: ...`; a progress bar is drawn on it
when it is a terminal.  Every value is escaped (patchaudit/model/escape.py).
"""

from __future__ import annotations

import os
from typing import IO, Any, Sequence

from patchaudit.model.escape import json_text, safe, safe_lines, visible
from patchaudit.pipeline.tokens import BATCH, Auditor, Sample, audit_files
from patchaudit.reporters.progress import ByteProgress as Progress

#: errors kept for the JSON report (all of them go to stderr)
MAX_ERRORS_KEPT = 1000


def _fmt_span(ids: Sequence[int], toks: Sequence[str]) -> str:
    return f"[{', '.join(map(str, ids))}] ({', '.join(visible(repr(t)) for t in toks)})"


def format_sample(s: Sample, tok) -> str:
    """A sample's lines of the text report; every value escaped (patchaudit/model/escape.py)."""
    who = f" (id {visible(s.sample_id)})" if s.sample_id is not None else ""
    where = f"{visible(s.path)}:{s.line}{who}"
    if not s.differences:
        return safe_lines(f"{where}: round-trips unchanged, length {len(s.ids)}")
    n = len(s.differences)
    head = (
        f"{where}: drifts under decode and re-encode: {n} difference{'s' * (n != 1)}, "
        f"length {len(s.ids)} -> {len(s.reencoded or [])}"
    )
    lines = [head]
    for d in s.differences:
        lines.append(
            f"    [{d.start}:{d.end}] {_fmt_span(d.ids, tok.tokens(d.ids))} -> "
            f"{_fmt_span(d.becomes, tok.tokens(d.becomes))}"
        )
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
    lines = [
        f"Checked {aud.checked} sample{'s' * (aud.checked != 1)} ({aud.tokens_checked} tokens) in {files} "
        f"file{'s' * (files != 1)}: {aud.drifting} would drift under decode and re-encode{pct}."
    ]
    if errors:
        lines.append(
            f"{errors} line{'s' * (errors != 1)} or file{'s' * (errors != 1)} could not be read (see the errors above)."
        )
    pairs = aud.top_pairs(top)
    if pairs:
        lines.append("Most frequent drifting spans:")
        for p in pairs:
            lines.append(
                f"  {p['count']:>6}x  {_fmt_span(p['ids'], p['tokens'])} -> "
                f"{_fmt_span(p['becomes'], p['becomes_tokens'])}  "
                f"(in {p['samples']} sample{'s' * (p['samples'] != 1)})"
            )
    return "\n".join(lines) + "\n"


def run_audit(
    files: Sequence[str],
    tok,
    *,
    field: str,
    id_field: str | None,
    fmt: str,
    out: IO[str],
    err: IO[str],
    top: int,
    all_samples: bool,
    summary_only: bool,
    progress_enabled: bool,
    out_is_terminal: bool,
    batch: int = BATCH,
) -> int:
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

    def error(path: str, line: int | None, message: str) -> None:
        if len(errors) < MAX_ERRORS_KEPT:
            errors.append({"path": path, "line": line, "message": message})
        progress.clear()
        where = f"{path}:{line}" if line else path
        err.write(safe(f"{where}: error: {message}") + "\n")
        err.flush()

    def batch_done(pending: list[Sample]) -> None:
        if not summary_only:
            for s in pending:
                if s.drifts or all_samples:
                    writer.sample(s, tok)
        progress.render(f"{aud.checked} samples, {aud.drifting} drifting")

    writer.begin({"tokenizer": tok.path, "field": field, "files": list(files)})
    per_file, error_count = audit_files(files, aud, on_read=progress.advance, on_error=error, on_batch=batch_done)
    progress.clear()
    summary = {
        "samples_checked": aud.checked,
        "samples_drifting": aud.drifting,
        "tokens_checked": aud.tokens_checked,
        "tokens_drifting": aud.tokens_drifting,
        "errors": error_count,
        "files": per_file,
        "top_pairs": aud.top_pairs(top),
    }
    writer.end(summary, errors, summary_text(aud, len(files), error_count, top))
    out.flush()
    if error_count:
        return 2
    return 1 if aud.drifting else 0
