"""What a run checks against, opened once per process from the settings: the engines
(`--engine`, exact mode) and the tokenizer (`--tokenizer`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from patchaudit.config.settings import Settings
from patchaudit.pipeline.results import RunError

if TYPE_CHECKING:  # pragma: no cover
    from patchaudit.units.engines import EngineSet


def open_engines(settings: Settings):
    if not settings.engines:
        return None
    from patchaudit.engine.sources import EngineError
    from patchaudit.units.engines import EngineSet

    try:
        # engine reads are bounded by max-file-size too, and one refused file is an error, not a crash
        return EngineSet.open(settings.engines, max_file_size=settings.max_file_size)
    except EngineError as exc:
        raise RunError(str(exc)) from None


def engine_warnings(engines: EngineSet | None) -> list[str]:
    """The members each engine archive left out and why (inputs/engine.py `warnings`)."""
    out: list[str] = []
    for src, _ in engines.engines if engines is not None else ():
        out.extend(f"engine {src.name!r} ({src.label}): {w}" for w in src.warnings())
    return out


def load_tokenizer(settings: Settings):
    if not settings.tokenizer:
        return None
    from patchaudit.inputs.tokenizer import TokenizerError
    from patchaudit.inputs.tokenizer import load_tokenizer as _load

    try:
        return _load(settings.tokenizer)
    except TokenizerError as exc:
        raise RunError(str(exc)) from None
