"""A small tree run through `patchaudit check` with one rule selected (the real pipeline):
the helper of the rules' shape tests (tests/test_pa10*_shapes.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from patchaudit.config.settings import Settings
from patchaudit.pipeline.runner import run_check


def check_rule(code: str, root: Path, files: dict[str, str], options: dict | None = None, errors_ok: bool = False):
    """Write `files` (dedented) under `root`, run rule `code` on it; ((file name, line) of
    each finding, sorted; the run's result).  A run error fails unless `errors_ok`."""
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(content).lstrip("\n"), encoding="utf-8")
    settings = Settings(select=[code], cache=False, jobs=1)
    if options:
        settings.rule_options = {code: options}
    res = run_check([str(root)], settings)
    if not errors_ok:
        assert not res.errors, [str(e) for e in res.errors]
    return sorted((Path(f.path).name, f.line) for f in res.findings), res
