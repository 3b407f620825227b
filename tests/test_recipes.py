"""Recipes read as the build runs them: Dockerfiles, shell scripts, series files."""

from __future__ import annotations

from patchaudit.inputs.dockerfile import instructions
from patchaudit.inputs.recipes import CheckoutStep, CopyStep, PatchStep, PinStep, read_recipe
from patchaudit.inputs.shellcmd import segments

DOCKERFILE = """\
ARG IMAGE_TAG=v0.5.15.post1-cu129
FROM lmsysorg/sglang:${IMAGE_TAG}
ARG PATCH_VERSION=latest
WORKDIR /root/
RUN git clone https://github.com/NVIDIA/Megatron-LM.git && \\
    cd Megatron-LM && git checkout abc1234
COPY docker/patch/${PATCH_VERSION}/megatron*.patch /root/Megatron-LM/
RUN cd Megatron-LM && git apply megatron.patch --3way
COPY docker/patch/${PATCH_VERSION}/sglang*.patch /sgl-workspace/sglang/
RUN cd /sgl-workspace/sglang && \\
  # a comment inside the continuation
  for p in sglang.patch sglang-b.patch sglang-a.patch; do \\
    git apply --check "$p" && git apply "$p" || exit 1; \\
  done
"""


def test_dockerfile_steps():
    r = read_recipe("docker/Dockerfile", "dockerfile", DOCKERFILE, folder="/repo/docker")
    pins = [s for s in r.steps if isinstance(s, PinStep)]
    assert pins[0].image and pins[0].package == "lmsysorg/sglang" and pins[0].version == "v0.5.15.post1-cu129"
    copies = [s for s in r.steps if isinstance(s, CopyStep)]
    assert copies[0].sources == ["docker/patch/latest/megatron*.patch"]
    assert copies[0].used == {"PATCH_VERSION": "latest"}
    assert copies[1].dest == "/sgl-workspace/sglang/"
    checkouts = [s for s in r.steps if isinstance(s, CheckoutStep)]
    assert checkouts[0].folder == "/root/Megatron-LM" and checkouts[1].rev == "abc1234"
    applied = [s for s in r.steps if isinstance(s, PatchStep)]
    assert applied[0].path == "/root/Megatron-LM/megatron.patch" and applied[0].options == {"three_way": True}
    real = [s.path.rsplit("/", 1)[1] for s in applied[1:] if not s.options.get("check_only")]
    assert real == ["sglang.patch", "sglang-b.patch", "sglang-a.patch"]  # the list's order
    checks = [s for s in applied[1:] if s.options.get("check_only")]
    assert len(checks) == 3 and all(s.cwd == "/sgl-workspace/sglang" for s in applied[1:])
    # the line of the command inside the continued RUN (the for loop body is on line 13)
    assert {s.line for s in applied[1:]} == {13}


def test_shell_script_variables_and_patch_forms():
    script = """\
#!/bin/bash
export SGLANG_COMMIT="0b3bb0c"
BASE=${BASE:-"/root"}
HERE="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
cd $BASE/sglang
git checkout ${SGLANG_COMMIT}
patch -p1 -F3 < "$HERE/patches/a.patch"
patch -p2 -R -i $HERE/patches/b.patch
patch --input=$HERE/patches/c.patch -p0
git -C /opt/vllm apply -p2 --reverse $HERE/patches/d.patch
git am $HERE/patches/e.patch
python - <<'PY'
git apply not-a-command.patch
PY
echo 'git apply quoted.patch'
"""
    r = read_recipe("build.sh", "shell", script, folder="/repo")
    steps = [s for s in r.steps if isinstance(s, PatchStep)]
    got = [(s.tool, s.path, s.cwd, s.options) for s in steps]
    assert got == [
        ("patch", "/repo/patches/a.patch", "/root/sglang", {"strip": 1, "fuzz": 3}),
        ("patch", "/repo/patches/b.patch", "/root/sglang", {"strip": 2, "reverse": True}),
        ("patch", "/repo/patches/c.patch", "/root/sglang", {"strip": 0}),
        ("git-apply", "/repo/patches/d.patch", "/opt/vllm", {"strip": 2, "reverse": True}),
        ("git-am", "/repo/patches/e.patch", "/root/sglang", {}),
    ]
    assert r.env["SGLANG_COMMIT"] == "0b3bb0c"
    assert [s.rev for s in r.steps if isinstance(s, CheckoutStep)] == ["0b3bb0c"]


def test_glob_loop_and_series():
    r = read_recipe("b.sh", "shell", "cd /w/sglang\nfor f in /repo/p/*.patch; do git apply $f; done\n", folder="/repo")
    (step,) = [s for s in r.steps if isinstance(s, PatchStep)]
    assert step.from_glob and step.path == "/repo/p/*.patch"
    s = read_recipe("/q/series", "series", "# quilt\nb.patch -p1\na.patch\n", folder="/q")
    assert [(p.path, p.line) for p in s.steps] == [("/q/b.patch", 2), ("/q/a.patch", 3)]


def test_segments_quotes_and_continuations():
    segs = segments("a 'x && y' && b \\\n  c; d | e # f && g\nh\n")
    assert segs == [("a 'x && y'", 1), ("b    c", 1), ("d", 2), ("e", 2), ("h", 3)]
    inst = instructions("# escape=`\nFROM x\nRUN a `\n  b\n")
    assert [(i.keyword, i.line) for i in inst] == [("FROM", 2), ("RUN", 3)]


def test_hostile_recipes_are_bounded():
    from patchaudit.inputs.recipes import MAX_WORK, TOO_MUCH

    items = " ".join(f"x{k}" for k in range(1000))
    loops = f"for a in {items}; do for b in {items}; do for c in {items}; do true; done; done; done\n"
    r = read_recipe("b.sh", "shell", loops, folder="/r")
    assert r.work <= MAX_WORK + 200 and r.problems[-1][1] == TOO_MUCH
    deep = "cd /w/${A:-" * 2000 + "x" + "}" * 2000 + "\ngit apply p.patch\n"
    (step,) = read_recipe("d.sh", "shell", deep, folder="/r").steps
    assert "UNKNOWN" not in step.path  # cd to an unknown folder is not taken
    r = read_recipe("q.sh", "shell", "git apply 'unclosed\n", folder="/r")
    assert r.problems and "unclosed quote" in r.problems[0][1]
