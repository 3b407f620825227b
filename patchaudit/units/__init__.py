"""Units: the code a rule analyses, with the maps from its lines back to files.

A unit is what one rule invocation sees: a whole Python file, a window of a
patch hunk parsed on its own (fragment mode), a whole engine file with the
patch applied (exact mode), the lines of a shell/Dockerfile/YAML/.env file or
hunk, or a patch file as a whole.  Every unit knows how to map a line of its
own text back to the place a user reads (`LineInfo`): the `.py` file, or the
patch file's own line plus the engine file's line.  `pipeline.reports.to_finding` does that
mapping for every report of every rule, in one place (the driver builds the finding:
`patchaudit/pipeline/reports.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from patchaudit.inputs.patches import FileSection, Hunk, PatchFile

INCOMPLETE_NOTE = "call continues past the hunk; give --engine to confirm"


@dataclass(frozen=True)
class LineInfo:
    """Where a unit line is in the file the user reads."""

    line: int  # line in the reported file (.py, or the patch file)
    col_shift: int = 0  # add to a unit column to get the reported column
    target_line: int | None = None  # line in the engine/target file (patches)
    changed: bool = True  # the line is added/changed by the patch


@dataclass
class Unit:
    path: str  # the file findings are reported in
    lines_map: dict[int, LineInfo] | None = None  # None: identity (a file read directly)
    judged: frozenset[int] | None = None  # unit lines that may carry findings (None: all)
    target_path: str | None = None  # the engine file a patch unit lands in
    patch: "PatchFile | None" = None
    section: "FileSection | None" = None
    hunk: "Hunk | None" = None
    mode: str = "file"  # file | fragment | exact
    hunk_of: "dict[int, Hunk] | None" = None  # exact mode: unit line -> the hunk it comes from

    def info(self, line: int) -> LineInfo | None:
        if self.lines_map is None:
            return LineInfo(line, 0, None, True)
        return self.lines_map.get(line)

    def judges(self, first: int, last: int) -> bool:
        if self.judged is None:
            return True
        return any(first <= l <= last for l in self.judged)

    def symbol_at(self, line: int) -> str | None:  # overridden by Python units
        return None

    def is_incomplete(self, end_line: int, end_column: int) -> bool:  # fragments override
        return False

    def context_lines(self, report_line: int) -> list[str]:
        hunk = self.hunk
        if self.hunk_of is not None:
            hunk = self.hunk_of.get(report_line, hunk)
        if self.patch is not None and hunk is not None:
            return self.patch.hunk_text(hunk)
        return []


@dataclass
class PythonUnit(Unit):
    """Python code for the libcst rules."""

    text: str = ""
    # (line, column) after which the text was invented to close a fragment
    real_end: tuple[int, int] | None = None
    # symbol known to enclose the whole unit (a hunk's "@@ ... @@ class X:" header)
    outer_symbol: str | None = None
    engine: Any = None  # exact mode: the engine context
    # why the unit is reported instead of analysed (fragments.py: the window search ran out
    # of its budget); None for a unit to analyse
    unanalysed: str | None = None
    # exact mode: the patched text's `ast` tree (parsed once, reused by pruning and
    # EngineContext.unit_module); None when not parsed
    patched_tree: Any = field(default=None, repr=False, compare=False)
    _module: Any = field(default=None, repr=False)
    # EngineContext.unit_module's cache of the unit's module index (None: not known yet)
    _module_index: Any = field(default=None, repr=False, compare=False)
    _symbols: list[tuple[int, int, str]] | None = field(default=None, repr=False)

    kind = "python"

    def parse(self):
        """Parse once with libcst; raises libcst.ParserSyntaxError."""
        if self._module is None:
            import libcst as cst

            self._module = cst.parse_module(self.text)
        return self._module

    def is_incomplete(self, end_line: int, end_column: int) -> bool:
        if self.real_end is None:
            return False
        return (end_line, end_column) > self.real_end

    def symbol_at(self, line: int) -> str | None:
        if self._symbols is None:
            self._symbols = _symbol_ranges(self._module, self.text)
        best = None
        for start, end, name in self._symbols:
            if start <= line <= end:
                best = name  # parents come first: the last hit is the innermost
        if best and self.outer_symbol and "." not in best and self.mode == "fragment":
            return f"{self.outer_symbol}.{best}"
        return best or self.outer_symbol


def _symbol_ranges(module, text: str) -> list[tuple[int, int, str]]:
    """(first line, last line, dotted name) of every class and function, parents first;
    from `text`'s `ast` tree when ast reads it (the engine index's `definition_spans`,
    from the `def` or `class` line, decorators out, to the last line of the body: the
    lines libcst's positions give, on every file of SGLang 0.5.15.post1, verl, trl and
    slime; a tenth of the cost of libcst's position metadata on a large engine file),
    else from `module`, libcst's parse of `text` or of a text with the same lines
    (pruned: what was dropped holds no finding), or none when no rule that reads the
    tree ran (PA204's units are not parsed)."""
    from patchaudit.engine.definitions import definition_spans
    from patchaudit.inputs import pyast

    tree = pyast.parse(text)
    if tree is not None:
        try:
            return [(s, e, name) for s, e, name, _ in definition_spans(tree, decorators=False)[1]]
        except RecursionError:
            pass
    return _cst_symbol_ranges(module) if module is not None else []


def _cst_symbol_ranges(module) -> list[tuple[int, int, str]]:
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    out: list[tuple[int, int, str]] = []

    class V(cst.CSTVisitor):
        METADATA_DEPENDENCIES = (PositionProvider,)

        def __init__(self):
            super().__init__()
            self.stack: list[str] = []

        def _enter(self, node, name):
            self.stack.append(name)
            pos = self.get_metadata(PositionProvider, node)
            out.append((pos.start.line, pos.end.line, ".".join(self.stack)))

        def visit_ClassDef(self, node):
            self._enter(node, node.name.value)

        def leave_ClassDef(self, node):
            self.stack.pop()

        def visit_FunctionDef(self, node):
            self._enter(node, node.name.value)

        def leave_FunctionDef(self, node):
            self.stack.pop()

    MetadataWrapper(module, unsafe_skip_copy=True).visit(V())
    return out


@dataclass
class TextUnit(Unit):
    """Lines of a shell script, Dockerfile, YAML or .env file (or of a hunk of one)."""

    flavor: str = "shell"  # shell | dockerfile | yaml | env
    lines: list[str] = field(default_factory=list)  # unit line k is lines[k-1]

    kind = "text"


@dataclass
class PatchUnit(Unit):
    """A patch file as a whole (malformed-patch, unsafe paths, apply results)."""

    problems: list[Any] = field(default_factory=list)
    engine: Any = None  # exact mode: per-section engine results
    siblings: list[Any] = field(default_factory=list)  # other patches of the run (PA304)
    # the patch set it belongs to (patchaudit/pipeline/patch_set.py); None: its folder's
    set_name: str | None = None
    # how the set is ordered: "recipe" (a build recipe's order, pipeline/plan.py), True (a
    # quilt series or name order the run was told to follow), False (no order known)
    set_ordered: bool | str = True

    kind = "patch"
