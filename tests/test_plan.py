"""The plan (recipes + bindings -> per-patch engine, order, applier) and what check does with it."""

from __future__ import annotations

import json
import subprocess

import git
from click.testing import CliRunner

from patchaudit.cli import main

BASE = "def f(x):\n    a = 1\n    b = 2\n    c = 3\n    return a + b + c\n"


def _patch(old: str, new: str, path: str = "pkg/mod.py") -> str:
    import difflib

    diff = difflib.unified_diff(
        old.splitlines(True), new.splitlines(True), f"a/python/sglang/{path}", f"b/python/sglang/{path}"
    )
    return "".join(diff)


P1 = _patch(BASE, BASE.replace("    b = 2\n", "    b = 20\n"))
P2 = _patch(BASE, BASE.replace("    b = 2\n", "    b = 200\n"))  # the same line: conflicts in every order
P3 = _patch(BASE.replace("b = 2", "b = 20"), BASE.replace("b = 2", "b = 20").replace("    c = 3\n", "    c = 30\n"))
MEGATRON = (
    "--- a/megatron/core/parallel_state.py\n+++ b/megatron/core/parallel_state.py\n"
    "@@ -1,2 +1,2 @@\n-x = 1\n+x = 2\n y = 1\n"
)

DOCKERFILE = """\
FROM lmsysorg/sglang:v0.5.15.post1
ARG PATCH_VERSION=latest
COPY docker/patch/${PATCH_VERSION}/megatron*.patch /root/Megatron-LM/
RUN cd /root/Megatron-LM && git apply megatron.patch --3way
COPY docker/patch/${PATCH_VERSION}/sglang*.patch /sgl-workspace/sglang/
RUN cd /sgl-workspace/sglang && for p in sglang-b.patch sglang-a.patch; do git apply "$p"; done
"""


def _tree(tmp_path, extra: dict | None = None):
    files = {
        "docker/Dockerfile": DOCKERFILE,
        "docker/patch/latest/sglang-a.patch": P1,
        "docker/patch/latest/sglang-b.patch": P3,
        "docker/patch/latest/megatron.patch": MEGATRON,
        "docker/patch/v0.5.9/sglang.patch": P2,
        "other/loose.patch": P2,
        **(extra or {}),
    }
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def _engine(tmp_path):
    root = tmp_path / "engine"
    (root / "sglang" / "pkg").mkdir(parents=True)
    (root / "sglang" / "__init__.py").write_text("")
    (root / "sglang" / "version.py").write_text('__version__ = "0.5.15.post1"\n')
    (root / "sglang" / "pkg" / "mod.py").write_text(BASE)
    return root


def test_plan_json_order_applier_version(tmp_path, monkeypatch):
    _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(main, ["plan", ".", "--format", "json"])
    assert out.exit_code == 0, out.output
    got = json.loads(out.output)
    sets = {(s["recipe"], s["engine"]): s for s in got["sets"]}
    sgl = sets[("docker/Dockerfile", "sglang")]
    assert [p["patch"] for p in sgl["patches"]] == [
        "docker/patch/latest/sglang-b.patch",
        "docker/patch/latest/sglang-a.patch",
    ]  # the Dockerfile's order, not the names'
    assert {p["applier"] for p in sgl["patches"]} == {"git apply"}
    assert sgl["patches"][0]["version"] == "0.5.15.post1"
    meg = sets[("docker/Dockerfile", "megatron")]
    assert [p["applier"] for p in meg["patches"]] == ["git apply --3way"]
    assert [a["patch"] for a in got["alternatives"]] == ["docker/patch/v0.5.9/sglang.patch"]
    assert got["unnamed"] == ["other/loose.patch"]
    text = CliRunner().invoke(main, ["plan", "."]).output
    assert "docker/Dockerfile:6: sglang (0.5.15.post1) in /sgl-workspace/sglang" in text
    assert "patches no recipe or binding assigns to an engine:\n  other/loose.patch" in text


def test_binding_overrides_and_type_error(tmp_path, monkeypatch):
    _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.patchaudit.engines.vllm]\npatches = ["other/*.patch"]\n')
    got = json.loads(CliRunner().invoke(main, ["plan", ".", "--format", "json"]).output)
    assert [(b["patch"], b["engine"]) for b in got["bound"]] == [("other/loose.patch", "vllm")]
    (tmp_path / "pyproject.toml").write_text("[tool.patchaudit.engines.vllm]\npatches = 3\n")
    bad = CliRunner().invoke(main, ["plan", "."])
    assert bad.exit_code == 2
    assert "pyproject.toml" in bad.output and "engines.vllm] patches" in bad.output


def test_check_scopes_patches_to_their_engine(tmp_path, monkeypatch):
    _tree(tmp_path)
    engine = _engine(tmp_path)
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(
        main, ["check", "docker", "other", "--no-cache", "--engine", f"sglang={engine}", "--format", "json"]
    )
    assert "no engine given for megatron (1 patch): not applied" in out.output
    assert "of other PATCH_VERSION folders (v0.5.9) not applied" in out.output
    data = json.loads(out.stdout)
    hunks = {(h["patch"], h["status"]) for h in data.get("hunks", [])} if isinstance(data, dict) else set()
    paths = {f["path"] for f in (data["findings"] if isinstance(data, dict) else data)}
    assert "docker/patch/latest/megatron.patch" not in paths
    assert not any(p == "docker/patch/v0.5.9/sglang.patch" for p, _ in hunks)


def _git_apply_ok(repo, patch_text: str) -> bool:
    (repo / "p.patch").write_text(patch_text)
    r = subprocess.run(["git", "apply", "p.patch"], cwd=repo, capture_output=True)
    return r.returncode == 0


def _repo(tmp_path, name: str):
    root = tmp_path / name
    (root / "python/sglang/pkg").mkdir(parents=True)
    (root / "python/sglang/pkg/mod.py").write_text(BASE)
    r = git.Repo.init(root)
    r.index.add(["python/sglang/pkg/mod.py"])
    r.index.commit("base")
    return root


def test_pa304_unordered_criterion_matches_git_apply(tmp_path, monkeypatch):
    """Without a recipe: PA304 fires only on the pair that real `git apply` refuses in both
    orders (P1/P2), not on the pair one order of which applies (P1 then P3)."""
    for first, second, both_fail in ((P1, P2, True), (P1, P3, False)):
        orders = []
        for k, (x, y) in enumerate(((first, second), (second, first))):
            repo = _repo(tmp_path, f"r{both_fail}{k}")
            orders.append(_git_apply_ok(repo, x) and _git_apply_ok(repo, y))
        assert (not any(orders)) == both_fail
        tree = tmp_path / f"set{both_fail}"
        tree.mkdir()
        (tree / "0001-a.patch").write_text(first)
        (tree / "0002-b.patch").write_text(second)
        monkeypatch.chdir(tree)
        out = CliRunner().invoke(main, ["check", ".", "--no-cache", "--select", "PA304"])
        assert ("PA304" in out.output) == both_fail, out.output


def test_pa304_recipe_order_matches_git_apply(tmp_path, monkeypatch):
    """With the Dockerfile's order (b before a: P3 written on P1 is applied first), git apply
    fails on the second patch and PA304 says so; in the other order neither does."""
    for order, fails in (("sglang-b.patch sglang-a.patch", True), ("sglang-a.patch sglang-b.patch", False)):
        repo = _repo(tmp_path, f"o{fails}")
        names = order.split()
        texts = {"sglang-a.patch": P1, "sglang-b.patch": P3}
        ok = _git_apply_ok(repo, texts[names[0]]) and _git_apply_ok(repo, texts[names[1]])
        assert ok != fails
        tree = _tree(
            tmp_path / f"t{fails}", {"docker/Dockerfile": DOCKERFILE.replace("sglang-b.patch sglang-a.patch", order)}
        )
        monkeypatch.chdir(tree)
        out = CliRunner().invoke(main, ["check", "docker", "--no-cache", "--select", "PA304", "--output-format", "concise"])
        assert ("applied earlier by the recipe" in out.stdout) == fails, out.output


def test_series_orders_but_assigns_no_engine(tmp_path, monkeypatch):
    stack = tmp_path / "stack"
    stack.mkdir()
    (stack / "b.patch").write_text(P1)
    (stack / "a.patch").write_text(P3)
    (stack / "series").write_text("b.patch\na.patch\n")
    engine = _engine(tmp_path)
    monkeypatch.chdir(tmp_path)
    got = json.loads(CliRunner().invoke(main, ["plan", "stack", "--format", "json"]).stdout)
    assert [p["patch"] for p in got["sets"][0]["patches"]] == ["stack/b.patch", "stack/a.patch"]
    out = CliRunner().invoke(main, ["check", "stack", "--no-cache", "--engine", f"sglang={engine}", "--format", "json"])
    assert "not applied" not in out.stderr  # an empty plan: every patch goes to the engine its paths match
    assert out.exit_code in (0, 1), out.output


def test_exact_mode_stacks_the_recipe_order_like_git_apply(tmp_path, monkeypatch):
    """The Dockerfile applies sglang-a (P1) then sglang-b (P3, written on P1's result):
    real `git apply` takes both in that order; exact mode, which checks sglang-b on the
    engine with sglang-a applied, agrees (no hunk fails)."""
    repo = _repo(tmp_path, "oracle")
    assert _git_apply_ok(repo, P1) and _git_apply_ok(repo, P3)
    order = DOCKERFILE.replace("sglang-b.patch sglang-a.patch", "sglang-a.patch sglang-b.patch")
    tree = _tree(tmp_path / "t", {"docker/Dockerfile": order})
    engine = _engine(tmp_path)
    monkeypatch.chdir(tree)
    out = CliRunner().invoke(
        main, ["check", "docker/Dockerfile", "docker/patch/latest", "--no-cache", "--engine", f"sglang={engine}"]
    )
    assert "PA201" not in out.stdout, out.output
    assert "sglang-b.patch -> sglang" in out.stdout and "1 clean" in out.stdout, out.stdout


def test_alternatives_stack_in_the_recipe_order_like_git_apply(tmp_path, monkeypatch):
    """slime's layout: the Dockerfile selects `latest/`, and the folder of the engine's version
    holds the same names.  Those alternatives are applied by the same step in the same order:
    exact mode checks sglang-b (P3, written on P1) with sglang-a applied, as `git apply` does
    (alone, P3 does not apply: the false PA201 of a patch checked out of its set).  A name the
    step does not list keeps no place; PA304 judges the folder in the recipe's order."""
    repo = _repo(tmp_path, "oracle")
    assert not _git_apply_ok(repo, P3)
    assert _git_apply_ok(repo, P1) and _git_apply_ok(repo, P3)
    order = DOCKERFILE.replace("sglang-b.patch sglang-a.patch", "sglang-a.patch sglang-b.patch")
    tree = _tree(
        tmp_path / "t",
        {
            "docker/Dockerfile": order,
            "docker/patch/v0.5.15.post1/sglang-a.patch": P1,
            "docker/patch/v0.5.15.post1/sglang-b.patch": P3,
            "docker/patch/v0.5.15.post1/sglang-extra.patch": P2,
        },
    )
    engine = _engine(tmp_path)
    monkeypatch.chdir(tree)
    got = json.loads(CliRunner().invoke(main, ["plan", "docker", "--format", "json"]).stdout)
    places = {a["patch"]: a["position"] for a in got["alternatives"] if "v0.5.15.post1" in a["patch"]}
    assert places == {
        "docker/patch/v0.5.15.post1/sglang-a.patch": 0,
        "docker/patch/v0.5.15.post1/sglang-b.patch": 1,
        "docker/patch/v0.5.15.post1/sglang-extra.patch": 0,
    }
    args = ["check", "docker/Dockerfile", "docker/patch/v0.5.15.post1", "--no-cache", "--select", "PA201"]
    out = CliRunner().invoke(main, [*args, "--engine", f"sglang={engine}"])
    assert "v0.5.15.post1/sglang-b.patch -> sglang 0.5.15.post1, git apply: 1 clean" in out.stdout, out.output
    assert "sglang-b.patch" not in "".join(line for line in out.stdout.splitlines(True) if "PA201" in line)
    # PA304 on the alternatives: in the recipe's order they stack; reversed, the second fails
    assert "PA304" not in CliRunner().invoke(main, ["check", "docker", "--no-cache", "--select", "PA304"]).stdout
    (tree / "docker/Dockerfile").write_text(DOCKERFILE)
    out = CliRunner().invoke(main, ["check", "docker", "--no-cache", "--select", "PA304", "--output-format", "concise"])
    assert "v0.5.15.post1/sglang-a.patch" in out.stdout and "applied earlier by the recipe" in out.stdout, out.output
