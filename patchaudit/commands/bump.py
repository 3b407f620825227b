"""`patchaudit bump PATCHES... --engine NAME --from OLD --to NEW`"""

from __future__ import annotations

import os
import sys

import click

from patchaudit.commands.check import build_settings, emit, use_color
from patchaudit.config.settings import ConfigError, Settings
from patchaudit.model.escape import safe, safe_lines, visible

FORMATS = ["text", "markdown", "json", "sarif", "github"]


def parse_engine_name(value: str) -> tuple[str, int | None, str | None]:
    """`NAME`, `NAME:pN`, `NAME=REPO`, `NAME:pN=REPO` -> (name, strip, repo)."""
    name, sep, repo = value.partition("=")
    strip = None
    if ":p" in name:
        name, _, n = name.partition(":p")
        if not n.isdigit():
            raise click.BadParameter(f"bad strip level in {value!r} (NAME:pN)", param_hint="--engine")
        strip = int(n)
    if not name or name.startswith("-") or (sep and (not repo or repo.startswith("-"))):
        raise click.BadParameter(f"expected NAME, NAME:pN or NAME=REPO, got {value!r}", param_hint="--engine")
    return name, strip, repo or None


def resolve_revision(spec: str, repo: str | None) -> str:
    """A bare revision (`v2`, a tag or sha) of the engine's git repository -> `REPO@v2`.

    An existing path (directory, wheel, sdist) or a `PATH@REV` spec is kept as it is."""
    from patchaudit.engine.sources import _split_git_spec

    if not repo or spec.startswith("-") or os.path.exists(os.path.expanduser(spec)) or _split_git_spec(spec):
        return spec
    base = repo
    if not os.path.isdir(os.path.expanduser(base)):
        split = _split_git_spec(base)
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


def render_text(report, color: bool = False) -> str:
    """The text report; every value escaped (patchaudit/model/escape.py)."""
    from patchaudit.reporters.text import _style, format_finding

    v = visible

    out = [_style(f"patchaudit bump {v(report.engine)}: {v(report.old_name)} -> {v(report.new_name)}", color,
                  bold=True)]
    if report.hunks:
        out.append("")
        out.append(f"Hunks (on {v(report.old_name)} -> on {v(report.new_name)}):")
        for row in report.hunks:
            old = v(row.old.label()) if row.old else "-"
            new = v(row.new.label()) if row.new else "-"
            if row.moved_to:
                new += f" (moved to {v(row.moved_to)}: {v(row.moved.label()) if row.moved else '?'})"
            flag = "  [changed upstream]" if row.changed_upstream else ""
            sym = f"  {v(row.symbol)}" if row.symbol else ""
            out.append(f"  {v(row.patch)}:{row.patch_line}  {v(row.target)}  #{row.hunk}{sym}  {old} -> {new}{flag}")
    if report.findings:
        out.append("")
        out.extend(format_finding(f, color) for f in report.findings)
    out.append("")
    out.append(summary_line(report))
    return safe_lines("\n".join(out) + "\n")


def summary_line(report) -> str:
    by = {"error": 0, "warning": 0, "info": 0}
    for f in report.findings:
        by[f.severity.value] += 1
    counts = report.hunk_counts()
    on_new = f"on {visible(report.new_name)}"
    hunks = f"{len(report.hunks)} hunk{'s' if len(report.hunks) != 1 else ''} {on_new}: " + ", ".join(
        f"{v} {k}" for k, v in counts.items() if v) if report.hunks else "no hunks"
    n = len(report.findings)
    if not n:
        return f"No findings ({hunks})."
    parts = ", ".join(f"{v} {k}{'s' if v != 1 else ''}" for k, v in by.items() if v)
    return f"Found {n} finding{'s' if n != 1 else ''} ({parts}); {hunks}."


@click.command("bump")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--engine", "engine", required=True, metavar="NAME[:pN][=REPO]",
              help="The engine the patches are for (e.g. sglang). NAME:pN fixes the strip level; "
                   "NAME=REPO (or [tool.patchaudit.engines]) names a git repository whose revisions "
                   "--from/--to may then give bare.")
@click.option("--from", "old", required=True, metavar="OLD",
              help="The engine version the patches were made for: a directory, PATH@REV, a wheel or an sdist "
                   "(or a revision of the engine's repository).")
@click.option("--to", "new", required=True, metavar="NEW", help="The engine version to move to (same kinds).")
@click.option("--select", multiple=True, metavar="CODES", help="Rule codes or prefixes to run (comma-separated).")
@click.option("--ignore", multiple=True, metavar="CODES", help="Rule codes or prefixes to skip.")
@click.option("--extend-select", multiple=True, metavar="CODES", help="Codes to add to the selection.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write the report to FILE.")
@click.option("--config", type=click.Path(exists=True, dir_okay=False), help="A pyproject.toml to read.")
@click.option("--tokenizer", type=click.Path(), help="tokenizer.json or a model folder (PA105).")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when errors are found.")
def bump(paths, engine, old, new, select, ignore, extend_select, fmt, output, config, tokenizer,
         exit_zero) -> None:
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
        report = run_bump(list(paths), name, resolve_revision(old, repo), resolve_revision(new, repo), settings,
                          strip=strip)
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
