"""The per-file job of the check pipeline: inputs -> units -> rules -> findings.

`analyse_file` is the whole per-file job (read, build units, run the selected
rules, map reports to findings, apply inline suppressions).  It is a plain
function of picklable arguments so it can run in a worker process, and its
result depends only on the file's content and the run's settings, which is
what makes the per-file cache sound.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

# patchaudit.lint.rule imports libcst (its Rule is a libcst visitor): the functions that
# run rules import it; a run that parses nothing never does (see parallel.py)
from patchaudit.config.registry import PATCH as K_PATCH
from patchaudit.config.registry import PYTHON as K_PYTHON
from patchaudit.config.registry import TEXT as K_TEXT
from patchaudit.config.settings import Settings
from patchaudit.inputs import source_lines
from patchaudit.inputs.discover import PATCH, PYTHON, SourceFile
from patchaudit.model.findings import FileError, Finding
from patchaudit.pipeline.results import FileResult
from patchaudit.pipeline.run_rules import resolve_rules, run_python_rules, run_unit_rules, unit_line
from patchaudit.pipeline.suppression import apply_per_file_ignores, apply_suppressions, dedupe_findings, finish_findings
from patchaudit.units.suppression import suppressible_patch_lines

if TYPE_CHECKING:  # pragma: no cover
    from patchaudit.lint.rule import Rule


def read_error(exc, what: str = "max-file-size") -> FileError:
    """The FileError of a file the reader refused (patchaudit/files/reader.py)."""
    from patchaudit.inputs.discover import read_error_message

    message = read_error_message(exc)
    if "over the limit of" in message:
        message += f" ({what})"
    return FileError(exc.path, message, exc.line)


def read_bytes(path: str, settings: Settings, result: FileResult) -> bytes | None:
    """The file's bytes through the one guarded reader: a regular file (a FIFO would
    block the run forever, a device never ends: never opened), at most
    `max-file-size` bytes even if it grows; else None and an error in `result`."""
    from patchaudit.files.reader import ReadError
    from patchaudit.files.reader import read_bytes as _read

    try:
        return _read(path, settings.max_file_size)
    except ReadError as exc:
        result.errors.append(read_error(exc))
    except OSError as exc:  # pragma: no cover - the reader raises ReadError
        result.errors.append(FileError(path, f"cannot read: {exc.strerror or exc}"))
    return None


def decode_source(path: str, data: bytes, result: FileResult) -> str | None:
    from patchaudit.files.reader import ReadError, decode_utf8

    try:
        return decode_utf8(path, data)
    except ReadError as exc:
        result.errors.append(FileError(path, exc.reason, exc.line))
        return None


def analyse_file(
    src: SourceFile,
    settings: Settings,
    rules: list[type[Rule]] | None = None,
    engines: Any = None,
    tokenizer: Any = None,
    data: bytes | None = None,
) -> FileResult:
    """Everything patchaudit does to one file.  Never raises for bad input.

    `data`, when given, is the file's content already read by the caller (the
    scheduler reads each file once, for the cache digest and the pre-filter).

    The result's `reads` are the other files the analysis read (a monkey-patch
    module's enclosing `__init__.py`, a tokenizer) with their signatures
    (files/observe.py): the per-file cache holds the result only while they are
    unchanged, and a replayed run depends on them (None: one changed while it was
    read, or just before: the result is not kept)."""
    from patchaudit.files.observe import observing, signed

    started = time.time_ns()
    with observing() as seen:
        result = _analyse_file(src, settings, rules, engines, tokenizer, data)
    seen.paths.discard(src.path)
    result.reads = signed(seen.paths, started)
    return result


def _analyse_file(
    src: SourceFile,
    settings: Settings,
    rules: list[type[Rule]] | None,
    engines: Any,
    tokenizer: Any,
    data: bytes | None,
) -> FileResult:
    rules = rules if rules is not None else resolve_rules(settings)
    result = FileResult(src.path)
    from patchaudit.inputs.pyast import set_parse_limit

    set_parse_limit(settings)  # every parser of this process refuses texts over max-parse-size
    if data is None:
        data = read_bytes(src.path, settings, result)
    if data is None:
        return result
    findings: list[Finding] = []
    raw_lines: list[str]
    comment_lines: list[str] | None = None  # patches: where suppression comments count
    try:
        if src.kind == PATCH:
            findings, raw_lines, comment_lines = _analyse_patch(src, data, settings, rules, engines, tokenizer, result)
        else:
            got = _analyse_source(src, data, settings, rules, engines, tokenizer, result)
            if got is None:
                return result
            findings, raw_lines = got
    except RecursionError:
        result.errors.append(FileError(src.path, "input nested too deeply (recursion limit)"))
        _engine_errors(engines, result)
        return result
    except MemoryError:  # over a worker's address-space budget (parallel.py), or the machine's
        result.errors.append(FileError(src.path, "analysis ran out of memory; not analysed"))
        _engine_errors(engines, result)
        return result
    except Exception as exc:  # isolate: a bug on one file never stops the run
        import traceback

        tb = traceback.extract_tb(exc.__traceback__)[-1]
        where = f"{os.path.basename(tb.filename)}:{tb.lineno}"
        result.errors.append(FileError(src.path, f"internal error: {exc!r} at {where}"))
        _engine_errors(engines, result)
        return result
    _engine_errors(engines, result)
    findings = dedupe_findings(findings)
    findings = apply_per_file_ignores(findings, settings)
    result.findings, result.unused_suppressions = apply_suppressions(
        findings, comment_lines if comment_lines is not None else raw_lines
    )
    finish_findings(src, result, raw_lines, comment_lines, rules, settings, engines, tokenizer)
    return result


def _analyse_patch(
    src: SourceFile,
    data: bytes,
    settings: Settings,
    rules: list[type[Rule]],
    engines: Any,
    tokenizer: Any,
    result: FileResult,
) -> tuple[list[Finding], list[str], list[str]]:
    """A patch file: (findings, its lines, its lines where suppression comments count).
    With an engine its sections are judged in exact mode, else in fragment mode."""
    from patchaudit.inputs.patches import read_patch
    from patchaudit.units import PatchUnit
    from patchaudit.units.fragments import patch_fragment_units

    patch = read_patch(src.path, data)
    comment_lines = suppressible_patch_lines(patch)
    punit = PatchUnit(path=src.path, patch=patch, problems=patch.problems)
    units_py, units_text = [], []
    engine_ctx, applier = _exact_engine(engines, patch, src.path, result, settings)
    if engine_ctx is not None:
        from patchaudit.units.exact import exact_units

        try:
            units_py, units_text, punit.engine = exact_units(patch, engine_ctx, report_path=src.path, applier=applier)
        except Exception as exc:  # a safety net: exact_units isolates each file section itself
            result.errors.append(
                _internal_error(src.path, exc, "in exact mode; the patch was checked without the engine")
            )
            engine_ctx, punit.engine = None, None
        else:
            result.errors.extend(punit.engine.errors)
            result.hunks = [h.to_json() for h in punit.engine.hunks]
    if engine_ctx is None:
        py_rules = [r for r in rules if K_PYTHON in r.kinds]
        units_py, units_text = patch_fragment_units(
            patch, src.path, lambda text: any(r.can_match(text, settings) for r in py_rules)
        )
    findings = run_unit_rules(punit, K_PATCH, rules, settings, result, engine=engine_ctx, tokenizer=tokenizer)
    # one unit (a hunk's windows, an exact-mode file) that fails costs that unit only
    for u in units_py:
        findings += _isolated(u, result, lambda u=u: run_python_rules(u, rules, settings, result, tokenizer))
    for u in units_text:
        findings += _isolated(
            u,
            result,
            lambda u=u: run_unit_rules(u, K_TEXT, rules, settings, result, engine=engine_ctx, tokenizer=tokenizer),
        )
    if engine_ctx is None and engines is not None:
        _why_no_engine(findings, src.path, settings)
    return findings, patch.lines, comment_lines


def _why_no_engine(findings: list[Finding], path: str, settings: Settings) -> None:
    """A patch the plan leaves out of exact mode in a run with engines: its fragment
    findings say why (`another PATCH_VERSION folder, whose engine was not given`), not
    "give --engine to confirm" (the run has one)."""
    from patchaudit.units import INCOMPLETE_NOTE

    scope = settings.patch_scope.get(os.path.abspath(path)) if settings.patch_scope else None
    why = scope[1] if scope is not None and scope[0] == "skip" else "the engine given does not have its files"
    for f in findings:
        f.message = f.message.replace(INCOMPLETE_NOTE, f"call continues past the hunk; not applied: {why}")


def _analyse_source(
    src: SourceFile,
    data: bytes,
    settings: Settings,
    rules: list[type[Rule]],
    engines: Any,
    tokenizer: Any,
    result: FileResult,
) -> tuple[list[Finding], list[str]] | None:
    """A .py or text file: (findings, its lines); None when it is not UTF-8 (an error on `result`)."""
    from patchaudit.units import PythonUnit, TextUnit

    text = decode_source(src.path, data, result)
    if text is None:
        return None
    raw_lines = source_lines(text)
    if src.kind == PYTHON:
        # with --engine, a plain .py file sees the run's first engine (and, through
        # its `engine_set`, every engine): the monkey-patch rules PA206/PA207
        py_engine = engines.for_python() if engines is not None else None
        return run_python_rules(
            PythonUnit(path=src.path, text=text, engine=py_engine), rules, settings, result, tokenizer
        ), raw_lines
    unit = TextUnit(path=src.path, flavor=src.kind, lines=raw_lines)
    return run_unit_rules(unit, K_TEXT, rules, settings, result, tokenizer=tokenizer), raw_lines


def _engine_errors(engines: Any, result: FileResult) -> None:
    """Engine files refused while this file was analysed (over max-file-size, unreadable):
    each is reported once by the process that met it (units/engines.py BoundedSource)."""
    if engines is None:
        return
    from patchaudit.units.engines import EngineSet

    if isinstance(engines, EngineSet):  # bump's engine pairs read through their own sources
        result.errors.extend(engines.take_errors())


def _internal_error(path: str, exc: BaseException, what: str, line: int | None = None) -> FileError:
    import traceback

    if isinstance(exc, RecursionError):
        return FileError(path, f"nested too deeply (recursion limit) {what}", line)
    tb = traceback.extract_tb(exc.__traceback__)
    at = f" at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else ""
    return FileError(path, f"internal error {what}: {exc!r}{at}", line)


def _exact_engine(engines: Any, patch, path: str, result: FileResult, settings: Settings | None = None):
    """(the engine context a patch is checked against, or None: fragment mode; the build's
    applier): the plan's scope (pipeline/plan.py) names the engine and the command, or
    leaves the patch out of exact mode; a failure while choosing is an error, and the
    patch is still checked without the engine."""
    from patchaudit.patching.appliers import DEFAULT_APPLIER

    if engines is None:
        return None, DEFAULT_APPLIER
    scope = settings.patch_scope.get(os.path.abspath(path)) if settings is not None and settings.patch_scope else None
    if scope is not None and scope[0] == "skip":
        return None, DEFAULT_APPLIER
    try:
        if scope is not None:
            ctx = engines.for_patch(patch, only=scope[1], index=scope[4] if len(scope) > 4 else None)
            if ctx is not None and len(scope) > 3 and scope[3] and settings is not None:  # the set's earlier patches
                from patchaudit.units.stacked import stacked_context

                ctx = stacked_context(ctx, list(scope[3]), scope[2], settings.max_file_size)
            return ctx, scope[2]
        return engines.for_patch(patch), DEFAULT_APPLIER
    except Exception as exc:
        result.errors.append(
            _internal_error(path, exc, "while matching the patch to the engine; it was checked without the engine")
        )
        return None, DEFAULT_APPLIER


def _isolated(unit, result: FileResult, run) -> list[Finding]:
    """`run()` (the rules on one unit of a patch); a failure costs that unit only and is
    an error naming the patch file and the unit's line."""
    try:
        return run()
    except Exception as exc:  # RecursionError too: the stack is unwound to here
        where = unit.target_path or (unit.section.path if unit.section else unit.path)
        result.errors.append(
            _internal_error(unit.path, exc, f"on {where}; the rest of the patch was checked", unit_line(unit))
        )
        return []
