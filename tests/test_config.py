"""`[tool.patchaudit]` in pyproject.toml: every key, command-line overrides, bad configs (exit 2)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from patchaudit.testing import invoke_in
from patchaudit.config.settings import ConfigError, find_pyproject, load_pyproject

PA101_PY = "def f(text):\n    return legacy_load_mm_data(prompt=text)\n"
PA104_SH = "export SGLANG_MM_AVOID_RETOKENIZE=0\n"

FIRST = """\
--- a/python/sglang/srt/x.py
+++ b/python/sglang/srt/x.py
@@ -10,3 +10,4 @@ class A:
     def f(self):
-        a = 1
+        a = 2
+        b = 3
         return a
"""
# inserts right after the line the first patch added: touches it, shares no line
SECOND_TOUCHING = """\
--- a/python/sglang/srt/x.py
+++ b/python/sglang/srt/x.py
@@ -11,3 +11,4 @@ class A:
         a = 2
         b = 3
+        c = 4
         return a
"""




def check(root: Path, *args: str):
    """`patchaudit check --format json --no-cache ARGS` run in `root`: (exit code, codes by file, stderr)."""
    res = invoke_in(root, ["check", "--format", "json", "--no-cache", *args])
    found = json.loads(res.stdout) if res.exit_code in (0, 1) else []
    by_file: dict[str, list[str]] = {}
    for f in found:
        by_file.setdefault(f["path"], []).append(f["code"])
    return res.exit_code, by_file, res.stderr


def project(tmp_path: Path, config: str, files: dict[str, str]) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'rl'\n\n[tool.patchaudit]\n" + config)
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


FILES = {"rollout.py": PA101_PY, "run.sh": PA104_SH}


# ----- every key, with its effect ---------------------------------------------


def test_no_config_runs_the_default_rules(tmp_path):
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    code, by_file, _ = check(tmp_path, ".")
    assert code == 1 and by_file == {"rollout.py": ["PA101"], "run.sh": ["PA104"]}


def test_select(tmp_path):
    root = project(tmp_path, 'select = ["PA104"]\n', FILES)
    assert check(root, ".")[1] == {"run.sh": ["PA104"]}


def test_select_prefix_and_command_line_override(tmp_path):
    root = project(tmp_path, 'select = ["PA1"]\n', FILES)
    assert check(root, ".")[1] == {"rollout.py": ["PA101"], "run.sh": ["PA104"]}
    # --select replaces the configured selection
    assert check(root, "--select", "PA101", ".")[1] == {"rollout.py": ["PA101"]}


def test_ignore(tmp_path):
    root = project(tmp_path, 'ignore = ["PA101"]\n', FILES)
    assert check(root, ".")[1] == {"run.sh": ["PA104"]}
    # --ignore adds to it
    code, by_file, _ = check(root, "--ignore", "PA104", ".")
    assert code == 0 and by_file == {}


def test_extend_select_turns_on_an_opt_in_rule(tmp_path):
    files = {"a.py": "x = 1  # patchaudit: ignore[PA101]\n"}
    root = project(tmp_path, "", files)
    assert check(root, ".")[1] == {}
    (tmp_path / "pyproject.toml").write_text('[tool.patchaudit]\nextend-select = ["PA001"]\n')
    assert check(root, ".")[1] == {"a.py": ["PA001"]}


def test_per_file_ignores(tmp_path):
    files = {"legacy/old_rollout.py": PA101_PY, "rollout.py": PA101_PY}
    root = project(tmp_path, '[tool.patchaudit.per-file-ignores]\n"legacy/*.py" = ["PA101"]\n', files)
    assert check(root, ".")[1] == {"rollout.py": ["PA101"]}


def test_per_file_ignores_basename_glob_and_all(tmp_path):
    files = {"a/conftest.py": PA101_PY, "b/run.sh": PA104_SH, "rollout.py": PA101_PY}
    root = project(tmp_path, '[tool.patchaudit.per-file-ignores]\n"conftest.py" = ["PA1"]\n"b/*" = ["ALL"]\n',
                   files)
    assert check(root, ".")[1] == {"rollout.py": ["PA101"]}


def test_exclude(tmp_path):
    files = {"vendor/sglang/x.py": PA101_PY, "rollout.py": PA101_PY}
    root = project(tmp_path, 'exclude = ["vendor/"]\n', files)
    assert check(root, ".")[1] == {"rollout.py": ["PA101"]}


MM_ROLLOUT = """\
import requests


def rollout(mm, images, url):
    ids = mm(text="<image> hi", images=images)["input_ids"]
    return requests.post(url, json={"input_ids": ids, "image_data": images})
"""


def test_per_rule_options(tmp_path):
    # `mm` is not a processor name by default; [tool.patchaudit.rules.PA102] makes it one
    root = project(tmp_path, "", {"rollout.py": MM_ROLLOUT})
    assert check(root, ".")[1] == {}
    (tmp_path / "pyproject.toml").write_text('[tool.patchaudit.rules.PA102]\nprocessor-names = ["mm"]\n')
    assert check(root, ".")[1] == {"rollout.py": ["PA102"]}


def test_engines_string_and_table(tmp_path):
    root = project(tmp_path, '[tool.patchaudit.engines]\nsglang = "../engines/sglang"\n'
                             'vllm = { source = "vendor/vllm.whl", strip = 2 }\n', {})
    s = load_pyproject(root / "pyproject.toml")
    assert [(e.name, e.strip) for e in s.engines] == [("sglang", None), ("vllm", 2)]
    # relative sources are relative to the pyproject.toml
    assert Path(s.engines[0].source) == root / "../engines/sglang"
    assert Path(s.engines[1].source) == root / "vendor/vllm.whl"


def test_engines_are_used_and_overridden_by_the_command_line(tmp_path):
    engine = tmp_path / "engine" / "python" / "sglang" / "srt"
    engine.mkdir(parents=True)
    (engine / "x.py").write_text("class A:\n" + "    pass\n" * 8 + "    def f(self):\n        z = 0\n"
                                 "        return a\n")
    root = project(tmp_path, '[tool.patchaudit.engines]\nsglang = "engine"\n', {"p/0001-a.patch": FIRST})
    code, by_file, err = check(root, "--select", "PA201", "p")
    assert code == 1 and by_file == {os.path.join("p", "0001-a.patch"): ["PA201"]}, err
    # --engine replaces the configured engines: a source that does not exist is an error
    code, _, err = check(root, "--select", "PA201", "--engine", "sglang=nowhere", "p")
    assert code == 2 and "nowhere" in err


def test_tokenizer_path_is_relative_to_the_config(tmp_path):
    root = project(tmp_path, 'tokenizer = "models/tok.json"\n', {"a.py": "x = 1\n"})
    s = load_pyproject(root / "pyproject.toml")
    assert Path(s.tokenizer) == root / "models" / "tok.json"
    code, _, err = check(root, ".")
    assert code == 2 and "tok.json" in err


@pytest.mark.parametrize("key,value,attr,expected", [
    ("jobs", "1", "jobs", 1),   # a value above the machine's CPUs is clamped (test_security_readers.py)
    ("cache", "false", "cache", False),
    ("max-nesting", "50", "max_nesting", 50),
    ("max-file-size", "1000", "max_file_size", 1000),
    ("engine-packages", '["sglang", "myengine"]', "engine_packages", ["sglang", "myengine"]),
])
def test_scalar_keys(tmp_path, key, value, attr, expected):
    root = project(tmp_path, f"{key} = {value}\n", {})
    assert getattr(load_pyproject(root / "pyproject.toml"), attr) == expected


def test_cache_dir_is_relative_to_the_config(tmp_path):
    # (that the cache then lives there is the cache's own test, issue 7)
    root = project(tmp_path, 'cache-dir = "build/pa-cache"\n', {"a.py": "x = 1\n"})
    assert Path(load_pyproject(root / "pyproject.toml").cache_dir) == root / "build" / "pa-cache"


def test_max_file_size_names_the_file(tmp_path):
    root = project(tmp_path, "max-file-size = 10\n", {"big.py": "x = 1\n" * 10})
    code, _, err = check(root, ".")
    assert code == 2 and "big.py" in err and "max-file-size" in err


def test_config_is_found_walking_up_from_the_paths(tmp_path):
    root = project(tmp_path, 'select = ["PA104"]\n', {"sub/deep/rollout.py": PA101_PY, "sub/deep/run.sh": PA104_SH})
    assert find_pyproject([str(root / "sub" / "deep")]) == root / "pyproject.toml"
    code, by_file, _ = check(root / "sub", "deep")
    assert by_file == {os.path.join("deep", "run.sh"): ["PA104"]}


def test_pyproject_without_our_table_is_skipped_on_the_way_up(tmp_path):
    project(tmp_path, 'select = ["PA104"]\n', {})
    inner = tmp_path / "pkg"
    inner.mkdir()
    (inner / "pyproject.toml").write_text("[project]\nname = 'inner'\n")
    assert find_pyproject([str(inner)]) == tmp_path / "pyproject.toml"


def test_explicit_config_option(tmp_path):
    root = project(tmp_path, "", FILES)
    other = tmp_path / "ci.toml"
    other.write_text('[tool.patchaudit]\nselect = ["PA101"]\n')
    assert check(root, "--config", str(other), ".")[1] == {"rollout.py": ["PA101"]}


# ----- bad configurations: exit 2, naming the file and the key -----------------


@pytest.mark.parametrize("config,needle", [
    ('selct = ["PA101"]\n', "'selct'"),
    ("select = 5\n", "select"),
    ('select = ["PA999"]\n', "select"),
    ('ignore = ["XX"]\n', "ignore"),
    ("extend-select = [1]\n", "extend-select"),
    ('extend-select = ["PA9"]\n', "extend-select"),
    ('per-file-ignores = ["x"]\n', "per-file-ignores"),
    ('[tool.patchaudit.per-file-ignores]\n"*.py" = 3\n', "per-file-ignores"),
    ('[tool.patchaudit.per-file-ignores]\n"*.py" = ["PA7"]\n', "per-file-ignores"),
    ('exclude = ["vendor"]\nexclude2 = 1\n', "exclude2"),
    ('select = "PA102"\n', "select: expected a list of strings, got str"),
    ('exclude = "vendor"\n', "exclude"),
    ("exclude = [1]\n", "exclude"),
    ("engines = 3\n", "engines"),
    ('[tool.patchaudit.engines]\nsglang = { source = "x", strip = -1 }\n', "engines.sglang.strip"),
    ('[tool.patchaudit.engines]\nsglang = { src = "x" }\n', "engines.sglang"),
    ("[tool.patchaudit.engines]\nsglang = 4\n", "engines.sglang"),
    ("rules = 1\n", "rules"),
    ("[tool.patchaudit.rules.PA999]\nx = 1\n", "rules.PA999"),
    ("[tool.patchaudit.rules.PA304]\nadjacent = true\n", "rules.PA304] adjacent"),
    ('[tool.patchaudit.rules.PA304]\ntouching = "no"\n', "rules.PA304] touching"),
    ("tokenizer = 3\n", "tokenizer"),
    ("jobs = 0\n", "jobs"),
    ("jobs = true\n", "jobs"),
    ('cache = "yes"\n', "cache"),
    ("cache-dir = 1\n", "cache-dir"),
    ("engine-packages = 1\n", "engine-packages"),
    ("max-file-size = -1\n", "max-file-size"),
    ('max-nesting = "deep"\n', "max-nesting"),
    ("select = [\n", "pyproject.toml"),          # not TOML at all
])
def test_bad_config_exits_2_naming_the_key(tmp_path, config, needle):
    root = project(tmp_path, config, {"a.py": "x = 1\n"})
    code, _, err = check(root, ".")
    assert code == 2, err
    assert "pyproject.toml" in err and needle in err, err
    assert "Traceback" not in err


def test_bad_config_named_with_config_option(tmp_path):
    cfg = tmp_path / "other.toml"
    cfg.write_text("[tool.other]\nx = 1\n")
    (tmp_path / "a.py").write_text("x = 1\n")
    code, _, err = check(tmp_path, "--config", str(cfg), ".")
    assert code == 2 and "other.toml" in err and "[tool.patchaudit]" in err


def test_load_pyproject_raises_config_error_not_keyerror(tmp_path):
    p = tmp_path / "pyproject.toml"
    p.write_text("[tool.patchaudit]\nbogus = 1\n")
    with pytest.raises(ConfigError, match="bogus"):
        load_pyproject(p)


# ----- the documentation's example is a valid configuration ---------------------


def test_documented_configuration_example_is_valid_and_complete(tmp_path):
    import re

    from patchaudit.config.settings import _KEYS

    doc = (Path(__file__).resolve().parents[1] / "docs" / "workflow.md").read_text()
    ref = doc.split("## Configuration reference", 1)[1]
    (example,) = [b for b in re.findall(r"```toml\n(.*?)```", ref, re.S) if "[tool.patchaudit]" in b]
    (tmp_path / "pyproject.toml").write_text(example)
    s = load_pyproject(tmp_path / "pyproject.toml")
    assert s.extend_select == ["PA001"] and s.rule_options == {"PA304": {"touching": False}}
    assert [(e.name, e.strip) for e in s.engines] == [("sglang", None), ("vllm", 1)]
    for key in _KEYS:
        assert f"`{key}`" in ref or f"`rules.CODE`" in ref and key == "rules", f"{key} is not documented"
