"""`patchaudit rules` and `patchaudit explain CODE`."""

from __future__ import annotations

import click

from patchaudit.config.registry import all_rules
from patchaudit.model.escape import json_text, safe, text_block


def _rules(config: str | None) -> dict:
    """The built-in rules and the local rules of the configuration (`--config`, or the
    `pyproject.toml` found from the current folder; patchaudit/config/local_rules.py)."""
    import sys

    from patchaudit.config.settings import ConfigError, find_pyproject, load_pyproject

    try:
        cfg = config or find_pyproject(["."])
        if cfg is not None:
            load_pyproject(cfg)
    except ConfigError as exc:
        click.echo(safe(f"patchaudit: error: {exc}"), err=True)
        sys.exit(2)
    return all_rules()


_CONFIG = click.option(
    "--config", type=click.Path(exists=True, dir_okay=False), help="A pyproject.toml (its extend-rules are listed too)."
)


@click.command("rules")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
@_CONFIG
def rules_cmd(fmt: str, config: str | None) -> None:
    """List the rules: code, name, default severity, what it needs (`--format markdown`:
    the built-in pack's reference, docs/rules.md)."""
    if fmt == "markdown":
        from patchaudit.config.registry import pack_rules
        from patchaudit.reporters.rule_docs import render

        click.echo(text_block(render(pack_rules().values())), nl=False)
        return
    rules = _rules(config)
    if fmt == "json":
        listing = json_text(
            [
                {
                    "code": r.code,
                    "name": r.name,
                    "severity": r.severity.value,
                    "default": r.default_enabled,
                    "needs": sorted(r.needs),
                    "summary": r.summary(),
                }
                for r in rules.values()
            ]
        )
        click.echo(listing)  # output-safe: json_text escapes what a terminal or a CI log acts on
        return
    for r in rules.values():
        needs = f" [needs {', '.join(sorted(r.needs))}]" if r.needs else ""
        off = " (off by default)" if not r.default_enabled else ""
        click.echo(safe(f"{r.code}  {r.name:<34} {r.severity.value:<7}{needs}{off}"))
        click.echo(safe(f"       {r.summary()}"))


@click.command("explain")
@click.argument("code")
@_CONFIG
def explain(code: str, config: str | None) -> None:
    """Print a rule's documentation."""
    rules = _rules(config)
    rule = rules.get(code.upper()) or next((r for r in rules.values() if r.name == code), None)
    if rule is None:
        raise click.UsageError(safe(f"unknown rule {code!r}; `patchaudit rules` lists them"))
    needs = ", ".join(sorted(rule.needs)) or "nothing beyond the input"
    click.echo(safe(f"# {rule.code} {rule.name}") + "\n")
    click.echo(
        safe(
            f"Default severity: {rule.severity.value}. Needs: {needs}."
            f"{'' if rule.default_enabled else ' Off by default: enable with --select ' + rule.code + '.'}"
        )
        + "\n"
    )
    click.echo(text_block(rule.docs()))
