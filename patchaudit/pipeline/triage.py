"""The scan's pre-filter: which files need the rules, decided from the rule index alone;
and how heavy a heavy file is, for the pool (pipeline/parallel.py)."""

from __future__ import annotations

import contextlib
import os
from typing import Any

#: a patch checked against an engine (exact mode) costs about the engine files it patches,
#: not its own bytes: they count this many times toward the pool's POOL_MIN_BYTES, and such
#: patches are taken largest first (slime's v0.5.15.post1 set: sglang.patch, 65 KB of 200,
#: is 2.5 s of its 4; in one process the set took 3.7-4.9 s, in two workers 2.3-3.3 s)
EXACT_PATCH_WEIGHT = 16


def weight(src, data: bytes | None, engines: Any) -> int:
    """What a heavy file counts toward the pool's threshold: its bytes, an exact-mode
    patch's `EXACT_PATCH_WEIGHT` times."""
    if data is None:
        return 0
    return len(data) * (EXACT_PATCH_WEIGHT if src.kind == "patch" and engines is not None else 1)


def take_order(files: list, engines: Any) -> list[int]:
    """The order files are taken in (their results keep the order of `files`): with an
    engine, the patches first, largest first (each is one task; the largest last would
    leave the other workers waiting at the end), then the rest as given."""
    if engines is None:
        return list(range(len(files)))
    patches = [i for i, src in enumerate(files) if src.kind == "patch"]

    def size(i: int) -> int:
        try:
            return os.path.getsize(files[i].path)
        except OSError:
            return 0

    patches.sort(key=lambda i: -size(i))
    taken = set(patches)
    return patches + [i for i in range(len(files)) if i not in taken]


class Triage:
    """Decides, from the rule index alone, which files need the rules.

    A rule with its own `can_match` (PA102/PA103 follow their options, PA206/
    PA207 the run's engine packages) keeps its class `requires` a sound
    over-approximation of it under the default settings (the contract stated
    in `Rule.can_match`, checked by tests/test_speed_invariants.py): with
    default settings for it, a file that fails `requires` is dropped without
    importing the rule, and one that passes is put to the rule's own filter;
    with other settings, only the rule's own filter decides."""

    def __init__(self, metas: list, settings, engines: Any, tokenizer: Any, defer: bool = False):
        from patchaudit.config.settings import Settings
        from patchaudit.pipeline.run_rules import needs_met

        self.settings = settings
        # exact mode may hand engines to any unit: count "engine" rules as able to run
        engine_marker = engines if engines is not None else (True if settings.engines else None)
        runnable = [m for m in metas if needs_met(m, engine=engine_marker, tokenizer=tokenizer)]
        self.runnable_codes = {m.code for m in runnable}
        default_run = list(settings.engine_packages) == list(Settings().engine_packages) and not settings.engines
        self.static_ok = {
            m.code: m.byte_filter and (not m.custom_filter or (default_run and not settings.options_for(m.code)))
            for m in runnable
        }
        self.by_kind = {
            "python": [m for m in runnable if "python" in m.kinds],
            "text": [m for m in runnable if "text" in m.kinds],
        }
        # rules judged from the other rules' results (PA001): they need the full rule
        # list wherever a suppression comment could be judged
        self.meta_rules = any(not m.kinds for m in metas)
        # with worker processes, a rule's own filter runs here in its quick pass only (the
        # text read without a parse, analysis/gate.py); its `ast` tier (PA102/PA103 parse the
        # file) runs in the worker that would run the rule, not in this process, which would
        # otherwise do it for every file one after the other
        self.defer = defer

    def runnable(self, meta) -> bool:
        """Whether the rule can run at all in this run (its needs can be met).  A rule
        that cannot (PA206 without an engine, PA105 without a tokenizer) is never
        imported: analyse_file would skip it on every unit anyway."""
        return meta.code in self.runnable_codes

    def candidates(self, kind: str, data: bytes) -> list:
        """The runnable rules of a file's kind whose byte filter the file passes (a rule
        whose own filter follows non-default settings is always a candidate)."""
        unit_kind = "python" if kind == "python" else "text"
        return [m for m in self.by_kind[unit_kind] if not self.static_ok[m.code] or m.can_match_bytes(data)]

    def heavy(self, kind: str, data: bytes) -> bool:
        if kind == "patch":
            return True  # fragment and exact units are built from the patch: always run the rules
        unit_kind = "python" if kind == "python" else "text"
        text: str | None = None
        for m in self.by_kind[unit_kind]:
            if self.static_ok[m.code]:
                if not m.can_match_bytes(data):
                    continue  # cannot fire: decided without importing the rule
                if not m.custom_filter:
                    return True
                # `requires` (a sound over-approximation) let it through: the rule's own,
                # finer filter decides (PA103 wants a *call* of a decode method), so a
                # file it rejects is not shipped to a worker for nothing
            if text is None:
                try:
                    text = data.decode("utf-8-sig")
                except UnicodeDecodeError:
                    return True  # analyse_file reports it; no rule will run
            if self._can_match(m, unit_kind, text):
                return True
        if self.meta_rules and b"patchaudit" in data.lower():
            return True
        return False

    def _can_match(self, m, unit_kind: str, text: str) -> bool:
        """Exactly what run_rules.run_python_rules / run_unit_rules ask; with workers, only
        the filter's quick pass (gate.quick_only: the dataflow rules' `ast` tier is left to
        the worker, which asks the whole filter again before it runs the rule)."""
        from patchaudit.analysis.gate import quick_only

        with quick_only() if self.defer else contextlib.nullcontext():
            if unit_kind == "python":
                return bool(m.load().can_match(text, self.settings))
            return bool(m.load().can_match(_joined_lines(text)))


def _joined_lines(text: str) -> str:
    """A text file's lines as analyse.analyse_file splits them, joined by "\\n" (the
    text a TextUnit's rules pre-filter on)."""
    from patchaudit.inputs import source_lines

    return "\n".join(source_lines(text))
