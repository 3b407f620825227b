"""`check --fix`, `--diff`, `--unsafe-fixes`: the options and what the command does with
them after the check (the work is patchaudit/pipeline/fix.py's, the diff
reporters/fixdiff.py's).  As in ruff: `--fix` writes the safe fixes and reports what
remains, `--unsafe-fixes` adds the unsafe ones, `--diff` prints the unified diff of
what `--fix` would write, writes nothing and exits 1 when there is a diff."""

from __future__ import annotations

from typing import Any, Callable

import click

from patchaudit.model.escape import safe

_OPTIONS = [
    click.option("--fix", is_flag=True, help="Apply the safe fixes of the findings (and report what remains)."),
    click.option(
        "--unsafe-fixes", is_flag=True, help="With --fix or --diff: apply the unsafe fixes too (they change behaviour)."
    ),
    click.option(
        "--diff",
        "fix_diff",
        is_flag=True,
        help="Print the diff of what --fix would write and write nothing (exit 1 if there is one).",
    ),
]


def fix_options(command: Callable) -> Callable:
    """The three options on a click command (its keyword arguments `fix`, `unsafe_fixes`, `fix_diff`)."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


def wants_fixes(opts: dict[str, Any], stdin: bool = False) -> bool:
    wanted = bool(opts.get("fix") or opts.get("fix_diff"))
    if wanted and stdin:
        raise click.UsageError("--fix and --diff need files: they cannot fix standard input (`-`)")
    return wanted


def run_fixes(result, settings, opts: dict[str, Any], refilter=None) -> int | None:
    """Apply (or, with --diff, print) the fixes of `result`.  With --diff the command ends
    here: the exit code is returned.  With --fix the changed files are written and
    `result.findings` becomes what remains; None is returned (the report follows)."""
    from patchaudit.pipeline.fix import fix_findings, write_fixes
    from patchaudit.reporters import HUMAN_FORMATS
    from patchaudit.reporters.fixdiff import render

    quiet = opts.get("quiet") or opts.get("silent")
    outcome = fix_findings(result, settings, unsafe=bool(opts.get("unsafe_fixes")), refilter=refilter)
    for message in outcome.messages:
        if not quiet:
            click.echo(safe(f"patchaudit: {message}"), err=True)
    if opts.get("fix_diff"):
        text = render((f.path, f.old, f.new) for f in outcome.changed)
        if text:
            click.echo(text, nl=False)  # output-safe: reporters/fixdiff.py escapes what it renders
        if not quiet:
            n, hidden = outcome.fixed, outcome.unsafe_available
            click.echo(f"Would fix {n} finding{'s' if n != 1 else ''}.", err=True)  # output-safe: a number
            if hidden:
                more = (
                    f"{hidden} hidden fix{'es' if hidden != 1 else ''} can be enabled with the `--unsafe-fixes` option."
                )
                click.echo(more, err=True)  # output-safe: a number
        if result.errors:
            for err in result.errors:
                click.echo(safe(err), err=True)
            return 2
        return 1 if text else 0
    errors = write_fixes(outcome, settings.project_root)
    result.errors.extend(errors)
    result.findings = outcome.remaining
    result.fixed = 0 if errors else outcome.fixed  # the report's summary says how many
    if not errors:  # the hunk summary of exact mode: the fixed patches' own
        fixed = {f.path: f.hunks for f in outcome.changed if f.hunks is not None}
        result.hunks = [h for h in result.hunks if h.get("patch") not in fixed]
        result.hunks += [h for hunks in fixed.values() for h in hunks]
    # one summary: a report for a person ends with it (reporters/text.py); any other says it here
    if not quiet and opts.get("fmt") not in HUMAN_FORMATS and not opts.get("fix_only"):
        n, left = result.fixed, len(result.findings)
        click.echo(f"Fixed {n} finding{'s' if n != 1 else ''} ({left} remaining).", err=True)  # output-safe: numbers
    return None
