"""`patchaudit rules` and `patchaudit explain CODE`."""

from __future__ import annotations

import json

import click

from patchaudit.config.registry import all_rules
from patchaudit.model.escape import safe, text_block


@click.command("rules")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def rules_cmd(fmt: str) -> None:
    """List the rules: code, name, default severity, what it needs."""
    rules = all_rules()
    if fmt == "json":
        listing = json.dumps(
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
            ],
            indent=2,
        )
        click.echo(listing)  # output-safe: ASCII JSON (ensure_ascii) of the built-in rule pack
        return
    for r in rules.values():
        needs = f" [needs {', '.join(sorted(r.needs))}]" if r.needs else ""
        off = " (off by default)" if not r.default_enabled else ""
        click.echo(safe(f"{r.code}  {r.name:<34} {r.severity.value:<7}{needs}{off}"))
        click.echo(safe(f"       {r.summary()}"))


@click.command("explain")
@click.argument("code")
def explain(code: str) -> None:
    """Print a rule's documentation."""
    rules = all_rules()
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
