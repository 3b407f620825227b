"""`patchaudit server` with a real LSP client over stdio (pygls's `LanguageClient` starting
`python -m patchaudit server` as a subprocess), in a tmp project with a pyproject.toml.

One server process for the module; each test opens its own document.  Nothing here
asserts a time: waits are bounded only so that a broken server fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

from rules._pa102_examples import SEED_SHAPE

#: bounds on waits (a broken server fails the test instead of hanging it)
WAIT = 120.0
#: the debounce the server is started with: long enough that two quick changes are one check
DEBOUNCE = 1.0

PA101_FUNC = """

class Processor:
    async def process(self, text, input_ids):
        return await self.legacy_load_mm_data(prompt=text)
"""

PATCH_PA101 = """\
--- a/python/sglang/srt/multimodal/processors/qwen_vl.py
+++ b/python/sglang/srt/multimodal/processors/qwen_vl.py
@@ -1,3 +1,3 @@
 async def process(self, text):
-    base_output = await self.load_mm_data(prompt=text)
+    base_output = await self.legacy_load_mm_data(prompt=text)
     return base_output
"""


#: a module whose function returns the processor's ids (expanded) or the tokenizer's
DATASET_EXPANDED = """\
def row_ids(processor, row):
    return processor(text=row["text"], images=row["images"])["input_ids"][0].tolist()
"""
DATASET_CLEAN = """\
def row_ids(processor, row):
    return processor.tokenizer.encode(row["text"])
"""
#: a module that sends what `row_ids` returns to the engine with the images
SENDER = """\
from rl.dataset import row_ids


async def generate(url, processor, row):
    ids = row_ids(processor, row)
    payload = {"input_ids": ids, "image_data": row["images"]}
    return await post(url, payload)
"""


#: a second file section after the PA101's: the fix (the rename reverted) keeps it alone
PATCH_OTHER = """\
--- a/python/other.py
+++ b/python/other.py
@@ -1,2 +1,2 @@
 x = 1
-y = 2
+y = 3
"""


class Session:
    """The client, its event loop, and the diagnostics the server published (by URI)."""

    def __init__(self, root: Path):
        self.root = root
        self.loop = asyncio.new_event_loop()
        self.client = LanguageClient("patchaudit-test", "0")
        self.published: dict[str, list[lsp.PublishDiagnosticsParams]] = {}
        self.changed = asyncio.Event()
        self.versions: dict[str, int] = {}

        @self.client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(params: lsp.PublishDiagnosticsParams) -> None:
            self.published.setdefault(params.uri, []).append(params)
            self.changed.set()

        self.registrations: list[lsp.Registration] = []

        @self.client.feature(lsp.CLIENT_REGISTER_CAPABILITY)
        def on_register(params: lsp.RegistrationParams) -> None:
            self.registrations.extend(params.registrations)
            self.changed.set()

        @self.client.feature(lsp.WINDOW_LOG_MESSAGE)
        def on_log(params: lsp.LogMessageParams) -> None:
            pass

    def run(self, coro):
        return self.loop.run_until_complete(asyncio.wait_for(coro, WAIT))

    def start(self) -> None:
        async def go():
            await self.client.start_io(
                sys.executable, "-m", "patchaudit", "server", "--debounce", str(DEBOUNCE), cwd=str(self.root)
            )
            return await self.client.initialize_async(
                lsp.InitializeParams(
                    capabilities=lsp.ClientCapabilities(
                        workspace=lsp.WorkspaceClientCapabilities(
                            did_change_watched_files=lsp.DidChangeWatchedFilesClientCapabilities(
                                dynamic_registration=True
                            )
                        )
                    ),
                    root_uri=self.root.as_uri(),
                    workspace_folders=[lsp.WorkspaceFolder(uri=self.root.as_uri(), name="demo")],
                )
            )

        self.capabilities = self.run(go()).capabilities
        self.client.initialized(lsp.InitializedParams())

    def open(self, path: Path, text: str, language: str = "python") -> str:
        uri = path.as_uri()
        self.versions[uri] = 1
        self.client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri=uri, language_id=language, version=1, text=text))
        )
        return uri

    def change(self, uri: str, changes: list) -> int:
        self.versions[uri] += 1
        self.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
                content_changes=changes,
            )
        )
        return self.versions[uri]

    def diagnostics(self, uri: str, version: int | None = None) -> list[lsp.Diagnostic]:
        """The first diagnostics published for `uri` at `version` (the current one if None)."""
        want = self.versions[uri] if version is None else version

        async def wait():
            while True:
                for p in self.published.get(uri, []):
                    if p.version == want:
                        return p.diagnostics
                self.changed.clear()
                await self.changed.wait()

        return self.run(wait())

    def latest(self, uri: str, check) -> list[lsp.Diagnostic]:
        """The diagnostics of `uri` once the latest published satisfy `check`."""

        async def wait():
            while True:
                got = self.published.get(uri)
                if got and check(got[-1].diagnostics):
                    return got[-1].diagnostics
                self.changed.clear()
                await self.changed.wait()

        return self.run(wait())

    def stop(self) -> int | None:
        async def go():
            await self.client.shutdown_async(None)
            self.client.exit(None)
            await self.client.stop()

        self.run(go())
        server = self.client._server
        code = server.returncode if server is not None else None
        self.loop.close()
        return code


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    root = tmp_path_factory.mktemp("project")
    (root / "pyproject.toml").write_text('[project]\nname = "demo"\n\n[tool.patchaudit]\n')
    (root / "rollout.py").write_text(SEED_SHAPE + PA101_FUNC)
    (root / "rl").mkdir()
    (root / "rl" / "__init__.py").write_text("")
    (root / "rl" / "dataset.py").write_text(DATASET_CLEAN)
    (root / "rl" / "sender.py").write_text(SENDER)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    s = Session(root)
    s.start()
    yield s
    if s.client._server is not None and s.client._server.returncode is None:
        s.stop()


def _by_code(diags: list[lsp.Diagnostic]) -> dict[str, lsp.Diagnostic]:
    return {str(d.code): d for d in diags}


def test_capabilities(session):
    caps = session.capabilities
    assert caps.code_action_provider
    assert caps.hover_provider
    assert caps.text_document_sync is not None

    async def registered():  # the server asks to be told of Python files changed on disk
        while not session.registrations:
            session.changed.clear()
            await session.changed.wait()
        return session.registrations

    (reg,) = session.run(registered())
    assert reg.method == lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES
    assert [w["globPattern"] for w in reg.register_options["watchers"]] == ["**/*.py"]  # LSPAny: JSON


def test_pa101_pa102_with_trace_then_quick_fix(session):
    path = session.root / "rollout.py"
    text = path.read_text()
    uri = session.open(path, text)
    got = _by_code(session.diagnostics(uri))
    assert {"PA101", "PA102"} <= set(got), got
    pa101, pa102 = got["PA101"], got["PA102"]
    lines = text.splitlines()
    assert "legacy_load_mm_data" in lines[pa101.range.start.line]
    assert pa101.source == "patchaudit" and pa101.severity == lsp.DiagnosticSeverity.Error
    assert pa102.code_description is not None and pa102.code_description.href.endswith("#pa102")
    # the trace: each step's file and line, the first the processor call, the last the request
    steps = pa102.related_information
    assert steps and len(steps) >= 3
    assert all(s.location.uri == uri for s in steps)
    assert "processor(" in lines[steps[0].location.range.start.line]
    assert steps[0].location.range.start.character == lines[steps[0].location.range.start.line].index(
        "processor_output"
    )
    assert "input_ids" in lines[steps[-1].location.range.start.line]

    # the quick fix of the PA101 (unsafe without an engine: it passes the `input_ids` in scope)
    actions = session.run(
        session.client.text_document_code_action_async(
            lsp.CodeActionParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri),
                range=pa101.range,
                context=lsp.CodeActionContext(diagnostics=[pa101]),
            )
        )
    )
    fixes = [a for a in actions if isinstance(a, lsp.CodeAction) and a.diagnostics and a.diagnostics[0].code == "PA101"]
    assert len(fixes) == 1, actions
    fix = fixes[0]
    assert fix.kind == lsp.CodeActionKind.QuickFix
    assert "unsafe" in fix.title and not fix.is_preferred
    edits = fix.edit.changes[uri]
    assert len(edits) == 1 and "input_ids=input_ids" in edits[0].new_text

    # applied by the editor: the change goes to the server, the PA101 goes, the PA102 stays
    version = session.change(uri, [lsp.TextDocumentContentChangePartial(range=edits[0].range, text=edits[0].new_text)])
    after = _by_code(session.diagnostics(uri, version))
    assert "PA101" not in after and "PA102" in after


def test_debounced_changes_are_one_check(session):
    path = session.root / "second.py"
    text = "class P:\n    async def f(self, text, input_ids):\n        return 1\n"
    uri = session.open(path, text)
    assert list(session.diagnostics(uri)) == []
    # two changes in a row, well within the debounce: only the last version is checked
    v2 = session.change(
        uri,
        [
            lsp.TextDocumentContentChangePartial(
                range=lsp.Range(lsp.Position(2, 15), lsp.Position(2, 16)),
                text="await self.legacy_load_mm_data(prompt=text)",
            )
        ],
    )
    v3 = session.change(
        uri,
        [lsp.TextDocumentContentChangePartial(range=lsp.Range(lsp.Position(3, 0), lsp.Position(3, 0)), text="# end\n")],
    )
    got = session.diagnostics(uri, v3)
    assert [d.code for d in got] == ["PA101"]
    assert got[0].range.start.line == 2
    assert all(p.version != v2 for p in session.published[uri])


def test_patch_buffer_and_hover(session):
    path = session.root / "patches" / "qwen.patch"
    path.parent.mkdir(exist_ok=True)
    uri = session.open(path, PATCH_PA101, language="diff")  # an unsaved buffer: nothing on disk
    got = _by_code(session.diagnostics(uri))
    assert "PA101" in got, got
    assert got["PA101"].range.start.line == 5  # the `+` line of the patch
    hover = session.run(
        session.client.text_document_hover_async(
            lsp.HoverParams(text_document=lsp.TextDocumentIdentifier(uri=uri), position=got["PA101"].range.start)
        )
    )
    assert hover is not None and hover.contents.kind == lsp.MarkupKind.Markdown
    assert hover.contents.value.startswith("# PA101 ")
    assert "Default severity: error" in hover.contents.value
    nothing = session.run(
        session.client.text_document_hover_async(
            lsp.HoverParams(text_document=lsp.TextDocumentIdentifier(uri=uri), position=lsp.Position(0, 0))
        )
    )
    assert nothing is None


def test_summaries_follow_a_saved_module(session):
    """sender.py never changes: its PA102 comes when dataset.py, saved, returns the
    processor's ids (the warm summaries follow the one saved file), with the trace's first
    step in dataset.py."""
    sender = session.open(session.root / "rl" / "sender.py", SENDER)
    assert list(session.diagnostics(sender)) == []
    path = session.root / "rl" / "dataset.py"
    dataset = session.open(path, DATASET_CLEAN)
    session.diagnostics(dataset)
    whole = lsp.Range(lsp.Position(0, 0), lsp.Position(len(DATASET_CLEAN.splitlines()), 0))
    session.change(dataset, [lsp.TextDocumentContentChangePartial(range=whole, text=DATASET_EXPANDED)])
    path.write_text(DATASET_EXPANDED)
    session.client.text_document_did_save(lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(uri=dataset)))
    got = session.latest(sender, lambda d: any(x.code == "PA102" for x in d))
    (pa102,) = [d for d in got if d.code == "PA102"]
    assert pa102.range.start.line == 5
    first = pa102.related_information[0].location
    assert first.uri == dataset and first.range.start.line == 1
    # changed back on disk by another tool (the editor's buffer is closed): the finding goes
    session.client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri=dataset)))
    path.write_text(DATASET_CLEAN)
    session.client.workspace_did_change_watched_files(
        lsp.DidChangeWatchedFilesParams(changes=[lsp.FileEvent(uri=dataset, type=lsp.FileChangeType.Changed)])
    )
    session.latest(sender, lambda d: not any(x.code == "PA102" for x in d))


def test_patch_quick_fix_is_what_fix_writes(session, tmp_path):
    """The quick fix of a patch's PA101 (its hunk reverted, the hunk headers recounted)
    gives the text `patchaudit check --fix` writes for the same file."""
    text = PATCH_PA101 + PATCH_OTHER
    path = session.root / "patches" / "two.patch"
    path.parent.mkdir(exist_ok=True)
    uri = session.open(path, text, language="diff")
    (pa101,) = [d for d in session.diagnostics(uri) if d.code == "PA101"]
    actions = session.run(
        session.client.text_document_code_action_async(
            lsp.CodeActionParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri),
                range=pa101.range,
                context=lsp.CodeActionContext(diagnostics=[pa101], only=[lsp.CodeActionKind.QuickFix]),
            )
        )
    )
    (fix,) = actions
    assert fix.is_preferred and "unsafe" not in fix.title
    (edit,) = fix.edit.changes[uri]
    lines = text.splitlines(keepends=True)
    start, end = edit.range.start, edit.range.end
    assert start.character == 0 and end.character == 0
    fixed = "".join(lines[: start.line]) + edit.new_text + "".join(lines[end.line :])
    # the oracle: the command line's --fix on a copy of the file
    copy = tmp_path / "patches" / "two.patch"
    copy.parent.mkdir()
    copy.write_text(text)
    (tmp_path / "pyproject.toml").write_text("[tool.patchaudit]\n")
    subprocess.run(
        [sys.executable, "-m", "patchaudit", "check", "--fix", "--no-cache", "patches/two.patch"],
        cwd=tmp_path,
        capture_output=True,
    )
    assert fixed == copy.read_text() == PATCH_OTHER
    version = session.change(uri, [lsp.TextDocumentContentChangePartial(range=edit.range, text=edit.new_text)])
    assert not [d for d in session.diagnostics(uri, version) if d.code == "PA101"]


def test_syntax_error_is_a_diagnostic(session):
    uri = session.open(session.root / "broken.py", "def f(:\n    legacy_load_mm_data(prompt=x)\n")
    got = session.diagnostics(uri)
    assert got and all(d.severity == lsp.DiagnosticSeverity.Error for d in got)


def test_positions_in_utf16(session):
    """A character outside the BMP before the finding: the client's columns count UTF-16 units."""
    line = 'tag = "\U0001f600"; out = legacy_load_mm_data(prompt=text)\n'
    uri = session.open(session.root / "emoji.py", line)
    (d,) = [d for d in session.diagnostics(uri) if d.code == "PA101"]
    start = line.index("legacy_load_mm_data")  # in code points (the finding's column is start + 1)
    assert d.range.start.character == start + 1  # the emoji is 2 UTF-16 units
    assert d.range.end.character == line.index("\n") + 1


def test_bad_configuration_is_a_diagnostic_and_the_server_goes_on(session):
    bad = session.root / "bad"
    bad.mkdir()
    (bad / "pyproject.toml").write_text('[tool.patchaudit]\nselect = "PA101"\n')
    uri = session.open(bad / "x.py", "out = legacy_load_mm_data(prompt=text)\n")
    (d,) = session.diagnostics(uri)
    assert d.severity == lsp.DiagnosticSeverity.Error and "pyproject.toml" in d.message and "select" in d.message
    # another project of the same server is still checked
    other = session.open(session.root / "fine.py", "out = legacy_load_mm_data(prompt=text)\n")
    assert [x.code for x in session.diagnostics(other)] == ["PA101"]


def test_buffer_over_max_file_size_is_refused(session):
    small = session.root / "small"
    small.mkdir()
    (small / "pyproject.toml").write_text("[tool.patchaudit]\nmax-file-size = 64\n")
    uri = session.open(small / "big.py", "out = legacy_load_mm_data(prompt=text)\n" * 4)
    (d,) = session.diagnostics(uri)
    assert d.severity == lsp.DiagnosticSeverity.Error and "max-file-size" in d.message


def test_per_file_ignores_from_the_projects_folder(session):
    """A project below the server's folder: its per-file-ignores globs match the file's path
    from the project's folder, as `check` run there matches them; `# noqa` works too."""
    sub = session.root / "nested"
    (sub / "tests").mkdir(parents=True)
    (sub / "pyproject.toml").write_text('[tool.patchaudit]\nper-file-ignores = { "tests/*" = ["PA101"] }\n')
    code = "out = legacy_load_mm_data(prompt=text)\n"
    ignored = session.open(sub / "tests" / "t.py", code)
    assert list(session.diagnostics(ignored)) == []
    kept = session.open(sub / "a.py", code + "out = legacy_load_mm_data(prompt=text)  # noqa: PA101\n")
    assert [(d.code, d.range.start.line) for d in session.diagnostics(kept)] == [("PA101", 0)]


def test_lone_surrogate_is_an_error_at_its_line(session):
    uri = session.open(session.root / "surrogate.py", "x = 1\ny = '\ud800'\n")
    (d,) = session.diagnostics(uri)
    assert d.severity == lsp.DiagnosticSeverity.Error and "not UTF-8" in d.message and d.range.start.line == 1


def test_unreadable_pyproject_is_a_diagnostic(session):
    broken = session.root / "broken_toml"
    broken.mkdir()
    (broken / "pyproject.toml").write_text("[tool.patchaudit\n")
    uri = session.open(broken / "x.py", "x = 1\n")
    (d,) = session.diagnostics(uri)
    assert d.severity == lsp.DiagnosticSeverity.Error and "pyproject.toml: cannot read" in d.message


def test_shutdown_and_exit(session):
    assert session.stop() == 0


def test_help():
    out = subprocess.run(
        [sys.executable, "-m", "patchaudit", "server", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "--debounce" in out and "language server" in out


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def test_editors_doc_snippets():
    """docs/editors.md: every snippet parses in its language's reader where Python has
    one, starts `patchaudit server`, and passes the one initialization option the
    server reads (`debounce`); its shell commands run as pasted (`patchaudit ...`)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    doc = (Path(__file__).resolve().parents[1] / "docs" / "editors.md").read_text()
    (vscode,) = _blocks(doc, "json")
    settings = json.loads(vscode)
    assert settings["glspc.server.command"] == "patchaudit"
    assert settings["glspc.server.commandArguments"] == ["server"]
    assert set(settings["glspc.server.languageId"]) == {"python", "diff"}
    assert set(settings["glspc.server.initializationOptions"]) == {"debounce"}
    (helix,) = _blocks(doc, "toml")
    hx = tomllib.loads(helix)
    assert hx["language-server"]["patchaudit"] == {
        "command": "patchaudit",
        "args": ["server"],
        "config": {"debounce": 0.3},
    }
    assert {lang["name"] for lang in hx["language"]} == {"python", "diff"}
    (lua,) = _blocks(doc, "lua")
    assert 'cmd = { "patchaudit", "server" }' in lua and "init_options = { debounce = 0.3 }" in lua
    for elisp in _blocks(doc, "elisp"):
        assert elisp.count("(") == elisp.count(")") and '("patchaudit" "server"' in elisp
    for block in _blocks(doc, "sh"):
        for command in block.strip().splitlines():
            if command.startswith("patchaudit "):
                argv = [sys.executable, "-m", "patchaudit", *command.split()[1:]]
                subprocess.run(argv, capture_output=True, check=True)


def test_server_exits_when_the_client_goes(tmp_path):
    """The client's end of the pipe closes without `shutdown`/`exit`: the server ends,
    with the protocol's exit code 1, and leaves nothing behind."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "patchaudit", "server", "--no-cache"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}).encode()
    out, err = proc.communicate(b"Content-Length: %d\r\n\r\n" % len(body) + body, timeout=WAIT)
    assert proc.returncode == 1, err
    assert b'"capabilities"' in out  # it answered before the pipe closed
    assert list(tmp_path.iterdir()) == []


def test_fresh_server_first_file_and_debounce_option(tmp_path):
    """A fresh server: the first Python file opened is published at once judged alone, then
    again with the whole-repository summaries (a PA102 across modules).  The client's
    `initializationOptions.debounce` overrides `--debounce`: with 0 against 60 s on the
    command line, a change is checked (the wait is bounded below 60 s)."""
    (tmp_path / "pyproject.toml").write_text("[tool.patchaudit]\n")
    s = Session(tmp_path)

    async def go():
        await s.client.start_io(
            sys.executable, "-m", "patchaudit", "server", "--debounce", "60", "--no-cache", cwd=str(tmp_path)
        )
        await s.client.initialize_async(
            lsp.InitializeParams(capabilities=lsp.ClientCapabilities(), initialization_options={"debounce": 0})
        )

    s.run(go())
    s.client.initialized(lsp.InitializedParams())
    # the first Python file opened: judged alone at once, then again with the summaries
    (tmp_path / "rl").mkdir()
    (tmp_path / "rl" / "__init__.py").write_text("")
    (tmp_path / "rl" / "dataset.py").write_text(DATASET_EXPANDED)
    (tmp_path / "rl" / "sender.py").write_text(SENDER)
    sender = s.open(tmp_path / "rl" / "sender.py", SENDER)
    (pa102,) = s.latest(sender, lambda d: any(x.code == "PA102" for x in d))
    assert list(s.published[sender][0].diagnostics) == [] and s.published[sender][0].version == 1
    assert pa102.related_information[0].location.uri == (tmp_path / "rl" / "dataset.py").as_uri()
    uri = s.open(tmp_path / "a.py", "x = 1\n")
    assert list(s.diagnostics(uri)) == []
    edit = lsp.TextDocumentContentChangePartial(
        range=lsp.Range(lsp.Position(0, 0), lsp.Position(1, 0)), text="out = legacy_load_mm_data(prompt=text)\n"
    )
    version = s.change(uri, [edit])
    started = s.loop.time()
    assert [d.code for d in s.diagnostics(uri, version)] == ["PA101"]
    assert s.loop.time() - started < 60  # not the command line's debounce (a bound, not a timing)
    assert s.stop() == 0
