"""Every shell command of README.md and docs/*.md works as pasted.

Each ```sh (or ```bash) block is run, one command at a time (backslash continuations
joined, comments left to bash), by bash in a fresh `git clone` of this repository (no
tags, nothing untracked: what a user who clones it has), with the installed
interpreter's `patchaudit` first on PATH.  The test builds the small trees the commands
name into the clone first: a project with `docker/patch/latest/sglang.patch`,
`patches/`, `fork_pkg/`, `src/`, fake sglang wheels under their real file names,
`~/src/sglang` (a git repository with the release tags; HOME is a temporary folder),
tokenizers and rollout files.  pip runs as pasted, configured (as a user configures it)
to install into a throwaway folder from no index: nothing downloads, nothing of this
environment changes.  A command passes when it exits 0 or 1 (1: findings) without a
traceback; 2 is a usage or configuration error.

A block that cannot run here says why in the doc, on the line before its fence:
`<!-- doc-test: skip: REASON -->` (REASON required).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import git
import pytest
from enginewheels import build_wheel
from test_bump import SEED_PATCH, TREE_V1, _tree_v2

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^(?P<indent>[ ]*)```(?P<lang>[A-Za-z]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```", re.M | re.S)
SKIP = re.compile(r"<!--\s*doc-test:\s*skip:\s*(?P<why>\S[^>]*?)\s*-->\s*$")
WHEEL = "sglang-{v}-cp311-cp311-manylinux_2_34_x86_64.whl"


def blocks() -> list[tuple[str, int, str, str | None]]:
    """(doc, line, body, skip reason) of every sh/bash block."""
    out = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            if m.group("lang") not in ("sh", "bash"):
                continue
            line = text.count("\n", 0, m.start()) + 1
            before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            skip = SKIP.search(before)
            out.append((doc.relative_to(REPO).as_posix(), line, m.group("body"), skip.group("why") if skip else None))
    return out


#: a command whose exit code 1 means findings: patchaudit itself (also under /usr/bin/time)
FINDINGS_OK = re.compile(r"(?:\S*/time(?:\s+-\w+)*\s+)?patchaudit\s")


def commands(body: str) -> list[str]:
    """The commands of a block: continuation lines joined, `a && b` as two commands (each
    checked: the second runs only when the first passed), blank and comment-only lines dropped."""
    text = re.sub(r"\\\n", " ", body)
    lines = [c for c in (line.strip() for line in text.splitlines()) if c and not c.startswith("#")]
    return [part.strip() for c in lines for part in c.split(" && ")]


def _engine_repo(root: Path) -> None:
    repo = git.Repo.init(root)
    for version, tree in (("v0.5.12.post1", TREE_V1), ("v0.5.15.post1", _tree_v2())):
        for rel, text in tree.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        repo.git.add("-A")
        repo.index.commit(version)
        repo.create_tag(version)


def _trees(clone: Path, home: Path) -> None:
    """What the documented commands name, built into the clone."""
    from test_tokenizer import write_tokenizer

    wheel_tree = {k.removeprefix("python/"): v for k, v in TREE_V1.items()}
    build_wheel(clone, "sglang", "0.5.12.post1", wheel_tree, tag="cp311-cp311-manylinux_2_34_x86_64")
    new_tree = {k.removeprefix("python/"): v for k, v in _tree_v2().items()}
    build_wheel(clone, "sglang", "0.5.15.post1", new_tree, tag="cp311-cp311-manylinux_2_34_x86_64")
    for folder in ("docker/patch/latest", "patches"):
        (clone / folder).mkdir(parents=True)
        (clone / folder / "sglang.patch").write_text(SEED_PATCH)
    (clone / "fork_pkg").mkdir()
    (clone / "fork_pkg" / "patches.py").write_text(
        "from sglang.srt.multimodal.processors.base_processor import BaseMultimodalProcessor\n\n\n"
        "def load(self, prompt, multimodal_tokens, image_data=None):\n    return prompt\n\n\n"
        "BaseMultimodalProcessor.legacy_load_mm_data = load\n"
    )
    (clone / "src").mkdir()
    (clone / "src" / "proc.py").write_text('PLACEHOLDER = "<|media_pad|>"\n')
    for folder in ("path/to/model", "models/Kimi-K3", "models/Qwen3-VL", "."):
        write_tokenizer(clone / folder)
    record = json.dumps({"tokens": [10, 11, 12, 13]}) + "\n"
    (clone / "rollouts").mkdir()
    for name in ("rollouts.jsonl", "roll.jsonl", "rollouts/a.jsonl", "rollouts/b.jsonl"):
        (clone / name).write_text(record * 3)
    _engine_repo(home / "src" / "sglang")


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    pytest.importorskip("tokenizers")
    base = tmp_path_factory.mktemp("docs")
    clone = base / "patchaudit"
    # a clone of what is committed (a clone has no tags unless they are pushed: none here)
    git.Repo.clone_from(str(REPO), clone, no_tags=True)
    home = base / "home"
    _trees(clone, home)
    bin_dir = base / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "patchaudit"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m patchaudit "$@"\n')
    exe.chmod(0o755)
    env = {
        **os.environ,
        "HOME": str(home),
        "PATH": os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "XDG_CACHE_HOME": str(base / "cache"),
        "PATCHAUDIT_OFFLINE": "1",
        # pip as a user may configure it: no index, into a throwaway folder, this environment's setuptools
        "PIP_NO_INDEX": "1",
        "PIP_TARGET": str(base / "site"),
        "PIP_NO_DEPS": "1",
        "PIP_NO_BUILD_ISOLATION": "0",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return clone, env


ALL = blocks()


def test_the_docs_have_shell_blocks_and_every_skip_says_why():
    assert len(ALL) >= 8
    for doc, line, _, why in ALL:
        assert why is None or len(why) > 10, f"{doc}:{line}: a skip needs its reason"


def test_no_doc_names_a_tag_of_this_repository_that_a_clone_lacks():
    """`rev: v0.1.0` (pre-commit), `<org>/patchaudit@v0.1.0` (the Action, pip): each tag
    named must exist (`git tag`); until a release is tagged, a commit sha is named."""
    tags = set(git.Repo(REPO).git.tag().split())
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for m in re.finditer(r"(?:^\s*rev:\s*|patchaudit@)(?P<tag>[^\s\"'<>#]+)", text, re.M):
            line = text.count("\n", 0, m.start()) + 1
            assert m.group("tag") in tags, f"{doc.name}:{line}: tag {m.group('tag')!r} does not exist in a clone"


@pytest.mark.parametrize(("doc", "line", "body", "why"), ALL, ids=[f"{d}:{n}" for d, n, _, _ in ALL])
def test_the_command_works_as_pasted(clone, doc, line, body, why):
    if why:
        pytest.skip(f"{doc}:{line}: {why}")
    root, env = clone
    for command in commands(body):
        program = command.split()[0]
        if program.startswith("/") and not os.path.exists(program):
            pytest.skip(f"{doc}:{line}: {program} is not installed on this machine")
        res = subprocess.run(["bash", "-c", command], cwd=root, env=env, capture_output=True, text=True, timeout=600)
        said = f"{doc}:{line}: `{command}` exited {res.returncode}\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}"
        # patchaudit exits 1 on findings; any other program (pip, git) must succeed
        assert res.returncode in ((0, 1) if FINDINGS_OK.match(command) else (0,)), said
        assert "Traceback" not in res.stderr, said
