"""The benchmark's data: wheels (downloaded with pip into bench/data/ when absent) and the
trees unpacked from them (bench/data/trees/NAME-VERSION, a git repository with one commit)."""

from __future__ import annotations

import glob
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
DATA = BENCH / "data"

#: tree key -> (distribution, version).  sglang and verl get every row; the RL frameworks
#: (RL_TREES, verl among them) get the default rules next to the semgrep taint rule
TREES = {
    "sglang": ("sglang", "0.5.15.post1"),
    "verl": ("verl", "0.9.1"),
    "areal": ("areal", "1.0.4"),
    "openrlhf": ("openrlhf", "0.11.2"),
    "trl": ("trl", "1.16.0"),
    "skyrl": ("skyrl", "0.4.0"),
}
FULL_TREES = ("sglang", "verl")
RL_TREES = ("verl", "areal", "openrlhf", "trl", "skyrl")

PLANT_FILE = "sglang/srt/multimodal/processors/qwen_vl.py"
PLANT_FROM = "base_output = await self.load_mm_data("
PLANT_TO = "base_output = await self.legacy_load_mm_data("
LITERAL = "legacy_load_mm_data"

#: where wheels are looked for before pip downloads them (--wheel-dir)
WHEEL_DIRS: list[Path] = []


def wheel(name: str, version: str) -> Path:
    """The wheel of NAME==VERSION in bench/data/: copied from a --wheel-dir, else downloaded."""
    DATA.mkdir(parents=True, exist_ok=True)
    pattern = f"{name}-{version}-*.whl"
    found = sorted(glob.glob(str(DATA / pattern)))
    for folder in WHEEL_DIRS:
        if found:
            break
        for src in sorted(glob.glob(str(folder / pattern)))[:1]:
            print(f"copying {src} into {DATA}", flush=True)
            shutil.copy2(src, DATA / Path(src).name)
        found = sorted(glob.glob(str(DATA / pattern)))
    if not found:
        print(f"downloading {name}=={version} (pip download --no-deps) ...", flush=True)
        cmd = [sys.executable, "-m", "pip", "download", f"{name}=={version}", "--no-deps"]
        subprocess.run(cmd + ["--only-binary", ":all:", "-d", str(DATA)], check=True)
        found = sorted(glob.glob(str(DATA / pattern)))
    if not found:
        sys.exit(f"no wheel of {name}=={version} in {DATA}")
    return Path(found[0])


def local_wheel(name: str, version: str) -> Path | None:
    """The wheel of NAME==VERSION if bench/data/ or a --wheel-dir has it (no download)."""
    pattern = f"{name}-{version}-*.whl"
    if glob.glob(str(DATA / pattern)) or any(glob.glob(str(d / pattern)) for d in WHEEL_DIRS):
        return wheel(name, version)
    return None


def _unpack(key: str, root: Path) -> None:
    name, version = TREES[key]
    whl = wheel(name, version)
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    with zipfile.ZipFile(whl) as z:
        for info in z.infolist():
            if info.filename.endswith(".py") and ".dist-info/" not in info.filename:
                z.extract(info, root)
    if key == "sglang":
        target = root / PLANT_FILE
        text = target.read_text(encoding="utf-8")
        if text.count(PLANT_FROM) < 1:
            sys.exit(f"{target}: cannot plant the PA101 positive ({PLANT_FROM!r} not found)")
        target.write_text(text.replace(PLANT_FROM, PLANT_TO, 1), encoding="utf-8")
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@invalid", "-c", "commit.gpgsign=false"]
    subprocess.run(git + ["init", "-q"], cwd=root, check=True)
    (root / ".gitignore").write_text(".patchaudit_cache/\n")
    subprocess.run(git + ["add", "-A"], cwd=root, check=True)
    subprocess.run(git + ["commit", "-q", "-m", f"{name} {version} sources"], cwd=root, check=True)
    (root / ".bench-ready").write_text("")


def tree(key: str) -> tuple[Path, set[tuple[str, int]]]:
    """The unpacked tree and the PA101 findings planted in it (path, line)."""
    name, version = TREES[key]
    root = DATA / "trees" / f"{name}-{version}"
    if not (root / ".bench-ready").exists():
        _unpack(key, root)
    # the tree's own patchaudit configuration (default settings): without it, the run
    # would pick up the [tool.patchaudit] of a project above the tree (this repository's,
    # for one), its excludes and its cache folder
    cfg = root / "pyproject.toml"
    if not cfg.exists():
        cfg.write_text("[tool.patchaudit]\n")
    planted: set[tuple[str, int]] = set()
    if key == "sglang":
        lines = (root / PLANT_FILE).read_text(encoding="utf-8").splitlines()
        planted = {(PLANT_FILE, i + 1) for i, line in enumerate(lines) if PLANT_TO in line}
    return root, planted


def py_files(root: Path) -> tuple[int, int]:
    """Number of .py files under root (hidden folders left out) and their bytes."""
    n = size = 0
    for p in root.rglob("*.py"):
        if not any(part.startswith(".") for part in p.relative_to(root).parts):
            n += 1
            size += p.stat().st_size
    return n, size
