"""Runtime monkey-patches of the engine (issue 9): recognition, PA206/PA207,
version gates and per-version modules, and the bump audit (PA203)."""

from __future__ import annotations

import json
import os
import textwrap
import zipfile
from pathlib import Path

import git
import pytest

from patchaudit.analysis import monkeypatch as mp
from patchaudit.analysis import monkeypatch_filter as mpf
from patchaudit.engine import versions
from patchaudit.pipeline.bump_monkeypatch import audit_bump
from patchaudit.testing import invoke_in
from patchaudit.config.settings import EngineSpec, Settings
from patchaudit.engine.sources import open_engine
from patchaudit.units.engines import EngineContext

# --------------------------------------------------------------------------
# a small engine, in two versions

SCHEDULER_V1 = '''\
import torch.nn as nn


class Scheduler:
    max_batch = 8

    def __init__(self, server_args):
        self.server_args = server_args
        self.waiting = []

    def process_input_requests(self, recv_reqs):
        return [self.handle(r) for r in recv_reqs]

    def handle(self, req):
        return req

    async def generate_request(self, obj, request=None):
        return obj

    @staticmethod
    def is_ready(state):
        return state == "ready"


class Sampler(nn.Module):
    def forward(self, logits):
        return logits
'''

ENGINE_PY = '''\
def _set_envs_and_config(server_args):
    return server_args


def launch(server_args, *args, **kwargs):
    return _set_envs_and_config(server_args)
'''

UTILS_PY = '''\
def get_device(idx=0):
    return "cuda:%d" % idx
'''

QWEN2 = '''\
class Qwen2Model:
    def forward(self, input_ids, positions):
        return input_ids
'''


def sglang_tree(version: str = "0.5.9", scheduler: str = SCHEDULER_V1, utils: str = UTILS_PY,
                engine: str = ENGINE_PY) -> dict[str, str]:
    # srt/ is a namespace package (no __init__.py), as in the real sglang
    return {
        "sglang/__init__.py": "from sglang.version import __version__\n",
        "sglang/version.py": f'__version__ = "{version}"\n',
        "sglang/srt/managers/scheduler.py": scheduler,
        "sglang/srt/entrypoints/engine.py": engine,
        "sglang/srt/utils.py": utils,
    }


def vllm_tree(qwen2: str = QWEN2) -> dict[str, str]:
    return {
        "vllm/__init__.py": '__version__ = "0.11.0"\n',
        "vllm/model_executor/__init__.py": "",
        "vllm/model_executor/models/__init__.py": "",
        "vllm/model_executor/models/qwen2.py": qwen2,
    }


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content, encoding="utf-8")
    return root


def build_wheel(path: Path, files: dict[str, str], name: str, version: str) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for rel, content in files.items():
            zf.writestr(rel, content)
        zf.writestr(f"{name}-{version}.dist-info/METADATA", f"Name: {name}\nVersion: {version}\n")
        zf.writestr(f"{name}-{version}.dist-info/RECORD", "")
    return path


def ctx_of(spec: str, name: str = "sglang") -> EngineContext:
    return EngineContext(open_engine(spec, name=name), 0, "")


# --------------------------------------------------------------------------
# the fork: every form of runtime patch

FORK = '''\
"""A fork's runtime patches of the engine, in every form patchaudit knows."""

import functools
import importlib
from unittest import mock
from unittest.mock import patch

import sglang.srt.managers.scheduler as sched
import vllm.model_executor.models.qwen2 as q
from sglang.srt import utils as sgl_utils
from sglang.srt.managers.scheduler import Scheduler


def handle(self, req):
    return req


Scheduler.handle = handle


def new_forward(self, input_ids, positions):
    return input_ids


q.Qwen2Model.forward = new_forward

_orig_process = Scheduler.process_input_requests


def _wrap(fn):
    @functools.wraps(fn)
    def inner(self, *args, **kwargs):
        return fn(self, *args, **kwargs)

    return inner


Scheduler.process_input_requests = _wrap(_orig_process)


def get_device(idx=0, *, fallback="cpu"):
    return fallback


setattr(sgl_utils, "get_device", get_device)

engine_mod = importlib.import_module("sglang.srt.entrypoints.engine")
engine_mod._set_envs_and_config = functools.partial(lambda server_args, quiet: server_args, quiet=True)


async def generate_request(self, obj, request=None):
    return obj


_patcher = mock.patch("sglang.srt.managers.scheduler.Scheduler.generate_request", new=generate_request)
_ready = patch.object(sched.Scheduler, "is_ready", staticmethod(lambda state: True))


def apply_late():
    from sglang.srt.managers.scheduler import Scheduler as S

    _orig_init = S.__init__

    def __init__(self, server_args):
        _orig_init(self, server_args)
        self.fork_state = {}

    S.__init__ = __init__
'''

FORK_TARGETS = {
    ("sglang.srt.managers.scheduler.Scheduler.handle", "replaced", "assign"),
    ("vllm.model_executor.models.qwen2.Qwen2Model.forward", "replaced", "assign"),
    ("sglang.srt.managers.scheduler.Scheduler.process_input_requests", "wrapped", "assign"),
    ("sglang.srt.utils.get_device", "replaced", "setattr"),
    ("sglang.srt.entrypoints.engine._set_envs_and_config", "replaced", "assign"),
    ("sglang.srt.managers.scheduler.Scheduler.generate_request", "replaced", "mock.patch"),
    ("sglang.srt.managers.scheduler.Scheduler.is_ready", "replaced", "mock.patch.object"),
    ("sglang.srt.managers.scheduler.Scheduler.__init__", "wrapped", "assign"),
}


def collect(text: str, path: str = "fork/patches.py"):
    return mp.collect(path, textwrap.dedent(text), versions.DEFAULT_PACKAGES)


def test_every_form_is_recognized():
    found = {(p.target, p.how, p.form) for p in collect(FORK)}
    assert found == FORK_TARGETS


def test_recognition_details():
    by = {p.target.rsplit(".", 1)[-1]: p for p in collect(FORK)}
    assert by["handle"].line == 18 and by["handle"].replacement.params[1].name == "req"
    part = by["_set_envs_and_config"].replacement
    assert part.binding == "unbound" and [p.name for p in part.params] == ["server_args", "quiet"]
    assert part.params[1].kind == "keyword_only" and part.params[1].has_default
    assert by["is_ready"].replacement.binding == "static"
    assert by["process_input_requests"].replacement.params is not None   # the factory's inner function
    assert by["__init__"].function == "apply_late"


def test_restoring_the_original_is_not_a_patch():
    found = collect("""\
        from sglang.srt.managers.scheduler import Scheduler
        _orig = Scheduler.handle
        def handle(self, req):
            return _orig(self, req)
        Scheduler.handle = handle
        Scheduler.handle = _orig
        """)
    assert [(p.line, p.how) for p in found] == [(5, "wrapped")]


def test_mock_patch_in_tests_is_not_a_patch_of_the_engine():
    code = 'from unittest import mock\np = mock.patch("sglang.srt.utils.get_device", lambda idx=0: "cpu")\n'
    assert collect(code, "fork/util.py")
    assert not collect(code, "tests/test_util.py")
    assert not collect(code, "fork/test_util.py")


def test_instances_and_unrelated_objects_are_not_targets():
    assert not collect("""\
        import sglang
        from sglang.srt.managers.scheduler import Scheduler

        class Mine(Scheduler):
            pass

        def f(self, sglang_obj):
            self.x = 1
            sglang_obj.y = 2
            s = Scheduler(None)
            s.handle = print
            Mine.handle = print
        """)


def test_tables_of_targets_give_one_patch_per_row():
    found = collect("""\
        from unittest.mock import patch

        _TARGETS = [
            ("sglang.srt.utils.get_device", lambda idx=0: "cpu"),
            (
                "sglang.srt.entrypoints.engine."
                "_set_envs_and_config",
                print,
            ),
        ]

        def apply():
            for target, replacement in _TARGETS:
                patch(target, replacement).start()
        """)
    assert sorted((p.target, p.line) for p in found) == [
        ("sglang.srt.entrypoints.engine._set_envs_and_config", 6),
        ("sglang.srt.utils.get_device", 4)]


def test_string_constants_and_getattr_and_sys_modules():
    found = collect("""\
        import sys
        from unittest.mock import patch
        import sglang.srt.utils

        PATH = "sglang.srt.utils.get_device"
        p = patch(PATH, lambda idx=0: "cpu")
        mod = sys.modules["sglang.srt.entrypoints.engine"]
        mod.launch = print
        getattr(sglang.srt, "utils").get_device = print
        """)
    assert sorted(p.target for p in found) == [
        "sglang.srt.entrypoints.engine.launch", "sglang.srt.utils.get_device", "sglang.srt.utils.get_device"]


def test_configured_engine_packages():
    code = "import myengine.core as c\nc.Engine.step = lambda self: None\n"
    assert not mp.collect("f.py", code, versions.DEFAULT_PACKAGES)
    s = Settings(engine_packages=["myengine"])
    assert [p.target for p in mp.collect("f.py", code, mpf.engine_packages(s))] == ["myengine.core.Engine.step"]
    # --engine NAME=... names a package too
    s = Settings(engines=[EngineSpec("otherengine", "/x")])
    assert "otherengine" in mpf.engine_packages(s) and "sglang" in mpf.engine_packages(s)


def test_prefilters_are_sound_on_every_form():
    """The cheap filters never drop a file the libcst recognizer finds a patch in."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper

    samples = [FORK] + [textwrap.dedent(s) for s in (
        "import sglang\nsglang.x = 1\n",
        "from sglang import srt\nsetattr(srt, 'a', 1)\n",
        "import importlib\nm = importlib.import_module('vllm.x')\nm.f = print\n",
        "from unittest import mock as mk\nmk.patch('megatron.core.x', 1)\n",
        "def f():\n    import vllm.engine as e\n    e.LLM.generate = print\n",
        "import sglang.srt.utils as u\nalias = u\nalias2 = alias\nalias2.get_device = print\n",
    )]
    for text in samples:
        module = cst.parse_module(text)
        col = mp.collector_class()("f.py", versions.DEFAULT_PACKAGES)
        MetadataWrapper(module, unsafe_skip_copy=True).visit(col)
        assert col.patches, text
        assert mpf.can_match(text, versions.DEFAULT_PACKAGES) and mpf.may_have_sites(text, versions.DEFAULT_PACKAGES), text
    assert not mpf.can_match("import os\nos.environ['X'] = '1'\n", versions.DEFAULT_PACKAGES)
    # the name in a comment or an unrelated string is not enough
    assert not mpf.can_match("# we use sglang\nx = 'see sglang docs'\n", versions.DEFAULT_PACKAGES)
    # imported but never patched: no libcst pass needed
    assert not mpf.may_have_sites("import sglang\nprint(sglang.__version__)\nself.x = 1\n", versions.DEFAULT_PACKAGES)


# --------------------------------------------------------------------------
# PA206 / PA207 through `patchaudit check`


def run(args, cwd):
    return invoke_in(cwd, args)


def check(tmp_path, fork: str, sglang: dict[str, str] | None = None, extra_engines=(), select="PA206,PA207"):
    (tmp_path / "fork").mkdir(exist_ok=True)
    (tmp_path / "fork" / "patches.py").write_text(textwrap.dedent(fork))
    eng = write_tree(tmp_path / "sgl", sglang or sglang_tree())
    args = ["check", "--no-cache", "--format", "json", "--select", select, "--engine", f"sglang={eng}"]
    for name, tree in extra_engines:
        args += ["--engine", f"{name}={write_tree(tmp_path / name, tree)}"]
    res = run(args + ["fork"], tmp_path)
    assert res.exit_code in (0, 1), res.output + res.stderr
    return json.loads(res.stdout)


def test_the_clean_fork_gives_nothing(tmp_path):
    assert check(tmp_path, FORK, extra_engines=[("vllm", vllm_tree())]) == []


def test_renamed_method_gives_pa206(tmp_path):
    renamed = SCHEDULER_V1.replace("def process_input_requests", "def process_requests")
    out = check(tmp_path, FORK, sglang_tree(scheduler=renamed))
    assert [(f["code"], f["line"]) for f in out] == [("PA206", 38)]
    assert "`sglang.srt.managers.scheduler.Scheduler.process_input_requests` does not exist" in out[0]["message"]
    assert "renamed to `process_requests`?" in out[0]["message"] and "sglang 0.5.9" in out[0]["message"]


def test_added_parameter_gives_pa207_naming_it(tmp_path):
    grown = SCHEDULER_V1.replace("def handle(self, req):", "def handle(self, req, priority):")
    out = check(tmp_path, FORK, sglang_tree(scheduler=grown))
    assert [(f["code"], f["line"]) for f in out] == [("PA207", 18)]
    msg = out[0]["message"]
    assert "parameter `priority` of the original is missing from the replacement" in msg
    assert "(sglang/srt/managers/scheduler.py:14 in sglang 0.5.9)" in msg     # the engine definition and version


def test_args_kwargs_wrapper_gives_neither(tmp_path):
    # the wrapped process_input_requests (*args, **kwargs) and the wrapped __init__
    # survive a renamed parameter and an added one
    changed = (SCHEDULER_V1.replace("def process_input_requests(self, recv_reqs):",
                                    "def process_input_requests(self, reqs, *, block=False):"))
    assert check(tmp_path, FORK, sglang_tree(scheduler=changed), extra_engines=[("vllm", vllm_tree())]) == []


def test_async_original_replaced_by_sync_gives_pa207(tmp_path):
    fork = FORK.replace("async def generate_request", "def generate_request")
    out = check(tmp_path, fork)
    assert [f["code"] for f in out] == ["PA207"]
    assert "the original is async" in out[0]["message"]


def test_other_signature_mismatches(tmp_path):
    out = check(tmp_path, """\
        from sglang.srt.managers.scheduler import Scheduler
        import sglang.srt.entrypoints.engine as eng

        def generate_request(self, obj, request):
            return obj

        async def launch(server_args):
            return server_args

        Scheduler.generate_request = generate_request
        Scheduler.is_ready = lambda state: state
        eng.launch = launch
        Scheduler.handle = lambda: None
        """)
    msgs = {f["line"]: f["message"] for f in out}
    assert "the original is async" in msgs[10] and "makes `request` required" in msgs[10]
    assert "@staticmethod" in msgs[11]
    assert "extra positional arguments (*args)" in msgs[12] and "any keyword argument (**kwargs)" in msgs[12]
    assert "plain function but the replacement is async" in msgs[12]
    assert "no parameter for the instance" in msgs[13]


def test_unknowable_targets_are_never_reported(tmp_path):
    out = check(tmp_path, """\
        from sglang.srt.managers.scheduler import Scheduler, Sampler
        import sglang.srt.managers.scheduler as sched

        Sampler.extra_repr = lambda self: ""        # may come from torch's nn.Module
        Scheduler.max_batch = 16                    # class attribute
        Scheduler.waiting = None                    # instance attribute set in __init__
        Scheduler.__repr__ = lambda self: "S"       # from object
        sched.torch_helpers = None                  # a new module attribute: reported
        """)
    assert [(f["code"], f["line"]) for f in out] == [("PA206", 8)]


def test_backport_shims_are_not_reported(tmp_path):
    assert check(tmp_path, """\
        import sglang.srt.utils

        try:
            from sglang.srt.utils import get_free_port
        except ImportError:
            def get_free_port():
                return 0
            sglang.srt.utils.get_free_port = get_free_port

        if not hasattr(sglang.srt.utils, "is_hip"):
            sglang.srt.utils.is_hip = lambda: False
        """) == []


def test_version_gates_are_evaluated_against_the_engine(tmp_path):
    fork = """\
        import sglang
        from packaging import version
        from sglang.srt.managers.scheduler import Scheduler

        _NEW = version.parse(sglang.__version__) >= version.parse("0.5.10")

        def process_batch(self, batch):
            return batch

        if _NEW:
            Scheduler.process_batch = process_batch      # only exists from 0.5.10
        else:
            Scheduler.handle = lambda self, req: req

        if sglang.__version__ in ("0.5.9",):
            Scheduler.handle_v9 = print
        """
    out = check(tmp_path, fork, sglang_tree("0.5.9"))
    assert [(f["code"], f["line"]) for f in out] == [("PA206", 16)]
    (tmp_path / "sgl").rename(tmp_path / "old")
    out = check(tmp_path, fork, sglang_tree("0.5.12"))
    assert [(f["code"], f["line"]) for f in out] == [("PA206", 11)]


def test_version_class_orders_like_pep440():
    V = versions.Version
    assert V("0.5.9") < V("0.5.10") < V("0.5.10.post1") < V("0.6.0rc1") < V("0.6.0")
    assert V("0.6.0.dev1") < V("0.6.0rc1") and V("1.0") == V("1.0.0")
    assert V("v0.5.15.post1").base_version == "0.5.15"


def test_per_version_modules_are_checked_against_their_engine(tmp_path):
    """A per-version patch package: patches/sglang_0_5_9.py is written against
    0.5.9, patches/v0_5_12.py against 0.5.12; each is checked only there."""
    pkg = tmp_path / "fork" / "patches"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent("""\
        import importlib
        import sglang

        def apply():
            tag = sglang.__version__.replace(".", "_")
            importlib.import_module(f"fork.patches.v{tag}")
        """))
    (pkg / "v0_5_9.py").write_text("from sglang.srt.managers.scheduler import Scheduler\n"
                                   "Scheduler.handle = lambda self, req: req\n")
    (pkg / "v0_5_12.py").write_text("from sglang.srt.managers.scheduler import Scheduler\n"
                                    "Scheduler.handle_request = lambda self, req, priority=0: req\n")
    v9 = write_tree(tmp_path / "e9", sglang_tree("0.5.9"))
    v12 = write_tree(tmp_path / "e12", sglang_tree("0.5.12", scheduler=SCHEDULER_V1.replace(
        "def handle(self, req):", "def handle_request(self, req, priority=0):")))
    res = run(["check", "--no-cache", "--format", "json", "--select", "PA206,PA207",
               "--engine", f"sglang={v9}", "--engine", f"sglang={v12}", "fork"], tmp_path)
    assert json.loads(res.stdout) == [] and res.exit_code == 0
    # swap the modules' contents: each now patches a name its version lacks
    a, b = (pkg / "v0_5_9.py").read_text(), (pkg / "v0_5_12.py").read_text()
    (pkg / "v0_5_9.py").write_text(b)
    (pkg / "v0_5_12.py").write_text(a)
    res = run(["check", "--no-cache", "--format", "json", "--select", "PA206,PA207",
               "--engine", f"sglang={v9}", "--engine", f"sglang={v12}", "fork"], tmp_path)
    out = json.loads(res.stdout)
    assert sorted((f["path"], f["code"]) for f in out) == [
        ("fork/patches/v0_5_12.py", "PA206"), ("fork/patches/v0_5_9.py", "PA206")]
    assert any("sglang 0.5.12" in f["message"] for f in out) and any("sglang 0.5.9" in f["message"] for f in out)


def test_version_tags_from_paths():
    pk = versions.DEFAULT_PACKAGES
    assert versions.path_version_tag("fork/patches/v0_5_9.py", pk) == (None, "0.5.9")
    assert versions.path_version_tag("fork/sglang_0_5_15_post1/sched.py", pk) == ("sglang", "0.5.15.post1")
    assert versions.path_version_tag("fork/vllm-0.11.0/x.py", pk) == ("vllm", "0.11.0")
    assert versions.path_version_tag("fork/0.5.9/x.py", pk) == (None, "0.5.9")
    assert versions.path_version_tag("fork/models/qwen2_5_vl.py", pk) is None
    assert versions.path_version_tag("fork/patches/sglang_patch.py", pk) is None
    assert versions.tag_matches("0.5.15", "0.5.15.post1") and versions.tag_matches("0.5", "0.5.9")
    assert not versions.tag_matches("0.5.1", "0.5.15") and not versions.tag_matches("0.5.15.post1", "0.5.15")


def test_engine_versions_of_every_source_kind(tmp_path):
    d = write_tree(tmp_path / "d", sglang_tree("0.5.9"))
    assert versions.engine_versions(open_engine(str(d)))["sglang"] == "0.5.9"
    whl = build_wheel(tmp_path / "sglang-0.5.15.post1-py3-none-any.whl", sglang_tree("0.0.0.dev0"),
                      "sglang", "0.5.15.post1")
    assert versions.engine_versions(open_engine(str(whl)))["sglang"] == "0.5.15.post1"
    mega = write_tree(tmp_path / "m", {"megatron/core/__init__.py": "",
                                       "megatron/core/package_info.py": "MAJOR = 0\nMINOR = 13\nPATCH = 1\n"})
    assert versions.engine_versions(open_engine(str(mega)))["megatron"] == "0.13.1"


# --------------------------------------------------------------------------
# bump: PA203 for patched definitions that changed, PA206/PA207 against NEW


SCHEDULER_V2 = (
    # lines inserted above everything: every definition moves, no body changes...
    "import logging\n\nlogger = logging.getLogger(__name__)\n\n" + SCHEDULER_V1
    # ...except handle's
    .replace("    def handle(self, req):\n        return req\n",
             "    def handle(self, req):\n        logger.debug('req %s', req)\n        return req\n")
)


def _bump_fork(tmp_path: Path) -> str:
    f = tmp_path / "fork" / "patches.py"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(FORK)
    return str(f)


def _audit(tmp_path, old_spec, new_spec, settings=None):
    fork = _bump_fork(tmp_path)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        return audit_bump([os.path.relpath(fork, tmp_path)], ctx_of(old_spec), ctx_of(new_spec),
                             settings or Settings())
    finally:
        os.chdir(cwd)


def test_bump_between_git_tags(tmp_path):
    repo_dir = tmp_path / "sglang-repo"
    repo = git.Repo.init(repo_dir)
    write_tree(repo_dir / "python", sglang_tree("0.5.9"))
    (repo_dir / "python" / "pyproject.toml").write_text("[project]\nname = 'sglang'\n")
    repo.git.add(A=True)
    repo.index.commit("v1")
    repo.create_tag("v0.5.9")
    write_tree(repo_dir / "python", sglang_tree("0.5.10", scheduler=SCHEDULER_V2,
                                                utils=UTILS_PY.replace("get_device", "get_device_name")))
    repo.git.add(A=True)
    repo.index.commit("v2")
    repo.create_tag("v0.5.10")
    out = _audit(tmp_path, f"{repo_dir}@v0.5.9", f"{repo_dir}@v0.5.10")
    got = [(f.code, f.line) for f in out]
    # handle's body changed: PA203; process_input_requests, __init__, generate_request,
    # is_ready only moved: nothing; get_device was renamed: PA206
    assert got == [("PA203", 18), ("PA206", 45)], [f.message for f in out]
    pa203 = out[0]
    assert "`sglang.srt.managers.scheduler.Scheduler.handle` changed upstream between sglang 0.5.9 and " \
           "sglang 0.5.10" in pa203.message and "+1/-0" in pa203.message
    assert pa203.name == "patched-code-changed-upstream"
    assert pa203.target.path == "python/sglang/srt/managers/scheduler.py" and pa203.target.line == 18
    assert "renamed to `get_device_name`?" in out[1].message


def test_bump_between_wheels(tmp_path):
    old = build_wheel(tmp_path / "sglang-0.5.9-py3-none-any.whl", sglang_tree("0.5.9"), "sglang", "0.5.9")
    new_sched = SCHEDULER_V2.replace("async def generate_request(self, obj, request=None):",
                                     "async def generate_request(self, obj, request=None, *, rid):")
    new = build_wheel(tmp_path / "sglang-0.5.10-py3-none-any.whl", sglang_tree("0.5.10", scheduler=new_sched),
                      "sglang", "0.5.10")
    out = _audit(tmp_path, str(old), str(new))
    got = sorted((f.code, f.line) for f in out)
    # handle changed (PA203); generate_request changed too (PA203) and now requires
    # `rid`, which the mock's replacement lacks (PA207)
    assert got == [("PA203", 18), ("PA203", 55), ("PA207", 55)]
    pa207 = next(f for f in out if f.code == "PA207")
    assert "keyword parameter `rid` of the original is missing" in pa207.message
    # selection and inline suppression apply
    assert {f.code for f in _audit(tmp_path, str(old), str(new), Settings(ignore=["PA203"]))} == {"PA207"}
    fork = tmp_path / "fork" / "patches.py"
    fork.write_text(FORK.replace("Scheduler.handle = handle", "Scheduler.handle = handle  # patchaudit: ignore[PA203]"))
    out = audit_bump([str(fork)], ctx_of(str(old)), ctx_of(str(new)), Settings())
    assert sorted((f.code, f.line) for f in out) == [("PA203", 55), ("PA207", 55)]


def test_bump_unchanged_engine_gives_nothing(tmp_path):
    old = build_wheel(tmp_path / "a.whl", sglang_tree("0.5.9"), "sglang", "0.5.9")
    new = build_wheel(tmp_path / "b.whl", sglang_tree("0.5.9.post1"), "sglang", "0.5.9.post1")
    assert _audit(tmp_path, str(old), str(new)) == []


def test_bump_command_covers_monkeypatches(tmp_path):
    pytest.importorskip("patchaudit.pipeline.bump")
    repo_dir = tmp_path / "eng"
    repo = git.Repo.init(repo_dir)
    write_tree(repo_dir, sglang_tree("0.5.9"))
    repo.git.add(A=True)
    repo.index.commit("v1")
    repo.create_tag("v1")
    write_tree(repo_dir, sglang_tree("0.5.10", scheduler=SCHEDULER_V2))
    repo.git.add(A=True)
    repo.index.commit("v2")
    repo.create_tag("v2")
    _bump_fork(tmp_path)
    res = run(["bump", "fork", "--engine", f"sglang={repo_dir}", "--from", "v1", "--to", "v2",
               "--format", "json"], tmp_path)
    assert res.exit_code in (0, 1), res.output + res.stderr
    data = json.loads(res.stdout)
    findings = data["findings"] if isinstance(data, dict) else data
    assert [(f["code"], f["line"]) for f in findings if f["path"].endswith("patches.py")] == [("PA203", 18)]


def test_gate_forms():
    code = textwrap.dedent("""\
        from importlib.metadata import version as dist_version
        import sglang
        from sglang import __version__ as V
        from packaging.version import Version
        from sglang.srt.managers.scheduler import Scheduler

        _SGL = Version(sglang.__version__)
        if dist_version("sglang") >= "0.6":
            Scheduler.a = 1
        if V < "0.5":
            Scheduler.b = 1
        elif _SGL.base_version in ("0.5.9", "0.5.10"):
            Scheduler.c = 1
        if not (_SGL >= Version("0.5.10") and some_flag):
            Scheduler.d = 1
        if some_flag or _SGL < Version("0.5.10"):
            Scheduler.e = 1
        """)
    gates = {p.target.rsplit(".", 1)[-1]: p.gates for p in collect(code)}

    def runs(name, version):
        vals = [g.evaluate({"sglang": version}) for g in gates[name]]
        return False if False in vals else (None if None in vals else True)

    assert runs("a", "0.5.9") is False and runs("a", "0.6.1") is True
    assert runs("b", "0.4.1") is True and runs("b", "0.5.9") is False
    assert runs("c", "0.5.9.post1") is True and runs("c", "0.5.11") is False and runs("c", "0.4") is False
    assert runs("d", "0.5.9") is True and runs("d", "0.5.10") is None      # unknown flag
    assert runs("e", "0.5.9") is True and runs("e", "0.5.10") is None


def test_hasattr_gates_markers_and_torch_bases(tmp_path):
    out = check(tmp_path, """\
        from sglang.srt.managers.scheduler import Scheduler, Sampler

        if getattr(Scheduler, "_fork_patched", False):
            pass
        Scheduler._fork_patched = True                  # a marker the fork tests for: added
        if hasattr(Scheduler, "handle_batch"):          # false in this engine: gated off
            Scheduler.handle_batch = lambda self, b: b
        if hasattr(Scheduler, "handle"):
            Scheduler.handle = lambda self: None        # true: checked
        Sampler.extra_repr = lambda self: "s"           # inherited from torch.nn.Module
        Sampler.forward_native = lambda self, x: x      # nn.Module has no such thing
        """)
    assert [(f["code"], f["line"]) for f in out] == [("PA207", 9), ("PA206", 11)]
    assert "parameter `req` of the original is missing" in out[0]["message"]


def test_bump_resolves_replacements_from_other_fork_modules(tmp_path):
    write_tree(tmp_path, {
        "fork/__init__.py": "",
        "fork/impl.py": "class Impl:\n    @staticmethod\n    def handle(self, req):\n        return req\n\n\n"
                        "def generate_request(self, obj, request=None):\n    return obj\n",
        "fork/apply.py": "from sglang.srt.managers.scheduler import Scheduler\n"
                         "from fork.impl import Impl, generate_request\n\n"
                         "Scheduler.handle = Impl.handle\n"
                         "Scheduler.generate_request = generate_request\n",
    })
    old = build_wheel(tmp_path / "a.whl", sglang_tree("0.5.9"), "sglang", "0.5.9")
    new = build_wheel(tmp_path / "b.whl", sglang_tree("0.5.10", scheduler=SCHEDULER_V1.replace(
        "def handle(self, req):", "def handle(self, req, priority):")), "sglang", "0.5.10")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        files = ["fork/__init__.py", "fork/impl.py", "fork/apply.py"]
        out = audit_bump(files, ctx_of(str(old)), ctx_of(str(new)), Settings(ignore=["PA203"]))
        alone = audit_bump(["fork/apply.py"], ctx_of(str(old)), ctx_of(str(new)), Settings(ignore=["PA203"]))
    finally:
        os.chdir(cwd)
    # Impl.handle lacks the new `priority`; generate_request (fork/impl.py) is sync while
    # the engine's is async: PA207, found only when the module that defines them is among the files
    assert [(f.code, f.line) for f in out] == [("PA207", 4), ("PA207", 5)]
    assert "`Impl.handle` (fork/impl.py:3)" in out[0].message and "`priority`" in out[0].message
    assert "`generate_request` (fork/impl.py:7)" in out[1].message and "the original is async" in out[1].message
    assert alone == []
