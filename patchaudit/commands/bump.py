"""`patchaudit bump PATCHES... --engine NAME --from OLD --to NEW`, and with no versions
given: `bump --diff-base REF` (the pin that moved since REF), `bump --to NEW` (from the
plan's current version): patchaudit/pipeline/bump_plan.py."""

from __future__ import annotations

import sys

import click

from patchaudit.commands.check import build_settings, emit, use_color
from patchaudit.commands.options import engine_resolve_options, parse_engine_name
from patchaudit.config.settings import ConfigError, Settings, apply_engine_options
from patchaudit.model.escape import safe
from patchaudit.pipeline.bump_plan import resolve_revision
from patchaudit.reporters.bump import render_text

__all__ = ["bump", "parse_engine_name", "render_text", "resolve_revision"]

FORMATS = ["text", "markdown", "json", "sarif", "github"]


def _settings(paths, config, select, ignore, extend_select, tokenizer) -> Settings:
    """check's settings, without check's engines, cache or workers: bump opens its own two engines."""
    settings = build_settings(paths, config, select, ignore, extend_select, (), None, True, tokenizer)
    settings.jobs = 1
    return settings


def _tell(message: str) -> None:
    """What the run does that takes time (a download), on stderr."""
    click.echo(safe(f"patchaudit: {message}"), err=True)


@click.command("bump")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option(
    "--engine",
    "engine",
    metavar="NAME[:pN][=REPO]",
    help="The engine the patches are for (e.g. sglang; default: the one whose pin moved, or the one "
    "the recipes pin). NAME:pN fixes the strip level; NAME=REPO (or [tool.patchaudit.engines]) names a "
    "git repository whose revisions --from/--to may then give bare.",
)
@click.option(
    "--from",
    "old",
    metavar="OLD",
    help="The engine version the patches were made for: a directory, PATH@REV, a wheel or an sdist, "
    "a revision of the engine's repository, or a version found as --engine-dir says "
    "(default: the plan's pin, at --diff-base REF if given).",
)
@click.option(
    "--to",
    "new",
    metavar="NEW",
    help="The engine version to move to (same kinds; default with --diff-base: the plan's pin now).",
)
@click.option(
    "--diff-base",
    metavar="REF",
    help="Bump the engine whose pin changed since the git revision REF (what a pull request runs): "
    "both versions from the plans at REF and now, the patches from the plan now.",
)
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
@engine_resolve_options
def bump(
    paths,
    engine,
    old,
    new,
    diff_base,
    select,
    ignore,
    extend_select,
    fmt,
    output,
    config,
    tokenizer,
    exit_zero,
    engine_dirs,
    offline,
) -> None:
    """The engine-bump report for the patches (and monkey-patching .py files) PATHS:
    how every hunk applies to OLD and NEW, the patched code that changed upstream
    (PA203), the calls that no longer fit NEW's signatures (PA204), and every rule
    run on NEW with the patches applied.  Exit code 1 when an error-severity
    finding is reported, 2 on a usage error or an unreadable file."""
    from patchaudit.pipeline.bump import BumpError, run_bump
    from patchaudit.reporters import available_formats, render

    if fmt not in ("text", "json", "markdown") and fmt not in available_formats():
        raise click.UsageError(f"format {fmt!r} is not available in this build")
    from patchaudit.pipeline.bump_plan import BumpTarget, NoBump, PlanBumpError, engine_spec, plan_bump

    name, strip, repo = parse_engine_name(engine) if engine else (None, None, None)
    try:
        settings = _settings(paths or ["."], config, select, ignore, extend_select, tokenizer)
        apply_engine_options(settings, engine_dirs, offline)
        if repo is None and name is not None:
            repo = next((e.source for e in settings.engines if e.name == name), None)
        if name is None or old is None or new is None or not paths or diff_base:
            target = plan_bump(list(paths), name, old, new, diff_base, settings, repo, _tell)
        else:  # all given: a bare version (`--from 0.5.12.post1`) is found by version
            notes: list[str] = []
            from_spec = engine_spec(name, old, repo, settings, notes, "--from", _tell)
            to_spec = engine_spec(name, new, repo, settings, notes, "--to", _tell)
            target = BumpTarget(name, from_spec, to_spec, list(paths), notes)
        for note in target.notes:
            click.echo(safe(f"patchaudit: {note}"), err=True)
        name = target.engine
        if strip is None:
            strip = next((e.strip for e in settings.engines if e.name == name), None)
        report = run_bump(target.paths, name, target.old_spec, target.new_spec, settings, strip=strip)
    except NoBump as exc:
        click.echo(safe(f"patchaudit: {exc}"), err=True)
        sys.exit(0)
    except (ConfigError, BumpError, PlanBumpError) as exc:
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
