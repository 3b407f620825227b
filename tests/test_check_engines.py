"""`check` with no engine flag: the engine the recipe pins is found by its version
(`engine-dirs`, the user cache; pip only when online) and exact mode runs on it; offline
with no engine the run is fragment mode with one note naming the engine and the line
that gives it, and the exit code of a run without an engine.  Real wheels built by the
test; pip is pointed at a local folder (`PIP_NO_INDEX`, `PIP_FIND_LINKS`); nothing
downloads."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from enginewheels import build_wheel

from patchaudit.cli import main
from patchaudit.engine import resolve

ENGINE = {
    "fakeengine/__init__.py": "",
    "fakeengine/loader.py": textwrap.dedent(
        """\
        def load(prompt, input_ids=None):
            return prompt


        def other():
            return 1
        """
    ),
}

PATCH = """\
--- a/python/fakeengine/loader.py
+++ b/python/fakeengine/loader.py
@@ -1,5 +1,5 @@
 def load(prompt, input_ids=None):
-    return prompt
+    return prompt or input_ids
 
 
 def other():
"""

# a hunk that does not apply to 1.0: exact mode reports it (PA201); fragment mode cannot
BROKEN = """\
--- a/python/fakeengine/loader.py
+++ b/python/fakeengine/loader.py
@@ -4,2 +4,2 @@
 def other(x=None):
-    return 1
+    return 2
"""

DOCKERFILE = """\
FROM python:3.11
RUN pip install fakeengine==1.0
COPY patch/ /patch/
RUN cd /opt/fakeengine && git apply /patch/fix.patch /patch/broken.patch
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    resolve.clear()
    root = tmp_path / "proj"
    (root / "docker" / "patch").mkdir(parents=True)
    (root / "docker" / "Dockerfile").write_text(DOCKERFILE)
    (root / "docker" / "patch" / "fix.patch").write_text(PATCH)
    (root / "docker" / "patch" / "broken.patch").write_text(BROKEN)
    (root / "pyproject.toml").write_text(
        '[tool.patchaudit]\nengine-packages = ["fakeengine"]\nengine-dirs = ["../wheels"]\n'
    )
    monkeypatch.chdir(root)
    yield root
    resolve.clear()


def _check(*args: str):
    return CliRunner().invoke(main, ["check", "--no-cache", *args])


def _codes(res) -> list[str]:
    return sorted(f["code"] for f in json.loads(res.stdout))


def test_the_pinned_engine_is_found_in_engine_dirs_and_exact_mode_runs(project, tmp_path):
    build_wheel(tmp_path / "wheels", "fakeengine", "1.0", ENGINE)
    res = _check("--format", "json", ".")
    assert _codes(res) == ["PA201"], (res.stdout, res.stderr)
    assert "fakeengine 1.0" in res.stderr and "engine-dirs" in res.stderr
    # the same as naming the wheel by hand
    wheel = next((tmp_path / "wheels").glob("*.whl"))
    by_hand = _check("--format", "json", "--engine", f"fakeengine={wheel}", ".")
    assert json.loads(by_hand.stdout) == json.loads(res.stdout)


def test_offline_with_no_engine_is_fragment_mode_with_one_note(project, monkeypatch):
    monkeypatch.setenv("PATCHAUDIT_OFFLINE", "1")
    res = _check(".")
    notes = [line for line in (res.stdout + res.stderr).splitlines() if "fakeengine==1.0" in line]
    assert len(notes) == 1, res.stdout + res.stderr
    assert "--engine fakeengine=" in notes[0] or "pip download" in notes[0]
    # the exit code of a run without an engine: here, no finding
    without = _check("--config", str(project / "pyproject.toml"), "--offline", ".")
    assert res.exit_code == without.exit_code == 0


def test_online_the_pin_is_downloaded_with_pip_as_the_user_configured_it(project, tmp_path, monkeypatch):
    monkeypatch.delenv("PATCHAUDIT_OFFLINE", raising=False)
    links = tmp_path / "links"
    build_wheel(links, "fakeengine", "1.0", ENGINE)
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    res = _check("--format", "json", ".")
    assert _codes(res) == ["PA201"], (res.stdout, res.stderr)
    cached = list(Path(os.environ["XDG_CACHE_HOME"]).rglob("fakeengine-1.0-*.whl"))
    assert cached, "the download lands in the user cache"
    # the next run takes it from the cache, offline
    monkeypatch.setenv("PATCHAUDIT_OFFLINE", "1")
    resolve.clear()
    again = _check("--format", "json", ".")
    assert _codes(again) == ["PA201"]
