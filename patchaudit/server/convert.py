"""Findings as the Language Server Protocol shows them: diagnostics, quick fixes, hovers.

- a diagnostic: the finding's region (1-based, end column exclusive: `Finding.region`)
  as an LSP range (0-based, in the client's position encoding: the document's codec
  converts code points to UTF-16 units), `code` the rule code, `codeDescription` the
  rule's section of docs/rules.md (the `helpUri` of SARIF; a local rule has none),
  `source` "patchaudit", the severity mapped (error, warning, info -> Information), the
  trace (PA102, PA103: each step's file and line) as `relatedInformation`;
- a file error (the file cannot be read or parsed, the configuration cannot be loaded):
  an error diagnostic at its line (the first line when it has none), code "E";
- a quick fix: the finding's fix (`pipeline.fix.effective_fix`: as its rule declares it)
  applied to the buffer's text as `--fix` applies it (`pipeline.fix.apply_edits`: a
  `.patch` gets its hunk headers recounted), sent as one edit of the lines that differ;
  a safe fix is the preferred `quickfix`, an unsafe one is titled so and not preferred;
- a hover on a finding's region: the rule's documentation, as `patchaudit explain` prints it.
"""

from __future__ import annotations

import os
from typing import Any

from lsprotocol import types as lsp

from patchaudit.model.findings import FileError, Finding, Fix

SOURCE = "patchaudit"

_SEVERITY = {
    "error": lsp.DiagnosticSeverity.Error,
    "warning": lsp.DiagnosticSeverity.Warning,
    "info": lsp.DiagnosticSeverity.Information,
}


def path_uri(path: str) -> str:
    from pathlib import Path

    return Path(os.path.abspath(path)).as_uri()


def uri_path(uri: str) -> str | None:
    """The file of a `file:` URI of a kind `check` reads, else None."""
    from pygls.uris import to_fs_path

    from patchaudit.inputs.discover import classify

    if not uri.startswith("file:"):
        return None
    path = to_fs_path(uri)
    if path is None or classify(path) is None:
        return None
    return os.path.abspath(path)


def _client_range(doc: Any, line: int, col: int, end_line: int, end_col: int) -> lsp.Range:
    """0-based (line, code point) bounds -> the client's range (its position encoding)."""
    from pygls.workspace.position_codec import ServerTextPosition, ServerTextRange

    line, end_line = max(0, line), max(0, end_line)
    if doc is None:
        return lsp.Range(lsp.Position(line, max(0, col)), lsp.Position(end_line, max(0, end_col)))
    server = ServerTextRange(ServerTextPosition(line, max(0, col)), ServerTextPosition(end_line, max(0, end_col)))
    return doc.range_to_client_units(server)


def _line_range(doc: Any, line: int) -> lsp.Range:
    """The text of 1-based `line` of `doc` (without its indentation), else its start."""
    lines = doc.lines if doc is not None else []
    if 1 <= line <= len(lines):
        text = lines[line - 1].rstrip("\r\n")
        start = len(text) - len(text.lstrip())
        return _client_range(doc, line - 1, start, line - 1, len(text))
    return _client_range(None, line - 1, 0, line - 1, 0)


def help_url(rule: Any) -> str | None:
    """The rule's section of docs/rules.md, for a rule of the pack (a local rule has none)."""
    if rule is None or not rule.__module__.startswith("patchaudit.rules."):
        return None
    from patchaudit.reporters.sarif import help_uri

    return help_uri(rule.code)


def diagnostic(f: Finding, doc: Any, rules: dict[str, Any], docs_of: Any = None) -> lsp.Diagnostic:
    """The diagnostic of finding `f` in the document `doc` (None: positions as they are).
    `docs_of(path)`: an open document of another file a trace step is in, or None."""
    line, col, end_line, end_col = f.region()
    related = []
    here = os.path.abspath(f.path)
    for step in f.trace:
        path = os.path.abspath(step.path)
        where = doc if path == here else (docs_of(path) if docs_of is not None else None)
        related.append(
            lsp.DiagnosticRelatedInformation(
                location=lsp.Location(uri=path_uri(path), range=_line_range(where, step.line)),
                message=step.note,
            )
        )
    url = help_url(rules.get(f.code))
    return lsp.Diagnostic(
        range=_client_range(doc, line - 1, col - 1, end_line - 1, end_col - 1),
        message=f.message,
        severity=_SEVERITY.get(f.severity.value, lsp.DiagnosticSeverity.Warning),
        code=f.code,
        code_description=lsp.CodeDescription(href=url) if url else None,
        source=SOURCE,
        related_information=related or None,
        data={"fingerprint": f.fingerprint} if f.fingerprint else None,
    )


def error_diagnostic(e: FileError, doc: Any, path: str) -> lsp.Diagnostic:
    """A file error as an error diagnostic: at its line when it is about the file `path`
    itself, else (the configuration, an engine file) at the first line, naming its file."""
    own = os.path.abspath(e.path) == os.path.abspath(path)
    where = "" if own else (f"{e.path}:{e.line}: " if e.line else f"{e.path}: ")
    return lsp.Diagnostic(
        range=_line_range(doc, (e.line or 1) if own else 1),
        message=where + e.message,
        severity=lsp.DiagnosticSeverity.Error,
        code="E",
        source=SOURCE,
    )


def in_region(f: Finding, line: int, col: int) -> bool:
    """Whether the 0-based (line, code point) position is in the finding's region (its
    end included, so that a hover at the end of a name still finds it)."""
    start_line, start_col, end_line, end_col = f.region()
    pos, start, end = (line + 1, col + 1), (start_line, start_col), (end_line, end_col)
    return start <= pos <= end


def overlaps(f: Finding, first: int, last: int) -> bool:
    """Whether the finding's lines meet 0-based lines `first`..`last`."""
    start_line, _, end_line, _ = f.region()
    return start_line - 1 <= last and first <= end_line - 1


def fix_edit(path: str, text: str, fix: Fix, doc: Any) -> lsp.TextEdit | None:
    """The fix applied to `text` as `--fix` applies it, as one edit of the lines that
    differ; None when it cannot be applied (or changes nothing)."""
    from patchaudit.pipeline.fix import apply_edits

    try:
        new = apply_edits(path, text, [fix])
    except (ValueError, IndexError):  # PatchEditError is a ValueError
        return None
    if new == text:
        return None
    old_lines, new_lines = text.splitlines(keepends=True), new.splitlines(keepends=True)
    head = 0
    while head < min(len(old_lines), len(new_lines)) and old_lines[head] == new_lines[head]:
        head += 1
    tail = 0
    while (
        tail < min(len(old_lines), len(new_lines)) - head
        and old_lines[len(old_lines) - 1 - tail] == new_lines[len(new_lines) - 1 - tail]
    ):
        tail += 1
    replaced = "".join(new_lines[head : len(new_lines) - tail])
    end = len(old_lines) - tail
    # the old lines head..end (exclusive) are replaced: from the start of line `head` to
    # the start of line `end` (past the last line: the end of the text)
    if end < len(old_lines) or not old_lines or old_lines[-1].endswith(("\n", "\r")):
        rng = _client_range(doc, head, 0, end, 0)
    else:
        last = old_lines[-1]
        rng = _client_range(doc, head, 0, end - 1, len(last))
    return lsp.TextEdit(range=rng, new_text=replaced)


def code_action(f: Finding, fix: Fix, edit: lsp.TextEdit, uri: str, diag: lsp.Diagnostic) -> lsp.CodeAction:
    what = fix.description or "apply the fix"
    title = f"Fix {f.code}: {what}" if fix.safe else f"Fix {f.code} (unsafe: changes behaviour): {what}"
    return lsp.CodeAction(
        title=title,
        kind=lsp.CodeActionKind.QuickFix,
        diagnostics=[diag],
        is_preferred=fix.safe,
        edit=lsp.WorkspaceEdit(changes={uri: [edit]}),
    )


def rule_markdown(rule: Any) -> str:
    """The rule's documentation as `patchaudit explain CODE` prints it, in Markdown."""
    needs = ", ".join(sorted(rule.needs)) or "nothing beyond the input"
    off = "" if rule.default_enabled else f" Off by default: enable with --select {rule.code}."
    head = f"# {rule.code} {rule.name}\n\nDefault severity: {rule.severity.value}. Needs: {needs}.{off}\n\n"
    url = help_url(rule)
    tail = f"\n\n[{rule.code} in the rule reference]({url})" if url else ""
    return head + rule.docs() + tail
