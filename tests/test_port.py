"""`patchaudit port` with real parts: engines built in git repositories here, the ported
set applied with real `git apply`, merges checked against `git merge-file`."""

from __future__ import annotations

import json
import os
import subprocess

import git
import pytest
from click.testing import CliRunner

from patchaudit.cli import main
from patchaudit.pipeline.port_hunks import Text, check_port

MOD = """import os


def helper(x):
    return x + 1


class Loader:
    def __init__(self, path):
        self.path = path

    def load(self, name):
        data = helper(len(name))
        return data


def untouched():
    return 1
"""


def _engine(tmp_path, name: str, text: str) -> str:
    root = tmp_path / name
    (root / "eng").mkdir(parents=True)
    (root / "eng" / "__init__.py").write_text("")
    (root / "eng" / "mod.py").write_text(text)
    return str(root)


def _patch(tmp_path, before: str, after: str) -> str:
    """A `git diff` of eng/mod.py before -> after, made in a real repository."""
    repo_dir = tmp_path / "mk"
    repo = git.Repo.init(repo_dir)
    (repo_dir / "eng").mkdir(exist_ok=True)
    (repo_dir / "eng" / "mod.py").write_text(before)
    repo.index.add(["eng/mod.py"])
    repo.index.commit("base")
    (repo_dir / "eng" / "mod.py").write_text(after)
    out = tmp_path / "fix.patch"
    out.write_text(repo.git.diff() + "\n")
    return str(out)


def _port(tmp_path, patch: str, old: str, new: str, *extra: str):
    out = tmp_path / "out"
    res = CliRunner().invoke(
        main,
        ["port", patch, "--engine", "eng", "--from", old, "--to", new, "-o", str(out), "--format", "json", *extra],
    )
    assert res.exit_code in (0, 1), res.output
    data = json.loads(res.stdout)
    return res.exit_code, data, (out / os.path.basename(patch)).read_text()


def _git_apply(tree: str, patch_text: str, tmp_path) -> str:
    work = tmp_path / "apply"
    subprocess.run(["cp", "-r", tree, str(work)], check=True)
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    p = tmp_path / "ported.patch"
    p.write_text(patch_text)
    subprocess.run(["git", "apply", str(p)], cwd=work, check=True)
    return (work / "eng" / "mod.py").read_text()


_LINE = "        data = helper(len(name))\n"
PATCHED = MOD.replace(_LINE, _LINE + "        data = data * 2\n")


def test_identity_on_an_unchanged_engine(tmp_path):
    old = _engine(tmp_path, "old", MOD)
    patch = _patch(tmp_path, MOD, PATCHED)
    code, data, text = _port(tmp_path, patch, old, old)
    assert code == 0
    assert [h["status"] for h in data["hunks"]] == ["clean"]
    assert _git_apply(old, text, tmp_path) == PATCHED


def test_an_engine_that_has_the_patch_drops_every_hunk(tmp_path):
    two = PATCHED.replace("def untouched():\n    return 1\n", "def untouched():\n    return 2\n    # end\n")
    old = _engine(tmp_path, "old", MOD)
    new = _engine(tmp_path, "new", two)
    patch = _patch(tmp_path, MOD, two)
    code, data, text = _port(tmp_path, patch, old, new)
    assert data["hunks"] and all(h["status"] == "dropped" for h in data["hunks"])
    assert all("upstream has it" in h["detail"] for h in data["hunks"])
    assert "@@" not in text


def test_a_merge_agrees_with_git_merge_file(tmp_path):
    # upstream changed the line right above the hunk's context: exact context fails, the merge works
    new_text = MOD.replace("class Loader:\n", "class Loader:\n    kind = 'file'\n").replace(
        "    def load(self, name):\n", "    def load(self, name):  # upstream note\n"
    )
    old = _engine(tmp_path, "old", MOD)
    new = _engine(tmp_path, "new", new_text)
    patch = _patch(tmp_path, MOD, PATCHED)
    code, data, text = _port(tmp_path, patch, old, new)
    assert code == 0, data
    assert data["hunks"][0]["status"] == "merged"
    for name, body in (("ours", new_text), ("base", MOD), ("theirs", PATCHED)):
        (tmp_path / name).write_text(body)
    subprocess.run(["git", "merge-file", "ours", "base", "theirs"], cwd=tmp_path, check=True)
    assert _git_apply(new, text, tmp_path) == (tmp_path / "ours").read_text()


def test_a_conflict_is_flagged_with_a_rej(tmp_path):
    new_text = MOD.replace("        data = helper(len(name))\n", "        data = helper(len(name), 3)\n")
    old = _engine(tmp_path, "old", MOD)
    new = _engine(tmp_path, "new", new_text)
    patch = _patch(tmp_path, MOD, PATCHED.replace("helper(len(name))", "helper(len(name) + 1)"))
    code, data, text = _port(tmp_path, patch, old, new)
    assert code == 1
    assert data["hunks"][0]["status"] == "flagged"
    rej = (tmp_path / "out" / "fix.patch.rej").read_text()
    assert "<<<<<<< ours" in rej and ">>>>>>> theirs" in rej


def test_a_name_that_no_longer_exists_is_flagged(tmp_path):
    new_text = MOD.replace("def helper(x):\n    return x + 1\n", "def helper2(x):\n    return x + 1\n").replace(
        "helper(len(name))", "helper2(len(name))"
    )
    uses = MOD.replace("def untouched():\n    return 1\n", "def untouched():\n    return helper(1)\n")
    old = _engine(tmp_path, "old", MOD)
    new = _engine(tmp_path, "new", new_text)
    patch = _patch(tmp_path, MOD, uses)
    code, data, text = _port(tmp_path, patch, old, new, "--no-rules")
    assert code == 1
    hunk = data["hunks"][0]
    assert hunk["status"] == "flagged" and "`helper`" in hunk["detail"]
    assert "@@" not in text  # never written as if ported


def test_a_changed_signature_is_flagged_by_the_rules_pass(tmp_path):
    new_text = MOD.replace("def helper(x):", "def helper(x, scale):").replace(
        "helper(len(name))", "helper(len(name), 1)"
    )
    uses = MOD.replace("def untouched():\n    return 1\n", "def untouched():\n    return helper(1)\n")
    old = _engine(tmp_path, "old", MOD)
    new = _engine(tmp_path, "new", new_text)
    patch = _patch(tmp_path, MOD, uses)
    code, data, text = _port(tmp_path, patch, old, new)
    hunk = data["hunks"][0]
    assert code == 1 and hunk["status"] == "flagged", hunk
    assert "PA204" in hunk["detail"]


def test_each_check_fails_on_a_planted_bad_port():
    before = Text(MOD.split("\n")[:-1])

    def run(after_text: str):
        checks, _ = check_port("eng/mod.py", before, Text(after_text.split("\n")[:-1]), lambda *a: None)
        return {c.name: c for c in checks}

    broken = run(MOD.replace("        return data\n", "        return data +\n"))
    assert not broken["parse"].ok
    twice = run(MOD.replace("def untouched():", "def helper(y):\n    return y\n\n\ndef untouched():"))
    assert not twice["duplicates"].ok and "helper" in twice["duplicates"].detail
    gone = run(MOD.replace("        return data\n", "        return missing_name(data)\n"))
    assert not gone["names"].ok and "missing_name" in gone["names"].detail
    local = run(MOD.replace("        return data\n", "        value = data\n        return value\n"))
    assert all(c.ok for c in local.values())


@pytest.mark.parametrize("args", [["--write", "-o", "x"]])
def test_usage_errors_exit_2(tmp_path, args):
    res = CliRunner().invoke(main, ["port", "nothing.patch", "--to", str(tmp_path), *args])
    assert res.exit_code == 2


IMPORTS = """from __future__ import annotations

import logging
import time

from eng.util import (
    Alpha,
    Beta,
    delta,
)


def run():
    logging.info("%s %s %s %s", Alpha, Beta, delta, time.time())


def one():
    return 1


def two():
    return 2
"""


def test_import_lines_merge_where_upstream_added_its_own_next_to_them(tmp_path):
    # the patch adds `import os` and `Gamma` next to lines upstream also added to: a conflict
    # for git merge-file, merged in isort's order here, and the result applies with git apply
    patched = IMPORTS.replace("import logging\n", "import logging\nimport os\n").replace(
        "    Beta,\n", "    Beta,\n    Gamma,\n"
    )
    patched += "\n\ndef extra():\n    return os.sep, Gamma\n"
    new_text = IMPORTS.replace("import logging\n", "import logging\nimport pathlib\n").replace(
        "    Beta,\n", "    Beta,\n    Carrot,\n"
    )
    new_text = new_text.replace("\n\ndef run():", "\n\ndef more():\n    return pathlib, Carrot\n\n\ndef run():")
    old = _engine(tmp_path, "old", IMPORTS)
    new = _engine(tmp_path, "new", new_text)
    (tmp_path / "new" / "eng" / "util.py").write_text("Alpha = Beta = Carrot = Gamma = 1\ndef delta(): pass\n")
    patch = _patch(tmp_path, IMPORTS, patched)
    for name, body in (("ours", new_text), ("base", IMPORTS), ("theirs", patched)):
        (tmp_path / name).write_text(body)
    assert subprocess.run(["git", "merge-file", "-p", "ours", "base", "theirs"], cwd=tmp_path).returncode > 0
    code, data, text = _port(tmp_path, patch, old, new, "--no-rules")
    statuses = {h["status"] for h in data["hunks"]}
    assert "flagged" not in statuses, [h["detail"] for h in data["hunks"]]
    result = _git_apply(new, text, tmp_path)
    assert "import logging\nimport os\nimport pathlib\n" in result
    assert "    Beta,\n    Carrot,\n    Gamma,\n" in result


def test_an_import_nothing_uses_after_the_port_is_flagged(tmp_path):
    # the patch imports `os` for code that upstream rewrote (the call it changes is gone):
    # that hunk is flagged, and so is the import it needed
    uses = MOD.replace("import os\n", "import os\nimport json\n").replace(
        "        data = helper(len(name))\n", "        data = helper(len(name))\n        json.dumps(data)\n"
    )
    new_text = MOD.replace("        data = helper(len(name))\n        return data\n", "        return helper(0)\n")
    old = _engine(tmp_path, "old", MOD)
    new = _engine(tmp_path, "new", new_text)
    patch = _patch(tmp_path, MOD, uses)
    code, data, text = _port(tmp_path, patch, old, new, "--no-rules")
    assert code == 1
    assert all(h["status"] == "flagged" for h in data["hunks"]), data
    assert any("nothing in the ported file uses" in h["detail"] for h in data["hunks"])
    assert "+import json" not in text


def test_a_dotted_name_upstream_stopped_using_is_flagged():
    from patchaudit.analysis.port_checks import vanished_usages

    old = ["class A:", "    def f(self):", "        return self.sched.enabled"]
    new = ["class A:", "    def f(self):", "        return self.sched.reporter.enabled"]
    assert vanished_usages(["        if self.sched.enabled:"], old, new) == ["self.sched.enabled"]
    assert vanished_usages(["        if self.sched.reporter.enabled:"], old, new) == []
    assert (
        vanished_usages(["        t = time.perf_counter()"], ["import time", "time.perf_counter()"], ["import time"])
        == []
    )


def test_write_replaces_the_patch_with_its_port(tmp_path):
    new_text = MOD.replace("class Loader:\n", "class Loader:\n    kind = 'file'\n")
    old = _engine(tmp_path, "old", MOD)
    new = _engine(tmp_path, "new", new_text)
    patch = _patch(tmp_path, MOD, PATCHED)
    res = CliRunner().invoke(main, ["port", patch, "--engine", "eng", "--from", old, "--to", new, "--write"])
    assert res.exit_code == 0, res.output
    text = open(patch).read()
    assert "index " not in text and "diff --git a/eng/mod.py b/eng/mod.py" in text
    assert _git_apply(new, text, tmp_path) == new_text.replace(_LINE, _LINE + "        data = data * 2\n")


def test_a_name_a_later_hunk_defines_is_not_flagged_and_its_loss_is(tmp_path):
    # hunk 1 calls `extra()`, which hunk 2 (further down the file) defines
    filler = "".join(f"\n\ndef f{i}():\n    return {i}\n" for i in range(4))
    base = MOD + filler
    uses = base.replace(_LINE, _LINE + "        extra()\n") + "\n\ndef extra():\n    return 0\n"
    old = _engine(tmp_path, "old", base)
    patch = _patch(tmp_path, base, uses)
    code, data, text = _port(tmp_path, patch, old, old, "--no-rules")
    assert code == 0 and [h["status"] for h in data["hunks"]] == ["clean", "clean"], data
    # upstream put its own, different `f3` where hunk 2's context was: hunk 2 conflicts, and
    # hunk 1, which needs its `extra`, is flagged at the end of the port
    new = _engine(tmp_path, "new", base.replace("def f3():\n    return 3\n", "def f3():\n    return 33\n"))
    code, data, text = _port(tmp_path, patch, old, new, "--no-rules")
    assert code == 1 and all(h["status"] == "flagged" for h in data["hunks"]), data
    assert any("`extra`" in h["detail"] for h in data["hunks"])
