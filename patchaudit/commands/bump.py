"""`patchaudit bump PATCHES... --engine NAME --from OLD --to NEW`"""

from __future__ import annotations

import os
import sys

import click

from patchaudit.commands.check import build_settings, emit, use_color
from patchaudit.commands.options import parse_engine_name
from patchaudit.config.settings import ConfigError, Settings
from patchaudit.model.escape import safe
from patchaudit.reporters.bump import render_text

__all__ = ["bump", "parse_engine_name", "render_text", "resolve_revision"]

FORMATS = ["text", "markdown", "json", "sarif", "github"]


def resolve_revision(spec: str, repo: str | None) -> str:
    """A bare revision (`v2`, a tag or sha) of the engine's git repository -> `REPO@v2`.

    An existing path (directory, wheel, sdist) or a `PATH@REV` spec is kept as it is."""
    from patchaudit.engine.sources import split_git_spec

    if not repo or spec.startswith("-") or os.path.exists(os.path.expanduser(spec)) or split_git_spec(spec):
        return spec
    base = repo
    if not os.path.isdir(os.path.expanduser(base)):
        split = split_git_spec(base)
        if split is None:
            return spec
        base = split[0]
    base = os.path.expanduser(base)
    if os.path.exists(os.path.join(base, ".git")) or os.path.isfile(os.path.join(base, "HEAD")):
        return f"{base}@{spec}"
    return spec


def _settings(paths, config, select, ignore, extend_select, tokenizer) -> Settings:
    """check's settings, without check's engines, cache or workers: bump opens its own two engines."""
    settings = build_settings(paths, config, select, ignore, extend_select, (), None, True, tokenizer)
    settings.jobs = 1
    return settings


@click.command("bump")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option(
    "--engine",
    "engine",
    required=True,
    metavar="NAME[:pN][=REPO]",
    help="The engine the patches are for (e.g. sglang). NAME:pN fixes the strip level; "
    "NAME=REPO (or [tool.patchaudit.engines]) names a git repository whose revisions "
    "--from/--to may then give bare.",
)
@click.option(
    "--from",
    "old",
    required=True,
    metavar="OLD",
    help="The engine version the patches were made for: a directory, PATH@REV, a wheel or an sdist "
    "(or a revision of the engine's repository).",
)
@click.option("--to", "new", required=True, metavar="NEW", help="The engine version to move to (same kinds).")
@click.option("--select", multiple=True, metavar="CODES", help="Rule codes or prefixes to run (comma-separated).")
@click.option("--ignore", multiple=True, metavar="CODES", help="Rule codes or prefixes to skip.")
@click.option("--extend-select", multiple=True, metavar="CODES", help="Codes to add to the selection.")
@click.option(
    "--output-format",
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="Report format (`--format` is the same option, as in `check`).",
)
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write the report to FILE.")
@click.option("--config", type=click.Path(exists=True, dir_okay=False), help="A pyproject.toml to read.")
@click.option(
    "--tokenizer", type=click.Path(), help="tokenizer.json or a model folder, for the rules that need a tokenizer."
)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when errors are found.")
def bump(paths, engine, old, new, select, ignore, extend_select, fmt, output, config, tokenizer, exit_zero) -> None:
    """The engine-bump report for the patches (and monkey-patching .py files) PATHS:
    how every hunk applies to OLD and NEW, the patched code that changed upstream
    (PA203), the calls that no longer fit NEW's signatures (PA204), and every rule
    run on NEW with the patches applied.  Exit code 1 when an error-severity
    finding is reported, 2 on a usage error or an unreadable file."""
    from patchaudit.pipeline.bump import BumpError, run_bump
    from patchaudit.reporters import available_formats, render

    if fmt not in ("text", "json", "markdown") and fmt not in available_formats():
        raise click.UsageError(f"format {fmt!r} is not available in this build")
    name, strip, repo = parse_engine_name(engine)
    try:
        settings = _settings(paths, config, select, ignore, extend_select, tokenizer)
        if repo is None:
            repo = next((e.source for e in settings.engines if e.name == name), None)
            if strip is None:
                strip = next((e.strip for e in settings.engines if e.name == name), None)
        report = run_bump(
            list(paths), name, resolve_revision(old, repo), resolve_revision(new, repo), settings, strip=strip
        )
    except (ConfigError, BumpError) as exc:
        click.echo(safe(f"patchaudit: error: {exc}"), err=True)
        sys.exit(2)
    for err in report.errors:
        click.echo(safe(err), err=True)
    if fmt == "text":
        text = render_text(report, color=use_color(output))
    elif fmt == "json":
        from patchaudit.model.escape import json_text

        text = json_text(report.to_json()) + "\n"
    else:
        text = render(fmt, report)
    emit(text, output)
    code = report.exit_code
    if exit_zero and code == 1:
        code = 0
    sys.exit(code)
