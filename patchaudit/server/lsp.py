"""`patchaudit server`: the language server (pygls, over stdio).

What it does with a document (a `file:` URI of a kind `check` reads: `.py`,
`.patch`/`.diff`, and the build files it knows):

- on `didOpen`, on `didChange` (debounced: the check starts `debounce` seconds after
  the last change; `--debounce`, or the client's `initializationOptions.debounce`) and
  on `didSave`: the buffer's text is checked (`project.Project.check`, the per-file job
  of `check -`, with the project's configuration) and its diagnostics are published
  with the document version they were computed on; a result for a version the editor
  has already moved past is dropped (a newer check is due);
- on `didSave` (and `workspace/didChangeWatchedFiles` for a Python file): the project's
  whole-repository summaries follow the file on disk, then every open document of the
  project is checked again (what it sees of the others may have changed);
- `textDocument/codeAction`: the quick fixes of the findings in the range
  (convert.py: the safe ones preferred, the unsafe ones titled so);
- `textDocument/hover` on a finding's region: its rule's documentation.

The checks run one at a time in one worker thread (the analysis keeps per-process
state: the parse limit, the observed reads, the local rules), so the server keeps
answering (hover, code actions, shutdown) while one runs.
"""

from __future__ import annotations

import asyncio
import logging
import os
from asyncio import CancelledError
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass, field
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer

from patchaudit import __version__
from patchaudit.model.findings import FileError
from patchaudit.server import convert
from patchaudit.server.project import Checked, Project, project_key

#: seconds after the last change before a changed buffer is checked
DEFAULT_DEBOUNCE = 0.3
#: seconds a check still running at exit is waited for
EXIT_WAIT = 2.0

log = logging.getLogger("patchaudit.server")


@dataclass
class Shown:
    """The diagnostics published for a document: the text and version they were computed
    on, and the findings behind them (what code actions and hovers read)."""

    version: int | None
    text: str
    path: str
    checked: Checked
    #: the project's summaries' generation the check saw (`Project.generation`)
    generation: int = 0
    diagnostics: list[lsp.Diagnostic] = field(default_factory=list)


class PatchauditServer(LanguageServer):
    def __init__(self, debounce: float = DEFAULT_DEBOUNCE, config: str | None = None, no_cache: bool = False):
        super().__init__("patchaudit", __version__, text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental)
        self.debounce = debounce
        self.config = config
        self.no_cache = no_cache
        self.projects: dict[tuple[str, str | None], Project] = {}
        self.shown: dict[str, Shown] = {}
        self.pending: dict[str, asyncio.TimerHandle] = {}
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="patchaudit-check")
        self.shut_down = False  # a `shutdown` request came (the exit code is then 0)
        self.running: Future | None = None  # the worker's latest job
        self.warming: set[str] = set()  # the projects whose summaries are (being) computed
        self.announced: set[str] = set()  # the projects whose warnings were logged

    # -- projects and checks (in the worker thread) --------------------------------------

    def project_for(self, path: str) -> Project:
        key = project_key(path, self.config)
        project = self.projects.get(key)
        if project is None:
            project = self.projects[key] = Project(key[0], key[1], self.no_cache)
        return project

    def key_of(self, path: str) -> tuple[str, str | None] | None:
        """The project of `path`, or None when it cannot be told (an unreadable
        pyproject.toml: the check says why)."""
        try:
            return project_key(path, self.config)
        except Exception:
            return None

    def _check(self, path: str, text: str) -> Checked:
        # the project names the file as `check` run in its folder would; the findings come
        # back with absolute paths (the URIs)
        from patchaudit.config.settings import ConfigError

        try:
            return self.project_for(path).check(path, text)
        except ConfigError as exc:  # a pyproject.toml that cannot be read, on the way up
            return Checked(errors=[FileError(path, str(exc))])
        except Exception as exc:  # a bug must cost this check, never the server
            log.exception("checking %s", path)
            return Checked(errors=[FileError(path, f"internal error: {exc!r}")])

    def _refresh(self, path: str) -> None:
        try:
            self.project_for(path).refresh(path)
        except Exception:  # the summaries stay as they were; the checks go on
            log.exception("refreshing the summaries after %s changed", path)

    # -- scheduling (in the event loop) --------------------------------------------------

    def schedule(self, uri: str, delay: float) -> None:
        """Check the document `delay` seconds from now (a check already due is replaced)."""
        old = self.pending.pop(uri, None)
        if old is not None:
            old.cancel()
        loop = asyncio.get_running_loop()
        self.pending[uri] = loop.call_later(max(0.0, delay), lambda: loop.create_task(self.run_check(uri)))

    async def run_check(self, uri: str) -> None:
        self.pending.pop(uri, None)
        doc = self.workspace.text_documents.get(uri)
        path = convert.uri_path(uri)
        if doc is None or path is None:
            return
        version, text = doc.version, doc.source
        key = self.key_of(path)
        project = self.projects.get(key) if key is not None else None
        generation = project.generation if project is not None else 0
        old = self.shown.get(uri)
        if old is not None and old.text == text and old.generation == generation and project is not None:
            # the same text under the same summaries (saved after its check, an undo): the same findings
            self.publish(uri, Shown(version, text, path, old.checked, generation))
            return
        try:
            checked = await self.in_worker(self._check, path, text)
        except (RuntimeError, CancelledError):  # the worker was shut down: the server is exiting
            return
        doc = self.workspace.text_documents.get(uri)
        if doc is None or doc.version != version:  # closed, or changed since: a newer check is due
            return
        key = self.key_of(path)
        project = self.projects.get(key) if key is not None else None
        self.publish(uri, Shown(version, text, path, checked, project.generation if project is not None else 0))
        if project is not None and project.root not in self.announced:
            self.announced.add(project.root)  # (the engines' warnings: once per project)
            for warning in project.warnings:
                self.window_log_message(lsp.LogMessageParams(lsp.MessageType.Warning, f"patchaudit: {warning}"))
        if checked.partial and project is not None:
            await self.warm(project, path)

    async def warm(self, project: Project, path: str) -> None:
        """The project's whole-repository summaries (once; `Project.prepare`), then every
        open document of the project checked again with them."""
        if project.root in self.warming:
            return
        self.warming.add(project.root)
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            modules = await self.in_worker(project.prepare, path)
        except (RuntimeError, CancelledError):
            return
        except Exception:  # the files stay judged alone
            log.exception("the whole-repository summaries of %s", project.root)
            return
        self.window_log_message(
            lsp.LogMessageParams(
                lsp.MessageType.Info,
                f"patchaudit: whole-repository summaries ready for {project.root} "
                f"({modules} modules, {loop.time() - started:.1f} s)",
            )
        )
        self.recheck(project.root)

    def recheck(self, root: str) -> None:
        """Check again every open document of the project in folder `root`."""
        for uri in list(self.workspace.text_documents):
            other = convert.uri_path(uri)
            key = self.key_of(other) if other is not None else None
            if key is not None and key[0] == root:
                self.schedule(uri, 0)

    async def refresh(self, path: str) -> None:
        """A file changed on disk: the summaries follow it, every open document of its
        project is checked again."""
        key = self.key_of(path)
        project = self.projects.get(key) if key is not None else None
        before = project.generation if project is not None else None
        try:
            await self.in_worker(self._refresh, path)
        except (RuntimeError, CancelledError):
            return
        if project is None or project.generation == before:  # the summaries did not change
            return
        self.recheck(project.root)

    def publish(self, uri: str, shown: Shown) -> None:
        doc = self.workspace.text_documents.get(uri)
        rules = shown.checked.rules
        shown.diagnostics = [convert.diagnostic(f, doc, rules, self.open_document) for f in shown.checked.findings]
        errors = [convert.error_diagnostic(e, doc, shown.path) for e in shown.checked.errors]
        self.shown[uri] = shown
        self.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=uri, diagnostics=shown.diagnostics + errors, version=shown.version)
        )

    def open_document(self, path: str) -> Any:
        return self.workspace.text_documents.get(convert.path_uri(path))

    def current(self, uri: str) -> Shown | None:
        """What is shown for the document, if it was computed on its current text."""
        shown = self.shown.get(uri)
        doc = self.workspace.text_documents.get(uri)
        if shown is None or doc is None or doc.version != shown.version or doc.source != shown.text:
            return None
        return shown

    async def in_worker(self, fn, *args):
        """`fn(*args)` in the worker thread (checks run one at a time)."""
        future = self.worker.submit(fn, *args)
        self.running = future
        return await asyncio.wrap_future(future)

    def close(self, wait: float = EXIT_WAIT) -> None:
        """Stop: the checks not started are dropped, the one running is given `wait`
        seconds to end (a cold pre-pass of a large repository may take longer: the process
        then exits without it: `leave`), the server's own cache folders are removed."""
        for handle in self.pending.values():
            handle.cancel()
        self.pending.clear()
        self.worker.shutdown(wait=False, cancel_futures=True)
        if self.running is not None:
            futures_wait([self.running], timeout=wait)
        for project in self.projects.values():  # (a check still running is abandoned: its writes may fail)
            project.close()


def build_server(debounce: float = DEFAULT_DEBOUNCE, config: str | None = None, no_cache: bool = False):
    """The server with its handlers (see the module docstring)."""
    from patchaudit.server.features import register

    server = PatchauditServer(debounce, config, no_cache)
    register(server)
    return server


def serve(debounce: float = DEFAULT_DEBOUNCE, config: str | None = None, no_cache: bool = False) -> int:
    """Run the server on stdin/stdout until the client says exit; the exit code (the
    protocol's: 0 after a `shutdown` request, else 1).

    The protocol gets its own copy of the standard output, and file descriptor 1 then
    points at standard error: a stray print (of a library, of a rule) cannot corrupt the
    stream of messages, and the process's own stdout stays open when the protocol's is
    closed at exit."""
    import sys

    server = build_server(debounce, config, no_cache)
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    try:
        server.start_io(sys.stdin.buffer, out)
    finally:
        server.close()
    return 0 if server.shut_down else 1


def leave(code: int) -> None:
    """End the process now: a check still running in the worker thread (the pre-pass of a
    large repository) is not waited for; the streams are flushed first."""
    import sys

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
