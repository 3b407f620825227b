"""The built wheel ships the rule pack and works from a fresh virtualenv."""

import subprocess
import sys
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_wheel_installs_and_runs(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(dist), str(REPO)], check=True)
    wheel = next(dist.glob("patchaudit-*.whl"))
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    assert "patchaudit/rules/pa101_legacy_loader_drops_input_ids.py" in names
    assert not any(n.startswith("rules/") for n in names)
    env_dir = tmp_path / "venv"
    # the dependencies come from this interpreter's site-packages; the wheel itself is
    # installed into the venv, which shadows the editable install of the checkout
    venv.create(env_dir, system_site_packages=True, with_pip=True)
    py = env_dir / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True)
    where = subprocess.run([str(py), "-c", "import patchaudit.rules, patchaudit; print(patchaudit.rules.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert str(env_dir) in where, where
    exe = env_dir / "bin" / "patchaudit"
    out = subprocess.run([str(exe), "rules"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0 and "PA101" in out.stdout
    (tmp_path / "launch.sh").write_text("export SGLANG_MM_AVOID_RETOKENIZE=0\n")
    out = subprocess.run([str(exe), "check", "launch.sh"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 1 and "PA104" in out.stdout
