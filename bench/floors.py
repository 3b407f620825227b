"""What a libcst-based run cannot go below on this machine: the floors bench/run.py prints
beside the bounds of issue 21 that depend on them.

    python bench/floors.py start FILE
        one JSON object: the seconds of one fresh process that starts Python, imports
        libcst and parses FILE with it, and nothing else: the least a run whose rules
        read FILE's libcst tree can take (the one-changed-file row: the file holds
        PA101's finding and PA102's sources, so its rules must read its tree);

    python bench/floors.py scan [CHECK OPTIONS] PATH
        one JSON object for `patchaudit check --no-cache -j 1 [CHECK OPTIONS] PATH` run in
        this process: its wall seconds, the seconds and bytes of every libcst parse it
        made (the files the pre-filters let through to libcst), of every `ast` parse
        (`ast_parse`...: the gates, the pre-pass and the dataflow rules read `ast`), and the
        seconds of the dataflow interpreter (`Flow.run`, the whole-repository pre-pass and PA102, PA103,
        PA106 and PA107).  Both are single-threaded work on files the byte filter and the
        `ast` gates could not rule out: spread over N cores at best they take 1/N of it.

Nothing here is asserted in the test suite; bench/run.py turns these into lines.
"""

from __future__ import annotations

import json
import os
import sys
import time


def start(path: str) -> dict:
    t = time.perf_counter()
    import libcst

    imported = time.perf_counter()
    with open(path, "rb") as fh:
        libcst.parse_module(fh.read())
    return {"import_libcst": imported - t, "parse": time.perf_counter() - imported}


def scan(args: list[str]) -> dict:
    import libcst

    from patchaudit.analysis import dataflow
    from patchaudit.cli import main
    from patchaudit.inputs import pyast

    got = {"parse": 0.0, "parsed_bytes": 0, "parses": 0, "interpreter": 0.0}
    got.update({"ast_parse": 0.0, "ast_parsed_bytes": 0, "ast_parses": 0})
    parse_module = libcst.parse_module
    parse_ast = pyast.parse_uncached
    run = dataflow.Flow.run
    depth = [0]

    def timed_parse(source, *a, **k):
        t = time.perf_counter()
        try:
            return parse_module(source, *a, **k)
        finally:
            got["parse"] += time.perf_counter() - t
            got["parsed_bytes"] += len(source)
            got["parses"] += 1

    def timed_ast(source, *a, **k):
        t = time.perf_counter()
        try:
            return parse_ast(source, *a, **k)
        finally:
            got["ast_parse"] += time.perf_counter() - t
            got["ast_parsed_bytes"] += len(source)
            got["ast_parses"] += 1

    def timed_run(self):
        depth[0] += 1
        t = time.perf_counter()
        try:
            return run(self)
        finally:
            depth[0] -= 1
            if not depth[0]:
                got["interpreter"] += time.perf_counter() - t

    libcst.parse_module = timed_parse  # patchaudit calls it as `cst.parse_module`
    dataflow.Flow.run = timed_run  # type: ignore[method-assign]
    pyast.parse_uncached = timed_ast  # pyast.parse calls it through the module
    argv = ["check", "--no-cache", "-j", "1", "--format", "json", "--exit-zero", "-o", os.devnull, *args]
    t = time.perf_counter()
    try:
        main(argv, standalone_mode=False)
    except SystemExit as exc:  # pragma: no cover - click's own exits
        if exc.code not in (0, 1, None):
            raise
    got["wall"] = time.perf_counter() - t
    return got


def main() -> int:
    if len(sys.argv) >= 3 and sys.argv[1] == "start":
        print(json.dumps(start(sys.argv[2])))
        return 0
    if len(sys.argv) >= 3 and sys.argv[1] == "scan":
        print(json.dumps(scan(sys.argv[2:])))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
