"""`patchaudit port PATCHES... --to NEW [--from OLD]`"""

from __future__ import annotations

import sys

import click

from patchaudit.commands.bump import resolve_revision
from patchaudit.commands.options import parse_engine_name
from patchaudit.model.escape import safe

__all__ = ["port"]


@click.command("port")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option(
    "--engine",
    "engine",
    default="engine",
    show_default=True,
    metavar="NAME[:pN][=REPO]",
    help="The engine the patches are for, as `bump` takes it (NAME=REPO: --from/--to may be bare revisions).",
)
@click.option("--from", "old", metavar="OLD", help="The release the patches were made for (default: the recipe's).")
@click.option("--to", "new", required=True, metavar="NEW", help="The release to port them to.")
@click.option("-o", "--out-dir", "out_dir", type=click.Path(file_okay=False), help="Write the ported patches here.")
@click.option("--write", is_flag=True, help="Replace each patch by its port (atomically).")
@click.option("--format", "--output-format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text")
@click.option("--output", type=click.Path(dir_okay=False), help="Write the report to FILE.")
@click.option(
    "--no-rules",
    is_flag=True,
    help="Skip the rules pass (the call-signature and token-in/token-out rules) over the ported set.",
)
@click.option("--config", type=click.Path(exists=True, dir_okay=False), help="A pyproject.toml to read.")
def port(paths, engine, old, new, out_dir, write, fmt, output, no_rules, config) -> None:
    """Carry the patch set PATHS (with the recipes that apply it) from the engine release
    OLD to NEW, hunk by hunk, verifying each ported hunk; write the ported set (-o DIR or
    --write) and report one row per hunk.  Exit code 0 when every hunk is ported, 1 when
    one is flagged, 2 on a usage error."""
    from patchaudit.commands.check import build_settings, emit
    from patchaudit.config.settings import ConfigError
    from patchaudit.pipeline.port import PortError
    from patchaudit.pipeline.port_output import write_in_place, write_outputs
    from patchaudit.pipeline.port_run import PortOptions, run_port
    from patchaudit.reporters.port import render_port
    from patchaudit.reporters.progress import FileProgress

    if out_dir and write:
        raise click.UsageError("give -o DIR or --write, not both")
    name, strip, repo = parse_engine_name(engine)
    bar = FileProgress()
    try:
        settings = build_settings(paths, config, (), (), (), (), None, True, None)
        settings.jobs = 1
        if repo is None:
            repo = next((e.source for e in settings.engines if e.name == name), None)
        opts = PortOptions(list(paths), name, new, old, strip, not no_rules, repo=repo, resolve=resolve_revision)
        opts.progress = (lambda what: bar.show(f"\rport: {safe(what)}")) if bar.enabled else None
        report, _order = run_port(opts, settings)
        bar.clear()
        if out_dir:
            write_outputs(report.outs, out_dir)
        elif write:
            write_in_place(report.outs)
    except (ConfigError, PortError, OSError) as exc:
        bar.clear()
        click.echo(safe(f"patchaudit: error: {exc}"), err=True)
        sys.exit(2)
    for err in report.errors:
        click.echo(safe(err), err=True)
    emit(render_port(report, fmt), output)
    sys.exit(report.exit_code)
