"""Issue 19's monkey-patch cases: namespace-dict writes, pass-through `**kwargs`, version gates in
the importing package's `__init__.py`, test stubs, and messages that name the engine version and
the cause of a position shift.  Engine trees and fork modules are written here."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from patchaudit.analysis import monkeypatch as mp
from patchaudit.analysis.monkeypatch_imports import import_gates
from patchaudit.engine import versions
from patchaudit.testing import invoke_in

SCHED = """\
class Scheduler:
    def handle(self, req, priority=0, *, trace=None):
        return req

    def step(self, batch, budget):
        return batch
"""

ENGINE = """\
def _set_envs_and_config(server_args):
    return server_args


def run_scheduler_process(server_args, port):
    return port
"""


def _tree(root: Path, version: str, sched: str = SCHED, engine: str = ENGINE) -> Path:
    files = {
        "sglang/__init__.py": "from sglang.version import __version__\n",
        "sglang/version.py": f'__version__ = "{version}"\n',
        "sglang/srt/managers/scheduler.py": sched,
        "sglang/srt/entrypoints/engine.py": engine,
    }
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text), encoding="utf-8")


def _collect(text: str, path: str = "fork/patches.py", **kw):
    return mp.collect(path, textwrap.dedent(text), versions.DEFAULT_PACKAGES, **kw)


def _check(tmp_path: Path, engines: list[Path], paths=("fork",), select="PA206,PA207", config=""):
    args = ["check", "--no-cache", "--format", "json", "--select", select]
    for e in engines:
        args += ["--engine", f"sglang={e}"]
    if config:
        (tmp_path / "pyproject.toml").write_text(config, encoding="utf-8")
    res = invoke_in(tmp_path, args + list(paths))
    assert res.exit_code in (0, 1), res.output + res.stderr
    return json.loads(res.stdout)


def test_namespace_dict_writes_are_sites():
    found = _collect("""\
        import sys
        import sglang.srt.entrypoints.engine as engine_module

        def _set_envs_and_config(server_args):
            return server_args

        def apply():
            sys.modules['sglang.srt.entrypoints.engine'].__dict__['_set_envs_and_config'] = _set_envs_and_config
            engine_module.__dict__["run_scheduler_process"] = _set_envs_and_config
            vars(engine_module)["launch"] = _set_envs_and_config
            other = {}
            other["x"] = _set_envs_and_config
        """)
    assert sorted((p.target, p.form) for p in found) == [
        ("sglang.srt.entrypoints.engine._set_envs_and_config", "__dict__"),
        ("sglang.srt.entrypoints.engine.launch", "__dict__"),
        ("sglang.srt.entrypoints.engine.run_scheduler_process", "__dict__"),
    ]


def test_namespace_dict_write_of_a_missing_name_is_pa206(tmp_path):
    _write(
        tmp_path,
        {
            "fork/patches.py": """\
        import sys

        def f(server_args):
            return server_args

        sys.modules["sglang.srt.entrypoints.engine"].__dict__["_set_env_and_config"] = f
        """
        },
    )
    out = _check(tmp_path, [_tree(tmp_path / "sgl", "0.5.9")])
    assert [(f["code"], f["line"]) for f in out] == [("PA206", 6)]
    assert "renamed to `_set_envs_and_config`?" in out[0]["message"]


def test_pass_through_kwargs_accepts_optional_keywords(tmp_path):
    _write(
        tmp_path,
        {
            "fork/patches.py": """\
        from sglang.srt.managers.scheduler import Scheduler

        _orig = Scheduler.handle

        def handle(self, req, **extra):
            return _orig(self, req, **extra)

        def step(self, batch, **kwargs):
            return batch

        Scheduler.handle = handle
        Scheduler.step = step
        """
        },
    )
    out = _check(tmp_path, [_tree(tmp_path / "sgl", "0.5.9")])
    # handle: priority= and trace= go through **extra; step: `budget` is required, and a
    # positional call step(batch, 5) fails, so that one is still reported
    assert [(f["code"], f["line"]) for f in out] == [("PA207", 12)]
    assert "`budget` (position 2) of the original cannot be passed positionally" in out[0]["message"]


def test_messages_name_the_engine_version_and_the_cause_of_a_shift(tmp_path):
    _write(
        tmp_path,
        {
            "fork/patches.py": """\
        from sglang.srt.managers.scheduler import Scheduler

        def step(self, budget, extra=None):
            return budget

        Scheduler.step = step
        """
        },
    )
    grown = SCHED.replace("def step(self, batch, budget):", "def step(self, batch, budget):")
    out = _check(tmp_path, [_tree(tmp_path / "a", "0.5.9", grown), _tree(tmp_path / "b", "0.5.12", grown)])
    msgs = [f["message"] for f in out if f["code"] == "PA207"]
    assert any("in sglang 0.5.9)" in m for m in msgs) and any("in sglang 0.5.12)" in m for m in msgs)
    assert all("the original has `batch` before it, which the replacement lacks" in m for m in msgs)


def test_gate_in_the_importing_init_is_followed(tmp_path):
    _write(
        tmp_path,
        {
            "fork/__init__.py": "",
            "fork/sgl/__init__.py": """\
            import sglang as sgl

            if sgl.__version__ == "0.5.2":
                from fork.sgl import old_patch
            elif sgl.__version__ in ["0.5.9", "0.5.10"]:
                from fork.sgl import new_patch
            """,
            "fork/sgl/old_patch/__init__.py": "from . import engine\n",
            "fork/sgl/old_patch/engine.py": """\
            import sys

            def run_scheduler_process(server_args):
                return server_args

            sys.modules["sglang.srt.entrypoints.engine"].__dict__["run_scheduler_proc"] = run_scheduler_process
            """,
            "fork/sgl/new_patch/__init__.py": "from . import engine\n",
            "fork/sgl/new_patch/engine.py": """\
            import sys

            def run_scheduler_process(server_args, port):
                return port

            sys.modules["sglang.srt.entrypoints.engine"].__dict__["run_scheduler_process"] = run_scheduler_process
            """,
        },
    )
    read = lambda p: Path(p).read_text() if Path(p).is_file() else None  # noqa: E731
    gates = import_gates(str(tmp_path / "fork/sgl/old_patch/engine.py"), ["sglang"], read)
    assert len(gates) == 1 and gates[0].evaluate({"sglang": "0.5.2"}) is True
    assert gates[0].evaluate({"sglang": "0.5.9"}) is False and "imports `old_patch`" in gates[0].text
    # on 0.5.9 the old module is never imported: its missing target is not reported
    assert _check(tmp_path, [_tree(tmp_path / "sgl", "0.5.9")]) == []
    # on 0.5.2 it is, and the renamed target is
    out = _check(tmp_path, [_tree(tmp_path / "sgl2", "0.5.2")])
    assert [(f["code"], f["path"].endswith("old_patch/engine.py")) for f in out] == [("PA206", True)]


def test_inventory_says_gated_off_by_the_importing_module(tmp_path):
    _write(
        tmp_path,
        {
            "fork/__init__.py": """\
            import sglang
            if sglang.__version__.startswith("0.4"):
                from fork import legacy
            """,
            "fork/legacy.py": """\
            import sglang.srt.entrypoints.engine as e
            e.run_scheduler_process = print
            """,
        },
    )
    res = invoke_in(
        tmp_path, ["inventory", "fork", "--format", "json", "--engine", f"sglang={_tree(tmp_path / 'sgl', '0.5.9')}"]
    )
    rows = json.loads(res.stdout)["rows"]
    # startswith() cannot be evaluated: assumed true, so the site is checked
    assert [r["exists"] for r in rows] == ["yes"]
    (tmp_path / "fork/__init__.py").write_text(
        'import sglang\nif sglang.__version__ < "0.5":\n    from fork import legacy\n', encoding="utf-8"
    )
    res = invoke_in(
        tmp_path, ["inventory", "fork", "--format", "json", "--engine", f"sglang={_tree(tmp_path / 'sgl', '0.5.9')}"]
    )
    rows = json.loads(res.stdout)["rows"]
    assert [r["exists"] for r in rows] == ["gated off"] and "fork/__init__.py imports `legacy`" in rows[0]["note"]


def test_test_stubs_are_left_out_unless_configured(tmp_path):
    stub = """\
        import sglang.srt.entrypoints.engine as e

        def fake(server_args):
            return None

        e._set_envs_and_config = fake
        """
    assert _collect(stub, "fork/patches.py")
    assert not _collect(stub, "tests/test_engine.py") and not _collect(stub, "fork/conftest.py")
    assert _collect(stub, "tests/test_engine.py", include_tests=True)
    _write(tmp_path, {"tests/test_engine.py": stub.replace("_set_envs_and_config", "_set_envs")})
    engine = _tree(tmp_path / "sgl", "0.5.9")
    assert _check(tmp_path, [engine], paths=("tests",)) == []
    out = _check(tmp_path, [engine], paths=("tests",), config="[tool.patchaudit.rules.PA206]\ninclude-tests = true\n")
    assert [f["code"] for f in out] == ["PA206"]


def test_a_package_getattr_cannot_provide_a_module_the_fork_imports(tmp_path):
    engine = _tree(tmp_path / "sgl", "0.5.9")
    (engine / "sglang/srt/__init__.py").write_text(
        "def __getattr__(name):\n    raise AttributeError(name)\n", encoding="utf-8"
    )
    _write(
        tmp_path,
        {
            "fork/patches.py": """\
        import sglang.srt.managers.old_scheduler as old
        import sglang.srt as srt

        old.Scheduler.handle = print
        srt.lazy_name = print
        """
        },
    )
    out = _check(tmp_path, [engine])
    # the import statement needs the module itself; `srt.lazy_name` may come from __getattr__
    assert [(f["code"], f["line"]) for f in out] == [("PA206", 4)]
    assert "`sglang.srt.managers.old_scheduler` does not exist" in out[0]["message"]


def test_a_backport_defined_in_the_except_branch_is_a_shim_not_a_restore():
    found = _collect("""\
        def apply():
            try:
                from sglang.srt.utils import get_device
            except ImportError:
                import sglang.srt.utils

                def get_device(idx=0):
                    return "cpu"

                sglang.srt.utils.get_device = get_device
        """)
    assert [(p.target, p.how) for p in found] == [("sglang.srt.utils.get_device", "added")]


def test_optional_parameters_shifted_behind_kwargs_go_by_keyword():
    from patchaudit.engine.definitions import Param

    orig = [Param("x", "positional", False), Param("cos_sin", "positional", True), Param("bias", "positional", True)]
    repl = [Param("x", "positional", False), Param("bias", "positional", True), Param("kwargs", "varkw", False)]
    assert mp.compare_params(orig, repl) == []
    # without **kwargs, `cos_sin=` fails and a positional call binds it to `bias`
    assert "a call passing `cos_sin=` fails" in " ".join(mp.compare_params(orig, repl[:2]))


SITE_SHAPES = '''\
import sglang.srt.managers.scheduler as sch
from unittest import mock


@mock.patch.object(sch.Scheduler, "run")
def decorated(m):
    sch.Scheduler.a = 1; sch.Scheduler.b = 2
    return m


class Holder:
    @staticmethod
    @mock.patch("sglang.srt.utils.get_bool_env_var")
    def method(m):
        try:
            setattr(sch.Scheduler, "c", 3)
        except (sch.Missing, ValueError) as exc:
            sch.Scheduler.d = exc
        else:
            with mock.patch.object(sch, "X"):
                fs = [setattr(sch.Scheduler, n, 1) for n in "ef"]
        finally:
            pass
        return fs


match holder:
    case Holder() if setattr(sch.Scheduler, "g", 4) is None:
        sch.Scheduler.h = lambda self: sch.Scheduler.i
    case _:
        vars(sch.Scheduler)["j"] = 5
'''


def test_a_sites_statement_by_position_is_its_parent_statement():
    """The monkey-patch pre-filter finds a site's statement by position
    (`monkeypatch_filter._statement_of`): the same statement as the site's first
    statement ancestor, on decorators, `;`, except clauses, comprehensions, match cases."""
    import ast

    from patchaudit.analysis import monkeypatch_filter as mf

    tree = ast.parse(SITE_SHAPES)
    _, _, sites = mf._scan(tree, ("sglang",))
    parent = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    assert len(sites) >= 11
    for site in sites:
        stmt = site
        while not isinstance(stmt, ast.stmt):
            stmt = parent[id(stmt)]
        assert mf._statement_of(tree, site) is stmt, ast.dump(site)[:80]
