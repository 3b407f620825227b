"""The exact-mode Python unit: a patched engine file, whole or sliced.

`ExactPythonUnit` is the unit `units/exact.py` makes of a patched Python file.
Besides the whole patched text it can give itself *sliced* to the definitions
the patch changed and what they name (`sliced()`, patchaudit/units/slicing.py),
which the rules that declare `sliceable` run on (pipeline/run_rules.py); the
sliced unit shares the whole file's engine module index, so the engine resolves
calls as it does without slicing.  `original_index` is the index of a section's
pre-image (or patched text), shared by content with every engine view of the
process (patchaudit/engine/shared.py); `syntax_error` says where a patched text
stops parsing (PA302).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from patchaudit.engine.shared import shared_index
from patchaudit.units import LineInfo, PythonUnit
from patchaudit.units.engines import EngineContext


@dataclass
class ExactPythonUnit(PythonUnit):
    """A patched engine file: a PythonUnit that can also be seen *sliced* to what the patch
    changed (units/slicing.py), for the rules that declare `sliceable`."""

    _slice: Any = field(default=None, repr=False, compare=False)  # the sliced unit, or False

    def sliced(self) -> PythonUnit | None:
        """This unit with every definition no changed line needs emptied (same lines and
        columns, the same engine module index), or None: nothing to gain."""
        if self._slice is None:
            import dataclasses

            from patchaudit.units.slicing import changed_slice

            text = changed_slice(self.text, self.patched_tree, self.judged or ())
            self._slice = False
            if text is not None:
                engine = self.engine
                module_index = engine.unit_module(self) if isinstance(engine, EngineContext) else None
                self._slice = dataclasses.replace(
                    self, text=text, patched_tree=None, _module=None, _symbols=None, _slice=False
                )
                # the engine sees the whole patched file: resolution as without slicing
                self._slice._module_index = module_index
        return self._slice or None


def original_index(ctx: EngineContext, path: str, text: str):
    """The index of a section's pre-image, shared with every view of the same text
    (engine/shared.py): the engine's unchanged file is parsed once per run."""
    try:
        module = ctx.source.module_name(path)
    except Exception:  # a source without module names (never seen): index it unnamed
        module = None
    return shared_index(path, text, module)


def syntax_error(text: str, lines_map: dict[int, LineInfo]) -> tuple[int, int | None, str]:
    """(line, patch line, message) of the first syntax error of a patched text; the
    patch line is the nearest line the patch gave, when the error's own is not one."""
    try:
        compile(text, "<patched>", "exec", dont_inherit=True, flags=0x400)  # PyCF_ONLY_AST
    except SyntaxError as exc:
        line = exc.lineno or 1
        info = lines_map.get(line)
        if info is None and lines_map:
            nearest = min(lines_map, key=lambda l: abs(l - line))
            info = lines_map[nearest]
        return line, info.line if info else None, exc.msg or "invalid syntax"
    except (ValueError, RecursionError, MemoryError) as exc:
        return 1, None, str(exc)
    return 1, None, "does not parse"
