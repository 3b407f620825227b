"""The monkey-patch audit of `patchaudit bump`: the runtime monkey-patches of
the fork's `.py` files, judged across the engine bump by the rules
(rules/_monkeypatch.py: PA203 when a patched target changed upstream,
PA206/PA207 against NEW), with the run's rule selection, per-file ignores and
suppression comments."""

from __future__ import annotations

import os
from typing import Iterable

from patchaudit.analysis.monkeypatch import collect, contexts_for
from patchaudit.analysis.monkeypatch_filter import engine_packages
from patchaudit.analysis.monkeypatch_records import TRANSPARENT_DECORATORS, MonkeyPatch
from patchaudit.config.registry import codes_with_role, select_rules
from patchaudit.engine.definitions import FuncInfo, ModuleIndex, index_module
from patchaudit.files.reader import read_text
from patchaudit.inputs import source_lines
from patchaudit.pipeline.run_rules import guarded_reader
from patchaudit.pipeline.suppression import apply_per_file_ignores, apply_suppressions, dedupe_findings
from patchaudit.rules._monkeypatch import bump_findings


def include_tests(settings) -> bool:
    """`include-tests` of the monkey-patch rule's options ([tool.patchaudit.rules.CODE] of the
    rule whose role is "monkeypatch-target"): list assignments in test files too."""
    if not hasattr(settings, "options_for"):
        return False
    return any(settings.options_for(code).get("include-tests", False) for code in codes_with_role("monkeypatch-target"))


def audit_bump(py_files: list[str], old_ctx, new_ctx, settings) -> list:
    """Monkey-patches of `py_files` across an engine bump: PA203 when a patched
    target's definition changed between OLD and NEW (its source text, so a
    definition that only moved is unchanged), PA206/PA207 against NEW.

    A module of a per-version patch package is audited only when its version
    tag matches NEW (it is the module that will run on NEW); untagged modules
    always are.  Version gates are evaluated against NEW (PA206/PA207) and
    against both (PA203: a patch gated off on both versions is skipped)."""
    packages = engine_packages(settings)
    rules = select_rules(settings.select, settings.ignore, settings.extend_select)
    fork = ForkIndex(py_files)
    fork.max_file_size = settings.max_file_size
    out = []
    for path in py_files:
        try:  # the one guarded reader: regular files only, bounded (analyse_file reports the rest)
            text = read_text(path, settings.max_file_size)
        except OSError:  # ReadError too
            continue
        patches = collect(path, text, packages, include_tests(settings), guarded_reader(settings))
        if not patches:
            continue
        lines = source_lines(text)
        findings = []
        for mp in patches:
            chosen, _ = contexts_for(mp, [new_ctx], packages)
            if not chosen:
                continue
            fork.resolve(mp)
            findings.extend(bump_findings(rules, mp, old_ctx, new_ctx, lines))
        findings = apply_per_file_ignores(findings, settings)
        kept, _ = apply_suppressions(findings, lines)
        out.extend(kept)
    return dedupe_findings(out)


class ForkIndex:
    """The fork's own modules among the files of a run, to resolve a replacement
    imported from another module of the fork (`from fork.patches import new_fn`)."""

    #: the largest module read (the run's max-file-size, set by audit_bump)
    max_file_size = 64 * 1024 * 1024

    def __init__(self, paths: Iterable[str]):
        self.by_module: dict[str, str] = {}
        for path in paths:
            parts = os.path.normpath(path).replace(os.sep, "/").split("/")
            if not parts[-1].endswith(".py"):
                continue
            parts[-1] = parts[-1][:-3]
            if parts[-1] == "__init__":
                parts.pop()
            for k in range(len(parts)):
                name = ".".join(p for p in parts[k:] if p not in (".", ".."))
                if name:
                    self.by_module.setdefault(name, path)
        self._modules: dict[str, ModuleIndex | None] = {}

    def function(self, dotted: str) -> FuncInfo | None:
        parts = dotted.lstrip(".").split(".")
        for cut in range(len(parts) - 1, 0, -1):
            path = self.by_module.get(".".join(parts[:cut]))
            if path is None:
                continue
            if path not in self._modules:
                try:  # the one guarded reader: regular files only, bounded
                    self._modules[path] = index_module(path, read_text(path, self.max_file_size))
                except OSError:  # ReadError too
                    self._modules[path] = None
            mod = self._modules[path]
            rest = parts[cut:]
            if mod is None:
                return None
            if len(rest) == 1:
                return mod.functions.get(rest[0])
            cls = mod.classes.get(".".join(rest[:-1]))
            return cls.methods.get(rest[-1]) if cls else None
        return None

    def resolve(self, mp: MonkeyPatch) -> None:
        """Fill in the signature of a replacement defined in another fork module."""
        rep = mp.replacement
        if rep is None or rep.params is not None or not rep.fork_ref:
            return
        f = self.function(rep.fork_ref)
        if f is None:
            return
        extra = [
            d for d in f.decorators if d not in ("staticmethod", "classmethod") and d not in TRANSPARENT_DECORATORS
        ]
        if extra:
            rep.note = f"decorated with @{extra[0]}"
            return
        rep.params, rep.is_async = list(f.params), f.is_async
        if f.is_method:
            # read through its class: a staticmethod or a plain method is a plain function,
            # a classmethod is bound to the fork's class
            rep.binding = "function"
            if f.is_classmethod:
                rep.params, rep.binding = rep.params[1:], "unbound"
        else:
            rep.binding = "static" if f.is_static else "class" if f.is_classmethod else "function"
        rep.note = f"defined at {f.path}:{f.line}"
