from __future__ import annotations

from typing import Any

from patchaudit.analysis.signatures import (
    CallTarget,
    bind_problems,
    left_out_defaults,
    param_names,
    passing_sites,
    rejected_calls,
    renamed_keywords,
    render_params,
    shifted_positional,
)
from patchaudit.engine.symbols import CallShape
from patchaudit.lint.rule import PYTHON, Example, Rule
from patchaudit.model.findings import Severity
from patchaudit.units.engines import unit_pair

from ._seed import BASE_WITH_PARAM as BASE_V2
from ._seed import BASE_WITHOUT_PARAM as BASE_V1
from ._seed import EXACT_PATCH as SEED_PATCH
from ._seed import engine_tree as _mm_engine

PROC = """\
class Processor:
    def load(self, prompt):
        ids = self.tokenize(prompt)
        out = self.process(ids)
        return out

    def tokenize(self, prompt, add_special=True):
        return list(prompt)

    def process(self, ids, max_len=None):
        return ids
"""


def _proc_engine(content: str = PROC) -> dict[str, str]:
    return {"python/sglang/__init__.py": "", "python/sglang/srt/__init__.py": "", "python/sglang/srt/proc.py": content}


def _proc_patch(new_line: str) -> str:
    return (
        "--- a/python/sglang/srt/proc.py\n+++ b/python/sglang/srt/proc.py\n"
        "@@ -1,5 +1,5 @@\n"
        " class Processor:\n"
        "     def load(self, prompt):\n"
        "         ids = self.tokenize(prompt)\n"
        "-        out = self.process(ids)\n"
        f"+        {new_line}\n"
        "         return out\n"
    )


_POOL_V1 = """\
class KVCache:
    def copy(self, indices):
        return indices


def backup(cache, indices):
    return cache.copy(indices)


class Pool(KVCache):
    def size(self):
        return 1
"""

_POOL_V2 = _POOL_V1.replace("def copy(self, indices):", "def copy(self, indices, extra=None):").replace(
    "return cache.copy(indices)", "return cache.copy(indices, extra=None)"
)

_POOL_PATCH = (
    "--- a/python/sglang/srt/pool.py\n+++ b/python/sglang/srt/pool.py\n"
    "@@ -10,3 +10,6 @@ def backup(cache, indices):\n"
    " class Pool(KVCache):\n"
    "     def size(self):\n"
    "         return 1\n"
    "+\n"
    "+    def copy(self, indices):\n"
    "+        return indices\n"
)


def _pool_engine(content: str) -> dict[str, str]:
    return {"python/sglang/__init__.py": "", "python/sglang/srt/__init__.py": "", "python/sglang/srt/pool.py": content}


class CallSignatureDrift(Rule):
    """
    Flags calls in patched code that no longer fit the new engine version's signatures.

    ## What it does
    Runs under `patchaudit bump` (it needs the OLD and the NEW engine version).
    Every call a patch adds, or that sits in code a hunk touches, is resolved
    to its engine definition through the module's imports and the class
    hierarchy (`self.m()`, `super().m()`, `Class.m()`, imported functions and
    classes with their own `__init__`; a call on an object of unknown type is
    never guessed), in NEW with all patches of the set applied, and checked:

    - a keyword the definition does not take, with "removed or renamed between
      OLD and NEW" when OLD took it;
    - a required parameter the call does not pass (noting when it is new);
    - too many positional arguments, an argument given twice;
    - a positional argument that binds to another parameter in NEW than in OLD;
    - a parameter upstream's own call sites pass in NEW (all of them by
      default: option `upstream-share`, with at least `min-upstream-calls`
      sites; call sites in tests are left out unless `include-tests`) while
      this call leaves it out: an error when the parameter is new in NEW, a
      warning when it existed but upstream only started passing it.  The
      message names the parameter, how many upstream call sites pass it and
      one of them.

    A definition the patch adds or changes that replaces one of NEW (the same
    class) or overrides one (a base class) is checked against NEW's callers: a
    call site of upstream's definition, or a call of a method of that name on
    an object of unknown type passing a keyword only upstream's definition
    takes, that the patched signature does not accept is an error naming the
    callers (a patch that re-adds an old `get_cpu_copy(self, indices)` where
    NEW's callers pass `mamba_indices=`: a TypeError at each of them).

    A hunk that fails on NEW is checked all the same (its added lines, parsed
    on their own): the maintainer will port it.

    ## Why is this bad?
    A patch that calls an engine function keeps applying and importing when
    upstream adds a parameter with a default, and silently gets the default.
    When upstream's own callers all pass the new parameter, the default is
    the "off" switch of whatever upstream added it for.

    ## Example
    At NEW, `legacy_load_mm_data` gained `input_ids=None` and `load_mm_data`
    forwards `input_ids=input_ids`; a patch still calls
    ```python
    base_output = await self.legacy_load_mm_data(prompt=input_text, image_data=image_data)
    ```

    ## Use instead
    ```python
    base_output = await self.load_mm_data(prompt=input_text, image_data=image_data)
    ```
    or pass the new parameter the way upstream's call sites do.

    ## Incident
    SGLang added `input_ids` to `legacy_load_mm_data` (sgl-project/sglang#26555);
    slime's Qwen-VL patch called it without the argument and silently dropped
    the caller's token ids at every multimodal request (THUDM/slime#2388).
    """

    code = "PA204"
    roles = frozenset({"port-check"})
    name = "call-signature-drift"
    severity = Severity.ERROR
    kinds = frozenset({PYTHON})
    needs = frozenset({"engine-pair"})
    #: the calls and definitions come from the engine's `ast` index of the patched file
    #: (pipeline/bump_audit.py): no libcst tree is read
    reads_tree = False
    #: [tool.patchaudit.rules.PA204]: the share of upstream's own call sites (in NEW) that must
    #: pass a parameter this call leaves out, at least that many sites, and whether call sites
    #: in tests count
    options = {"upstream-share": 1.0, "min-upstream-calls": 1, "include-tests": False}

    VALID = [
        Example(
            SEED_PATCH,
            kind="patch",
            engine_old=_mm_engine(BASE_V1),
            engine=_mm_engine(BASE_V1),
            title="the seed patch, OLD = NEW = v1",
        ),
        Example(
            SEED_PATCH.replace(
                "             prompt=input_text,\n",
                "             prompt=input_text,\n+            input_ids=input_text,\n",
            ).replace("@@ -3,7 +3,7 @@", "@@ -3,7 +3,8 @@"),
            kind="patch",
            engine_old=_mm_engine(BASE_V1),
            engine=_mm_engine(BASE_V2),
            title="the seed patch passing input_ids",
        ),
        Example(
            _proc_patch("out = self.process(ids, max_len=8)"),
            kind="patch",
            engine_old=_proc_engine(),
            engine=_proc_engine(),
            title="signature unchanged",
        ),
        Example(
            _proc_patch("out = self.process(ids, **extra)"),
            kind="patch",
            engine_old=_proc_engine(),
            engine=_proc_engine(PROC.replace("max_len=None", "max_length=None")),
            title="** may carry anything",
        ),
        Example(
            _proc_patch("out = helper.process(ids, max_len=8)"),
            kind="patch",
            engine_old=_proc_engine(),
            engine=_proc_engine(PROC.replace("max_len=None", "max_length=None")),
            title="an object of unknown type is not guessed",
        ),
    ]
    INVALID = [
        Example(
            _POOL_PATCH,
            kind="patch",
            engine_old=_pool_engine(_POOL_V1),
            engine=_pool_engine(_POOL_V2),
            line=8,
            contains="every such call raises TypeError",
            title="a re-added old method that NEW's callers call with a new keyword",
        ),
        Example(
            SEED_PATCH,
            kind="patch",
            engine_old=_mm_engine(BASE_V1),
            engine=_mm_engine(BASE_V2),
            line=8,
            contains="`input_ids` is new in",
            title="the seed: input_ids new in NEW",
        ),
        Example(
            _proc_patch("out = self.process(ids, max_len=8)"),
            kind="patch",
            engine_old=_proc_engine(),
            engine=_proc_engine(PROC.replace("max_len=None", "max_length=None")),
            line=8,
            contains="renamed to `max_length`",
            title="a keyword renamed upstream",
        ),
        Example(
            _proc_patch("out = self.process(ids)"),
            kind="patch",
            engine_old=_proc_engine(),
            engine=_proc_engine(
                PROC.replace("max_len=None", "max_len=None, *, mode").replace(
                    "out = self.process(ids)", "out = self.process(ids, mode=1)"
                )
            ),
            count=1,
            contains="requires",
            title="a new required parameter",
        ),
        Example(
            _proc_patch("out = self.process(self.tokenize(prompt, False))"),
            kind="patch",
            engine_old=_proc_engine(),
            engine=_proc_engine(PROC.replace("prompt, add_special=True", "prompt, truncate=False, add_special=True")),
            line=8,
            contains="positional argument 2",
            title="a parameter inserted before a positional one",
        ),
    ]

    @classmethod
    def check_options(cls, configured: dict[str, Any]) -> None:
        """Raise ValueError (naming the table and the option) when a configured option is
        unknown or out of range: `patchaudit bump` checks them before it opens anything."""
        opts = {**cls.options, **configured}
        table = f"[tool.patchaudit.rules.{cls.code}]"
        unknown = set(opts) - set(cls.options)
        if unknown:
            raise ValueError(f"{table}: unknown option(s) {sorted(unknown)} (known: {', '.join(sorted(cls.options))})")
        share = opts["upstream-share"]
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
            raise ValueError(f"{table} upstream-share: expected a number in (0, 1], got {share!r}")
        least = opts["min-upstream-calls"]
        if isinstance(least, bool) or not isinstance(least, int) or least < 1:
            raise ValueError(f"{table} min-upstream-calls: expected a positive integer, got {least!r}")
        if not isinstance(opts["include-tests"], bool):
            raise ValueError(f"{table} include-tests: expected true or false, got {opts['include-tests']!r}")

    def check_python(self) -> None:
        pair = unit_pair(self.unit)
        if pair is None:
            return
        audit = pair.audit  # patchaudit.pipeline.bump_audit.BumpAudit
        covered = self.check_definitions(audit)
        for line, col, end_line, end_col, callee, shape, class_q, complete in audit.calls_to_check(self.unit):
            target = audit.call_target(self.unit, callee, class_q)
            if target is None:
                continue
            for message, severity in self.problems(audit, target, shape, complete):
                if " leaves out " in message and any(
                    s <= line <= e and f"leaves out `{p}`" in message for s, e, params in covered for p in params
                ):
                    continue  # the definition around it is the error: it cannot take that parameter
                self.report_at(line, col, end_line, end_col, message, severity=severity)

    def check_definitions(self, audit) -> list[tuple[int, int, list[str]]]:
        """A definition the patch adds or changes that replaces or overrides one of NEW whose
        callers pass what the patched signature does not take: an error naming the callers.
        Returns (first line, last line, the parameters it lacks) of each one reported."""
        covered = []
        for mine, up, typed, by_name in audit.patched_definitions(self.unit):
            rejected = rejected_calls(mine.bound_params(), up.bound_params(), typed, by_name, mine.name)
            if not rejected:
                continue
            lacks = [p for p in param_names(up.bound_params()) if p not in param_names(mine.bound_params())]
            shown = "; ".join(
                f"{why} at {s.where}" + (f" in {s.symbol}" if s.symbol else "") for s, why, _ in rejected[:3]
            )
            more = f" and {len(rejected) - 3} more" if len(rejected) > 3 else ""
            if any(linked for _, _, linked in rejected):
                more += (
                    f" (calls of `.{mine.name}()` on objects of unknown type count when they pass a keyword only "
                    f"upstream's definition takes)"
                )
            how = "replaces" if up.qualname == mine.qualname else f"overrides `{up.qualname}`"
            self.report_at(
                mine.line,
                0,
                mine.line,
                0,
                f"`{mine.qualname}{render_params(mine.params)}` as the patch defines it {how} "
                f"`{up.qualname}{render_params(up.params)}` ({up.where}), and {audit.new_name}'s callers pass "
                f"what it does not take: {shown}{more}; every such call raises TypeError: accept "
                + (", ".join(f"`{p}`" for p in lacks) if lacks else "the new parameters")
                + " as upstream's definition does",
                severity=Severity.ERROR,
            )
            covered.append((mine.line, mine.end_line, lacks))
        return covered

    def problems(self, audit, t: CallTarget, shape: CallShape, complete: bool = True) -> list[tuple[str, Severity]]:
        """The problems of one call in patched code, as (message, severity).

        `complete` is False for a call whose arguments run past a hunk that NEW
        cannot place (and that OLD's patched file could not complete): then only
        what its visible arguments show is judged."""
        name, where, old, new = t.name, t.where, audit.old_name, audit.new_name
        old_names = param_names(t.old_params) if t.old_params is not None else None
        out: list[tuple[str, Severity]] = []
        unknown, too_many, missing, twice = bind_problems(t.params, shape)
        if not complete:
            missing, twice = [], []
        # a keyword OLD took and NEW renamed: one finding naming both names
        renamed = renamed_keywords(unknown, t.params, old_names)
        for kw in unknown:
            if kw in renamed:
                out.append(
                    (
                        f"{name} gets keyword `{kw}`, which {where} no longer takes: it was renamed to "
                        f"`{renamed[kw]}` between {old} and {new}; pass `{renamed[kw]}=`",
                        Severity.ERROR,
                    )
                )
                continue
            msg = f"{name} gets keyword `{kw}`, which {where} does not take"
            if old_names is not None and kw in old_names:
                msg += f": `{kw}` was removed between {old} and {new}"
            out.append((msg, Severity.ERROR))
        if too_many:
            out.append(
                (
                    f"{name} gets {shape.positional} positional arguments, {too_many} more than {where} takes",
                    Severity.ERROR,
                )
            )
        for p in missing:
            if p in renamed.values():
                continue
            msg = f"{name} does not pass `{p}`, which {where} requires"
            if old_names is not None and p not in old_names:
                msg += f" (`{p}` is new in {new})"
            out.append((msg, Severity.ERROR))
        for p in twice:
            out.append((f"{name} gets `{p}` both by position and by keyword", Severity.ERROR))
        if t.old_params is not None and t.new_up_params is not None and shape.positional:
            shift = shifted_positional(t.old_params, t.new_up_params, shape.positional)
            if shift is not None:
                i, o_name, n_name = shift
                out.append(
                    (
                        f"{name}: positional argument {i + 1} was `{o_name}` in {old} and is "
                        f"`{n_name}` in {new} ({where}): a parameter was added, removed or "
                        f"renamed before it; pass it by keyword",
                        Severity.ERROR,
                    )
                )
        if complete and t.up_new is not None and t.new_up_params is not None and not shape.star_kwargs:
            out += self._upstream_relies(audit, t, shape)
        return out

    def _upstream_relies(self, audit, t: CallTarget, shape: CallShape) -> list[tuple[str, Severity]]:
        """The defaulted parameters the call leaves out that upstream's own call sites pass."""
        share = float(self.opts["upstream-share"])
        least = int(self.opts["min-upstream-calls"])
        tests = self.opts["include-tests"]
        new_up_params = t.new_up_params or []
        out: list[tuple[str, Severity]] = []
        sites = None
        for p in left_out_defaults(t.params, new_up_params, shape):
            if sites is None:
                sites = audit.call_sites("new", t.up_new, tests)
            known, passing = passing_sites(sites, new_up_params, p.name)
            if not passing or len(known) < least or len(passing) < share * len(known):
                continue
            is_new = t.old_params is not None and p.name not in param_names(t.old_params)
            ex = passing[0]
            msg = (
                f"{t.name} leaves out `{p.name}`, which upstream's own call sites pass in {audit.new_name}: "
                f"{len(passing)} of {len(known)} (e.g. {ex.where}" + (f" in {ex.symbol}" if ex.symbol else "") + ")"
            )
            if is_new:
                msg += (
                    f"; `{p.name}` is new in {audit.new_name} ({t.where}; {audit.old_name}'s has no such "
                    f"parameter): the default `{p.name}` this call gets may drop what upstream now relies on"
                )
                out.append((msg, Severity.ERROR))
                continue
            # the parameter existed: drift only if upstream started passing it
            old_sites = audit.call_sites("old", t.up_old, tests) if t.up_old is not None else []
            o_known, o_pass = passing_sites(old_sites, t.old_params or [], p.name)
            if t.up_old is not None and o_known and len(o_pass) >= share * len(o_known):
                continue  # upstream passed it in OLD too: not drift
            o_txt = f"{len(o_pass)} of {len(o_known)}" if o_known else "none"
            msg += f"; in {audit.old_name} {o_txt} did: upstream started relying on it"
            out.append((msg, Severity.WARNING))
        return out
