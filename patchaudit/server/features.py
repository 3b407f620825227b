"""The language server's handlers: what each LSP message does (lsp.py has the state)."""

from __future__ import annotations

from typing import Any

from lsprotocol import types as lsp

from patchaudit.server import convert


def register(server: Any) -> None:
    """Register every handler on `server` (a `lsp.PatchauditServer`)."""

    @server.feature(lsp.INITIALIZE)
    def initialize(params: lsp.InitializeParams) -> None:
        options = params.initialization_options
        value = options.get("debounce") if isinstance(options, dict) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 60:
            server.debounce = float(value)

    @server.feature(lsp.INITIALIZED)
    async def initialized(params: lsp.InitializedParams) -> None:
        await watch_python_files(server)

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(params: lsp.DidOpenTextDocumentParams) -> None:
        if convert.uri_path(params.text_document.uri) is not None:
            server.schedule(params.text_document.uri, 0)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(params: lsp.DidChangeTextDocumentParams) -> None:
        if convert.uri_path(params.text_document.uri) is not None:
            server.schedule(params.text_document.uri, server.debounce)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(params: lsp.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        path = convert.uri_path(uri)
        if path is None:
            return
        server.schedule(uri, 0)
        if path.endswith(".py"):
            await server.refresh(path)

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    async def did_change_files(params: lsp.DidChangeWatchedFilesParams) -> None:
        done = set()  # one refresh per project, however many of its files changed
        for change in params.changes:
            path = convert.uri_path(change.uri)
            if path is None or not path.endswith(".py"):
                continue
            key = server.key_of(path)
            if key is not None and key not in done:
                done.add(key)
                await server.refresh(path)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(params: lsp.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        handle = server.pending.pop(uri, None)
        if handle is not None:
            handle.cancel()
        if server.shown.pop(uri, None) is not None:
            server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(
        lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix])
    )
    def code_action(params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        return code_actions(server, params)

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def hover(params: lsp.HoverParams) -> lsp.Hover | None:
        return hover_at(server, params.text_document.uri, params.position)

    @server.feature(lsp.SHUTDOWN)
    def shutdown(params: Any) -> None:
        server.shut_down = True
        server.close(wait=0)  # exit comes next: `serve` gives a running check its time then


async def watch_python_files(server: Any) -> None:
    """A Python file changed on disk (a checkout, another tool) moves the summaries too:
    asked of a client that can watch files for the server."""
    caps = server.client_capabilities.workspace
    watch = caps.did_change_watched_files if caps is not None else None
    if watch is None or not watch.dynamic_registration:
        return
    options = lsp.DidChangeWatchedFilesRegistrationOptions(watchers=[lsp.FileSystemWatcher(glob_pattern="**/*.py")])
    registration = lsp.Registration(
        id="patchaudit-python-files", method=lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES, register_options=options
    )
    try:
        await server.client_register_capability_async(lsp.RegistrationParams(registrations=[registration]))
    except Exception:  # a client that refuses: the summaries follow the saved files only
        return


def code_actions(server: Any, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    """The quick fixes of the findings whose lines meet the requested range."""
    from patchaudit.pipeline.fix import effective_fix

    uri = params.text_document.uri
    shown = server.current(uri)
    if shown is None:
        return []
    if params.context.only and not any(k.startswith(lsp.CodeActionKind.QuickFix) for k in params.context.only):
        return []
    doc = server.workspace.text_documents.get(uri)
    first, last = params.range.start.line, params.range.end.line
    out = []
    for f, diag in zip(shown.checked.findings, shown.diagnostics):
        if not convert.overlaps(f, first, last):
            continue
        fix = effective_fix(f, shown.checked.rules)
        if fix is None:
            continue
        edit = convert.fix_edit(shown.path, shown.text, fix, doc)
        if edit is not None:
            out.append(convert.code_action(f, fix, edit, uri, diag))
    out.sort(key=lambda a: not a.is_preferred)  # the safe fixes first
    return out


def hover_at(server: Any, uri: str, position: lsp.Position) -> lsp.Hover | None:
    """The documentation of the rules whose findings cover `position`."""
    shown = server.current(uri)
    doc = server.workspace.text_documents.get(uri)
    if shown is None or doc is None:
        return None
    at = doc.position_from_client_units(position)
    seen: list[str] = []
    parts = []
    for f in shown.checked.findings:
        rule = shown.checked.rules.get(f.code)
        if rule is None or f.code in seen or not convert.in_region(f, at.line, at.character):
            continue
        seen.append(f.code)
        parts.append(convert.rule_markdown(rule))
    if not parts:
        return None
    return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value="\n\n---\n\n".join(parts)))
