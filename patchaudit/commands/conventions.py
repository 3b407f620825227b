"""The rest of ruff's `check` options (issue 39): their click declarations and what
`check` does with them.  The work is elsewhere: fixes in patchaudit/pipeline/fix.py,
suppression comments in patchaudit/pipeline/noqa.py, the watch loop's snapshots in
patchaudit/pipeline/watch.py, the renderings in patchaudit/reporters/.

- `--show-fixes`: with `--fix`, the fixes applied, per file and rule (ruff's
  enumeration); without, each finding's fix under it in the full text report;
- `--fix-only`: apply the fixes and report nothing else (exit 0, or 1 with
  `--exit-non-zero-on-fix` when something was fixed);
- `--exit-non-zero-on-fix`: exit 1 when a fix was applied, even if nothing remains;
- `--fixable CODES` (also `--extend-fixable`) / `--unfixable CODES`: the rules whose
  fixes count (default all);
- `--add-noqa` (also ruff's `--add-ignore`): a `# patchaudit: ignore[CODE]` comment on
  each reported line;
- `--show-files`, `--show-settings`: what the run would read / use, then exit 0;
- `--isolated`: no configuration file is read (`--config` with it is a usage error);
- `-v/--verbose`: what the run used and did, on stderr;
- `--watch`: check, then check again whenever a checked file or the configuration
  changes (stat polling; `PATCHAUDIT_WATCH_INTERVAL` seconds, default 0.5;
  `PATCHAUDIT_WATCH_CYCLES=N` stops after N checks: the tests' bound).
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any, Callable

import click

from patchaudit.model.escape import safe, safe_lines, visible

_OPTIONS = [
    click.option(
        "--show-fixes/--no-show-fixes",
        default=False,
        help="With --fix: list the fixes applied; else: show each finding's fix under it.",
    ),
    click.option("--fix-only", is_flag=True, help="Apply the fixes and report nothing else (implies --fix)."),
    click.option(
        "--exit-non-zero-on-fix", is_flag=True, help="Exit 1 when a fix was applied, even if no finding remains."
    ),
    click.option(
        "--fixable",
        "--extend-fixable",
        "fixable",
        multiple=True,
        metavar="CODES",
        help="Rules whose fixes --fix may apply (default: all).",
    ),
    click.option("--unfixable", multiple=True, metavar="CODES", help="Rules whose fixes --fix never applies."),
    click.option(
        "--add-noqa",
        "--add-ignore",
        "add_noqa",
        is_flag=True,
        help="Add a `# patchaudit: ignore[CODE]` comment on each reported line (.py files, lines patches add).",
    ),
    click.option("--show-files", is_flag=True, help="List the files the check would read, then exit."),
    click.option("--show-settings", is_flag=True, help="Show the resolved settings, then exit."),
    click.option("--isolated", is_flag=True, help="Read no configuration file (pyproject.toml, patchaudit.toml)."),
    click.option("--verbose", "-v", is_flag=True, help="Say what the run used and did (on stderr)."),
    click.option("--watch", "-w", is_flag=True, help="Check again whenever a checked file changes."),
]


def convention_options(command: Callable) -> Callable:
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


def check_usage(opts: dict[str, Any], stdin: bool) -> None:
    """Usage errors of the combinations, before the scan."""
    if opts["isolated"] and opts["config"]:
        raise click.UsageError("--isolated reads no configuration file: it cannot be combined with --config")
    if opts["fix_only"]:
        opts["fix"] = True
    if opts["add_noqa"] and (opts["fix"] or opts["fix_diff"]):
        raise click.UsageError("--add-noqa cannot be combined with --fix or --diff")
    if stdin and (opts["add_noqa"] or opts["watch"]):
        raise click.UsageError("--add-noqa and --watch need files: they cannot read standard input (`-`)")


def split_codes(values: tuple[str, ...]) -> list[str]:
    return [c.strip().upper() for v in values for c in v.split(",") if c.strip()]


def _matches(code: str, prefixes: list[str]) -> bool:
    return any(p == "ALL" or code.startswith(p) for p in prefixes)


def restrict_fixes(findings: list, opts: dict[str, Any], settings: Any = None) -> None:
    """`--fixable`/`--unfixable` (over the configuration's `fixable`/`unfixable`): a finding
    of a rule whose fixes do not count has none."""
    fixable = split_codes(opts["fixable"]) or [c.upper() for c in (getattr(settings, "fixable", None) or [])]
    unfixable = split_codes(opts["unfixable"]) + [c.upper() for c in (getattr(settings, "unfixable", None) or [])]
    if not fixable and not unfixable:
        return
    for f in findings:
        if f.fix is not None and ((fixable and not _matches(f.code, fixable)) or _matches(f.code, unfixable)):
            f.fix = None


def fixed_by_file(before: list, after: list, changed: set[str], unsafe: bool) -> dict[str, Counter]:
    """The findings fixed, per file and code: those with an applied fix that are gone."""
    from patchaudit.reporters.fixable import fixable

    out: dict[str, Counter] = {}
    for path in sorted(changed):
        was = Counter((f.code, f.name) for f in before if f.path == path and fixable(f, unsafe))
        left = Counter((f.code, f.name) for f in after if f.path == path)
        gone = was - left
        if gone:
            out[path] = gone
    return out


def render_fixed(fixed: dict[str, Counter]) -> str:
    """ruff's `--show-fixes` enumeration."""
    total = sum(sum(c.values()) for c in fixed.values())
    if not total:
        return ""
    lines = [f"Fixed {total} finding{'s' if total != 1 else ''}:"]
    for path, counts in fixed.items():
        lines.append(f"- {visible(path)}:")
        for (code, name), n in sorted(counts.items()):
            lines.append(f"    {n} × {visible(code)} ({visible(name)})")
    return safe_lines("\n".join(lines)) + "\n\n"


def add_noqa(result, settings, quiet: bool) -> int:
    """`--add-noqa`: write the comments; the exit code (2 when a file could not be written)."""
    from patchaudit.files.reader import ReadError, decode_utf8, read_bytes
    from patchaudit.pipeline.fix import FixOutcome, write_fixes
    from patchaudit.pipeline.noqa import add_noqa as plan

    texts: dict[str, str] = {}
    for path in {f.path for f in result.findings}:
        try:
            texts[path] = decode_utf8(path, read_bytes(path, settings.max_file_size))
        except (ReadError, OSError, UnicodeDecodeError):
            continue
    outcome = plan(result.findings, texts, {e.path for e in result.errors})
    errors = write_fixes(FixOutcome(files=outcome.files))
    for e in result.errors + errors:
        click.echo(safe(e), err=True)
    if not quiet:
        for message in outcome.messages:
            click.echo(safe(f"patchaudit: {message}"), err=True)
        n = 0 if errors else outcome.added
        click.echo(f"Added {n} suppression comment{'s' if n != 1 else ''}.", err=True)  # output-safe: a number
    return 2 if errors or result.errors else 0


def verbose(opts: dict[str, Any], text: str) -> None:
    if opts.get("verbose"):
        click.echo(safe(f"patchaudit: {text}"), err=True)


def watch_settings() -> tuple[float, int]:
    """(seconds between polls, checks before stopping: 0 = until interrupted)."""
    try:
        interval = max(0.05, float(os.environ.get("PATCHAUDIT_WATCH_INTERVAL") or 0.5))
    except ValueError:
        interval = 0.5
    cycles = os.environ.get("PATCHAUDIT_WATCH_CYCLES") or "0"
    return interval, int(cycles) if cycles.isdigit() else 0
