"""A re-run over an unchanged tree replays the recorded result (pipeline/replay.py), and
any change the result could depend on runs the check again.

Every tree is written by the test.  `observe.RACY_NS` is 0 in most tests: a file
written a moment before a run would otherwise keep the run from being recorded
(tested on its own below, with the real window)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patchaudit.config.settings import Settings
from patchaudit.files import observe
from patchaudit.model.findings import FileError
from patchaudit.pipeline.replay import Replay
from patchaudit.pipeline.results import RunResult
from patchaudit.pipeline.runner import run_check

# the same length: an edit from one to the other keeps the file's size
EXPANDED = 'return processor(text=row["text"], images=row["images"])["input_ids"][0].tolist()'
CLEAN = 'return processor.tokenizer.encode(row["text"])'
CLEAN = CLEAN + "  # " + "x" * (len(EXPANDED) - len(CLEAN) - 4)
assert len(CLEAN) == len(EXPANDED)

ROLLOUT = """\
from rl.dataset import prompt_ids


async def generate(url, processor, row):
    ids = prompt_ids(processor, row)
    payload = {"input_ids": ids, "image_data": row["images"]}
    return await post(url, payload)
"""

RETOKENIZE = """\
def resend(tokenizer, ids):
    text = tokenizer.decode(ids)
    return {"input_ids": tokenizer.encode(text)}
"""


def _dataset(body: str) -> str:
    return f"def prompt_ids(processor, row):\n    {body}\n"


@pytest.fixture
def tree(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    files = {
        "pyproject.toml": "[project]\nname = 'proj'\n",
        "rl/__init__.py": "",
        "rl/dataset.py": _dataset(EXPANDED),
        "rl/rollout.py": ROLLOUT,
    }
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    monkeypatch.chdir(root)
    monkeypatch.setattr(observe, "RACY_NS", 0)
    return root


def _run(paths: list[str], replay: bool = True) -> RunResult:
    return run_check(paths, Settings(), replay=replay)


def _seen(result: RunResult) -> tuple:
    return (
        [(f.code, f.path, f.line, f.message) for f in result.findings],
        [str(e) for e in result.errors],
        list(result.warnings),
        result.files,
    )


def _codes(result: RunResult) -> list[tuple[str, str]]:
    return [(f.code, f.path) for f in result.findings]


def _same_size_edit(path: Path, text: str) -> None:
    """`text` written over `path`, of the same size, with its times set back: only the
    change time (and the bytes) tell it changed."""
    st = os.stat(path)
    assert len(text.encode()) == st.st_size
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_an_unchanged_tree_is_replayed_with_the_same_result(tree):
    first = _run(["."])
    # analysed, not replayed nor cached (the dataflow rules read `ast`: no libcst parse to count)
    assert not first.replayed and first.cached == 0 and first.files > 0
    assert ("PA102", os.path.join("rl", "rollout.py")) in _codes(first)
    second = _run(["."])
    assert second.replayed and second.parsed == 0 and second.cached == second.files
    assert _seen(second) == _seen(first)
    # the replay is what a full run gives
    assert _seen(_run(["."], replay=False)) == _seen(first)


def test_a_same_size_edit_with_its_times_set_back_is_seen(tree):
    _run(["."])
    _same_size_edit(tree / "rl" / "dataset.py", _dataset(CLEAN))
    again = _run(["."])
    assert not again.replayed
    assert "PA102" not in [c for c, _ in _codes(again)]
    assert _seen(again) == _seen(_run(["."], replay=False))


def test_a_module_the_named_file_imports_is_an_input_of_a_pre_commit_run(tree):
    """A file named alone: the whole-repository pre-pass reads the project's other modules."""
    first = _run(["rl/rollout.py"])
    assert [c for c, _ in _codes(first)] == ["PA102"]
    assert _run(["rl/rollout.py"]).replayed
    # the named file changes: the next record's pre-pass takes dataset.py from its
    # cache without reading it, and still depends on it
    (tree / "rl" / "rollout.py").write_text(ROLLOUT + "# edited\n", encoding="utf-8")
    assert not _run(["rl/rollout.py"]).replayed
    assert _run(["rl/rollout.py"]).replayed
    _same_size_edit(tree / "rl" / "dataset.py", _dataset(CLEAN))
    again = _run(["rl/rollout.py"])
    assert not again.replayed and _codes(again) == []


def test_files_added_removed_and_ignored_are_seen(tree):
    _run(["."])
    assert _run(["."]).replayed
    (tree / "rl" / "resend.py").write_text(RETOKENIZE, encoding="utf-8")  # a new file
    added = _run(["."])
    assert not added.replayed and ("PA103", os.path.join("rl", "resend.py")) in _codes(added)
    assert _run(["."]).replayed
    (tree / ".gitignore").write_text("resend.py\n", encoding="utf-8")  # a new .gitignore
    ignored = _run(["."])
    assert not ignored.replayed and "PA103" not in [c for c, _ in _codes(ignored)]
    (tree / ".gitignore").write_text("nothing\n", encoding="utf-8")  # an edited one
    edited = _run(["."])
    assert not edited.replayed and ("PA103", os.path.join("rl", "resend.py")) in _codes(edited)
    (tree / "rl" / "resend.py").unlink()  # a removed file
    removed = _run(["."])
    assert not removed.replayed and _seen(removed)[:2] == _seen(_run(["."], replay=False))[:2]
    assert "PA103" not in [c for c, _ in _codes(removed)]


def test_a_gitignore_above_the_scanned_folder_and_a_new_virtualenv_are_seen(tree):
    (tree / ".git").mkdir()  # the repository's top: its .gitignore judges `rl` too
    (tree / "rl" / "resend.py").write_text(RETOKENIZE, encoding="utf-8")
    _run(["rl"])
    assert _run(["rl"]).replayed
    (tree / ".gitignore").write_text("rl/resend.py\n", encoding="utf-8")  # above `rl`
    above = _run(["rl"])
    assert not above.replayed and "PA103" not in [c for c, _ in _codes(above)]
    (tree / ".gitignore").unlink()
    assert ("PA103", os.path.join("rl", "resend.py")) in _codes(_run(["rl"]))
    sub = tree / "rl" / "env"
    sub.mkdir()
    (sub / "resend.py").write_text(RETOKENIZE, encoding="utf-8")
    assert len([c for c, _ in _codes(_run(["rl"])) if c == "PA103"]) == 2
    assert _run(["rl"]).replayed
    (sub / "pyvenv.cfg").write_text("home = /usr\n", encoding="utf-8")  # now a virtualenv: skipped
    venv = _run(["rl"])
    assert not venv.replayed and len([c for c, _ in _codes(venv) if c == "PA103"]) == 1


def test_other_settings_and_other_paths_are_other_records(tree):
    _run(["."])
    assert _run(["."]).replayed
    other = run_check(["."], Settings(select=["PA103"]), replay=True)
    assert not other.replayed and _codes(other) == []
    assert not _run(["rl"]).replayed  # other paths
    assert not run_check(["."], Settings(), replay=False).replayed  # replay off


def test_a_run_changed_just_before_it_is_not_recorded(tree, monkeypatch):
    """The real window: files written a moment ago may still change within the same tick."""
    monkeypatch.setattr(observe, "RACY_NS", 2_000_000_000)
    (tree / "rl" / "dataset.py").write_text(_dataset(EXPANDED), encoding="utf-8")
    _run(["."])
    assert not _run(["."]).replayed


def test_what_cannot_be_replayed_is_not_recorded(tree):
    replay = Replay(tree / ".patchaudit_cache", "k" * 32, ["."])
    assert replay.record(observe.Observed(), RunResult(files=1))
    for message in ("internal error: boom", "analysis took longer than 30 s (the per-file time budget): stopped"):
        assert not replay.record(observe.Observed(), RunResult(errors=[FileError("a.py", message)]))
    seen = observe.Observed()
    seen.unstable = "it ran git"
    assert not replay.record(seen, RunResult())
    # a deterministic error (a syntax error) is part of the recorded result
    assert replay.record(observe.Observed(), RunResult(errors=[FileError("a.py", "syntax error", 1)]))


def test_the_observation_notes_reads_listings_and_probes(tree):
    with observe.observing() as seen:
        _run(["."], replay=False)
    paths = {os.path.relpath(p) if not os.path.isabs(p) else os.path.relpath(p, tree) for p in seen.paths}
    assert {os.path.join("rl", "dataset.py"), os.path.join("rl", "rollout.py"), "rl"} <= paths
    # a subfolder's virtualenv marker is probed; its absent .gitignore is told by its listing
    assert os.path.join("rl", "pyvenv.cfg") in paths and os.path.join("rl", ".gitignore") not in paths
    assert ".gitignore" in paths  # the scanned root's, probed
    assert seen.unstable is None
    assert observe._ACTIVE == []  # the observation ended with the block


def test_the_command_line_replays_byte_for_byte(tree):
    """Through the real entry point, with the real racy window: the same report and the
    same messages; then a same-size edit is seen."""
    env = dict(os.environ)
    env.pop("PATCHAUDIT_NO_CACHE", None)
    time.sleep(2.1)  # the files are now older than a real run's racy window
    cmd = [sys.executable, "-m", "patchaudit", "check", "--format", "json", "."]
    runs = [subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True) for _ in range(2)]
    assert runs[0].returncode == runs[1].returncode == 1
    assert runs[0].stdout == runs[1].stdout and runs[0].stderr == runs[1].stderr
    assert [f["code"] for f in json.loads(runs[1].stdout)] == ["PA102"]
    _same_size_edit(tree / "rl" / "dataset.py", _dataset(CLEAN))
    third = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    assert third.returncode == 0, third.stdout + third.stderr
    assert json.loads(third.stdout) == []


def test_a_listing_is_remembered_while_its_folders_are_unchanged(tree, monkeypatch):
    from patchaudit.inputs import discover as walk

    calls = []
    real = walk.discover
    monkeypatch.setattr(walk, "discover", lambda *a, **k: calls.append(a) or real(*a, **k))
    _run(["."])
    assert len(calls) == 1
    # a file's bytes change, not its folder: the run is not replayed, its listing is
    (tree / "rl" / "rollout.py").write_text(ROLLOUT + "# edited\n", encoding="utf-8")
    edited = _run(["."])
    assert not edited.replayed and len(calls) == 1
    # the record of that run still depends on what its remembered listing saw
    (tree / "rl" / "resend.py").write_text(RETOKENIZE, encoding="utf-8")
    added = _run(["."])
    assert not added.replayed and len(calls) == 2
    assert ("PA103", os.path.join("rl", "resend.py")) in _codes(added)
    assert _seen(added) == _seen(_run(["."], replay=False))
    # a file named alone: the pre-pass's listing of the whole project is remembered too
    # (the named file itself is listed again: a listing depends on what it names)
    _run(["rl/rollout.py"])
    walks = [a for a in calls if a[0] == [str(tree)]]
    assert len(walks) == 1
    (tree / "rl" / "rollout.py").write_text(ROLLOUT + "# again\n", encoding="utf-8")
    _run(["rl/rollout.py"])
    assert [a for a in calls if a[0] == [str(tree)]] == walks


def test_a_fix_run_is_never_a_replay(tree, monkeypatch):
    """--fix and --diff re-check in memory with the run's settings (its whole-repository
    view among them): they run the check; a plain check asks the record."""
    from patchaudit.pipeline import replay as replay_module
    from patchaudit.testing import invoke_in

    asked: list = []
    real = replay_module.Replay.result
    monkeypatch.setattr(replay_module.Replay, "result", lambda self: asked.append(1) or real(self))
    (tree / "rl" / "env.py").write_text('import os\nos.environ["SGLANG_MM_AVOID_RETOKENIZE"] = "0"\n')
    diff = invoke_in(tree, ["check", "--diff", "--unsafe-fixes", "--select", "PA104", "rl/env.py"])
    assert '+os.environ["SGLANG_MM_AVOID_RETOKENIZE"] = "1"' in diff.stdout, diff.output
    assert asked == []
    invoke_in(tree, ["check", "--select", "PA104", "rl/env.py"])
    assert asked == [1]

