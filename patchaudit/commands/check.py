"""`patchaudit check [PATHS]...`"""

from __future__ import annotations

import os
import sys

import click

from patchaudit.commands.options import parse_engine_option
from patchaudit.config.settings import ConfigError, Settings, apply_cache_options, find_pyproject, load_pyproject
from patchaudit.model.escape import safe
from patchaudit.reporters import available_formats, render
from patchaudit.reporters.progress import FileProgress


def _split_codes(values: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for v in values:
        out.extend(c.strip() for c in v.split(",") if c.strip())
    return out


def build_settings(
    paths, config, select, ignore, extend_select, engine, jobs, no_cache, tokenizer, cache_dir=None
) -> Settings:
    cfg_path = config or find_pyproject(list(paths))
    settings = load_pyproject(cfg_path) if cfg_path else Settings()
    # a cache-dir of the checked tree's pyproject.toml stays in the tree; --config FILE,
    # PATCHAUDIT_CACHE_DIR and --cache-dir are the user's own and may point anywhere
    apply_cache_options(settings, cache_dir=cache_dir, no_cache=no_cache, explicit_config=bool(config))
    if select:
        settings.select = _split_codes(select)
    if ignore:
        settings.ignore = settings.ignore + _split_codes(ignore)
    if extend_select:
        settings.extend_select = settings.extend_select + _split_codes(extend_select)
    if engine:
        settings.engines = [parse_engine_option(e) for e in engine]
    if jobs:
        settings.jobs = jobs
        settings.jobs_forced = True  # the user's own: may exceed the CPUs (parallel.scan clamps to 4x)
    if tokenizer:
        settings.tokenizer = tokenizer
    return settings


def emit(text: str, output: str | None) -> None:
    """Print a rendered report, or write it to `output` whole or not at all (a temporary file
    renamed over it).  Reporters escape what they render (patchaudit/model/escape.py)."""
    if output:
        from patchaudit.files.atomic import write_atomic

        try:
            write_atomic(output, text)
        except OSError as exc:
            raise click.ClickException(safe(f"{output}: cannot write: {exc.strerror or exc}")) from None
    else:
        click.echo(text, nl=False)  # output-safe: a reporter's rendering, escaped there


def use_color(output: str | None) -> bool:
    # https://no-color.org: NO_COLOR set to a non-empty value turns colour off
    return output is None and sys.stdout.isatty() and not os.environ.get("NO_COLOR")


@click.command("check")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option(
    "--engine",
    multiple=True,
    metavar="NAME=SOURCE",
    help="Engine source for exact mode: a directory, PATH@REV of a git repository, a wheel or sdist. "
    "Repeatable. NAME:pN=SOURCE fixes the strip level.",
)
@click.option("--select", multiple=True, metavar="CODES", help="Rule codes or prefixes to run (comma-separated).")
@click.option("--ignore", multiple=True, metavar="CODES", help="Rule codes or prefixes to skip.")
@click.option("--extend-select", multiple=True, metavar="CODES", help="Codes to add to the selection.")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json", "sarif", "github"]), default="text", show_default=True
)
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write the report to FILE.")
@click.option("--config", type=click.Path(exists=True, dir_okay=False), help="A pyproject.toml to read.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), help="Worker processes (default: number of cores).")
@click.option("--no-cache", is_flag=True, help="Do not read or write the result cache (also: PATCHAUDIT_NO_CACHE=1).")
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Keep the result cache in DIR (also: PATCHAUDIT_CACHE_DIR; default: .patchaudit_cache "
    "beside the pyproject.toml).",
)
@click.option("--tokenizer", type=click.Path(), help="tokenizer.json or a model folder (PA105).")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings are reported.")
@click.option(
    "--diff-base",
    metavar="REF",
    help="Report only findings on lines changed since the git revision REF (e.g. HEAD, origin/main).",
)
@click.option(
    "--baseline",
    "baseline_file",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Report only findings that are not in the baseline FILE.",
)
@click.option(
    "--write-baseline",
    "write_baseline_file",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Record today's findings in FILE (accepting them: exit 0).",
)
def check(
    paths,
    engine,
    select,
    ignore,
    extend_select,
    fmt,
    output,
    config,
    jobs,
    no_cache,
    cache_dir,
    tokenizer,
    exit_zero,
    diff_base,
    baseline_file,
    write_baseline_file,
) -> None:
    """Check patches, Python and other text files under PATHS (default: .)."""
    from patchaudit.pipeline.results import RunError
    from patchaudit.pipeline.runner import run_check

    paths = list(paths) or ["."]
    if fmt not in available_formats():
        raise click.UsageError(f"format {fmt!r} is not available in this build")
    from patchaudit.inputs.diffbase import DiffBaseError, changed_lines
    from patchaudit.pipeline.baseline import (
        BaselineError,
        ensure_fingerprints,
        filter_new,
        read_baseline,
        write_baseline,
    )

    progress = FileProgress()
    try:
        settings = build_settings(
            paths, config, select, ignore, extend_select, engine, jobs, no_cache, tokenizer, cache_dir
        )
        changed = changed_lines(paths, diff_base) if diff_base is not None else None
        entries = read_baseline(baseline_file) if baseline_file else None
        try:
            result = run_check(paths, settings, progress=progress)
        finally:
            progress.close()
        # a refused cache location: an error naming the file (and key), exit 2; the scan ran
        result.errors[:0] = settings.cache_errors
        if write_baseline_file or entries is not None:
            ensure_fingerprints(result.findings)
        if write_baseline_file:
            n = write_baseline(write_baseline_file, result.findings)
            click.echo(
                safe(f"patchaudit: wrote {n} finding{'s' if n != 1 else ''} to the baseline {write_baseline_file}"),
                err=True,
            )
        if changed is not None:
            result.findings = changed.filter(result.findings)
        if entries is not None:
            result.findings, hidden = filter_new(result.findings, entries, baseline_file)
            if hidden:
                click.echo(
                    safe(
                        f"patchaudit: {hidden} finding{'s' if hidden != 1 else ''} of the baseline "
                        f"{baseline_file} not shown"
                    ),
                    err=True,
                )
    except (ConfigError, RunError, BaselineError, DiffBaseError) as exc:
        click.echo(safe(f"patchaudit: error: {exc}"), err=True)
        sys.exit(2)
    for warning in result.warnings:
        click.echo(safe(f"patchaudit: warning: {warning}"), err=True)
    for err in result.errors:
        click.echo(safe(err), err=True)
    emit(render(fmt, result, color=use_color(output)), output)
    code = result.exit_code
    if write_baseline_file and code == 1:
        code = 0
    if exit_zero and code == 1:
        code = 0
    sys.exit(code)
