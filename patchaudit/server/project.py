"""A project as the language server keeps it warm: its configuration, rules, engines,
tokenizer and whole-repository summaries, and the check of one buffer.

A project is the folder of the `pyproject.toml` with a `[tool.patchaudit]` table found
from a file (`config.settings.find_pyproject`, as `check` finds it), else the file's
project root (`pipeline.repo_index.project_root`: the nearest folder holding a
`pyproject.toml`, `setup.py`, `setup.cfg` or `.git`).  Its settings are loaded once,
as `check` loads them (the cache options of the environment applied, the local rules
of its `extend-rules` made the run's before each of its checks).

A buffer is checked as `patchaudit check - --stdin-filename NAME` checks standard input
(`pipeline.stdin.check_bytes`: the same per-file job, rules, suppressions, per-file
ignores and severities), with the project's rules, engines and tokenizer kept open.

The whole-repository pre-pass of the dataflow rules (PA102, `pipeline.repo_index`) runs
once (`prepare`, after the first Python file was checked alone: its findings do not wait
for a cold pre-pass) and sets its summaries on the settings, where the per-file job
finds them.  When a file of the project is saved (or changed on disk),
`refresh` runs the pre-pass again with its cache: only the changed module (and the
modules whose view of it changed) is summarised again.  With the project's cache off
(`cache = false`, `PATCHAUDIT_NO_CACHE`), the server keeps the pre-pass's cache in a
folder of its own, removed when it exits, so nothing is written into the project.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator

from patchaudit.model.findings import FileError, Finding


@dataclass
class Checked:
    """One buffer's check: its findings and errors (a file that cannot be read or parsed,
    a configuration that cannot be loaded), and the rules they came from (their fixes)."""

    findings: list[Finding] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    rules: dict[str, Any] = field(default_factory=dict)
    #: checked before the project's whole-repository summaries were ready (the file judged
    #: alone, as with `whole-repository = false`): `Project.prepare` is due
    partial: bool = False


def project_key(path: str, config: str | None = None) -> tuple[str, str | None]:
    """(the project's folder, its configuration file or None) for a file at `path`."""
    from patchaudit.config.settings import find_pyproject
    from patchaudit.pipeline.repo_index import project_root

    # as `check` run in the file's folder: the editor opened that project (a nested one too)
    cfg = config or find_pyproject([path], cwd=os.path.dirname(os.path.abspath(path)))
    if cfg is not None:
        return os.path.dirname(os.path.abspath(cfg)), str(cfg)
    return project_root(path), None


class Project:
    """The warm state of one project (see the module docstring)."""

    def __init__(self, root: str, config: str | None, no_cache: bool = False):
        self.root = root
        self.config = config
        self.no_cache = no_cache
        self.lock = threading.Lock()
        self.problem: FileError | None = None
        self.settings: Any = None
        self.rules: list = []
        self.engines: Any = None
        self.tokenizer: Any = None
        self.warnings: list[str] = []
        self._local: dict[str, Any] = {}
        self._metas: list = []
        self._cache_root: Any = None
        self._own_cache: str | None = None
        self._repo_ready = False
        #: bumped when the summaries change: the open documents' findings may then change
        self.generation = 0
        self._repo_errors: list[FileError] = []
        self._load()

    def _load(self) -> None:
        from patchaudit.config.local_rules import LOCAL, activate
        from patchaudit.config.settings import ConfigError, Settings, apply_cache_options, load_pyproject
        from patchaudit.pipeline.results import RunError

        try:
            if self.config is not None:
                settings = load_pyproject(self.config)  # its extend-rules become the run's local rules
            else:
                settings = Settings()
                activate({})
            self._local = dict(LOCAL)
            apply_cache_options(settings, no_cache=self.no_cache)
            self.settings = settings
            self._open()
        except (ConfigError, RunError) as exc:
            self.problem = FileError(self.config or self.root, str(exc))

    def _open(self) -> None:
        from patchaudit import __version__
        from patchaudit.config.registry import rule_index, select_codes
        from patchaudit.pipeline.cache import cache_root, ensure_root
        from patchaudit.pipeline.context import engine_warnings, load_tokenizer, open_engines
        from patchaudit.pipeline.results import RunError
        from patchaudit.pipeline.run_rules import resolve_rules

        settings = self.settings
        root = cache_root(settings) if settings.cache else None
        if root is not None and not ensure_root(root):
            root = None
        if root is None:  # the project's cache is off or refused: the pre-pass keeps one of the server's
            from pathlib import Path

            self._own_cache = tempfile.mkdtemp(prefix="patchaudit-server-")
            root = Path(self._own_cache)
        self._cache_root = root
        index = rule_index(str(root / __version__))
        try:
            codes = select_codes(index, settings.select, settings.ignore, settings.extend_select)
        except KeyError as exc:
            raise RunError(f"unknown rule code or prefix {exc.args[0]!r} (see `patchaudit rules`)") from None
        self._metas = [index[c] for c in codes]
        self.rules = resolve_rules(settings)
        self.engines = open_engines(settings)
        self.warnings = engine_warnings(self.engines)
        self.tokenizer = load_tokenizer(settings)

    def close(self) -> None:
        if self._own_cache is not None:
            shutil.rmtree(self._own_cache, ignore_errors=True)
            self._own_cache = None

    def _activate(self) -> None:
        from patchaudit.config.local_rules import activate

        activate(self._local)

    def _prepare(self, path: str) -> None:
        """The whole-repository pre-pass from `path` (pipeline/repo_index.py), as `check
        PATH` runs it: the project root found from the file, its Python files listed."""
        from patchaudit.inputs.discover import PYTHON, SourceFile
        from patchaudit.pipeline.parallel import scan_jobs
        from patchaudit.pipeline.repo_index import forget_kept, prepare_repo

        settings = self.settings
        if not settings.whole_repository:
            return
        errors: list[FileError] = []
        # the cache of the pre-pass is read and written even when the project turned the
        # result cache off: `settings.cache` is what decides that, so it is set for the call
        cache_on = settings.cache
        settings.cache = True
        try:
            # (a file deleted from the project: its root is still found from its path)
            files = [SourceFile(path, PYTHON)] if os.path.isfile(path) else []
            prepare_repo([path], files, settings, self._metas, self._cache_root, scan_jobs(settings), errors)
        finally:
            settings.cache = cache_on
            forget_kept()  # the modules parsed for the scan's hand-over: the server has no scan
        self._repo_errors = errors
        self._repo_ready = True

    def refresh(self, path: str) -> None:
        """A file of the project (absolute `path`) changed on disk: the summaries follow (its
        module, and the modules whose view of it changed, are summarised again; the rest
        comes from the cache)."""
        if self.settings is None or not self._repo_ready:
            return
        with self.lock, in_folder(self.root):
            self._activate()
            before = self._summaries_digest()
            self._prepare(self.name(path))
            if self._summaries_digest() != before:
                self.generation += 1

    def prepare(self, path: str) -> int:
        """The whole-repository summaries, computed from the Python file `path` (absolute)
        found the project: once, after the first check of one (`Checked.partial`).  The
        number of modules summarised."""
        if self.settings is None or self._repo_ready:
            return 0
        with self.lock, in_folder(self.root):
            self._activate()
            self._prepare(self.name(path))
            self._repo_ready = True  # (also with whole-repository = false: nothing to prepare)
            self.generation += 1
        return sum(len(v.summaries) for v in (getattr(self.settings, "repo", None) or {}).values())

    def _summaries_digest(self) -> bytes:
        """What the summaries say, traces included (a step's line moves with its module)."""
        import hashlib

        h = hashlib.blake2b(digest_size=16)
        for code, view in sorted((getattr(self.settings, "repo", None) or {}).items()):
            h.update(code.encode())
            for path in sorted(view.summaries):
                h.update(repr((path, view.summaries[path])).encode("utf-8", "surrogateescape"))
        return h.digest()

    def name(self, path: str) -> str:
        """The file as `check` run in the project's folder names it (so that per-file-ignores
        globs match alike): relative to the folder when inside it."""
        top = self.root.rstrip(os.sep) + os.sep
        return os.path.relpath(path, self.root) if path.startswith(top) else path

    def check(self, path: str, text: str) -> Checked:
        """The findings of the buffer `text` of the file `path` (absolute), as `check` run in
        the project's folder reports them; their paths (and their trace's) made absolute."""
        if self.problem is not None:
            return Checked(errors=[self.problem])
        with self.lock, in_folder(self.root):
            got = self._check(self.name(path), text)
            findings, errors = [_absolute(f) for f in got.findings], [_absolute_error(e) for e in got.errors]
            return Checked(findings, errors, got.rules, got.partial)

    def _check(self, path: str, text: str) -> Checked:
        from patchaudit.inputs.discover import PYTHON, classify
        from patchaudit.pipeline.results import RunError
        from patchaudit.pipeline.stdin import check_bytes

        self._activate()
        # the first Python file's findings are not kept waiting for the summaries (a cold
        # pre-pass of a large repository takes seconds): it is judged alone, then again
        partial = not self._repo_ready and self.settings.whole_repository and classify(path) == PYTHON
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate the client sent: no UTF-8 text
            line = text.count("\n", 0, exc.start) + 1
            return Checked(errors=[FileError(path, f"not UTF-8: {exc.reason} (U+{ord(text[exc.start]):04X})", line)])
        limit = self.settings.max_file_size
        if len(data) > limit:  # as the guarded reader refuses a file, or standard input, over it
            message = f"file is {len(data)} bytes, over the limit of {limit} (max-file-size)"
            return Checked(errors=[FileError(path, message)])
        try:
            result = check_bytes(data, path, self.settings, self.rules, self.engines, self.tokenizer)
        except RunError as exc:
            return Checked(errors=[FileError(path, str(exc))])
        here = os.path.abspath(path)
        errors = list(result.errors) + [e for e in self._repo_errors if os.path.abspath(e.path) == here]
        return Checked(result.findings, errors, {r.code: r for r in self.rules}, partial)


@contextlib.contextmanager
def in_folder(folder: str) -> Iterator[None]:
    """The current folder is `folder` for the block (a project's relative paths, its
    default cache folder, are what they are for `check` run there).  Only the server's
    one worker thread runs a project's work, and nothing else reads the current folder."""
    before = os.getcwd()
    try:
        os.chdir(folder)
    except OSError:  # gone since it was found: the paths are absolute, the run goes on here
        yield
        return
    try:
        yield
    finally:
        os.chdir(before)


def _absolute(f: Finding) -> Finding:
    f.path = os.path.abspath(f.path)
    f.trace = [dataclasses.replace(s, path=os.path.abspath(s.path)) for s in f.trace]
    return f


def _absolute_error(e: FileError) -> FileError:
    return dataclasses.replace(e, path=os.path.abspath(e.path))
