"""The check pipeline: inputs -> units -> rules -> findings.

`analyse_file` is the whole per-file job (read, build units, run the selected
rules, map reports to findings, apply inline suppressions).  It is a plain
function of picklable arguments so it can run in a worker process, and its
result depends only on the file's content and the run's settings, which is
what makes the per-file cache sound.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from patchaudit.config.settings import Settings
from patchaudit.model.findings import FileError, Finding, Report, Severity
from patchaudit.inputs import source_lines
from patchaudit.inputs.discover import PATCH, PYTHON, SourceFile, classify
# patchaudit.lint.rule imports libcst (its Rule is a libcst visitor): the functions that
# run rules import it; a run that parses nothing never does (see parallel.py)
from patchaudit.config.registry import PATCH as K_PATCH
from patchaudit.config.registry import PYTHON as K_PYTHON
from patchaudit.config.registry import TEXT as K_TEXT

if TYPE_CHECKING:  # pragma: no cover
    from patchaudit.lint.rule import Rule, RuleContext

SUPPRESS_RE = re.compile(r"#\s*patchaudit:\s*ignore(?:\[(?P<codes>[A-Za-z0-9_,\s]*)\])?", re.I)


@dataclass
class FileResult:
    path: str
    findings: list[Finding] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    parsed: int = 0          # libcst parses done (for the cache/speed tests)
    # suppression comments: (line, codes or None) that matched nothing
    unused_suppressions: list[tuple[int, tuple[str, ...] | None]] = field(default_factory=list)
    # exact mode: how each hunk applied (HunkRecord.to_json() dicts, picklable)
    hunks: list[dict] = field(default_factory=list)


@dataclass
class RunResult:
    findings: list[Finding] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    files: int = 0
    parsed: int = 0
    cached: int = 0
    hunks: list[Any] = field(default_factory=list)   # exact mode: per-hunk application records
    #: what the user should hear that is no error (exit code unchanged): engine archive
    #: members refused (a huge member, a lying header, a huge tar name)
    warnings: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if self.errors:
            return 2
        return 1 if self.findings else 0


class RunError(Exception):
    """A usage or configuration problem that stops the run (exit code 2)."""


def resolve_rules(settings: Settings) -> list[type[Rule]]:
    try:
        from patchaudit.lint.rule import select_rules

        return select_rules(settings.select, settings.ignore, settings.extend_select)
    except KeyError as exc:
        raise RunError(f"unknown rule code or prefix {exc.args[0]!r} (see `patchaudit rules`)") from None


def text_flavor(kind: str) -> str:
    return kind


# --------------------------------------------------------------------------
# running rules on units


def _context_for(rule: type[Rule], settings: Settings, engine: Any = None, tokenizer: Any = None) -> RuleContext:
    from patchaudit.lint.rule import RuleContext

    return RuleContext(settings.options_for(rule.code), engine=engine, tokenizer=tokenizer, settings=settings)


def _needs_met(rule: type[Rule], *, engine: Any, tokenizer: Any) -> bool:
    if "engine" in rule.needs and engine is None:
        return False
    if "engine-pair" in rule.needs and getattr(engine, "pair", None) is None:
        return False  # only the bump command provides two engine versions (patchaudit/pipeline/bump.py)
    if "tokenizer" in rule.needs and tokenizer is None:
        return False
    return True


def run_python_rules(unit, rules: list[type[Rule]], settings: Settings, result: FileResult,
                     tokenizer: Any = None) -> list[Finding]:
    engine = getattr(unit, "engine", None)
    active = [r for r in rules if K_PYTHON in r.kinds and _needs_met(r, engine=engine, tokenizer=tokenizer)
              and r.can_match(unit.text, settings)]
    if not active:
        return []
    # libcst costs ~600 bytes of memory a byte and ~0.7 MB/s: a text over the parse budget
    # is reported and never parsed (patchaudit/inputs/pyast.py; can_match did not parse it)
    if _too_large(unit, settings, result):
        return []
    import libcst as cst

    from patchaudit.analysis.lazy_metadata import metadata_wrapper, visit_rules

    # libcst's native parser overflows the C stack (SIGSEGV) on deep nesting: refuse first
    from patchaudit.units.nesting import too_deep

    deep = too_deep(unit.text, settings.max_nesting)
    if deep is not None:
        info = unit.info(deep[0])
        result.errors.append(FileError(unit.path, f"Python nested too deeply: about {deep[1]} levels, over the "
                                                  f"limit of {settings.max_nesting} (max-nesting); not analysed",
                                       info.line if info else _unit_line(unit)))
        return []
    # local rules (Rule.local) run on the unit pruned to their statements, the others on
    # the whole unit; a rule that only reads the module (the dataflow rules) then no
    # longer makes PA101's visit_Call walk every node of the file
    local = [r for r in active if _prune_needles([r], unit.text)]
    rest = [r for r in active if r not in local]
    try:
        full = unit.parse() if rest else None
        batches = []
        if local:
            pruned = _parse_unit(unit, local, cst, keep=not rest)
            if pruned is full:   # nothing pruned: one pass for all
                rest = rest + local
            else:
                batches.append((pruned, local))
        if rest:
            batches.insert(0, (full, rest))
    except cst.ParserSyntaxError as exc:
        if unit.mode == "file":
            result.errors.append(FileError(unit.path, f"cannot parse Python: {exc.message}", exc.raw_line))
        return []
    except RecursionError:
        result.errors.append(FileError(unit.path, "Python nested too deeply to parse (recursion limit)",
                                       _unit_line(unit)))
        return []
    result.parsed += 1
    out: list[Finding] = []
    for module, batch in batches:
        instances = [i for i in (_instance(r, unit, settings, engine, tokenizer, result) for r in batch)
                     if i is not None]
        # one batched pass for the batch's rules; positions only if a rule reports (lazy_metadata.py)
        wrapper = metadata_wrapper(module)
        try:
            visit_rules(wrapper, instances)
        except RecursionError:
            result.errors.append(FileError(unit.path, "Python nested too deeply to analyse (recursion limit)",
                                           _unit_line(unit)))
            return []
        for inst in instances:
            if inst.crash is not None:
                result.errors.append(FileError(unit.path, f"rule {inst.code} crashed: {inst.crash!r}",
                                               _unit_line(unit)))
            out.extend(_to_findings(unit, type(inst), inst.reports))
    return out


def _too_large(unit, settings: Settings, result: FileResult) -> bool:
    """Whether the unit's text is over `max-parse-size`; if so the error is on `result`,
    naming the file, or the engine file as patched, or the hunk."""
    from patchaudit.inputs import pyast

    if getattr(unit, "unanalysed", None):
        result.errors.append(FileError(unit.path, unit.unanalysed, _unit_line(unit)))
        return True
    limit = pyast.parse_limit(settings)
    size = pyast.over_limit(unit.text, limit)
    if size is None:
        return False
    what = pyast.too_large_message(size, limit)
    if unit.mode == "exact":
        what = f"{unit.target_path} as patched is {what}"
    elif unit.mode == "fragment":
        what = f"the Python a hunk of {unit.target_path} shows is {what}"
    else:
        what = f"Python {what}"
    result.errors.append(FileError(unit.path, what, None if unit.mode == "file"
                                   else _unit_line(unit)))
    return True


def _prune_needles(rules: list[type[Rule]], text: str) -> set[str] | None:
    """The strings statement pruning keeps (`Rule.local`): for every rule, the strings
    of its `requires` groups that `text` satisfies; None when a rule is not local or
    has no such group (no `requires`, or its own `can_match` let the text through),
    or when pruning is switched off."""
    from patchaudit.units import prune as pruning

    if not pruning.ENABLED:
        return None
    needles: set[str] = set()
    for r in rules:
        if not r.local:
            return None
        groups = [g for g in r.requires if all(s in text for s in g)]
        if not groups:
            return None
        for g in groups:
            needles.update(g)
    return needles or None


def _instance(r: type[Rule], unit, settings: Settings, engine, tokenizer, result) -> Rule | None:
    """The rule's instance for `unit`, or None when its options are invalid: that is an
    error of the configuration (named once per run: errors are de-duplicated), and the
    other rules still run."""
    from patchaudit.lint.rule import RuleOptionError

    try:
        return r(unit, _context_for(r, settings, engine, tokenizer))
    except RuleOptionError as exc:
        result.errors.append(FileError(settings.config_path or "pyproject.toml", str(exc)))
        return None


def _parse_unit(unit, rules: list[type[Rule]], cst, keep: bool = True) -> Any:
    """The module local `rules` run on: the unit's text pruned to the statements that
    can matter (patchaudit/units/prune.py), with the same lines and columns, so
    positions, `symbol_at` and line maps are those of the full text.  With `keep`
    (no other rule parses the whole unit) the module is kept where `unit.parse()`
    keeps it.  Without a pruned text (nothing to gain, or one libcst refuses: never
    seen, a safety net) it is the whole unit, whose error is the one to report."""
    from patchaudit.units import prune as pruning

    if not keep or getattr(unit, "_module", None) is None:
        needles = _prune_needles(rules, unit.text)
        if needles:
            pruned = pruning.prune(unit.text, needles, tree=getattr(unit, "patched_tree", None))
            if pruned is not None:
                try:
                    module = cst.parse_module(pruned)
                except (cst.ParserSyntaxError, RecursionError):
                    module = None
                if module is not None:
                    if keep:
                        unit._module = module
                    return module
    return unit.parse()


def _to_findings(unit, rule: type[Rule], reports: Iterable[Report]) -> list[Finding]:
    out = []
    for rep in reports:
        f = unit.to_finding(rule, rep)
        if f is not None:
            out.append(f)
    return out


def run_unit_rules(unit, kind: str, rules: list[type[Rule]], settings: Settings, result: FileResult,
                   engine: Any = None, tokenizer: Any = None) -> list[Finding]:
    """Text and patch rules: each gets the unit and reports in its coordinates."""
    out: list[Finding] = []
    for r in rules:
        if kind not in r.kinds or not _needs_met(r, engine=engine, tokenizer=tokenizer):
            continue
        inst = _instance(r, unit, settings, engine, tokenizer, result)
        if inst is None:
            continue
        try:
            if kind == K_TEXT:
                if not r.can_match("\n".join(unit.lines)):
                    continue
                inst.check_text(unit)
            else:
                inst.check_patch(unit)
        except Exception as exc:  # one rule's crash never stops the run
            result.errors.append(FileError(unit.path, f"rule {r.code} crashed: {exc!r}"))
            continue
        out.extend(_to_findings(unit, r, inst.reports))
    return out


# --------------------------------------------------------------------------
# per-file analysis


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
    except OSError as exc:   # pragma: no cover - the reader raises ReadError
        result.errors.append(FileError(path, f"cannot read: {exc.strerror or exc}"))
    return None


def decode_source(path: str, data: bytes, result: FileResult) -> str | None:
    from patchaudit.files.reader import ReadError, decode_utf8

    try:
        return decode_utf8(path, data)
    except ReadError as exc:
        result.errors.append(FileError(path, exc.reason, exc.line))
        return None


def analyse_file(src: SourceFile, settings: Settings, rules: list[type[Rule]] | None = None,
                 engines: Any = None, tokenizer: Any = None, data: bytes | None = None) -> FileResult:
    """Everything patchaudit does to one file.  Never raises for bad input.

    `data`, when given, is the file's content already read by the caller (the
    scheduler reads each file once, for the cache digest and the pre-filter)."""
    from patchaudit.units import PatchUnit, PythonUnit, TextUnit

    rules = rules if rules is not None else resolve_rules(settings)
    result = FileResult(src.path)
    from patchaudit.inputs.pyast import set_parse_limit

    set_parse_limit(settings)   # every parser of this process refuses texts over max-parse-size
    if data is None:
        data = read_bytes(src.path, settings, result)
    if data is None:
        return result
    findings: list[Finding] = []
    raw_lines: list[str]
    comment_lines: list[str] | None = None   # patches: where suppression comments count
    try:
        if src.kind == PATCH:
            from patchaudit.inputs.patches import read_patch

            patch = read_patch(src.path, data)
            raw_lines = patch.lines
            comment_lines = suppressible_patch_lines(patch)
            punit = PatchUnit(path=src.path, patch=patch, problems=patch.problems)
            units_py, units_text = [], []
            engine_ctx = _exact_engine(engines, patch, src.path, result)
            if engine_ctx is not None:
                from patchaudit.units.exact import exact_units

                try:
                    units_py, units_text, punit.engine = exact_units(patch, engine_ctx, report_path=src.path)
                except Exception as exc:   # a safety net: exact_units isolates each file section itself
                    result.errors.append(_internal_error(src.path, exc, "in exact mode; the patch was "
                                                                        "checked without the engine"))
                    engine_ctx, punit.engine = None, None
                else:
                    result.errors.extend(punit.engine.errors)
                    result.hunks = [h.to_json() for h in punit.engine.hunks]
            if engine_ctx is None:
                py_rules = [r for r in rules if K_PYTHON in r.kinds]
                units_py, units_text = patch_fragment_units(
                    patch, src.path, lambda text: any(r.can_match(text, settings) for r in py_rules))
            findings += run_unit_rules(punit, K_PATCH, rules, settings, result,
                                       engine=engine_ctx, tokenizer=tokenizer)
            # one unit (a hunk's windows, an exact-mode file) that fails costs that unit only
            for u in units_py:
                findings += _isolated(u, result, lambda u=u: run_python_rules(u, rules, settings, result,
                                                                              tokenizer))
            for u in units_text:
                findings += _isolated(u, result, lambda u=u: run_unit_rules(
                    u, K_TEXT, rules, settings, result, engine=engine_ctx, tokenizer=tokenizer))
        else:
            text = decode_source(src.path, data, result)
            if text is None:
                return result
            raw_lines = source_lines(text)
            if src.kind == PYTHON:
                # with --engine, a plain .py file sees the run's first engine (and, through
                # its `engine_set`, every engine): the monkey-patch rules PA206/PA207
                py_engine = engines.for_python() if engines is not None else None
                findings += run_python_rules(PythonUnit(path=src.path, text=text, engine=py_engine), rules,
                                             settings, result, tokenizer)
            else:
                unit = TextUnit(path=src.path, flavor=src.kind, lines=raw_lines)
                findings += run_unit_rules(unit, K_TEXT, rules, settings, result, tokenizer=tokenizer)
    except RecursionError:
        result.errors.append(FileError(src.path, "input nested too deeply (recursion limit)"))
        _engine_errors(engines, result)
        return result
    except MemoryError:   # over a worker's address-space budget (parallel.py), or the machine's
        result.errors.append(FileError(src.path, "analysis ran out of memory; not analysed"))
        _engine_errors(engines, result)
        return result
    except Exception as exc:  # isolate: a bug on one file never stops the run
        import traceback

        tb = traceback.extract_tb(exc.__traceback__)[-1]
        result.errors.append(FileError(src.path, f"internal error: {exc!r} at {os.path.basename(tb.filename)}:{tb.lineno}"))
        _engine_errors(engines, result)
        return result
    _engine_errors(engines, result)
    findings = _dedupe(findings)
    findings = apply_per_file_ignores(findings, settings)
    result.findings, result.unused_suppressions = apply_suppressions(
        findings, comment_lines if comment_lines is not None else raw_lines)
    _finish_findings(src, result, raw_lines, comment_lines, rules, settings, engines, tokenizer)
    return result


def _engine_errors(engines: Any, result: FileResult) -> None:
    """Engine files refused while this file was analysed (over max-file-size, unreadable):
    each is reported once by the process that met it (units/exact.py BoundedSource)."""
    take = getattr(engines, "take_errors", None)
    if callable(take):
        result.errors.extend(take())


def _internal_error(path: str, exc: BaseException, what: str, line: int | None = None) -> FileError:
    import traceback

    if isinstance(exc, RecursionError):
        return FileError(path, f"nested too deeply (recursion limit) {what}", line)
    tb = traceback.extract_tb(exc.__traceback__)
    at = f" at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else ""
    return FileError(path, f"internal error {what}: {exc!r}{at}", line)


def _exact_engine(engines: Any, patch, path: str, result: FileResult):
    """The engine context a patch is checked against, or None (fragment mode): a failure
    while choosing it is an error, and the patch is still checked without the engine."""
    if engines is None:
        return None
    try:
        return engines.for_patch(patch)
    except Exception as exc:
        result.errors.append(_internal_error(path, exc, "while matching the patch to the engine; it was "
                                                        "checked without the engine"))
        return None


def _unit_line(unit) -> int | None:
    """The patch line a unit starts at: its hunk's header, its first judged line, its section."""
    if getattr(unit, "hunk", None) is not None:
        return unit.hunk.header_line
    lm = getattr(unit, "lines_map", None) or {}
    lines = [lm[k].line for k in (unit.judged if unit.judged is not None else lm) if k in lm]
    if lines:
        return min(lines)
    section = getattr(unit, "section", None)
    return section.header_line if section is not None else None


def _isolated(unit, result: FileResult, run) -> list[Finding]:
    """`run()` (the rules on one unit of a patch); a failure costs that unit only and is
    an error naming the patch file and the unit's line."""
    try:
        return run()
    except Exception as exc:   # RecursionError too: the stack is unwound to here
        where = unit.target_path or (unit.section.path if getattr(unit, "section", None) else unit.path)
        result.errors.append(_internal_error(unit.path, exc, f"on {where}; the rest of the patch was checked",
                                             _unit_line(unit)))
        return []


def _finish_findings(src: SourceFile, result: FileResult, raw_lines: list[str], comment_lines,
                     rules: list[type[Rule]], settings: Settings, engines: Any, tokenizer: Any) -> None:
    """Issue 6: PA001 (unused suppressions, opt-in) and baseline fingerprints."""
    if any(r.code == "PA001" for r in rules):
        from patchaudit.rules.pa001_unused_suppression import unused_suppression_findings

        ran = [r for r in rules if _needs_met(r, engine=engines if src.kind in (PATCH, PYTHON) else None,
                                              tokenizer=tokenizer)]
        result.findings += apply_per_file_ignores(unused_suppression_findings(
            src.path, result.unused_suppressions,
            comment_lines if comment_lines is not None else raw_lines, rules, ran), settings)
    from patchaudit.pipeline.baseline import assign_fingerprints

    assign_fingerprints(result.findings, raw_lines, is_patch=src.kind == PATCH)


def patch_fragment_units(patch, report_path: str, wanted=None):
    """Fragment mode: Python units from hunks of .py files, text units from other hunks.

    `wanted(text)` is the selected Python rules' pre-filter: a hunk whose
    post-image cannot match any of them is not parsed into windows at all (a
    window's text is always part of its hunk's post-image)."""
    from patchaudit.units.fragments import fragment_units

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
    from patchaudit.units import LineInfo, TextUnit

    post = hunk.post_image
    changed = hunk.changed_target_lines
    lines_map = {k + 1: LineInfo(l.patch_line, 1, l.target_line, l.target_line in changed)
                 for k, l in enumerate(post)}
    judged = frozenset(k + 1 for k, l in enumerate(post) if l.target_line in changed)
    return TextUnit(path=report_path, lines_map=lines_map, judged=judged,
                    target_path=target_path or section.path, patch=patch, section=section, hunk=hunk,
                    mode="fragment", flavor=kind, lines=[l.text for l in post])


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen = set()
    out = []
    for f in sorted(findings, key=Finding.sort_key):
        key = (f.code, f.path, f.line, f.column, f.message)
        if key in seen:
            continue
        seen.add(key)
        out.append(f)
    return out


def apply_per_file_ignores(findings: list[Finding], settings: Settings) -> list[Finding]:
    if not settings.per_file_ignores:
        return findings
    out = []
    for f in findings:
        p = f.path.replace(os.sep, "/")
        drop = False
        for glob, codes in settings.per_file_ignores.items():
            if fnmatch.fnmatch(p, glob) or fnmatch.fnmatch(os.path.basename(p), glob):
                if any(c.upper() == "ALL" or f.code.startswith(c.upper()) for c in codes):
                    drop = True
                    break
        if not drop:
            out.append(f)
    return out


def parse_suppression(line: str) -> tuple[bool, tuple[str, ...] | None]:
    m = SUPPRESS_RE.search(line)
    if not m:
        return False, None
    codes = m.group("codes")
    if codes is None:
        return True, None
    return True, tuple(c.strip().upper() for c in codes.split(",") if c.strip())


def suppressible_patch_lines(patch) -> list[str]:
    """A patch's lines with its context and removed lines blanked: a suppression
    comment in a patch counts on the lines the patch adds (and outside hunks)."""
    out = list(patch.lines)
    for _, hunk in patch.iter_hunks():
        for l in hunk.lines:
            if l.kind != "+" and 0 < l.patch_line <= len(out):
                out[l.patch_line - 1] = ""
    return out


def apply_suppressions(findings: list[Finding], lines: list[str]):
    """Drop findings whose reported line carries `# patchaudit: ignore[...]`."""
    used: dict[int, set[str]] = {}
    comments: dict[int, tuple[str, ...] | None] = {}
    for i, text in enumerate(lines, 1):
        if "patchaudit" in text:
            ok, codes = parse_suppression(text)
            if ok:
                comments[i] = codes
    kept = []
    for f in findings:
        codes = comments.get(f.line, ())
        if f.line in comments and (codes is None or any(f.code.startswith(c) for c in codes)):
            used.setdefault(f.line, set()).add(f.code)
            continue
        kept.append(f)
    unused = []
    for line, codes in comments.items():
        if codes is None:
            if line not in used:
                unused.append((line, None))
        else:
            left = tuple(c for c in codes if not any(u.startswith(c) for u in used.get(line, ())))
            if left:
                unused.append((line, left))
    return kept, unused


# --------------------------------------------------------------------------
# the whole run


def open_engines(settings: Settings):
    if not settings.engines:
        return None
    from patchaudit.engine.sources import EngineError
    from patchaudit.units.exact import EngineSet

    try:
        # engine reads are bounded by max-file-size too, and one refused file is an error, not a crash
        return EngineSet.open(settings.engines, max_file_size=settings.max_file_size)
    except EngineError as exc:
        raise RunError(str(exc)) from None


def engine_warnings(engines: Any) -> list[str]:
    """The members each engine archive left out and why (inputs/engine.py `warnings`)."""
    out: list[str] = []
    for src, _ in getattr(engines, "engines", None) or ():
        warn = getattr(src, "warnings", None)
        if callable(warn):
            out.extend(f"engine {src.name!r} ({src.label}): {w}" for w in warn())
    return out


def load_tokenizer(settings: Settings):
    if not settings.tokenizer:
        return None
    from patchaudit.inputs.tokenizer import TokenizerError, load_tokenizer as _load

    try:
        return _load(settings.tokenizer)
    except TokenizerError as exc:
        raise RunError(str(exc)) from None


def _unique_errors(errors: list[FileError]) -> list[FileError]:
    seen: set[tuple[str, int | None, str]] = set()
    out = []
    for e in errors:
        key = (e.path, e.line, e.message)
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out


def run_check(paths: list[str], settings: Settings, progress: Any = None) -> RunResult:
    """Check `paths`; `progress(total)`, if given, is called once per finished file.

    The per-file work (`analyse_file`) is scheduled by `patchaudit.pipeline.parallel`:
    result cache, pre-filter on the libcst-free rule index, worker processes.
    Results come back in file order whatever the number of jobs, and a run
    that parses nothing never imports libcst or a rule module.
    """
    from patchaudit import __version__
    from patchaudit.pipeline.cache import ResultCache, cache_root, ensure_root
    from patchaudit.inputs.discover import discover
    from patchaudit.pipeline.parallel import scan
    from patchaudit.config.registry import rule_index, select_codes

    root = cache_root(settings) if settings.cache else None
    if root is not None and not ensure_root(root):
        root = None
    index = rule_index(str(root / __version__) if root is not None else None)
    try:
        codes = select_codes(index, settings.select, settings.ignore, settings.extend_select)
    except KeyError as exc:
        raise RunError(f"unknown rule code or prefix {exc.args[0]!r} (see `patchaudit rules`)") from None
    metas = [index[c] for c in codes]
    files, errors = discover(paths, settings.exclude)
    engines = open_engines(settings)
    tokenizer = load_tokenizer(settings)
    cache = ResultCache.for_run(settings, codes) if root is not None else None
    # values of the configuration refused (a limit above its hard cap): errors of the run
    result = RunResult(errors=list(getattr(settings, "problems", ())) + list(errors), files=len(files))
    result.warnings.extend(engine_warnings(engines))
    done = (lambda: progress(len(files))) if progress is not None else None
    for fr, hit in scan(files, settings, metas, engines, tokenizer, cache, on_done=done):
        result.findings.extend(fr.findings)
        result.errors.extend(fr.errors)
        result.parsed += 0 if hit else fr.parsed   # a cached result was parsed by an earlier run
        result.cached += hit
        result.hunks.extend(getattr(fr, "hunks", ()))
    # one refused engine file is one error of the run, however many worker processes met it
    result.errors = _unique_errors(result.errors)
    if cache is not None:
        cache.save()
    # rules that see the whole set of patches (PA304): once per run, after the per-file
    # pass; with no patch file among `files` they have nothing to see
    if any(m.patch_set for m in metas) and any(f.kind == PATCH for f in files):
        from patchaudit.inputs.patchset import run_patch_set_rules

        run_patch_set_rules(files, [m.load() for m in metas], settings, result)
    result.findings.sort(key=Finding.sort_key)
    return result
