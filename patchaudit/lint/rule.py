"""The rule framework: what a rule declares, how it reports, how rules are found.

A rule is one module in the `rules/` folder (installed as `patchaudit.rules`)
holding one subclass of `Rule`.  The class declares its code, name, default
severity, the unit kinds it reads, the literal strings without which it cannot
fire (the pre-filter), its documentation (the class docstring, in ruff's shape:
What it does / Why is this bad / Example / Use instead / Incident) and its
VALID/INVALID examples, which the test suite runs through the real pipeline.

Python rules are libcst `BatchableCSTVisitor`s, as in Fixit: all selected rules
of a file share one parse and one batched traversal, and the metadata they
declare in METADATA_DEPENDENCIES is computed once.  Text and patch rules
implement `check_text` / `check_patch`.  Rules do no I/O.
"""

from __future__ import annotations

import inspect
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Iterator

from patchaudit.model.findings import Fix, Report, Severity

if TYPE_CHECKING:  # pragma: no cover
    import ast

    import libcst as cst

    from patchaudit.units import PatchUnit, TextUnit

#: unit kinds a rule can read
PYTHON, TEXT, PATCH = "python", "text", "patch"


class RuleOptionError(ValueError):
    """A rule's `[tool.patchaudit.rules.CODE]` option that the rule cannot use, raised
    from the rule's constructor: reported once as an error of the configuration, and
    the run goes on without that rule."""


@dataclass(frozen=True)
class Example:
    """One VALID or INVALID example of a rule.

    `code` is the file's content; `kind` says what file it is: "python",
    "patch", "shell", "dockerfile", "yaml", "env" (or give `filename`).
    For INVALID examples, `count` findings of the rule are expected; `line`
    (the first finding's line in the file) and `contains` (a substring of its
    message) are checked when given.  `engine` maps engine-relative paths to
    file contents: the example then runs in exact mode against that tree.
    `options` are per-rule options, `config` extra run configuration.
    """

    code: str
    kind: str = "python"
    filename: str | None = None
    count: int = 1
    line: int | None = None
    contains: str | None = None
    engine: dict[str, str] | None = None
    options: dict[str, Any] | None = None
    tokenizer: dict[str, Any] | None = None
    title: str = ""
    #: more files of the example, written beside it (name -> content) and
    #: checked in the same run: the other patches of a set (PA304)
    files: dict[str, str] | None = None
    #: the OLD engine tree of an engine-pair rule (PA203, PA204): the example
    #: then runs through `patchaudit bump` from `engine_old` to `engine`
    engine_old: dict[str, str] | None = None
    #: the example's file after `--fix --unsafe-fixes` with only this rule selected
    #: (dedented like `code`); checked by patchaudit/testing.py.  With `expected_fix`,
    #: `unsafe_fixes=False` checks what `--fix` alone writes
    expected_fix: str | None = None
    unsafe_fixes: bool = True

    def file_name(self) -> str:
        if self.filename:
            return self.filename
        return {
            "python": "example.py",
            "patch": "example.patch",
            "shell": "example.sh",
            "dockerfile": "Dockerfile",
            "yaml": "example.yaml",
            "env": ".env",
        }[self.kind]

    @property
    def source(self) -> str:
        return textwrap.dedent(self.code).lstrip("\n")

    @property
    def fixed_source(self) -> str | None:
        if self.expected_fix is None:
            return None
        return textwrap.dedent(self.expected_fix).lstrip("\n")


class RuleContext:
    """What a rule instance sees besides the unit: its options and run settings, and `read`,
    the driver's guarded reader of the files a rule may consult beside its unit (`read(path)
    -> text | None`: an importing package's `__init__.py` for its version gates); None: the rule
    reads nothing.  Rules do no I/O of their own (tests/test_architecture.py)."""

    def __init__(
        self,
        options: dict[str, Any] | None = None,
        engine: Any = None,
        tokenizer: Any = None,
        settings: Any = None,
        read: Any = None,
    ):
        self.options = options or {}
        self.engine = engine
        self.tokenizer = tokenizer
        self.settings = settings
        self.read = read


try:  # Python rules are libcst visitors; text-only runs must not need libcst imported
    from libcst import BatchableCSTVisitor as _VisitorBase
except Exception:  # pragma: no cover
    _VisitorBase = object  # type: ignore[assignment,misc]


class Rule(_VisitorBase):  # type: ignore[misc,valid-type]
    code: ClassVar[str] = ""
    name: ClassVar[str] = ""
    severity: ClassVar[Severity] = Severity.ERROR
    default_enabled: ClassVar[bool] = True
    #: unit kinds this rule reads: PYTHON, TEXT, PATCH
    kinds: ClassVar[frozenset[str]] = frozenset({PYTHON})
    #: what the rule needs beyond the input: "engine", "engine-pair", "tokenizer"
    needs: ClassVar[frozenset[str]] = frozenset()
    #: options whose value is a regular expression: the configuration (the checkout's) is
    #: refused at load when RE2 cannot compile one (patchaudit/inputs/linear_regex.py), and
    #: the rule compiles it with `compile_linear`, never with `re`
    regex_options: ClassVar[frozenset[str]] = frozenset()
    #: pre-filter in disjunctive normal form: the rule can only fire on a text
    #: that contains every string of at least one group.  () means "always".
    requires: ClassVar[tuple[tuple[str, ...], ...]] = ()
    #: statement pruning (patchaudit/units/prune.py, docs/speed.md): when every rule
    #: run on a Python unit is local, libcst parses the unit's text with every
    #: statement that holds none of the rules' needles emptied (same lines and
    #: columns).  A rule's needles on a text are the strings of its `requires`
    #: groups that the text satisfies.  A rule may be local only if, on any unit:
    #:
    #: 1. it reports only on nodes inside a statement whose source text contains
    #:    one of its needles.  "The statement" is the outermost statement that
    #:    encloses the node and is not a `class`/`def`/`async def` (pruning
    #:    descends into definitions and keeps only the body statements holding a
    #:    needle); a node of a definition's header (decorators, name, parameters,
    #:    bases) counts with the definition itself.  It never reports a
    #:    `class`/`def` node as a whole: pruning shortens the body, so the end of
    #:    its range moves;
    #: 2. its judgement of such a node depends only on that statement (all of it,
    #:    nested blocks included) and on the header lines (decorators, the
    #:    `class`/`def` line(s) up to the colon) of the class and function
    #:    definitions enclosing it: never on another statement of the module (a
    #:    name bound elsewhere, an import, a sibling method, anything gathered in
    #:    `visit_Module`/`leave_Module`).  What is not in the libcst tree stays
    #:    whole: `self.unit.text`, the engine (`resolve_call` indexes the full
    #:    text with `ast`), the options;
    #: 3. the strings are matched in the *source text*: a rule that matches the
    #:    value of a string literal (escapes decoded, implicit concatenation
    #:    joined) can see its needle in a statement whose source does not hold
    #:    it, and is not local.
    #:
    #: A rule without `requires` is never pruned for.  The findings with and
    #: without pruning are compared on every example and the corpus
    #: (tests/test_prune.py).
    local: ClassVar[bool] = False
    #: exact mode may hand the rule the patched engine file sliced to the definitions the
    #: patch changed and what they name (lines and columns kept).  A rule may be sliceable
    #: only if its judgement of a node on a changed line depends on nothing the slice
    #: empties: patchaudit/units/slicing.py states what it keeps; the dataflow rules,
    #: whose flows run through callers and class attributes, are not.
    sliceable: ClassVar[bool] = False
    #: False: the rule reads no libcst tree (it judges the unit's text with `ast` and the
    #: engine, from `check_python`); a unit only such rules run on is not parsed with libcst
    #: (PA204: bump's call-signature audit, on every patched engine file)
    reads_tree: ClassVar[bool] = True
    #: whole-repository dataflow (patchaudit/pipeline/repo_index.py, docs/dataflow.md): before
    #: the per-file pass the rule's `summarise` runs on every module its `exports` accepts,
    #: to a fixed point, and its analysis of each file sees the others' summaries
    repository: ClassVar[bool] = False
    #: default per-rule options (configurable under [tool.patchaudit.rules.CODE])
    options: ClassVar[dict[str, Any]] = {}
    #: the fixes the rule offers (ruff's FixAvailability): None (none; a fix it reports
    #: anyway is ignored), "safe" (its fixes say whether each is safe) or "unsafe" (every
    #: fix it reports is applied only with `--unsafe-fixes`); see docs/fixes.md
    fix: ClassVar[str | None] = None
    #: what the drivers and reports need to know of the rule's findings, named by role so that
    #: no code outside the rule pack names a rule code (tests/test_architecture.py):
    #: "unused-suppression" (it reports suppressions that suppress nothing: it runs after the
    #: others, on what they reported), "breaks-patch" (a fix that adds one of its findings is
    #: refused), "hunk-status" (how a hunk applies: the bump report folds the "changed-upstream"
    #: findings of the same hunk under it), "changed-upstream", "hunk-failed" (bump says where
    #: the code of a hunk that does not apply moved), "monkeypatch-target" (its options say which
    #: runtime patches bump lists), "port-check" (`patchaudit port` runs it on every ported
    #: file), "already-applied" (how a hunk already in the engine is found)
    roles: ClassVar[frozenset[str]] = frozenset()
    VALID: ClassVar[list[Example]] = []
    INVALID: ClassVar[list[Example]] = []

    def __init__(self, unit: Any = None, context: RuleContext | None = None):
        if _VisitorBase is not object:
            super().__init__()
        self.unit = unit
        self.context = context or RuleContext()
        self.opts = {**self.options, **self.context.options}
        self.reports: list[Report] = []
        self.set_reports: list[tuple[Any, Report, tuple[tuple[str, int, str], ...]]] = []
        self.crash: BaseException | None = None

    @property
    def unit_text(self) -> str:
        """The text of the unit the rule runs on ("" for a rule run without one: the patch-set
        rules, a rule's own test harness)."""
        return getattr(self.unit, "text", "") or ""

    def get_visitors(self):  # libcst's batching hook: isolate a crashing rule
        methods = {name: getattr(self, name) for name in _visitor_names(type(self))}

        def guard(fn):
            def run(node):
                if self.crash is not None:
                    return None
                try:
                    return fn(node)
                except RecursionError:
                    raise
                except Exception as exc:
                    self.crash = exc
                    return None

            return run

        return {name: guard(fn) for name, fn in methods.items()}

    # ----- reporting -------------------------------------------------------
    def report(
        self,
        node: "cst.CSTNode",
        message: str,
        *,
        trace: Iterable[tuple[int, str]] = (),
        severity: Severity | None = None,
        fix: Fix | None = None,
    ) -> None:
        """Report `message` at `node` (needs PositionProvider in METADATA_DEPENDENCIES)."""
        from libcst.metadata import PositionProvider

        pos = self.get_metadata(PositionProvider, node)
        self.report_at(
            pos.start.line,
            pos.start.column,
            pos.end.line,
            pos.end.column,
            message,
            trace=trace,
            severity=severity,
            fix=fix,
        )

    def report_at(
        self,
        line: int,
        column: int,
        end_line: int | None,
        end_column: int | None,
        message: str,
        *,
        trace: Iterable[tuple[int, str]] = (),
        severity: Severity | None = None,
        fix: Fix | None = None,
    ) -> None:
        """`fix`: in the reported file's coordinates (patchaudit/lint/fixes.py builds it)."""
        self.reports.append(
            Report(
                line,
                column,
                end_line or line,
                end_column if end_column is not None else column,
                message,
                tuple(trace),
                severity,
                fix=fix,
            )
        )

    # ----- hooks for non-Python units --------------------------------------
    def check_python(self) -> None:  # pragma: no cover - overridden
        """The whole judgement of a rule that does not read the tree (`reads_tree`)."""
        raise NotImplementedError

    def check_text(self, unit: "TextUnit") -> None:  # pragma: no cover - overridden
        """Called for text units (shell, Dockerfile, YAML, .env, hunks of such files)."""

    def check_patch(self, unit: "PatchUnit") -> None:  # pragma: no cover - overridden
        """Called once per patch file."""

    # ----- whole-run hook: rules that see every patch of the run ------------
    def check_patch_set(self, units: "list[PatchUnit]") -> None:  # pragma: no cover - overridden
        """Called once per run with the patch units of every patch file checked
        (see patchaudit/inputs/patchset.py).  Report with `report_in`."""

    def report_in(
        self,
        unit: Any,
        line: int,
        column: int,
        message: str,
        *,
        related: Iterable[tuple[str, int, str]] = (),
        severity: Severity | None = None,
    ) -> None:
        """A `check_patch_set` report in `unit`'s coordinates; `related` are
        (path, line, note) places in other files, shown as the finding's trace."""
        self.set_reports.append((unit, Report(line, column, line, column, message, (), severity), tuple(related)))

    @classmethod
    def exports(cls, text: str, settings: Any = None) -> bool:  # pragma: no cover - overridden
        """`repository` rules: whether this module may export a summary (a cheap filter)."""
        return False

    @classmethod
    def summarise(
        cls, module: "ast.Module", positions: Any, path: str, view: Any, settings: Any = None, seed: Any = None
    ) -> Any:  # pragma: no cover - overridden
        """`repository` rules: the module's summary (patchaudit.analysis.repo_summaries) from its
        `ast` tree and `positions` (patchaudit.analysis.flow_nodes.Positions); `seed`, the
        functions to follow parameter by parameter (`summary_words`)."""
        return None

    @classmethod
    def export_requires(cls, options: Any) -> tuple[tuple[str, ...], ...]:  # pragma: no cover - overridden
        """`repository` rules: the byte filter of `exports` (() accepts every file)."""
        return ()

    @classmethod
    def repo_requires(cls, options: Any, sources: list[str], sinks: list[str]) -> tuple:  # pragma: no cover
        """`repository` rules: the `requires` groups added for the words through which a file
        sees another module's taints (RepoView.sources/sinks)."""
        return tuple((w,) for w in sources)

    @classmethod
    def has_source(cls, text: str, settings: Any = None) -> bool:  # pragma: no cover - overridden
        """`repository` rules: whether the module holds a source of its own (a module that
        only has sinks its parameters reach is summarised only when a caller needs it)."""
        return True

    @classmethod
    def seed(cls, text: str, settings: Any = None) -> Any:  # pragma: no cover - overridden
        """`repository` rules: the functions of the module to summarise parameter by
        parameter (None: all)."""
        return None

    @classmethod
    def sees_patch_set(cls) -> bool:
        return cls.check_patch_set is not Rule.check_patch_set

    # ----- documentation ---------------------------------------------------
    @classmethod
    def docs(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def summary(cls) -> str:
        doc = cls.docs()
        for para in doc.split("\n\n"):
            para = para.strip()
            if para and not para.startswith("#"):
                return " ".join(para.split())
        return ""

    @classmethod
    def can_match(cls, text: str, settings: Any = None) -> bool:
        """The pre-filter: False only when the rule cannot fire on `text`.  A rule
        whose pre-filter depends on the run (PA206/PA207: the engine package
        names of `settings`) overrides this and reads `settings` when given; its
        class `requires` must stay a sound over-approximation of it under the
        default settings: the scheduler pre-filters with `requires` without
        importing the rule (patchaudit/config/registry.py, docs/speed.md)."""
        if not cls.requires:
            return True
        return any(all(s in text for s in group) for group in cls.requires)

    @classmethod
    def can_match_unit(cls, unit: Any, settings: Any = None) -> bool:
        """The unit's pre-filter, after `can_match`, before the unit is parsed: False only
        when the rule cannot report on the lines the unit judges (`unit.judged`; exact mode
        judges the lines the patch gave, and a report elsewhere is dropped).  A rule whose
        reports stand on statements it can find cheaply (PA206/PA207's sites) overrides
        it; the findings with and without it are compared (tests/test_exact_speed_invariants.py)."""
        return True


def is_rule_class(obj: Any, module_name: str) -> bool:
    """Whether `obj` is a rule class defined in the module `module_name` (a subclass
    of `Rule` with a code: an abstract helper base has none)."""
    return (
        inspect.isclass(obj)
        and issubclass(obj, Rule)
        and obj is not Rule
        and obj.__module__ == module_name
        and bool(obj.code)
    )


def iter_examples(rule: type[Rule]) -> Iterator[tuple[bool, Example]]:
    for ex in rule.VALID:
        yield False, ex
    for ex in rule.INVALID:
        yield True, ex


_VISITOR_NAMES: dict[type, tuple[str, ...]] = {}


def _visitor_names(cls: type) -> tuple[str, ...]:
    """The `visit_*`/`leave_*` methods libcst's `BatchableCSTVisitor.get_visitors` finds
    (`inspect.getmembers` of the instance, keeping methods whose function is named so
    and is not one of libcst's empty stubs), per class: getmembers walks every attribute
    of the instance, a few milliseconds per rule and file."""
    names = _VISITOR_NAMES.get(cls)
    if names is None:
        import inspect

        names = tuple(
            n
            for n, m in inspect.getmembers(cls, inspect.isfunction)
            if m.__name__.startswith(("visit_", "leave_")) and not getattr(m, "_is_no_op", False)
        )
        _VISITOR_NAMES[cls] = names
    return names
