"""Units of the `sed -i 's/A/B/'` edits a build script makes to engine files.

A post-install script that runs `sed -i 's/self\\.load_mm_data(/self.legacy_load_mm_data(/'
.../qwen_vl.py` patches the engine as a `.patch` would.  `sed_units` turns each such
edit of a Python file into a `PythonUnit` whose findings are reported at the script's
line (the sed command), so the Python rules (PA101, ...) judge it:

- with an engine that has the file (found by the longest path suffix that names one
  file of one engine: `.../site-packages/sglang/srt/x.py` -> `sglang/srt/x.py`), the
  substitution is applied to the engine file, line by line as sed does
  (patchaudit/inputs/sedexpr.py), and the whole edited file is the unit (exact mode):
  only the lines the sed changed are judged, each mapped to the script's line and to its
  line in the engine file;
- without one, the replacement text itself is the unit when it is known without a
  match (literal parts, and `&` when the pattern is a literal): a fragment, closed like a
  hunk's window, whose constructs that continue past it say so.

A sed this reader cannot translate gives no unit (never a wrong edit); the run says so
(pipeline/plan.py `sed_warnings`).
"""

from __future__ import annotations

import os
from typing import Any

from patchaudit.inputs.recipes import UNKNOWN, SedStep, read_recipe
from patchaudit.inputs.sedexpr import Unsupported, parse_substitution, pattern_literal
from patchaudit.units import LineInfo, PythonUnit
from patchaudit.units.engines import EngineContext

#: sed commands whose edits one script may turn into units
MAX_SED_EDITS = 200


def sed_steps(path: str, kind: str, text: str) -> list[SedStep]:
    """The in-place sed edits of Python files a recipe makes."""
    recipe = read_recipe(path, kind, text, folder=os.path.dirname(os.path.abspath(path)))
    return [s for s in recipe.steps if isinstance(s, SedStep) and any(f.endswith(".py") for f in s.files)]


def engine_file(engines: Any, wanted: str) -> tuple[EngineContext, str] | None:
    """(the engine context, the engine path) of the one engine file `wanted` names by its
    longest path suffix (at least the folder and the file name), or None."""
    parts = [p for p in wanted.split(UNKNOWN)[-1].split("/") if p and p != "."]
    if len(parts) < 2 or engines is None:
        return None
    contexts = engines.contexts()
    for start in range(0, len(parts) - 1):
        suffix = "/".join(parts[start:])
        hits = []
        for ctx in contexts:
            if ctx.source.has(suffix):
                hits.append((ctx, suffix))
            else:
                hits.extend((ctx, f) for f in ctx.source.files() if f.endswith("/" + suffix))
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            return None  # ambiguous: no edit rather than a wrong one
    return None


def sed_units(path: str, kind: str, text: str, engines: Any = None) -> list[PythonUnit]:
    """The Python units of the sed edits of one script (see the module docstring)."""
    out: list[PythonUnit] = []
    for step in sed_steps(path, kind, text)[:MAX_SED_EDITS]:
        try:
            sub = parse_substitution(step.script, step.extended)
        except Unsupported:
            continue  # reported by the run (pipeline/plan.py sed_warnings)
        for f in step.files:
            if not f.endswith(".py"):
                continue
            found = engine_file(engines, f) if engines is not None else None
            if found is not None:
                unit = _exact_unit(path, step, sub, found)
                if unit is not None:
                    out.append(unit)
                continue
            unit = _replacement_unit(path, step, sub)
            if unit is not None:
                out.append(unit)
    return out


def _exact_unit(path: str, step: SedStep, sub, found) -> PythonUnit | None:
    from patchaudit.engine.definitions import parse_python

    ctx, target = found
    original = ctx.source.read_text(target)
    if original is None:
        return None
    lines = original.split("\n")
    edited = [sub.apply_line(line) for line in lines]
    changed = [k + 1 for k, (a, b) in enumerate(zip(lines, edited)) if a != b]
    if not changed:
        return None
    new_text = "\n".join(edited)
    tree = parse_python(new_text)
    if tree is None:
        return None  # the edit breaks the file: PA302 is the patch rules'; judged no further
    lines_map = {k: LineInfo(step.line, 0, k, True) for k in changed}
    unit = PythonUnit(
        path=path,
        lines_map=lines_map,
        judged=frozenset(changed),
        target_path=target,
        mode="exact",
        text=new_text,
        engine=ctx,
    )
    unit.patched_tree = tree
    return unit


def _replacement_unit(path: str, step: SedStep, sub) -> PythonUnit | None:
    """The replacement text as a fragment (closed brackets after `real_end`)."""
    import io
    import tokenize

    text = sub.literal_replacement(pattern_literal(step.script, step.extended))
    if text is None or not text.strip() or "\n" in text:
        return None
    body = text.strip()
    closers: list[str] = []
    pairs = {"(": ")", "[": "]", "{": "}"}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(body).readline):
            if tok.type == tokenize.OP and tok.string in pairs:
                closers.append(pairs[tok.string])
            elif tok.type == tokenize.OP and tok.string in pairs.values() and closers:
                closers.pop()
    except (tokenize.TokenError, SyntaxError):
        pass
    closed = body + "".join(reversed(closers)) + "\n"
    unit = PythonUnit(
        path=path,
        lines_map={1: LineInfo(step.line, 0, None, True)},
        judged=frozenset({1}),
        mode="fragment",
        text=closed,
        real_end=(1, len(body)) if closers else None,
    )
    return unit
