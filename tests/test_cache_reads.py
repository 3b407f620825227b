"""The per-file cache follows what a file's analysis read besides the file itself.

A monkey-patch module's findings depend on the version gates its enclosing
packages' `__init__.py` put on importing it (analysis/monkeypatch_imports.py).
The cache was keyed by the module's own bytes only: after the gate changed, a
warm run returned the result of the old gate.  Now each result carries the
signatures of the other files its analysis read (`FileResult.reads`), and a
cached result holds only while they are unchanged.  Every tree and wheel here is
written by the test."""

from __future__ import annotations

import json
import os
from pathlib import Path

from test_monkeypatch import build_wheel, write_tree  # (tests/ is on sys.path)

from patchaudit.files import observe
from patchaudit.testing import invoke_in

GATED = """\
import sglang as sgl

if sgl.__version__ == "{version}":
    from fork.sgl import old_patch
"""

OLD_PATCH = """\
import sys

def run_scheduler_process(server_args):
    return server_args

sys.modules["sglang.srt.entrypoints.engine"].__dict__["run_scheduler_proc"] = run_scheduler_process
"""

ENGINE = {
    "sglang/__init__.py": "from sglang.version import __version__\n",
    "sglang/version.py": '__version__ = "0.5.2"\n',
    "sglang/srt/entrypoints/engine.py": "def run_scheduler_process(server_args):\n    return server_args\n",
}


def _check(root: Path, wheel: Path) -> list[tuple[str, str]]:
    args = ["check", "--format", "json", "--select", "PA206,PA207", "--engine", f"sglang={wheel}", "fork/sgl/old_patch"]
    res = invoke_in(root, args)
    assert res.exit_code in (0, 1), res.output + res.stderr
    return [(f["code"], os.path.basename(f["path"])) for f in json.loads(res.stdout)]


def test_a_cached_result_holds_only_while_what_its_analysis_read_is_unchanged(tmp_path, monkeypatch):
    monkeypatch.setattr(observe, "RACY_NS", 0)  # the files were written a moment ago
    root = tmp_path / "proj"
    write_tree(
        root,
        {
            "fork/__init__.py": "",
            "fork/sgl/__init__.py": GATED.format(version="0.5.2"),
            "fork/sgl/old_patch/__init__.py": "from . import engine\n",
            "fork/sgl/old_patch/engine.py": OLD_PATCH,
        },
    )
    wheel = build_wheel(tmp_path / "sglang-0.5.2-py3-none-any.whl", ENGINE, "sglang", "0.5.2")
    # imported on 0.5.2: its missing target is reported
    assert _check(root, wheel) == [("PA206", "engine.py")]
    assert _check(root, wheel) == [("PA206", "engine.py")]  # from the cache
    # the gate outside the scanned folder changes: never imported on 0.5.2 now
    (root / "fork/sgl/__init__.py").write_text(GATED.format(version="0.5.1"), encoding="utf-8")
    assert _check(root, wheel) == []
    (root / "fork/sgl/__init__.py").write_text(GATED.format(version="0.5.2"), encoding="utf-8")
    assert _check(root, wheel) == [("PA206", "engine.py")]


def test_the_files_an_analysis_reads_are_its_reads(tmp_path, monkeypatch):
    """`FileResult.reads`: what the analysis read besides the file, with signatures; None
    when one of them changed a moment before (the real window): such a result is not kept."""
    from patchaudit.config.settings import Settings
    from patchaudit.files.reader import read_bytes
    from patchaudit.inputs.discover import SourceFile
    from patchaudit.pipeline import analyse
    from patchaudit.pipeline.parallel import cacheable

    root = tmp_path / "proj"
    write_tree(root, {"pkg/__init__.py": "", "pkg/mod.py": "x = 1\n"})
    mod, init = str(root / "pkg/mod.py"), str(root / "pkg/__init__.py")
    plain = analyse.analyse_file(SourceFile(mod, "python"), Settings())
    assert plain.reads == () and cacheable(plain)
    real = analyse._analyse_file

    def reading(src, *args):
        read_bytes(init)
        return real(src, *args)

    monkeypatch.setattr(analyse, "_analyse_file", reading)
    racy = analyse.analyse_file(SourceFile(mod, "python"), Settings())
    assert racy.reads is None and not cacheable(racy)  # written a moment ago
    monkeypatch.setattr(observe, "RACY_NS", 0)
    got = analyse.analyse_file(SourceFile(mod, "python"), Settings())
    assert got.reads == ((init, observe.signature(init)),) and cacheable(got)
