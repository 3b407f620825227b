"""`patchaudit plan [PATHS]...`: which patch goes to which engine, in which order."""

from __future__ import annotations

import sys

import click

from patchaudit.model.escape import safe


@click.command("plan")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--config", type=click.Path(exists=True, dir_okay=False), help="A pyproject.toml to read.")
def plan(paths, fmt, config) -> None:
    """Show how the build's recipes (Dockerfiles, shell scripts, quilt series) and the
    configuration's bindings apply the patches under PATHS (default: .); the recipes are
    read from the project root whatever PATHS."""
    from patchaudit.config.settings import ConfigError, Settings, find_pyproject, load_pyproject
    from patchaudit.pipeline.plan_inputs import project_plan
    from patchaudit.reporters.plan import render_plan

    paths = list(paths) or ["."]
    try:
        cfg = config or find_pyproject(paths)
        settings = load_pyproject(cfg, local_rules=False) if cfg else Settings()  # plan runs no rule
    except ConfigError as exc:
        click.echo(safe(f"patchaudit: error: {exc}"), err=True)
        sys.exit(2)
    result, errors = project_plan(paths, settings)  # the recipes of the project root, whatever PATHS
    for err in list(errors) + list(result.errors):
        click.echo(safe(err), err=True)
    click.echo(render_plan(result, fmt), nl=False)  # output-safe: escaped by the renderer
    sys.exit(2 if errors or result.errors else 0)
