"""`patchaudit check - --stdin-filename NAME`: one file read from standard input.

The text is read with the guarded reader's bound (`max-file-size`,
patchaudit/files/reader.py `BoundedStream`): a larger input is an error, never
buffered whole.  Its kind (patch, Python, shell, ...) comes from NAME, and its
findings are reported at NAME, which never has to exist: nothing is read from
disk for it.  It then goes through the same per-file job as a file of the tree
(`analyse.analyse_file`, with the run's rules, engines and tokenizer), without
the result cache.
"""

from __future__ import annotations

from typing import IO, Any

from patchaudit.config.settings import Settings
from patchaudit.model.findings import FileError
from patchaudit.pipeline.results import RunError, RunResult, unique_errors


def read_stdin(stream: IO[bytes], limit: int, name: str = "-") -> bytes:
    """All of `stream`, at most `limit` bytes (ReadError naming `name` past it)."""
    from patchaudit.files.reader import BoundedStream

    bounded = BoundedStream(name, stream, limit)
    chunks = []
    while True:
        chunk = bounded.read(1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def run_check_stdin(stream: IO[bytes], filename: str, settings: Settings) -> RunResult:
    """Check the text of `stream` as the file `filename`."""
    from patchaudit.files.reader import ReadError
    from patchaudit.inputs.discover import classify
    from patchaudit.pipeline.analyse import read_error
    from patchaudit.pipeline.run_rules import resolve_rules

    kind = classify(filename)
    if kind is None:
        raise RunError(
            f"--stdin-filename {filename!r}: not a kind of file patchaudit reads "
            "(*.patch, *.diff, *.py, shell scripts, Dockerfiles, YAML, .env)"
        )
    rules = resolve_rules(settings)
    result = RunResult(errors=list(settings.problems), files=1)
    try:
        data = read_stdin(stream, settings.max_file_size, filename)
    except ReadError as exc:
        result.errors.append(read_error(exc))
        return result
    except OSError as exc:
        result.errors.append(FileError(filename, f"cannot read standard input: {exc.strerror or exc}"))
        return result
    return check_bytes(data, filename, settings, rules, result=result)


def check_bytes(
    data: bytes,
    filename: str,
    settings: Settings,
    rules: list | None = None,
    engines: Any = None,
    tokenizer: Any = None,
    result: RunResult | None = None,
) -> RunResult:
    """Check `data` as the file `filename` (nothing is read from disk for it): standard
    input's text, or an editor's unsaved buffer (patchaudit/server).  `rules`, `engines`,
    `tokenizer`: the run's, when the caller keeps them open; else resolved and opened here."""
    from patchaudit.inputs.discover import SourceFile, classify
    from patchaudit.pipeline.analyse import analyse_file
    from patchaudit.pipeline.context import engine_warnings, load_tokenizer, open_engines
    from patchaudit.pipeline.run_rules import resolve_rules

    kind = classify(filename)
    if kind is None:
        raise RunError(f"{filename!r}: not a kind of file patchaudit reads")
    if result is None:
        result = RunResult(errors=list(settings.problems), files=1)
    if rules is None:
        rules = resolve_rules(settings)
    if engines is None:
        engines = open_engines(settings)
        result.warnings.extend(engine_warnings(engines))
    if tokenizer is None:
        tokenizer = load_tokenizer(settings)
    fr = analyse_file(SourceFile(filename, kind), settings, rules, engines, tokenizer, data=data)
    result.findings.extend(fr.findings)
    result.errors = unique_errors(result.errors + fr.errors)
    result.hunks.extend(fr.hunks)
    return result
