"""Reporters: findings to text, json, sarif, github annotations, markdown."""

from __future__ import annotations

import importlib
import importlib.util

FORMATS = {
    "text": "patchaudit.reporters.text",
    "json": "patchaudit.reporters.json",
    "sarif": "patchaudit.reporters.sarif",
    "github": "patchaudit.reporters.github",
    "markdown": "patchaudit.reporters.markdown",
}


def available_formats() -> list[str]:
    out = []
    for name, mod in FORMATS.items():
        if importlib.util.find_spec(mod) is not None:
            out.append(name)
    return out


def render(fmt: str, result, *, color: bool = False, rules=None) -> str:
    """Render a run result (`RunResult` or a bump report) in `fmt`."""
    module = importlib.import_module(FORMATS[fmt])
    return module.render(result, color=color, rules=rules)
