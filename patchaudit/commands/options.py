"""The `--engine` option of the commands: one parser of its forms.

`patchaudit check` and `patchaudit inventory` take `NAME=SOURCE` (or a bare
SOURCE, named "engine"), `patchaudit bump` takes `NAME` with an optional
`=REPO`; both accept `NAME:pN` to fix the patches' strip level.
"""

from __future__ import annotations

import os

import click

from patchaudit.config.settings import EngineSpec


def _strip_level(name: str, value: str, form: str) -> tuple[str, int | None]:
    """`NAME:pN` -> (NAME, N); `NAME` -> (NAME, None).  `form` is the option's form, for the message."""
    strip = None
    if ":p" in name:
        name, _, n = name.partition(":p")
        if not n.isdigit():
            raise click.BadParameter(f"bad strip level in {value!r} ({form})", param_hint="--engine")
        strip = int(n)
    return name, strip


def _looks_like_name(value: str) -> bool:
    """A bare `--engine` value that is an engine's name (`sglang`, `vllm:p1`), not a
    source: no path separator, no `@REV`, no archive suffix, and nothing of that name here."""
    base = value.partition(":p")[0]
    return (
        base.replace("-", "_").replace(".", "_").isidentifier()
        and not value.endswith((".whl", ".tar.gz", ".zip"))
        and not os.path.lexists(value)
    )


def parse_engine_option(value: str) -> EngineSpec:
    """`NAME=SOURCE`, `NAME:pN=SOURCE` or `SOURCE` (check, inventory) -> EngineSpec."""
    name, sep, source = value.partition("=")
    if not sep:
        if _looks_like_name(value):
            raise click.BadParameter(
                f"--engine NAME=SOURCE expected; did you mean --engine {value}=PATH? "
                f"({value!r} is not a file or folder)",
                param_hint="--engine",
            )
        name, source = "engine", value
    if not name or not source:
        raise click.BadParameter(f"expected NAME=SOURCE, got {value!r}", param_hint="--engine")
    if name.startswith("-") or source.startswith("-"):
        raise click.BadParameter(f"refusing {value!r}: looks like an option", param_hint="--engine")
    name, strip = _strip_level(name, value, "NAME:pN=SOURCE")
    return EngineSpec(name, source, strip)


def parse_engine_name(value: str) -> tuple[str, int | None, str | None]:
    """`NAME`, `NAME:pN`, `NAME=REPO`, `NAME:pN=REPO` (bump) -> (name, strip, repo)."""
    name, sep, repo = value.partition("=")
    name, strip = _strip_level(name, value, "NAME:pN")
    if not name or name.startswith("-") or (sep and (not repo or repo.startswith("-"))):
        raise click.BadParameter(f"expected NAME, NAME:pN or NAME=REPO, got {value!r}", param_hint="--engine")
    return name, strip, repo or None


def engine_resolve_options(f):
    """`--engine-dir DIR` (repeatable) and `--offline`: where an engine the plan names by
    version is looked for, and whether it may be downloaded (patchaudit/engine/resolve.py)."""
    f = click.option(
        "--offline",
        is_flag=True,
        help="Never download an engine the plan names by version (also PATCHAUDIT_OFFLINE=1, offline = true).",
    )(f)
    return click.option(
        "--engine-dir",
        "engine_dirs",
        multiple=True,
        type=click.Path(file_okay=False),
        metavar="DIR",
        help="A folder of engine wheels, sdists or git clones, searched by version before "
        "[tool.patchaudit] engine-dirs (repeatable).",
    )(f)
