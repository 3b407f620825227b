"""`check --show-settings` and `--show-files`: what a run would use, as ruff shows them.

`render_settings`: the configuration file (or why none), the resolved rule selection,
then every setting as `name = value`, one per line.  `render_files`: the files the run
would check, one per line, sorted, each with its kind.  Values are shown with
`visible()`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from patchaudit.model.escape import safe_lines, visible

#: settings of the run's internals, not the user's (set while the run goes)
_INTERNAL = {"patch_scope", "repo", "cache_errors", "local_rules_stamp"}


def render_settings(settings: Any, codes: list[str], origin: str) -> str:
    lines = [f"Configuration: {visible(origin)}", f"Rules ({len(codes)}): {', '.join(codes)}", "", "Settings:"]
    for f in dataclasses.fields(settings):
        if f.name in _INTERNAL:
            continue
        value = getattr(settings, f.name)
        lines.append(f"  {f.name.replace('_', '-')} = {visible(repr(value))}")
    return safe_lines("".join(line + "\n" for line in lines))


def render_files(files: list[Any]) -> str:
    rows = sorted((visible(f.path), f.kind) for f in files)
    return safe_lines("".join(f"{path}  ({kind})\n" for path, kind in rows))
