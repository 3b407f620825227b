"""`patchaudit server`: one changed file's diagnostics after a change, on a warm server.

    python bench/lsp_latency.py [--tree bench/data/trees/sglang-0.5.15.post1]
                                [--files sglang/srt/multimodal/processors/qwen_vl.py,...]
                                [--repeat 15] [--json FILE]

A real LSP client (pygls's `LanguageClient`) starts `python -m patchaudit server
--no-cache` in the tree (nothing is written into it: the server keeps the pre-pass's
cache in a temporary folder of its own) with `initializationOptions.debounce = 0`, so
what is timed is the check itself, not the debounce.  It opens each file (the first
Python file opened is checked alone at once, then the whole-repository pre-pass runs
and the server says when its summaries are ready: both figures are printed; the
changes are timed after that, on the warm server), then `--repeat` times
sends a `didChange` (a statement appended, then removed) and times until the
`publishDiagnostics` of that version arrives.  Printed per file: its size, its
findings, the first open, the median and worst of the changes, and the floor under
them: one libcst parse of the whole file in this process (the median of 3; the rules
that need the whole module parse it once per change).  Target (issue 39):
a changed file's diagnostics within 0.1 s of the change.  Nothing here is asserted in
the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

HERE = Path(__file__).resolve().parent
TREE = HERE / "data" / "trees" / "sglang-0.5.15.post1"
#: the planted PA101 (bench_data.PLANT_FILE), a large module, a mid-size one with engine requests
FILES = [
    "sglang/srt/multimodal/processors/qwen_vl.py",
    "sglang/srt/entrypoints/openai/serving_chat.py",
    "sglang/srt/managers/tokenizer_manager.py",
]
TARGET = 0.1


def parse_floor(text: str) -> float:
    import libcst

    times = []
    for _ in range(3):
        start = time.perf_counter()
        libcst.parse_module(text)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class Bench:
    def __init__(self, tree: Path):
        self.tree = tree
        self.client = LanguageClient("patchaudit-bench", "0")
        self.arrived: dict[tuple[str, int | None], float] = {}
        self.counts: dict[tuple[str, int | None], int] = {}
        self.event = asyncio.Event()

        @self.client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(params: lsp.PublishDiagnosticsParams) -> None:
            key = (params.uri, params.version)
            self.arrived.setdefault(key, time.perf_counter())
            self.counts[key] = len(params.diagnostics)
            self.event.set()

        self.summaries_ready: float | None = None

        @self.client.feature(lsp.WINDOW_LOG_MESSAGE)
        def on_log(params: lsp.LogMessageParams) -> None:
            print(f"  server: {params.message}", file=sys.stderr)
            if "summaries ready" in params.message and self.summaries_ready is None:
                self.summaries_ready = time.perf_counter()
                self.event.set()

    async def start(self) -> None:
        await self.client.start_io(sys.executable, "-m", "patchaudit", "server", "--no-cache", cwd=str(self.tree))
        await self.client.initialize_async(
            lsp.InitializeParams(
                capabilities=lsp.ClientCapabilities(),
                root_uri=self.tree.as_uri(),
                initialization_options={"debounce": 0},
            )
        )
        self.client.initialized(lsp.InitializedParams())

    async def wait(self, uri: str, version: int, timeout: float = 900.0) -> float:
        async def until():
            while (uri, version) not in self.arrived:
                self.event.clear()
                await self.event.wait()
            return self.arrived[(uri, version)]

        return await asyncio.wait_for(until(), timeout)

    async def ready(self, timeout: float = 900.0) -> float:
        """When the server said the whole-repository summaries were ready (the first Python
        file opened is checked alone at once, then again with them)."""

        async def until():
            while self.summaries_ready is None:
                self.event.clear()
                await self.event.wait()
            return self.summaries_ready

        return await asyncio.wait_for(until(), timeout)

    async def file(self, rel: str, repeat: int) -> dict:
        path = self.tree / rel
        text = path.read_text(encoding="utf-8")
        uri = path.as_uri()
        sent = time.perf_counter()
        self.client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
        )
        cold = await self.wait(uri, 1) - sent
        ready = await self.ready() - sent  # the changes are timed on the warm server
        n_lines = len(text.splitlines())
        times = []
        for i in range(repeat):
            version = i + 2
            if i % 2 == 0:  # a statement appended at the end (code, not a comment)
                change = lsp.TextDocumentContentChangePartial(
                    range=lsp.Range(lsp.Position(n_lines, 0), lsp.Position(n_lines, 0)), text=f"_bench_edit = {i}\n"
                )
            else:  # and removed
                change = lsp.TextDocumentContentChangePartial(
                    range=lsp.Range(lsp.Position(n_lines, 0), lsp.Position(n_lines + 1, 0)), text=""
                )
            sent = time.perf_counter()
            self.client.text_document_did_change(
                lsp.DidChangeTextDocumentParams(
                    text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                    content_changes=[change],
                )
            )
            times.append(await self.wait(uri, version) - sent)
        self.client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri=uri)))
        return {
            "parse_floor_s": round(parse_floor(text), 4),
            "file": rel,
            "bytes": len(text.encode("utf-8")),
            "diagnostics": self.counts.get((uri, 1), 0),
            "first_open_s": round(cold, 4),
            "summaries_ready_s": round(max(0.0, ready), 4),
            "change_median_s": round(statistics.median(times), 4),
            "change_max_s": round(max(times), 4),
            "changes": len(times),
        }

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()


async def main_async(args) -> list[dict]:
    bench = Bench(Path(args.tree).resolve())
    await bench.start()
    rows = []
    try:
        for rel in args.files.split(","):
            row = await bench.file(rel, args.repeat)
            rows.append(row)
            verdict = "PASS" if row["change_median_s"] <= TARGET else "FAIL"
            print(
                f"{rel}: {row['bytes']:,} bytes, {row['diagnostics']} diagnostics; first open "
                f"{row['first_open_s']:.2f} s (summaries ready {row['summaries_ready_s']:.2f} s); didChange -> diagnostics median {row['change_median_s'] * 1000:.0f} ms, "
                f"max {row['change_max_s'] * 1000:.0f} ms over {row['changes']} ({verdict}: target "
                f"{TARGET * 1000:.0f} ms); one libcst parse of the file {row['parse_floor_s'] * 1000:.0f} ms",
                flush=True,
            )
    finally:
        await bench.stop()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", default=str(TREE))
    parser.add_argument("--files", default=",".join(FILES))
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", help="Write the rows to FILE as JSON.")
    args = parser.parse_args()
    rows = asyncio.run(main_async(args))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
