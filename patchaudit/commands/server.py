"""`patchaudit server`: the language server over stdio (the work is patchaudit/server/'s)."""

from __future__ import annotations

import click

from patchaudit.server.lsp import DEFAULT_DEBOUNCE


@click.command("server")
@click.option(
    "--config",
    type=click.Path(exists=True, dir_okay=False),
    help="A pyproject.toml for every file (default: the one found from each file, as `check` finds it).",
)
@click.option(
    "--debounce",
    type=click.FloatRange(0, 60),
    default=DEFAULT_DEBOUNCE,
    show_default=True,
    metavar="SECONDS",
    help="Check a changed buffer this long after the last change (the client's "
    "initializationOptions.debounce overrides it).",
)
@click.option("--no-cache", is_flag=True, help="Do not read or write the project's result cache.")
def server(config: str | None, debounce: float, no_cache: bool) -> None:
    """Run the language server on stdin/stdout (for an editor's LSP client; see docs/editors.md).

    Diagnostics for Python files, patches and the build files `check` reads, as `check`
    reports them, on open, change and save; quick fixes from the rules' fixes; a rule's
    documentation on hover."""
    from patchaudit.server.lsp import leave, serve

    leave(serve(debounce=debounce, config=config, no_cache=no_cache))
