"""`patchaudit check [PATHS]...`

The options follow ruff's names where patchaudit has the same thing
(tests/test_cli_conventions.py lists the mapping): `--output-format` (also
`--format`, `PATCHAUDIT_OUTPUT_FORMAT`), `-o/--output-file`, `--statistics`,
`-q/--quiet`, `-s/--silent`, `--stdin-filename`, `--exit-zero`, `--no-cache`,
`--cache-dir`, `--select`/`--ignore`/`--extend-select`, `--exclude`/`--extend-exclude`,
`--per-file-ignores`.  Several reports in one run: `--also FORMAT:FILE` (repeatable)
beside the main one.  ruff's other options (`--show-fixes`, `--fix-only`,
`--exit-non-zero-on-fix`, `--fixable`/`--unfixable`, `--add-noqa`, `--show-files`,
`--show-settings`, `--isolated`, `-v`, `--watch`) are declared in commands/conventions.py.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import click

from patchaudit.commands import conventions as conv
from patchaudit.commands.fixopts import fix_options, run_fixes, wants_fixes
from patchaudit.commands.options import engine_resolve_options, parse_engine_option
from patchaudit.config.local_rules import activate as activate_local_rules
from patchaudit.config.settings import (
    ConfigError,
    Settings,
    apply_cache_options,
    apply_engine_options,
    find_pyproject,
    load_pyproject,
    project_root,
)
from patchaudit.model.escape import safe
from patchaudit.reporters import HUMAN_FORMATS, available_formats, render, render_statistics
from patchaudit.reporters.progress import FileProgress

#: the values of `--output-format`: `text` is `full` (the default, today's output)
OUTPUT_FORMATS = [
    "full",
    "concise",
    "text",
    "grouped",
    "json",
    "json-lines",
    "sarif",
    "github",
    "gitlab",
    "junit",
    "pylint",
    "rdjson",
]
SEVERITIES = ["info", "warning", "error"]


def _split_codes(values: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for v in values:
        out.extend(c.strip() for c in v.split(",") if c.strip())
    return out


def build_settings(
    paths, config, select, ignore, extend_select, engine, jobs, no_cache, tokenizer, cache_dir=None, isolated=False
) -> Settings:
    """`isolated` (`--isolated`): no configuration file is looked for."""
    cfg_path = config or (None if isolated else find_pyproject(list(paths)))
    if cfg_path:
        settings = load_pyproject(cfg_path)  # its `extend-rules` are the run's local rules
    else:
        settings = Settings()
        activate_local_rules({})  # no configuration: no local rules
    settings.project_root = project_root(list(paths))  # --fix writes below it only
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


def _file_options(settings: Settings, opts: dict[str, Any]) -> None:
    """`--exclude`, `--extend-exclude`, `--per-file-ignores GLOB:CODES` over the configuration."""
    if opts.get("exclude"):
        settings.exclude = list(opts["exclude"])
    settings.exclude = settings.exclude + list(opts.get("extend_exclude") or ())
    for value in opts.get("per_file_ignores") or ():
        glob, sep, codes = value.rpartition(":")
        if not sep or not glob or not codes.strip():
            raise click.BadParameter(f"expected GLOB:CODES, got {value!r}", param_hint="--per-file-ignores")
        settings.per_file_ignores[glob] = settings.per_file_ignores.get(glob, []) + _split_codes((codes,))


class WriteError(click.ClickException):
    """A report that cannot be written: exit code 2 (an error), not 1 (findings)."""

    exit_code = 2


def emit(text: str, output: str | None, color: bool = False) -> None:
    """Print a rendered report, or write it to `output` whole or not at all (a temporary file
    renamed over it).  Reporters escape what they render (patchaudit/model/escape.py);
    `color`: the text holds the renderer's colours, kept even when stdout is no terminal."""
    if output:
        from patchaudit.files.atomic import write_atomic

        try:
            write_atomic(output, text)
        except OSError as exc:
            raise WriteError(safe(f"{output}: cannot write: {exc.strerror or exc}")) from None
    elif text:
        click.echo(text, nl=False, color=True if color else None)  # output-safe: a reporter's rendering, escaped there


def use_color(output: str | None, choice: str = "auto") -> bool:
    """Colour for a report printed on stdout: `--color always|never`, else FORCE_COLOR,
    else NO_COLOR (https://no-color.org: set to a non-empty value turns colour off),
    else whether stdout is a terminal.  A report written to a file has none."""
    if output is not None or choice == "never":
        return False
    if choice == "always" or os.environ.get("FORCE_COLOR"):
        return True
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def parse_also(values: tuple[str, ...]) -> list[tuple[str, str]]:
    """`--also FORMAT:FILE` -> [(format, file)]."""
    out = []
    for value in values:
        fmt, sep, path = value.partition(":")
        if not sep or not path or fmt not in OUTPUT_FORMATS:
            raise click.BadParameter(
                f"expected FORMAT:FILE with FORMAT one of {', '.join(OUTPUT_FORMATS)}, got {value!r}",
                param_hint="--also",
            )
        out.append((fmt, path))
    return out


def _stdin_paths(paths: list[str], stdin_filename: str | None) -> bool:
    """Whether the run reads standard input (`-`); usage errors for the wrong combinations."""
    if "-" not in paths:
        return False
    if len(paths) > 1:
        raise click.UsageError("`-` (standard input) cannot be combined with other paths")
    if not stdin_filename:
        raise click.UsageError(
            "`-` reads standard input: give --stdin-filename NAME (the file kind, patch, Python, "
            "shell..., comes from its name, and findings are reported at it)"
        )
    return True


def _note(quiet: bool, text: str) -> None:
    if not quiet:
        click.echo(safe(f"patchaudit: {text}"), err=True)


def _run(paths: list[str], settings: Settings, opts: dict[str, Any], stdin: bool):
    """The run, with --diff-base, --baseline and --write-baseline applied."""
    from patchaudit.inputs.diffbase import changed_lines
    from patchaudit.pipeline.baseline import ensure_fingerprints, filter_new, read_baseline, write_baseline

    quiet = opts["quiet"] or opts["silent"]
    baseline_file, write_baseline_file = opts["baseline_file"], opts["write_baseline_file"]
    changed = changed_lines(paths, opts["diff_base"]) if opts["diff_base"] is not None else None
    entries = read_baseline(baseline_file) if baseline_file else None
    if stdin:
        from patchaudit.pipeline.stdin import run_check_stdin

        result = run_check_stdin(sys.stdin.buffer, opts["stdin_filename"], settings)
    else:
        from patchaudit.pipeline.runner import run_check

        progress = FileProgress()
        try:
            # --fix and --diff re-check in memory with the run's settings: never a replay
            result = run_check(paths, settings, progress=progress, replay=not wants_fixes(opts, stdin))
        finally:
            progress.close()
    # a refused cache location: an error naming the file (and key), exit 2; the scan ran
    result.errors[:0] = settings.cache_errors
    if write_baseline_file or entries is not None:
        ensure_fingerprints(result.findings)
    if write_baseline_file:
        n = write_baseline(write_baseline_file, result.findings)
        _note(quiet, f"wrote {n} finding{'s' if n != 1 else ''} to the baseline {write_baseline_file}")
    if changed is not None:
        result.findings = changed.filter(result.findings)
    if entries is not None:
        result.findings, hidden = filter_new(result.findings, entries, baseline_file)
        if hidden:
            _note(quiet, f"{hidden} finding{'s' if hidden != 1 else ''} of the baseline {baseline_file} not shown")
    if opts["severity"]:
        floor = SEVERITIES.index(opts["severity"])
        result.findings = [f for f in result.findings if SEVERITIES.index(f.severity.value) >= floor]
    return result


def _shows_fixes(opts: dict[str, Any]) -> bool:
    """`--show-fixes` without `--fix`: each finding's fix under it (with --fix: the list)."""
    return bool(opts.get("show_fixes")) and not opts.get("fix")


def _report(result, paths: list[str], opts: dict[str, Any]) -> None:
    """Warnings and errors on stderr, the report(s) on stdout or in files."""
    fmt, output = opts["fmt"], opts["output"]
    quiet, silent = opts["quiet"] or opts["silent"], opts["silent"]
    # the text report on stdout carries the run's warnings (its `note:` lines): said once
    in_report = fmt in ("full", "concise", "text") and not opts["statistics"] and not output
    for warning in [] if in_report else result.warnings:
        _note(quiet, f"warning: {warning}")
    if not result.files and not result.errors:
        shown = " ".join(paths)
        _note(
            quiet,
            f"warning: no files to check under {shown} (patchaudit reads *.patch, *.diff, *.py, "
            "shell scripts, Dockerfiles, YAML and .env files)",
        )
    for err in result.errors:
        click.echo(safe(err), err=True)  # errors are shown even with --silent: exit code 2 says why
    color = use_color(output, opts["color"])
    unsafe = bool(opts.get("unsafe_fixes"))
    if opts["statistics"]:
        text = render_statistics(fmt, result, unsafe)
    else:
        text = render(fmt, result, color=color, quiet=opts["quiet"], unsafe_fixes=unsafe, show_fixes=_shows_fixes(opts))
    if opts.get("fixed_text") and not opts["quiet"]:  # --show-fixes after --fix: what was fixed
        if fmt in HUMAN_FORMATS and not output:
            text = opts["fixed_text"] + text
        else:
            click.echo(opts["fixed_text"], nl=False, err=True)  # output-safe: conventions.render_fixed escapes
    if not silent or output:
        emit(text, output, color)
    for also_fmt, path in parse_also(opts["also"]):
        emit(render(also_fmt, result), path)


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
    "--output-format",
    "--format",
    "fmt",
    type=click.Choice(OUTPUT_FORMATS),
    default="full",
    show_default=True,
    envvar="PATCHAUDIT_OUTPUT_FORMAT",
    help="Report format (also: PATCHAUDIT_OUTPUT_FORMAT). `text` is `full`.",
)
@click.option("--output", "--output-file", "-o", type=click.Path(dir_okay=False), help="Write the report to FILE.")
@click.option(
    "--also",
    multiple=True,
    metavar="FORMAT:FILE",
    help="Also write the report in FORMAT to FILE (repeatable): --also sarif:patchaudit.sarif.",
)
@click.option("--statistics", is_flag=True, help="Show the number of findings per rule instead of the findings.")
@click.option("--quiet", "-q", is_flag=True, help="Print the findings, nothing else (no summary, no warnings).")
@click.option("--silent", "-s", is_flag=True, help="Print nothing but errors (the exit code still says 1 on findings).")
@click.option(
    "--color",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    show_default=True,
    help="Colour the text report (auto: on a terminal, unless NO_COLOR; FORCE_COLOR forces it).",
)
@click.option(
    "--severity",
    type=click.Choice(SEVERITIES),
    help="Report only findings of this severity or a higher one.",
)
@click.option(
    "--stdin-filename",
    metavar="NAME",
    help="With the path `-`: the name of the file read from standard input (its kind, where findings are reported).",
)
@click.option("--config", type=click.Path(exists=True, dir_okay=False), help="A pyproject.toml to read.")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Exclude patterns, replacing the configuration's.")
@click.option("--extend-exclude", multiple=True, metavar="GLOB", help="Exclude patterns added to the configuration's.")
@click.option(
    "--per-file-ignores",
    "--extend-per-file-ignores",
    "per_file_ignores",
    multiple=True,
    metavar="GLOB:CODES",
    help="Codes to skip in files matching GLOB (added to the configuration's).",
)
@click.option("--jobs", "-j", type=click.IntRange(min=1), help="Worker processes (default: number of cores).")
@click.option(
    "--no-cache", "-n", is_flag=True, help="Do not read or write the result cache (also: PATCHAUDIT_NO_CACHE=1)."
)
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Keep the result cache in DIR (also: PATCHAUDIT_CACHE_DIR; default: .patchaudit_cache "
    "beside the pyproject.toml).",
)
@click.option(
    "--tokenizer", type=click.Path(), help="tokenizer.json or a model folder, for the rules that need a tokenizer."
)
@click.option("--exit-zero", "-e", is_flag=True, help="Exit 0 even when findings are reported.")
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
@fix_options  # --fix, --unsafe-fixes, --diff (commands/fixopts.py)
@conv.convention_options  # ruff's other options (commands/conventions.py)
@engine_resolve_options  # --engine-dir, --offline (engines found by version: engine/resolve.py)
def check(paths, **opts) -> None:
    """Check patches, Python and other text files under PATHS (default: .; `-`: standard input)."""
    paths = list(paths) or ["."]
    if opts["fmt"] not in available_formats():
        raise click.UsageError(f"format {opts['fmt']!r} is not available in this build")
    parse_also(opts["also"])  # a bad --also is a usage error before the scan
    stdin = _stdin_paths(paths, opts["stdin_filename"])
    conv.check_usage(opts, stdin)
    if opts["watch"]:
        sys.exit(_watch(paths, opts))
    sys.exit(check_once(paths, opts, stdin))


def _settings(paths: list[str], opts: dict[str, Any], stdin: bool) -> Settings:
    settings = build_settings(
        [opts["stdin_filename"]] if stdin else paths,
        opts["config"],
        opts["select"],
        opts["ignore"],
        opts["extend_select"],
        opts["engine"],
        opts["jobs"],
        opts["no_cache"],
        opts["tokenizer"],
        opts["cache_dir"],
        isolated=opts["isolated"],
    )
    _file_options(settings, opts)
    apply_engine_options(settings, opts["engine_dirs"], opts["offline"])
    origin = settings.config_path or ("none (--isolated)" if opts["isolated"] else "none: the defaults")
    conv.verbose(opts, f"configuration: {origin}")
    return settings


def _show(paths: list[str], settings: Settings, opts: dict[str, Any]) -> int:
    """--show-files / --show-settings: print, exit 0 (2 when a path cannot be read)."""
    from patchaudit.config.registry import rule_index, select_codes
    from patchaudit.inputs.discover import discover
    from patchaudit.reporters.settings import render_files, render_settings

    if opts["show_settings"]:
        try:
            codes = select_codes(rule_index(), settings.select, settings.ignore, settings.extend_select)
        except KeyError as exc:
            raise ConfigError(f"unknown rule code or prefix {exc.args[0]!r}") from None
        origin = settings.config_path or ("none (--isolated)" if opts["isolated"] else "none: the defaults")
        emit(render_settings(settings, codes, origin), None)
        return 0
    files, errors = discover(paths, settings.exclude)
    emit(render_files(files), None)
    for err in errors:
        click.echo(safe(err), err=True)
    return 2 if errors else 0


def check_once(paths: list[str], opts: dict[str, Any], stdin: bool = False) -> int:
    """One check: its report printed, its exit code returned."""
    from patchaudit.inputs.diffbase import DiffBaseError
    from patchaudit.pipeline.baseline import BaselineError
    from patchaudit.pipeline.results import RunError

    started = time.monotonic()
    opts["fixed_text"] = ""
    try:
        settings = _settings(paths, opts, stdin)
        if opts["show_files"] or opts["show_settings"]:
            return _show(paths, settings, opts)
        result = _run(paths, settings, opts, stdin)
        conv.restrict_fixes(result.findings, opts, settings)  # --fixable / --unfixable
        conv.verbose(
            opts,
            f"{result.files} file{'s' if result.files != 1 else ''} checked ({result.cached} from the cache"
            f"{', the whole run replayed' if result.replayed else ''}) in {time.monotonic() - started:.2f}s",
        )
        if opts["add_noqa"]:
            return conv.add_noqa(result, settings, opts["quiet"] or opts["silent"])
        # --fix / --diff / --unsafe-fixes (commands/fixopts.py): --diff ends the run here
        if wants_fixes(opts, stdin):
            before = list(result.findings)
            fixed_code = run_fixes(result, settings, opts)
            if fixed_code is not None:
                return fixed_code
            if opts["show_fixes"]:
                paths_fixed = {f.path for f in before}
                fixed = conv.fixed_by_file(before, result.findings, paths_fixed, bool(opts["unsafe_fixes"]))
                opts["fixed_text"] = conv.render_fixed(fixed)
    except (ConfigError, RunError, BaselineError, DiffBaseError) as exc:
        click.echo(safe(f"patchaudit: error: {exc}"), err=True)
        return 2
    return _finish(result, paths, opts)


def _finish(result, paths: list[str], opts: dict[str, Any]) -> int:
    """The report (none with --fix-only) and the exit code."""
    fixed = getattr(result, "fixed", 0)
    if opts["fix_only"]:
        for err in result.errors:
            click.echo(safe(err), err=True)
        if not (opts["quiet"] or opts["silent"]):
            done = f"Fixed {fixed} finding{'s' if fixed != 1 else ''}."
            click.echo(opts["fixed_text"] + done)  # output-safe: escaped by conventions.render_fixed; a number
        code = 2 if result.errors else 0
    else:
        _report(result, paths, opts)
        code = result.exit_code
    if opts["write_baseline_file"] and code == 1:
        code = 0
    if opts["exit_zero"] and code == 1:
        code = 0
    if opts["exit_non_zero_on_fix"] and fixed and code == 0:
        code = 1
    return code


def _watch_settings(paths: list[str], opts: dict[str, Any]) -> Settings:
    """The settings the watcher discovers files with (a broken configuration: the defaults;
    the check itself reports it)."""
    try:
        return _settings(paths, {**opts, "verbose": False}, False)
    except ConfigError:
        return Settings()


def _watch(paths: list[str], opts: dict[str, Any]) -> int:
    """--watch: check, then poll for changes and check again (commands/conventions.py)."""
    from patchaudit.pipeline.watch import snapshot

    interval, cycles = conv.watch_settings()
    runs, code = 0, 0
    try:
        while True:
            # the snapshot is taken before the check: a change made while it runs starts the next
            seen = snapshot(paths, _watch_settings(paths, opts))
            code = check_once(paths, dict(opts))
            runs += 1
            if cycles and runs >= cycles:
                return code
            click.echo("patchaudit: watching for file changes (Ctrl-C stops).", err=True)
            while snapshot(paths, _watch_settings(paths, opts)) == seen:
                time.sleep(interval)
            click.echo("patchaudit: a file changed: checking again.", err=True)
    except KeyboardInterrupt:
        return code
