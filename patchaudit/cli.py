"""The `patchaudit` command line (click).

Subcommands live in `patchaudit/commands/` and are imported only when used, so
`patchaudit check` on one file does not pay for what `bump` or `tokens` import.
"""

from __future__ import annotations

import importlib
import importlib.util

import click

from patchaudit import __version__

COMMANDS = {
    "check": ("patchaudit.commands.check", "check"),
    "bump": ("patchaudit.commands.bump", "bump"),
    "plan": ("patchaudit.commands.plan", "plan"),
    "port": ("patchaudit.commands.port", "port"),
    "inventory": ("patchaudit.commands.inventory", "inventory"),
    "tokens": ("patchaudit.commands.tokens", "tokens"),
    "rules": ("patchaudit.commands.rules", "rules_cmd"),
    "explain": ("patchaudit.commands.rules", "explain"),
    "test-rules": ("patchaudit.commands.test_rules", "test_rules"),
    "server": ("patchaudit.commands.server", "server"),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return [name for name, (mod, _) in COMMANDS.items() if importlib.util.find_spec(mod) is not None]

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        mod, attr = COMMANDS[name]
        if importlib.util.find_spec(mod) is None:
            return None
        return getattr(importlib.import_module(mod), attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="patchaudit")
def main() -> None:
    """Lint and audit patch sets carried against inference engines, and the RL
    rollout code that talks to them (token-in, token-out)."""


def run() -> None:
    """The console script: `main`, then a hard exit.

    Once the output is written and flushed, tearing the interpreter down (freeing
    every parsed tree, cached result and libcst class one by one) only delays the
    exit a pre-commit hook waits for, so the process ends there, as mypy does
    (`mypy.util.hard_exit`).  Nothing is left to run: the worker pool is shut down,
    the cache written, and files are closed by the commands themselves.

    The cyclic garbage collector runs less often, as in mypy (its `tune_gc`): a run
    builds hundreds of thousands of libcst nodes that live until their file is done,
    and with the default thresholds the collector walks them again and again (on
    SGLang with one job, about a tenth of the run, for some 15 MB more at the peak)."""
    import gc
    import os
    import sys
    import threading

    from patchaudit.files.tempdirs import run_scope

    gc.set_threshold(200_000, 30, 30)
    try:
        # the run's temporary folders (git engines' private git directories) are removed
        # here on every path, signals included, before the hard exit below skips finalizers
        with run_scope():
            main()
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:  # pragma: no cover - click turns it into an Abort
        code = 130
    else:  # pragma: no cover - click always exits
        code = 0
    if isinstance(code, str):
        from patchaudit.model.escape import safe

        sys.stderr.write(safe(code) + "\n")
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe (`patchaudit check . | head`)
        code = code or 1
    if threading.active_count() > 1 or sys.gettrace() is not None or sys.getprofile() is not None:
        # a thread still running, or a profiler or coverage tool that writes its data at
        # exit (`python -m cProfile -m patchaudit ...`): exit the normal way
        sys.exit(code)
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)


if __name__ == "__main__":  # pragma: no cover
    run()
