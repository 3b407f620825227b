"""A hostile checkout must not make patchaudit run programs through git.

Every git call goes through `patchaudit.inputs.safegit`.  These tests build,
in tmp_path only, checkouts whose git configuration tries every way git has to
run a program (gpg for signed commits, fsmonitor, pager, external diff,
textconv and filter drivers chosen by a committed .gitattributes, hooks,
aliases, credential/askpass/ssh helpers, a partial clone's lazy fetch over an
`ext::` transport) and check that no marker file appears while the findings
are still reported:

* item 1: an engine repository committed in the checkout (`bump`, `check
  --engine`, `[tool.patchaudit] engines`, `inventory`): its own config is never
  read, objects are read through a private git directory;
* item 2: `check --diff-base HEAD patches/fix.patch` (the `patchaudit-diff`
  pre-commit hook) where `patches/` holds a fake repository: the repository is
  the one of the current directory, never one found next to a path;
* the diff-base repository's own config and a committed .gitattributes cannot
  make `git diff` run anything either, nor can `GIT_*` variables.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import git
import pytest

from patchaudit.testing import invoke_in

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

# ---------------------------------------------------------------------------
# marker scripts


class Markers:
    """Scripts that, when run, leave a file named after them in `self.dir`."""

    def __init__(self, base: Path):
        self.dir = base / "markers"
        self.bin = base / "evil-bin"
        self.dir.mkdir()
        self.bin.mkdir()

    def script(self, name: str) -> str:
        p = self.bin / name
        p.write_text(f"#!/bin/sh\ntouch '{self.dir / name}'\ncat >/dev/null 2>&1 </dev/null\nexit 1\n")
        p.chmod(p.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return str(p)

    def fired(self) -> list[str]:
        return sorted(os.listdir(self.dir))

    def clear(self) -> None:
        for name in os.listdir(self.dir):
            os.unlink(self.dir / name)


HOOKS = ("applypatch-msg pre-applypatch post-applypatch pre-commit pre-merge-commit prepare-commit-msg "
         "commit-msg post-commit pre-rebase post-checkout post-merge pre-push pre-receive update proc-receive "
         "post-receive post-update reference-transaction push-to-checkout pre-auto-gc post-rewrite "
         "sendemail-validate fsmonitor-watchman post-index-change").split()


def hostile_config(repo_dir: Path, gitdir: Path, m: Markers, promisor: bool = True) -> None:
    """Append every program-running setting we know of to the repository's config,
    and put a marker script in place of every hook."""
    hooks = gitdir / "hooks"
    hooks.mkdir(exist_ok=True)
    evil_hooks = m.bin / "hooks"
    evil_hooks.mkdir(exist_ok=True)
    for h in HOOKS:
        for d in (hooks, evil_hooks):
            p = d / h
            p.write_text(f"#!/bin/sh\ntouch '{m.dir / ('hook-' + h)}'\nexit 1\n")
            p.chmod(0o755)
    ext = "ext::" + m.script("ext-transport").replace(" ", "% ")
    text = f"""
[core]
\tfsmonitor = {m.script("core.fsmonitor")}
\thooksPath = {evil_hooks}
\tpager = {m.script("core.pager")}
\tsshCommand = {m.script("core.sshCommand")}
\taskPass = {m.script("core.askPass")}
\talternateRefsCommand = {m.script("core.alternateRefsCommand")}
\teditor = {m.script("core.editor")}
\tgitProxy = {m.script("core.gitProxy")}
[pager]
\tlog = {m.script("pager.log")}
\tdiff = {m.script("pager.diff")}
\tdiff-index = {m.script("pager.diff-index")}
[diff]
\texternal = {m.script("diff.external")}
[diff "evil"]
\ttextconv = {m.script("diff.evil.textconv")}
\tcommand = {m.script("diff.evil.command")}
\tcachetextconv = false
[filter "evil"]
\tclean = {m.script("filter.evil.clean")}
\tsmudge = {m.script("filter.evil.smudge")}
[filter "evilproc"]
\tprocess = {m.script("filter.evilproc.process")}
[merge "evil"]
\tdriver = {m.script("merge.evil.driver")}
[log]
\tshowSignature = true
[gpg]
\tprogram = {m.script("gpg.program")}
[gpg "ssh"]
\tdefaultKeyCommand = {m.script("gpg.ssh.defaultKeyCommand")}
[credential]
\thelper = !{m.script("credential.helper")}
[interactive]
\tdiffFilter = {m.script("interactive.diffFilter")}
[sequence]
\teditor = {m.script("sequence.editor")}
[uploadpack]
\tpackObjectsHook = {m.script("uploadpack.packObjectsHook")}
[alias]
\tst = !{m.script("alias.st")}
\tlog = !{m.script("alias.log")}
\tls-tree = !{m.script("alias.ls-tree")}
\tcat-file = !{m.script("alias.cat-file")}
\trev-parse = !{m.script("alias.rev-parse")}
\tdiff = !{m.script("alias.diff")}
\tls-files = !{m.script("alias.ls-files")}
[protocol "ext"]
\tallow = always
[protocol]
\tallow = always
"""
    if promisor:  # a partial clone: a missing object is fetched lazily, over the ext:: command
        text += f"""
[extensions]
\tpartialClone = origin
[remote "origin"]
\turl = {ext}
\tpromisor = true
\tfetch = +refs/heads/*:refs/remotes/origin/*
"""
    cfg = gitdir / "config"
    body = cfg.read_text()
    if promisor:
        body = body.replace("repositoryformatversion = 0", "repositoryformatversion = 1")
    cfg.write_text(body + text)


ATTRIBUTES = "*.py diff=evil filter=evilproc\n*.patch diff=evil filter=evil\n* merge=evil\n"

# ---------------------------------------------------------------------------
# the engine (item 1): a git repository committed in the checkout

PROC_V1 = """\
import time


class Scheduler:
    def step(self, batch):
        start = time.perf_counter()
        batch = self.prepare(batch)
        out = self.run(batch)
        self.record(start)
        return out

    async def load(self, p, d):
        base = await self.legacy_load_mm_data(prompt=p, image_data=d, input_ids=None)
        return base

    async def legacy_load_mm_data(self, prompt, image_data=None, input_ids=None):
        return prompt

    def prepare(self, batch):
        return list(batch)

    def run(self, batch):
        return batch

    def record(self, start):
        return start
"""
PROC_V2 = PROC_V1.replace("def step(self, batch):", "def step(self, batch, stream=None):")

STEP_PATCH = """\
--- a/python/sglang/srt/proc.py
+++ b/python/sglang/srt/proc.py
@@ -6,5 +6,5 @@ class Scheduler:
         start = time.perf_counter()
         batch = self.prepare(batch)
-        out = self.run(batch)
+        out = self.run(list(batch))
         self.record(start)
         return out
"""

# a git-style patch whose index line names a pre-image blob the engine does not have:
# in a partial clone, asking for it would make git fetch it from the promisor remote
MISSING_BLOB = "1234567890abcdef1234567890abcdef12345678"
LOADER_PATCH = f"""\
diff --git a/python/sglang/srt/proc.py b/python/sglang/srt/proc.py
index {MISSING_BLOB}..{"f" * 40} 100644
--- a/python/sglang/srt/proc.py
+++ b/python/sglang/srt/proc.py
@@ -12,3 +12,3 @@ class Scheduler:
     async def load(self, p, d):
-        base = await self.legacy_load_mm_data(prompt=p, image_data=d, input_ids=None)
+        base = await self.legacy_load_mm_data(prompt=p, image_data=d)
         return base
"""

ENGINE_TREE = {"python/sglang/__init__.py": "", "python/sglang/srt/__init__.py": "",
               "python/sglang/srt/proc.py": PROC_V1, ".gitattributes": ATTRIBUTES}


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


def signed_commit(repo: git.Repo, message: str) -> str:
    """A commit object with a `gpgsig` header, written with `git hash-object`."""
    tree = repo.index.write_tree().hexsha
    parent = repo.head.commit.hexsha
    who = "Engine Dev <dev@example.com> 1700000000 +0000"
    body = (f"tree {tree}\nparent {parent}\nauthor {who}\ncommitter {who}\n"
            "gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEEhostilehostilehostile\n"
            " -----END PGP SIGNATURE-----\n\n" + message + "\n")
    out = subprocess.run(["git", "hash-object", "-t", "commit", "-w", "--stdin"], input=body.encode(),
                         cwd=repo.working_tree_dir, capture_output=True, check=True)
    sha = out.stdout.decode().strip()
    repo.head.reference.set_commit(sha)
    return sha


@pytest.fixture
def hostile(tmp_path):
    """A checkout (a real git repository) with an engine repository committed in it
    (vendor/sglang, v1 -> a signed commit -> v2), both configured to run programs."""
    m = Markers(tmp_path)
    co = tmp_path / "checkout"
    engine = co / "vendor" / "sglang"
    engine.mkdir(parents=True)
    er = git.Repo.init(engine)
    write(engine, ENGINE_TREE)
    er.index.add(list(ENGINE_TREE))
    er.index.commit("sglang v1")
    er.create_tag("v1")
    write(engine, {"python/sglang/srt/proc.py": PROC_V2})
    er.index.add(["python/sglang/srt/proc.py"])
    signed = signed_commit(er, "Scheduler.step takes the CUDA stream")
    er.create_tag("v2")
    er.close()
    hostile_config(engine, engine / ".git", m)

    cr = git.Repo.init(co)
    files = {"patches/fix.patch": LOADER_PATCH, "patches/step.patch": STEP_PATCH, ".gitattributes": ATTRIBUTES,
             ".gitignore": "vendor/\n", "rollout.py": "x = 1\n"}
    write(co, files)
    cr.index.add(list(files))
    cr.index.commit("the fork")
    cr.close()
    hostile_config(co, co / ".git", m, promisor=False)
    return co, m, signed


def run(cwd: Path, *args: str):
    return invoke_in(cwd, list(args))


# ---------------------------------------------------------------------------
# item 1


def test_bump_over_a_signed_commit_runs_no_gpg(hostile):
    """`git log -L` with log.showSignature=true and gpg.program in the engine's config ran gpg."""
    co, m, signed = hostile
    res = run(co, "bump", "patches/", "--engine", "sglang=vendor/sglang", "--from", "v1", "--to", "v2",
              "--format", "json")
    assert m.fired() == [], res.stderr
    assert res.exit_code == 1, res.stderr
    data = json.loads(res.stdout)
    pa203 = [f for f in data["findings"] if f["code"] == "PA203"]
    assert pa203 and "Scheduler.step" in pa203[0]["message"]
    assert signed[:10] in pa203[0]["message"]          # the upstream commit is still named
    assert any(f["code"] == "PA101" and f["path"].endswith("fix.patch") for f in data["findings"])


def test_bump_with_path_at_rev_specs(hostile):
    co, m, signed = hostile
    # PA203 is a warning: exit 0 (the PA101 error of fix.patch is not in this run)
    res = run(co, "bump", "patches/step.patch", "--engine", "sglang", "--from", "vendor/sglang@v1",
              "--to", "vendor/sglang@v2")
    assert m.fired() == [], res.stderr
    assert res.exit_code == 0 and "PA203" in res.stdout and signed[:10] in res.stdout, res.stdout + res.stderr


def test_check_with_a_git_engine_fetches_and_runs_nothing(hostile):
    """The index line names a blob the (partial clone) engine lacks: git would fetch it
    from the promisor remote, whose `ext::` URL is a command."""
    co, m, _ = hostile
    res = run(co, "check", "--no-cache", "--format", "json", "--engine", "sglang=vendor/sglang@v2", "patches/")
    assert m.fired() == [], res.stderr
    assert res.exit_code == 1, res.stderr
    found = [(Path(f["path"]).name, f["code"]) for f in json.loads(res.stdout)]
    assert ("fix.patch", "PA101") in found
    pa101 = [f for f in json.loads(res.stdout) if f["code"] == "PA101"][0]
    assert pa101["target"]["symbol"] == "Scheduler.load"     # exact mode: read from the engine


def test_engines_named_in_the_checkouts_pyproject(hostile):
    co, m, _ = hostile
    (co / "pyproject.toml").write_text('[tool.patchaudit]\nengines = { sglang = "vendor/sglang@v2" }\n')
    res = run(co, "check", "--no-cache", "--format", "json", "patches/")
    assert m.fired() == [], res.stderr
    assert res.exit_code == 1, res.stderr
    pa101 = [f for f in json.loads(res.stdout) if f["code"] == "PA101"]
    assert pa101 and pa101[0]["target"]["symbol"] == "Scheduler.load"


def test_inventory_with_a_git_engine(hostile):
    co, m, _ = hostile
    res = run(co, "inventory", "--format", "json", "--engine", "sglang=vendor/sglang@v2", "patches/")
    assert m.fired() == [], res.stderr
    assert res.exit_code == 0, res.stderr
    rows = json.loads(res.stdout)["rows"]
    symbols = {r["symbol"] for r in rows}
    assert "sglang.srt.proc.Scheduler.load" in symbols and "sglang.srt.proc.Scheduler.step" in symbols
    assert all(r["exists"] == "yes" for r in rows)


def test_engine_repository_config_is_never_read(hostile):
    """Even a config git cannot parse does not matter: the engine's config is never read."""
    co, m, _ = hostile
    cfg = co / "vendor" / "sglang" / ".git" / "config"
    cfg.write_text(cfg.read_text() + "\n[core\n\tgarbage\n")
    res = run(co, "check", "--no-cache", "--format", "json", "--engine", "sglang=vendor/sglang@v2", "patches/")
    assert res.exit_code == 1, res.stderr
    assert m.fired() == []


# ---------------------------------------------------------------------------
# item 2: a fake repository inside the checkout, next to the patch


FIX_V1 = """\
--- a/python/sglang/srt/proc.py
+++ b/python/sglang/srt/proc.py
@@ -12,3 +12,3 @@ class Scheduler:
     async def load(self, p, d):
-        base = await self.load_mm_data(prompt=p, image_data=d)
+        base = await self.load_mm_data(prompt=p, image_data=d, input_ids=None)
         return base
"""
FIX_V2 = """\
--- a/python/sglang/srt/proc.py
+++ b/python/sglang/srt/proc.py
@@ -12,3 +12,3 @@ class Scheduler:
     async def load(self, p, d):
-        base = await self.load_mm_data(prompt=p, image_data=d)
+        base = await self.legacy_load_mm_data(prompt=p, image_data=d)
         return base
"""


def fake_repository(where: Path, work_tree: Path, content: dict[str, str], m: Markers) -> list[str]:
    """A git directory (HEAD, config, index, objects/, refs/) holding `content` as its
    HEAD, with core.worktree and core.fsmonitor set; returns its files, relative to `where`."""
    staging = where.parent / (where.name + "-staging")
    gd = staging / "gd"
    wt = staging / "wt"
    wt.mkdir(parents=True)
    write(wt, content)
    env = {**os.environ, "GIT_DIR": str(gd), "GIT_WORK_TREE": str(wt)}
    subprocess.run(["git", "init", "-q", "--bare", str(gd)], check=True, env={**os.environ})
    subprocess.run(["git", "add", "-A"], check=True, env=env, cwd=wt)
    subprocess.run(["git", "commit", "-q", "-m", "fake"], check=True, env=env, cwd=wt)
    shutil.rmtree(gd / "hooks", ignore_errors=True)
    shutil.rmtree(gd / "info", ignore_errors=True)
    for name in ("description", "COMMIT_EDITMSG"):
        (gd / name).unlink(missing_ok=True)
    (gd / "config").write_text(
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
        f"\tworktree = {work_tree}\n\tfsmonitor = {m.script('fake-repo.fsmonitor')}\n"
        f"\tpager = {m.script('fake-repo.pager')}\n[diff]\n\texternal = {m.script('fake-repo.diff.external')}\n")
    out = []
    for p in sorted(gd.rglob("*")):
        if p.is_file():
            rel = p.relative_to(gd)
            dest = where / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, dest)
            out.append(str(Path(where.name) / rel))
    shutil.rmtree(staging)
    return out


@pytest.fixture
def clone_with_fake_repo(tmp_path):
    m = Markers(tmp_path)
    root = tmp_path / "clone"
    root.mkdir()
    r = git.Repo.init(root)
    write(root, {"patches/fix.patch": FIX_V1, "README": "fork\n"})
    r.index.add(["patches/fix.patch", "README"])
    r.index.commit("the fork")
    # the pull request: the new patch and, next to it, a repository of its own whose
    # HEAD already holds the new patch (so that `git diff` there sees no change)
    fake = fake_repository(root / "patches", root / "patches", {"fix.patch": FIX_V2}, m)
    r.index.add(fake)
    r.index.commit("add a git directory in patches/")
    r.close()
    (root / "patches" / "fix.patch").write_text(FIX_V2)   # the change under review (the commit being made)
    return root, m


def test_diff_base_does_not_open_a_repository_found_next_to_the_patch(clone_with_fake_repo):
    root, m = clone_with_fake_repo
    res = run(root, "check", "--no-cache", "--format", "json", "--diff-base", "HEAD", "patches/fix.patch")
    assert m.fired() == [], res.stderr
    assert res.exit_code == 1, res.stdout + res.stderr
    found = [(f["path"], f["line"], f["code"]) for f in json.loads(res.stdout)]
    assert found == [(os.path.join("patches", "fix.patch"), 6, "PA101")]


def test_diff_base_text_output_and_exit_code(clone_with_fake_repo):
    root, m = clone_with_fake_repo
    res = run(root, "check", "--no-cache", "--diff-base", "HEAD", "patches/fix.patch")
    assert m.fired() == []
    assert res.exit_code == 1 and "PA101" in res.stdout


def test_diff_base_from_inside_the_fake_repository_is_refused(clone_with_fake_repo):
    """Started inside the fake git directory, git must not take it for a repository."""
    root, m = clone_with_fake_repo
    res = run(root / "patches", "check", "--no-cache", "--diff-base", "HEAD", "fix.patch")
    assert m.fired() == []
    assert res.exit_code == 2, res.stdout + res.stderr
    assert "not in the work tree of a git repository" in res.stderr and "Traceback" not in res.stderr


def test_a_git_without_safe_bare_repository_is_caught_too(clone_with_fake_repo, monkeypatch):
    """git before 2.38 ignores safe.bareRepository and would take patches/ for the
    repository: the repository must also be the one a `.git` names."""
    from patchaudit.inputs import gitrun

    monkeypatch.setattr(gitrun, "SAFE_CONFIG",
                        tuple(kv for kv in gitrun.SAFE_CONFIG if kv[0] != "safe.bareRepository"))
    root, m = clone_with_fake_repo
    res = run(root / "patches", "check", "--no-cache", "--diff-base", "HEAD", "fix.patch")
    assert m.fired() == []
    assert res.exit_code == 2 and "which no .git names" in res.stderr, res.stdout + res.stderr


def test_diff_base_path_outside_the_current_repository_is_reported(clone_with_fake_repo, tmp_path):
    root, m = clone_with_fake_repo
    other = tmp_path / "elsewhere"
    other.mkdir()
    git.Repo.init(other).close()
    (other / "x.py").write_text("y = legacy_load_mm_data(prompt=t)\n")
    res = run(root, "check", "--no-cache", "--diff-base", "HEAD", str(other / "x.py"))
    assert res.exit_code == 2, res.stdout + res.stderr
    assert "x.py" in res.stderr and "Traceback" not in res.stderr
    assert m.fired() == []


# ---------------------------------------------------------------------------
# the diff-base repository's own config and attributes


ROLLOUT_NEW = "x = 1\nbase = await_it(legacy_load_mm_data(prompt=p, image_data=d))\n"


def test_diff_base_in_a_checkout_whose_config_runs_programs(hostile):
    co, m, _ = hostile
    (co / "rollout.py").write_text(ROLLOUT_NEW)            # a .py file (filter=evilproc, diff=evil)
    fix = co / "patches" / "fix.patch"
    fix.write_text("A fork patch.\n\n" + fix.read_text())  # a .patch file (filter=evil, diff=evil)
    os.utime(co / "patches" / "step.patch", (1, 1))         # stat-dirty, content unchanged
    (co / "new.sh").write_text("export SGLANG_MM_AVOID_RETOKENIZE=0\n")   # untracked: new as a whole
    res = run(co, "check", "--no-cache", "--format", "json", "--diff-base", "HEAD", "rollout.py", "patches/",
              "new.sh")
    assert m.fired() == [], res.stderr
    assert res.exit_code == 1, res.stdout + res.stderr
    found = sorted((f["path"], f["line"], f["code"]) for f in json.loads(res.stdout))
    assert found == [("new.sh", 1, "PA104"), ("rollout.py", 2, "PA101")]
    # nothing changed since HEAD in a clean tree: exit 0, still nothing run
    res = run(co, "check", "--no-cache", "--diff-base", "HEAD", "patches/step.patch")
    assert res.exit_code == 0 and m.fired() == [], res.stdout + res.stderr


def test_git_variables_that_point_at_programs_are_ignored(hostile, monkeypatch):
    co, m, signed = hostile
    for var in ("GIT_EXTERNAL_DIFF", "GIT_PAGER", "PAGER", "GIT_SSH_COMMAND", "GIT_SSH", "GIT_ASKPASS",
                "SSH_ASKPASS", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_PROXY_COMMAND"):
        monkeypatch.setenv(var, m.script("env." + var))
    monkeypatch.setenv("GIT_CONFIG_COUNT", "2")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.fsmonitor")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", m.script("env.GIT_CONFIG_COUNT.fsmonitor"))
    monkeypatch.setenv("GIT_CONFIG_KEY_1", "log.showSignature")
    monkeypatch.setenv("GIT_CONFIG_VALUE_1", "true")
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'diff.external'='{m.script('env.GIT_CONFIG_PARAMETERS')}'")
    monkeypatch.setenv("GIT_TRACE", str(m.dir / "env.GIT_TRACE"))          # a write, not a program
    (co / "rollout.py").write_text(ROLLOUT_NEW)
    res = run(co, "check", "--no-cache", "--format", "json", "--diff-base", "HEAD", "rollout.py")
    assert res.exit_code == 1 and [f["code"] for f in json.loads(res.stdout)] == ["PA101"], res.stderr
    res = run(co, "bump", "patches/step.patch", "--engine", "sglang=vendor/sglang", "--from", "v1", "--to", "v2")
    assert res.exit_code == 0 and signed[:10] in res.stdout, res.stdout + res.stderr
    assert m.fired() == []


def test_the_engine_is_not_written(hostile):
    """Reading the engine leaves its git directory as it was (no index, no refs, no objects)."""
    co, m, _ = hostile
    gd = co / "vendor" / "sglang" / ".git"

    def snap():
        return {str(p.relative_to(gd)): (p.stat().st_size, p.stat().st_mtime_ns)
                for p in gd.rglob("*") if p.is_file()}

    before = snap()
    res = run(co, "bump", "patches/", "--engine", "sglang=vendor/sglang", "--from", "v1", "--to", "v2")
    assert res.exit_code == 1
    assert snap() == before
    assert m.fired() == []


def test_a_bare_engine_repository_and_a_worktree(hostile, tmp_path):
    """The engine can be a bare repository or a linked work tree; refs come from where git keeps them."""
    co, m, signed = hostile
    engine = co / "vendor" / "sglang"
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", "--no-local", str(engine), str(bare)], check=True,
                   env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_ALLOW_PROTOCOL": "file"},
                   capture_output=True)
    (bare / "config").write_text((bare / "config").read_text()
                                 + f"[log]\n\tshowSignature = true\n[gpg]\n\tprogram = {m.script('bare.gpg')}\n")
    subprocess.run(["git", "--git-dir", str(bare), "pack-refs", "--all"], check=True)
    m.clear()
    res = run(co, "bump", "patches/step.patch", "--engine", f"sglang={bare}", "--from", "v1", "--to", "v2")
    assert m.fired() == [] and res.exit_code == 0 and signed[:10] in res.stdout, res.stdout + res.stderr
    wt = tmp_path / "wt"
    quiet = ["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=", "-c", "filter.evil.smudge=",
             "-c", "filter.evilproc.process="]
    subprocess.run(["git", *quiet, "worktree", "add", "--detach", str(wt), "v2"], cwd=engine, check=True,
                   capture_output=True)
    m.clear()
    res = run(co, "check", "--no-cache", "--format", "json", "--engine", f"sglang={wt}@HEAD", "patches/fix.patch")
    assert m.fired() == [] and res.exit_code == 1, res.stderr
    assert json.loads(res.stdout)[0]["target"]["symbol"] == "Scheduler.load"


# ---------------------------------------------------------------------------
# one way to run git


_RUNS_PROGRAMS = {"system", "popen", "execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp",
                  "execlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl", "spawnle", "spawnlp",
                  "spawnlpe", "posix_spawn", "posix_spawnp"}


def test_every_git_call_goes_through_safegit():
    """Only patchaudit/inputs/gitrun.py (behind patchaudit.inputs.safegit) starts programs
    (git); nothing imports GitPython."""
    import ast

    import patchaudit

    pkg = Path(patchaudit.__file__).parent
    sources = sorted(pkg.rglob("*.py")) + sorted((pkg.parent / "rules").glob("*.py"))
    allowed = {pkg / "inputs" / "gitrun.py"}   # the one module that runs git
    bad = []
    for path in sources:
        if path in allowed:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for n in names:
                if n.split(".")[0] in ("subprocess", "git", "gitdb", "pty"):
                    bad.append(f"{path.relative_to(pkg.parent)}:{node.lineno}: imports {n}")
            if isinstance(node, ast.Attribute) and node.attr in _RUNS_PROGRAMS \
                    and isinstance(node.value, ast.Name) and node.value.id == "os":
                bad.append(f"{path.relative_to(pkg.parent)}:{node.lineno}: os.{node.attr}")
    assert bad == [], "run git through patchaudit.inputs.safegit:\n" + "\n".join(bad)


def test_the_private_git_directory_goes_away_on_close(hostile):
    from patchaudit.engine.sources import open_engine

    co, m, _ = hostile
    src = open_engine(f"{co / 'vendor' / 'sglang'}@v2", name="sglang")
    private = src._repo.private
    assert os.path.isdir(private) and not private.startswith(str(co))
    assert "python/sglang/srt/proc.py" in src.files()
    assert src.read_text("python/sglang/srt/proc.py") == PROC_V2
    src.close()
    src.close()   # idempotent
    assert not os.path.exists(private)
    assert m.fired() == []
