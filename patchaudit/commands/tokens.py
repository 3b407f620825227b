"""`patchaudit tokens --tokenizer PATH FILE.jsonl...`: drift exposure of recorded rollout ids.

Every line of a JSONL file is one sample: a JSON object holding a list of token
ids under `--field` (a dotted path; a line that is itself a list of ids is taken
as it is).  For each sample the command checks `encode(decode(ids)) == ids`,
which is what an engine that decodes a token-id prompt and re-tokenizes it
does, and reports each difference as a span of the recorded ids and what it
becomes: `[14:16] [479, 3770] ('Ġtr', 'uly') -> [9149] ('Ġtruly')`.

Files are streamed in batches (decode and encode run in the tokenizer's
threads), so memory does not grow with the file; a progress bar is drawn on
stderr when it is a terminal.  A line that is not valid JSON, lacks the field
or holds something other than known ids is reported as `FILE:LINE: error: ...`
and skipped; the run goes on.  Exit code: 0 nothing drifts, 1 some sample
drifts, 2 a file, line or the tokenizer could not be read.
"""

from __future__ import annotations

import sys
from typing import Sequence

import click

from patchaudit.model.escape import safe
from patchaudit.reporters.tokens import run_audit

__all__ = ["tokens"]


def _resolve_tokenizer(tokenizer: str | None, config: str | None, files: Sequence[str]) -> str:
    if tokenizer:
        return tokenizer
    from pathlib import Path

    from patchaudit.config.settings import find_pyproject, load_pyproject

    cfg = Path(config) if config else find_pyproject(list(files))
    if cfg:
        settings = load_pyproject(cfg, local_rules=False)  # tokens runs no rule
        if settings.tokenizer:
            return settings.tokenizer
    raise click.UsageError(
        "give the model's tokenizer: --tokenizer PATH (a tokenizer.json or a model folder), "
        'or tokenizer = "..." under [tool.patchaudit]'
    )


@click.command("tokens")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option(
    "--tokenizer",
    type=click.Path(),
    help="The model's tokenizer.json or a folder holding one (default: tokenizer in [tool.patchaudit]).",
)
@click.option(
    "--field",
    default="tokens",
    show_default=True,
    metavar="PATH",
    help="Where each line keeps its token ids (dotted for nested objects: response.ids).",
)
@click.option("--id-field", metavar="PATH", help="A field naming the sample in the report (e.g. index).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write the report to FILE.")
@click.option(
    "--top",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    help="Most frequent drifting spans to list (0: all).",
)
@click.option("--all-samples", is_flag=True, help="List every sample, not only those that drift.")
@click.option("--summary-only", is_flag=True, help="Print only the summary.")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: when stderr is a terminal).")
@click.option("--config", type=click.Path(exists=True, dir_okay=False), help="A pyproject.toml to read.")
def tokens(files, tokenizer, field, id_field, fmt, output, top, all_samples, summary_only, progress, config) -> None:
    """Audit recorded rollout token ids (JSONL) for drift under decode and re-encode."""
    from patchaudit.config.settings import ConfigError
    from patchaudit.inputs.tokenizer import TokenizerError, load_tokenizer

    try:
        tok = load_tokenizer(_resolve_tokenizer(tokenizer, config, files))
    except (TokenizerError, ConfigError) as exc:
        click.echo(safe(f"patchaudit: error: {exc}"), err=True)
        sys.exit(2)
    if progress is None:
        progress = sys.stderr.isatty()
    from patchaudit.files.atomic import AtomicFile

    # the report file is written whole or not at all (a temporary file renamed over it at the end)
    try:
        atomic = AtomicFile(output) if output else None
        out = atomic if atomic is not None else sys.stdout
    except OSError as exc:
        click.echo(safe(f"patchaudit: error: {output}: cannot write: {exc.strerror or exc}"), err=True)
        sys.exit(2)
    try:
        code = run_audit(
            list(files),
            tok,
            field=field,
            id_field=id_field,
            fmt=fmt,
            out=out,
            err=sys.stderr,
            top=top,
            all_samples=all_samples,
            summary_only=summary_only,
            progress_enabled=progress,
            out_is_terminal=output is None and sys.stdout.isatty(),
        )
    except BaseException:
        if atomic is not None:
            atomic.discard()
        raise
    if atomic is not None:
        try:
            atomic.commit()
        except OSError as exc:
            click.echo(safe(f"patchaudit: error: {output}: cannot write: {exc.strerror or exc}"), err=True)
            sys.exit(2)
    sys.exit(code)
