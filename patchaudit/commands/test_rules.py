"""`patchaudit test-rules [PATHS]...`: run the VALID/INVALID examples of local rules.

PATHS are folders of rule modules or `.py` files (as `extend-rules` entries);
without PATHS, the `extend-rules` of the configuration (`--config`, or the
`pyproject.toml` found from the current folder).  Exit 0 when every example
behaves as declared, 1 when one does not, 2 when the rules cannot be loaded.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from patchaudit.config.settings import ConfigError, find_pyproject, load_pyproject
from patchaudit.model.escape import safe


def _local_rules(paths: tuple[str, ...], config: str | None) -> dict:
    """The rules to test, by code (ConfigError / LocalRuleError when they cannot be loaded)."""
    from patchaudit.config import local_rules
    from patchaudit.config.registry import all_rules, pack_index, user_cache_dir

    if paths:
        local_rules.load(
            list(paths),
            Path.cwd(),
            set(pack_index(user_cache_dir())),
            confine=False,
            where="patchaudit test-rules",
        )
    else:
        cfg = config or find_pyproject(["."])
        if cfg is None:
            raise ConfigError("no [tool.patchaudit] configuration found: give PATHS or --config")
        settings = load_pyproject(cfg)
        if not settings.extend_rules:
            raise ConfigError(f"{cfg}: [tool.patchaudit] has no extend-rules: give PATHS")
    rules = all_rules()
    return {code: rules[code] for code in sorted(local_rules.LOCAL)}


@click.command("test-rules")
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@click.option("--config", type=click.Path(exists=True, dir_okay=False), help="A pyproject.toml to read.")
def test_rules(paths: tuple[str, ...], config: str | None) -> None:
    """Run the VALID/INVALID examples of local rules (PATHS, or the configuration's extend-rules)."""
    from patchaudit.config.local_rules import LocalRuleError
    from patchaudit.pipeline.rule_examples import run_rule_examples

    try:
        rules = _local_rules(paths, config)
    except (ConfigError, LocalRuleError) as exc:
        click.echo(safe(f"patchaudit: error: {exc}"), err=True)
        sys.exit(2)
    if not rules:
        click.echo(safe("patchaudit: error: no rule found in the given folders or files"), err=True)
        sys.exit(2)
    outcomes = run_rule_examples(rules.values())
    for o in outcomes:
        title = f" ({o.title})" if o.title else ""
        click.echo(safe(f"{o.code} {o.kind} {o.index}{title}: {'ok' if o.ok else 'FAILED'}"))
        for problem in o.problems:
            click.echo(safe(f"    {problem}"))
    failed = sum(not o.ok for o in outcomes)
    n = len(rules)
    click.echo(
        safe(
            f"{len(outcomes)} example{'s' if len(outcomes) != 1 else ''} of {n} rule{'s' if n != 1 else ''}: "
            f"{len(outcomes) - failed} passed, {failed} failed."
        )
    )
    sys.exit(1 if failed else 0)
