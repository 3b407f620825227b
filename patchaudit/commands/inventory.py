"""`patchaudit inventory PATHS... [--engine NAME=SOURCE]...`

The fork's whole patch surface in one table: every engine symbol touched, by
a hunk of a `.patch`/`.diff` file (the engine symbol enclosing the hunk) or by
a runtime monkey-patch in Python (its target), with where, how (hunk /
replaced / wrapped / added / mocked) and, with engines given, whether the
symbol still exists in each engine and where it is defined there.

Without an engine, hunks are named from their path and their `@@ ... @@`
header (a hint: the header shows the nearest `def`/`class` above the hunk) and
nothing is looked up.  With engines, each patch is applied in memory (exact
mode) to the engine that fits it, and each monkey-patch is looked up in every
engine that has its package (for a module of a per-version patch package,
only the engine of that version; a patch under a version gate that is false
for an engine is listed as gated off there).

Exit code: 0, or 2 when a path could not be read or the configuration or an
engine is bad.  The inventory lists; `patchaudit check --engine ...` judges
(PA201, PA206, PA207).
"""

from __future__ import annotations

import sys

import click

from patchaudit.commands.check import emit
from patchaudit.commands.options import parse_engine_option
from patchaudit.config.settings import ConfigError, Settings, find_pyproject, load_pyproject
from patchaudit.model.escape import safe
from patchaudit.pipeline.inventory import build_inventory
from patchaudit.reporters.inventory import RENDERERS


@click.command("inventory")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option(
    "--engine",
    multiple=True,
    metavar="NAME=SOURCE",
    help="Engine source to look the symbols up in: a directory, PATH@REV of a git repository, a "
    "wheel or sdist. Repeatable (one per engine package, or one per version of a per-version "
    "patch package).",
)
@click.option("--format", "fmt", type=click.Choice(sorted(RENDERERS)), default="text", show_default=True)
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write the inventory to FILE.")
@click.option("--config", type=click.Path(exists=True, dir_okay=False), help="A pyproject.toml to read.")
def inventory(paths, engine, fmt, output, config) -> None:
    """List every engine symbol the patches and runtime monkey-patches under PATHS touch."""
    from patchaudit.pipeline.results import RunError

    paths = list(paths) or ["."]
    try:
        cfg = config or find_pyproject(paths)
        settings = load_pyproject(cfg, local_rules=False) if cfg else Settings()  # runs no rule
        if engine:
            settings.engines = [parse_engine_option(e) for e in engine]
        inv = build_inventory(paths, settings)
    except (ConfigError, RunError) as exc:
        click.echo(safe(f"patchaudit: error: {exc}"), err=True)
        sys.exit(2)
    for err in inv.errors:
        click.echo(safe(err), err=True)
    emit(RENDERERS[fmt](inv), output)
    sys.exit(2 if inv.errors else 0)
