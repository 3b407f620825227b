"""Running the selected rules on one unit: the rule's context, whether its needs are met,
one batched libcst pass for the Python rules (on the unit pruned to their statements
when they are local), and the reports mapped to findings by the unit."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

# patchaudit.lint.rule imports libcst (its Rule is a libcst visitor): the functions that
# run rules import it; a run that parses nothing never does (see parallel.py)
from patchaudit.config.registry import PYTHON as K_PYTHON
from patchaudit.config.registry import TEXT as K_TEXT
from patchaudit.config.settings import Settings
from patchaudit.model.findings import FileError, Finding, Report
from patchaudit.pipeline.reports import to_finding
from patchaudit.pipeline.results import FileResult, RunError

if TYPE_CHECKING:  # pragma: no cover
    from patchaudit.lint.rule import Rule, RuleContext


def resolve_rules(settings: Settings) -> list[type[Rule]]:
    try:
        from patchaudit.config.registry import select_rules

        return select_rules(settings.select, settings.ignore, settings.extend_select)
    except KeyError as exc:
        raise RunError(f"unknown rule code or prefix {exc.args[0]!r} (see `patchaudit rules`)") from None


def text_flavor(kind: str) -> str:
    return kind


def context_for(rule: type[Rule], settings: Settings, engine: Any = None, tokenizer: Any = None) -> RuleContext:
    from patchaudit.lint.rule import RuleContext

    return RuleContext(
        settings.options_for(rule.code),
        engine=engine,
        tokenizer=tokenizer,
        settings=settings,
        read=guarded_reader(settings),
    )


def guarded_reader(context: Any = None):
    """`read(path) -> text | None` through the one guarded reader (regular files only,
    bounded by max-file-size), for what a rule consults beside its unit: the importing
    packages' `__init__.py` (version gates).  `context`: the run's settings (or a rule context)."""
    from patchaudit.files.reader import read_text

    settings = getattr(context, "settings", context)
    limit = getattr(settings, "max_file_size", None) or 64 * 1024 * 1024

    def read(path: str) -> str | None:
        try:
            return read_text(path, limit)
        except (OSError, ValueError):
            return None

    return read


def needs_met(rule: type[Rule], *, engine: Any, tokenizer: Any) -> bool:
    if "engine" in rule.needs and engine is None:
        return False
    if "engine-pair" in rule.needs and getattr(engine, "pair", None) is None:
        return False  # only the bump command provides two engine versions (patchaudit/pipeline/bump.py)
    if "tokenizer" in rule.needs and tokenizer is None:
        return False
    return True


def run_python_rules(
    unit, rules: list[type[Rule]], settings: Settings, result: FileResult, tokenizer: Any = None
) -> list[Finding]:
    """The Python rules on one unit.  Exact mode: the rules that declare `sliceable` run on
    the patched file sliced to the definitions the patch changed and what they name
    (patchaudit/units/exact_unit.py, patchaudit/units/slicing.py), the others on all of it."""
    from patchaudit.units.exact_unit import ExactPythonUnit

    sliceable = [r for r in rules if r.sliceable and K_PYTHON in r.kinds]
    part = None
    if sliceable and isinstance(unit, ExactPythonUnit):
        # a pre-filter that refuses the whole file refuses its slice (whose statements and
        # lines are the file's): no slice is made for rules that would refuse it
        _hand_back(unit)
        sliceable = _active(unit, sliceable, settings, tokenizer)
        rules = [r for r in rules if not r.sliceable or r in sliceable]
        part = unit.sliced() if sliceable else None
    if part is None:
        return _run_python_rules(unit, rules, settings, result, tokenizer)
    rest = [r for r in rules if r not in sliceable]
    return _run_python_rules(unit, rest, settings, result, tokenizer) + _run_python_rules(
        part, sliceable, settings, result, tokenizer
    )


def _hand_back(unit) -> None:
    """The pre-filters ask `ast` about an exact unit's patched text: give pyast the tree
    the unit was built with (exact mode builds every unit of a patch before the rules run
    on the first, and the slice's parse comes between)."""
    if getattr(unit, "patched_tree", None) is not None:
        from patchaudit.inputs import pyast

        pyast.remember(unit.text, unit.patched_tree)


def _active(unit, rules: list[type[Rule]], settings: Settings, tokenizer: Any) -> list[type[Rule]]:
    """The Python rules whose needs the unit meets and whose pre-filters keep it."""
    return [
        r
        for r in rules
        if K_PYTHON in r.kinds
        and needs_met(r, engine=unit.engine, tokenizer=tokenizer)
        and r.can_match(unit.text, settings)
        and r.can_match_unit(unit, settings)
    ]


def _run_python_rules(
    unit, rules: list[type[Rule]], settings: Settings, result: FileResult, tokenizer: Any = None
) -> list[Finding]:
    engine = unit.engine
    _hand_back(unit)
    active = _active(unit, rules, settings, tokenizer)
    out_pre = _precomputed(unit, active, settings)  # takes out the rules it answers for
    if not active:
        return out_pre
    treeless = [r for r in active if not r.reads_tree]
    active = [r for r in active if r.reads_tree]
    # libcst costs ~600 bytes of memory a byte and ~0.7 MB/s: a text over the parse budget
    # is reported and never parsed (patchaudit/inputs/pyast.py; can_match did not parse it)
    if _too_large(unit, settings, result) or _too_deep(unit, settings, result):
        return []
    if not active:  # only rules that read no tree: libcst only says why a text ast cannot read
        if _readable(unit, result):
            return out_pre + _run_treeless(unit, treeless, settings, tokenizer, result)
        return out_pre
    import libcst as cst

    from patchaudit.analysis.lazy_metadata import metadata_wrapper, visit_rules

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
            if pruned is full:  # nothing pruned: one pass for all
                rest = rest + local
            else:
                batches.append((pruned, local))
        if rest:
            batches.insert(0, (full, rest))
    except (cst.ParserSyntaxError, RecursionError) as exc:
        _unparsed(unit, exc, result)
        return []
    result.parsed += 1
    out: list[Finding] = []
    for module, batch in batches:
        instances = [
            i for i in (_instance(r, unit, settings, engine, tokenizer, result) for r in batch) if i is not None
        ]
        # one batched pass for the batch's rules; positions only if a rule reports (lazy_metadata.py)
        wrapper = metadata_wrapper(module)
        try:
            visit_rules(wrapper, instances)
        except RecursionError:
            result.errors.append(
                FileError(unit.path, "Python nested too deeply to analyse (recursion limit)", unit_line(unit))
            )
            return []
        for inst in instances:
            if inst.crash is not None:
                result.errors.append(FileError(unit.path, f"rule {inst.code} crashed: {inst.crash!r}", unit_line(unit)))
            out.extend(_to_findings(unit, type(inst), inst.reports))
    return out_pre + out + _run_treeless(unit, treeless, settings, tokenizer, result)


def _readable(unit, result: FileResult) -> bool:
    """Whether a unit the rules that read no tree run on alone is one they would have run
    on with the others: it parses (with `ast`, kept for the rules' own reading; else with
    libcst, which reports why, as it does for every rule)."""
    from patchaudit.inputs import pyast

    if pyast.parse(unit.text) is not None:
        return True
    import libcst as cst

    try:
        unit.parse()
    except (cst.ParserSyntaxError, RecursionError) as exc:
        _unparsed(unit, exc, result)
        return False
    return True


def _unparsed(unit, exc: BaseException, result: FileResult) -> None:
    """The error of a unit libcst could not parse: a syntax error (a file's only: a hunk
    or patched text that does not parse is the patch rules' to report) or the recursion
    limit."""
    if isinstance(exc, RecursionError):
        result.errors.append(
            FileError(unit.path, "Python nested too deeply to parse (recursion limit)", unit_line(unit))
        )
    elif unit.mode == "file":
        result.errors.append(FileError(unit.path, f"cannot parse Python: {exc.message}", exc.raw_line))  # type: ignore[attr-defined]


def _run_treeless(unit, rules: list[type[Rule]], settings: Settings, tokenizer: Any, result) -> list[Finding]:
    """The rules that read no tree (`Rule.reads_tree`), each on its own: a crash is the rule's."""
    out: list[Finding] = []
    for r in rules:
        inst = _instance(r, unit, settings, unit.engine, tokenizer, result)
        if inst is None:
            continue
        try:
            inst.check_python()
        except RecursionError:  # as for the rules that read the libcst tree
            result.errors.append(
                FileError(unit.path, "Python nested too deeply to analyse (recursion limit)", unit_line(unit))
            )
            return []
        except Exception as exc:
            result.errors.append(FileError(unit.path, f"rule {r.code} crashed: {exc!r}", unit_line(unit)))
            continue
        out.extend(_to_findings(unit, r, inst.reports))
    return out


def _precomputed(unit, active: list, settings: Settings) -> list[Finding]:
    """The findings of the `repository` rules the whole-repository pre-pass already made on
    this module (pipeline/repo_index.py); those rules are taken out of `active`."""
    out: list[Finding] = []
    if not settings.repo or unit.mode != "file":
        return out
    from patchaudit.analysis.repo_summaries import run_repo

    for r in [r for r in active if r.repository]:
        repo = run_repo(settings, r.code)
        reports = repo.precomputed(unit.path, unit.text) if repo is not None else None
        if reports is not None:
            active.remove(r)
            out.extend(_to_findings(unit, r, reports))
    return out


def _too_deep(unit, settings: Settings, result: FileResult) -> bool:
    """Whether the unit's text nests deeper than `max-nesting` (libcst's native parser
    overflows the C stack, SIGSEGV, on deep nesting: refused first); if so the error is
    on `result`."""
    from patchaudit.units.nesting import too_deep

    deep = too_deep(unit.text, settings.max_nesting)
    if deep is None:
        return False
    info = unit.info(deep[0])
    result.errors.append(
        FileError(
            unit.path,
            f"Python nested too deeply: about {deep[1]} levels, over the "
            f"limit of {settings.max_nesting} (max-nesting); not analysed",
            info.line if info else unit_line(unit),
        )
    )
    return True


def _too_large(unit, settings: Settings, result: FileResult) -> bool:
    """Whether the unit's text is over `max-parse-size`; if so the error is on `result`,
    naming the file, or the engine file as patched, or the hunk."""
    from patchaudit.inputs import pyast

    if unit.unanalysed:
        result.errors.append(FileError(unit.path, unit.unanalysed, unit_line(unit)))
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
    result.errors.append(FileError(unit.path, what, None if unit.mode == "file" else unit_line(unit)))
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
        return r(unit, context_for(r, settings, engine, tokenizer))
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

    if not keep or unit._module is None:
        needles = _prune_needles(rules, unit.text)
        if needles:
            pruned = pruning.prune(unit.text, needles, tree=unit.patched_tree)
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
        # a step in another file of the repository (whole-repository dataflow) is (line, note, path)
        far = {i: s for i, s in enumerate(rep.trace) if len(s) == 3}
        if far:
            import dataclasses

            rep = dataclasses.replace(rep, trace=tuple(s[:2] for s in rep.trace))
        f = to_finding(unit, rule, rep)
        if f is not None:
            if far and len(f.trace) == len(rep.trace):
                f.trace = [_far_step(far[i], f.path) if i in far else t for i, t in enumerate(f.trace)]
            out.append(f)
    return out


def _far_step(step: tuple, shown_as: str):
    """A trace step of another file, its path shown as the finding's is (relative or not)."""
    import os

    from patchaudit.model.findings import TraceStep

    line, note, path = step
    if not os.path.isabs(shown_as):
        try:
            path = os.path.relpath(path)
        except ValueError:  # another drive (Windows)
            pass
    return TraceStep(path, int(line), note)


def run_unit_rules(
    unit,
    kind: str,
    rules: list[type[Rule]],
    settings: Settings,
    result: FileResult,
    engine: Any = None,
    tokenizer: Any = None,
) -> list[Finding]:
    """Text and patch rules: each gets the unit and reports in its coordinates."""
    out: list[Finding] = []
    for r in rules:
        if kind not in r.kinds or not needs_met(r, engine=engine, tokenizer=tokenizer):
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


def unit_line(unit) -> int | None:
    """The patch line a unit starts at: its hunk's header, its first judged line, its section."""
    if unit.hunk is not None:
        return unit.hunk.header_line
    lm = unit.lines_map or {}
    lines = [lm[k].line for k in (unit.judged if unit.judged is not None else lm) if k in lm]
    if lines:
        return min(lines)
    section = unit.section
    return section.header_line if section is not None else None
