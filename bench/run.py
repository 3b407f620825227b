"""patchaudit's benchmark: two real trees, side by side with its peers.

    python bench/run.py [--repeat 5] [--budget 120] [--jobs N] [--trees sglang,verl]
                        [--skip fixit,semgrep,...] [--json FILE]

Trees (downloaded with pip into bench/data/ if absent, unpacked once):
- the Python sources of the SGLang 0.5.15.post1 wheel (about 2,500 files,
  36 MB), with one file changed to hold a PA101 positive: Qwen-VL's processor
  calling `legacy_load_mm_data(` where the release calls `load_mm_data(` (the
  change slime's sglang.patch makes);
- the Python sources of the verl 0.9.1 wheel (an RL framework, about 450 files).
Each tree is made a git repository with one commit (a checkout, as users scan).

Tools, each on the whole tree from its root:
- patchaudit, PA101 alone and the default rules; cold (empty cache), warm
  (cache filled by an earlier run); 1 job and all jobs; and, on SGLang, the
  one changed file alone as a pre-commit hook passes it (warm cache for the
  rest, the file itself changed before every run);
- fixit 2 with the same rule as a LintRule (bench/fixit_pa101.py);
- semgrep with the same rule in YAML (bench/semgrep_pa101.yaml), offline
  (`--metrics=off --disable-version-check`);
- the parse floor: every file parsed with libcst, nothing else
  (bench/parse_all.py), with 1 and with all processes;
- the read floor: `grep -rn` for the rule's literal.

Every timed run is a fresh process; a cell is the median of up to --repeat
runs (fewer when a cell would pass --budget seconds; at least one).  The PA101
findings of every linter run must equal the one the benchmark planted (none
on verl); the table says "ok" or what differed.  Nothing here is asserted on
time: the acceptance lines at the end state what the figures show.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import zipfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
DATA = BENCH / "data"
TREES = {
    "sglang": ("sglang", "0.5.15.post1"),
    "verl": ("verl", "0.9.1"),
}
PLANT_FILE = "sglang/srt/multimodal/processors/qwen_vl.py"
PLANT_FROM = "base_output = await self.load_mm_data("
PLANT_TO = "base_output = await self.legacy_load_mm_data("
LITERAL = "legacy_load_mm_data"


# --------------------------------------------------------------------------
# data


def wheel(name: str, version: str) -> Path:
    DATA.mkdir(parents=True, exist_ok=True)
    found = sorted(glob.glob(str(DATA / f"{name}-{version}-*.whl")))
    if not found:
        print(f"downloading {name}=={version} (pip download --no-deps) ...", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "download", f"{name}=={version}", "--no-deps",
                        "--only-binary", ":all:", "-d", str(DATA)], check=True)
        found = sorted(glob.glob(str(DATA / f"{name}-{version}-*.whl")))
    if not found:
        sys.exit(f"no wheel of {name}=={version} in {DATA}")
    return Path(found[0])


def tree(key: str) -> tuple[Path, set[tuple[str, int]]]:
    """The unpacked tree and the PA101 findings planted in it (path, line)."""
    name, version = TREES[key]
    root = DATA / "trees" / f"{name}-{version}"
    marker = root / ".bench-ready"
    if not marker.exists():
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
        marker.write_text("")
    # the tree's own patchaudit configuration (default settings): without it, the run
    # would pick up the [tool.patchaudit] of a project above the tree (this repository's,
    # for one), its excludes and its cache folder
    cfg = root / "pyproject.toml"
    if not cfg.exists():
        cfg.write_text("[tool.patchaudit]\n")
    planted: set[tuple[str, int]] = set()
    if key == "sglang":
        lines = (root / PLANT_FILE).read_text(encoding="utf-8").splitlines()
        planted = {(PLANT_FILE, i + 1) for i, l in enumerate(lines) if PLANT_TO in l}
    return root, planted


# --------------------------------------------------------------------------
# running


class Cell:
    def __init__(self, tree: str, tool: str, config: str, times: list[float], check: str, note: str = ""):
        self.tree, self.tool, self.config, self.times, self.check, self.note = tree, tool, config, times, check, note

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    def to_json(self) -> dict:
        return {"tree": self.tree, "tool": self.tool, "config": self.config, "runs": self.times,
                "median": self.median, "check": self.check, "note": self.note}


def timed(cmd: list[str], cwd: Path, env: dict | None = None, before=None) -> tuple[float, subprocess.CompletedProcess]:
    if before is not None:
        before()
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    return time.perf_counter() - start, proc


def repeat(cmd, cwd, *, runs: int, budget: float, env=None, before=None, ok_codes=(0, 1)):
    times: list[float] = []
    first = None
    spent = 0.0
    while len(times) < runs and (not times or spent + times[-1] <= budget):
        t, proc = timed(cmd, cwd, env, before)
        if proc.returncode not in ok_codes:
            raise SystemExit(f"{' '.join(cmd)} (in {cwd}) exited {proc.returncode}:\n{proc.stderr[-3000:]}")
        times.append(t)
        spent += t
        first = first or proc
    return times, first


def verdict(found: set[tuple[str, int]], planted: set[tuple[str, int]]) -> str:
    if found == planted:
        return f"ok ({len(found)})"
    return f"DIFFERS: found {sorted(found)}, planted {sorted(planted)}"


def pa_findings(stdout: str) -> set[tuple[str, int]]:
    return {(os.path.normpath(f["path"]), f["line"]) for f in json.loads(stdout or "[]") if f["code"] == "PA101"}


def fixit_findings(stdout: str) -> set[tuple[str, int]]:
    out = set()
    for line in stdout.splitlines():
        m = re.match(r"^(.*?)@(\d+):\d+ LegacyLoaderDropsInputIds:", line)
        if m:
            out.add((os.path.normpath(m.group(1)), int(m.group(2))))
    return out


def semgrep_findings(stdout: str) -> set[tuple[str, int]]:
    data = json.loads(stdout)
    return {(os.path.normpath(r["path"]), r["start"]["line"]) for r in data["results"]}


def grep_lines(stdout: str) -> set[tuple[str, int]]:
    out = set()
    for line in stdout.splitlines():
        path, _, rest = line.partition(":")
        num, _, _ = rest.partition(":")
        if num.isdigit():
            out.add((os.path.normpath(path), int(num)))
    return out


def selectivity(key: str) -> list[str]:
    """What each selected-by-default Python rule's pre-filter lets through on a tree."""
    from patchaudit.config.settings import Settings
    from patchaudit.pipeline.triage import Triage
    from patchaudit.config.registry import build_index, select_codes

    root, _ = tree(key)
    index = build_index()
    metas = [index[c] for c in select_codes(index, None)]
    triage = Triage(metas, Settings(), None, None)
    rules = triage.by_kind["python"]
    datas = []
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(".")]
        for n in names:
            if n.endswith(".py"):
                datas.append((Path(d, n).read_bytes()))
    total = sum(len(x) for x in datas)
    out = [f"{key}: pre-filter of the default rules without engine/tokenizer "
           f"({len(datas)} files, {total / 1e6:.1f} MB): files and bytes each lets through to libcst"]
    settings = Settings()
    for m in rules:
        hit = [x for x in datas if m.can_match_bytes(x)]
        shown = str(m.requires)
        if m.custom_filter:   # the rule's own can_match refines its requires
            cls = m.load()
            hit = [x for x in hit if cls.can_match(x.decode("utf-8", "replace"), settings)]
            shown = "its can_match, within " + shown
        out.append(f"  {m.code} {shown[:60]:62} {len(hit):5} files {sum(map(len, hit)) / total:6.1%} of bytes")
    hit = [x for x in datas if triage.heavy("python", x)]
    out.append(f"  {'all':5} {'':62} {len(hit):5} files {sum(map(len, hit)) / total:6.1%} of bytes")
    return out


def bench_tree(key: str, args, jobs: int) -> list[Cell]:
    root, planted = tree(key)
    py = sys.executable
    cells: list[Cell] = []
    skip = set(args.skip)
    R, B = args.repeat, args.budget

    def say(cell: Cell) -> None:
        cells.append(cell)
        print(f"  {cell.tree:7} {cell.tool:10} {cell.config:34} {cell.median:9.3f} s  "
              f"(n={len(cell.times)})  {cell.check}", flush=True)

    cache = root / ".patchaudit_cache"

    def cold():
        shutil.rmtree(cache, ignore_errors=True)

    pa = [py, "-m", "patchaudit", "check", "--format", "json", "--exit-zero"]
    print(f"{key}: {root}", flush=True)
    if "grep" not in skip:
        t, p = repeat(["grep", "-rn", "--include=*.py", "-e", LITERAL, "."], root, runs=R, budget=B)
        found = grep_lines(p.stdout)
        say(Cell(key, "grep -r", "read floor (literal)", t,
                 f"ok ({len(found)} lines)" if planted <= found else f"DIFFERS: {sorted(found)}"))
    if "parse" not in skip:
        for j in sorted({1, jobs}):
            t, p = repeat([py, str(BENCH / "parse_all.py"), "-j", str(j), "."], root, runs=R, budget=B)
            say(Cell(key, "libcst", f"parse floor, {j} process{'es' if j > 1 else ''}", t, p.stdout.strip()))
    if "semgrep" not in skip and shutil.which("semgrep"):
        cmd = ["semgrep", "scan", "--config", str(BENCH / "semgrep_pa101.yaml"), "--metrics=off",
               "--disable-version-check", "--json", "--quiet", "--jobs", str(jobs), "."]
        env = dict(os.environ, SEMGREP_ENABLE_VERSION_CHECK="0", SEMGREP_SEND_METRICS="off")
        t, p = repeat(cmd, root, runs=R, budget=B, env=env)
        say(Cell(key, "semgrep", f"PA101 rule, {jobs} jobs", t, verdict(semgrep_findings(p.stdout), planted)))
    if "fixit" not in skip and shutil.which("fixit"):
        env = dict(os.environ, PYTHONPATH=str(BENCH) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        cmd = ["fixit", "--rules", "fixit_pa101", "lint", "."]
        t, p = repeat(cmd, root, runs=args.fixit_repeat, budget=B, env=env, ok_codes=(0, 1, 2, 3))
        say(Cell(key, "fixit", f"PA101 LintRule, {jobs} jobs", t, verdict(fixit_findings(p.stdout), planted)))
    if "patchaudit" not in skip:
        for label, sel in (("PA101", ["--select", "PA101"]), ("default rules", [])):
            for j in sorted({1, jobs}):
                t, p = repeat(pa + sel + ["-j", str(j), "."], root, runs=R, budget=B, before=cold)
                say(Cell(key, "patchaudit", f"{label}, cold, {j} job{'s' if j > 1 else ''}", t,
                         verdict(pa_findings(p.stdout), planted)))
            timed(pa + sel + ["-j", str(jobs), "."], root)   # fill the cache
            t, p = repeat(pa + sel + ["-j", str(jobs), "."], root, runs=R, budget=B)
            say(Cell(key, "patchaudit", f"{label}, warm, {jobs} jobs", t, verdict(pa_findings(p.stdout), planted)))
        if planted:
            target = root / PLANT_FILE
            original = target.read_bytes()
            counter = [0]

            def touch():
                counter[0] += 1
                target.write_bytes(original + f"# edited {counter[0]}\n".encode())

            try:
                timed(pa + ["-j", str(jobs), "."], root)   # warm cache for the tree
                t, p = repeat(pa + [PLANT_FILE], root, runs=R, budget=B, before=touch)
                say(Cell(key, "patchaudit", "default rules, 1 changed file", t,
                         verdict(pa_findings(p.stdout), planted)))
            finally:
                target.write_bytes(original)
    return cells


# --------------------------------------------------------------------------
# report


def find(cells, tree, tool, config_start):
    for c in cells:
        if c.tree == tree and c.tool == tool and c.config.startswith(config_start):
            return c
    return None


def report(cells: list[Cell], jobs: int) -> str:
    out = []
    w = out.append
    w("")
    w(f"{'tree':7} {'tool':10} {'configuration':34} {'median':>9}  {'runs':>4}  {'x patchaudit*':>13}  check")
    w("-" * 110)
    for tree_key in TREES:
        ref = find(cells, tree_key, "patchaudit", f"PA101, cold, {jobs} job")
        for c in (c for c in cells if c.tree == tree_key):
            ratio = f"{c.median / ref.median:12.1f}x" if ref and c.tool != "patchaudit" else ""
            w(f"{c.tree:7} {c.tool:10} {c.config:34} {c.median:8.3f}s  {len(c.times):>4}  {ratio:>13}  {c.check}")
    w("")
    w(f"* peer's median / patchaudit PA101 cold with {jobs} jobs on the same tree.")
    w("")
    w("Acceptance (medians of this run):")

    def line(text, ok):
        w(f"  [{'PASS' if ok else 'FAIL'}] {text}" if ok is not None else f"  [ -- ] {text} (not measured)")

    def get(*a):
        return find(cells, *a)

    pa101 = get("sglang", "patchaudit", f"PA101, cold, {jobs} job")
    sg = get("sglang", "semgrep", "PA101")
    fx = get("sglang", "fixit", "PA101")
    line(f"PA101 cold on SGLang >= 5x faster than semgrep: "
         f"{sg.median / pa101.median:.1f}x" if pa101 and sg else "PA101 vs semgrep",
         (sg.median / pa101.median >= 5) if pa101 and sg else None)
    line(f"PA101 cold on SGLang >= 100x faster than fixit: "
         f"{fx.median / pa101.median:.1f}x" if pa101 and fx else "PA101 vs fixit",
         (fx.median / pa101.median >= 100) if pa101 and fx else None)
    for j in sorted({1, jobs}):
        d = get("sglang", "patchaudit", f"default rules, cold, {j} job")
        floor = get("sglang", "libcst", f"parse floor, {j} process")
        line(f"default rules cold on SGLang <= 1/3 of the parse floor, {j} process(es): "
             f"{d.median / floor.median:.2f} of it" if d and floor else f"default vs parse floor ({j})",
             (d.median <= floor.median / 3) if d and floor else None)
    dv = get("verl", "patchaudit", f"default rules, cold, {jobs} job")
    sv = get("verl", "semgrep", "PA101")
    line(f"default rules cold on verl faster than semgrep's one rule: {dv.median:.2f}s vs {sv.median:.2f}s"
         if dv and sv else "default on verl vs semgrep", (dv.median < sv.median) if dv and sv else None)
    wr = get("sglang", "patchaudit", "default rules, warm")
    line(f"warm re-scan of SGLang (default rules) under 0.5 s: {wr.median:.3f}s" if wr else "warm re-scan",
         (wr.median < 0.5) if wr else None)
    one = get("sglang", "patchaudit", "default rules, 1 changed file")
    line(f"one changed file (default rules) under 0.3 s: {one.median:.3f}s" if one else "one changed file",
         (one.median < 0.3) if one else None)
    bad = [c for c in cells if c.check.startswith("DIFFERS")]
    line(f"every tool reports the same PA101 finding ({len(bad)} differ)", not bad)
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description="patchaudit's benchmark (see bench/README.md)")
    ap.add_argument("--repeat", type=int, default=5, help="runs per cell (median), default 5")
    ap.add_argument("--fixit-repeat", type=int, default=1, help="runs of fixit per tree (it is slow), default 1")
    ap.add_argument("--budget", type=float, default=120.0,
                    help="stop repeating a cell once it has taken this many seconds (default 120)")
    ap.add_argument("--jobs", type=int, default=None, help="'all jobs' (default: the number of cores)")
    ap.add_argument("--trees", default="sglang,verl")
    ap.add_argument("--skip", default="", help="comma-separated: grep,parse,semgrep,fixit,patchaudit")
    ap.add_argument("--json", default=None, help="also write the cells as JSON to FILE")
    args = ap.parse_args()
    args.skip = [s for s in args.skip.split(",") if s]
    # Every Python tool here runs from bytecode, as `pip install` leaves it (pip compiles
    # what it installs; an editable install writes __pycache__ on first use).  A shell
    # that forbids writing bytecode would make each run compile patchaudit's sources
    # again (~50 ms) while the peers, installed with their .pyc files, would not pay it.
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
        print("note: PYTHONDONTWRITEBYTECODE unset for the runs (tools run from bytecode)", flush=True)
    try:
        jobs = args.jobs or len(os.sched_getaffinity(0))
    except AttributeError:
        jobs = args.jobs or os.cpu_count() or 1
    import platform

    from patchaudit import __version__

    print(f"patchaudit {__version__}, Python {platform.python_version()}, {jobs} cores, "
          f"{platform.platform()}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    for tool in ("semgrep", "fixit"):
        if tool in args.skip:
            continue
        if shutil.which(tool):
            # semgrep checks for a newer version over the network unless told not to
            env = dict(os.environ, SEMGREP_ENABLE_VERSION_CHECK="0")
            try:
                v = subprocess.run([tool, "--version"], capture_output=True, text=True, env=env,
                                   timeout=120).stdout.strip().splitlines()
            except subprocess.TimeoutExpired:
                v = ["(--version timed out)"]
            print(f"{tool}: {v[-1] if v else '?'}", flush=True)
        else:
            print(f"{tool}: not installed (pip install {tool}); skipped", flush=True)
    cells: list[Cell] = []
    for key in [t for t in args.trees.split(",") if t]:
        cells += bench_tree(key, args, jobs)
    text = report(cells, jobs)
    print(text)
    print("")
    for key in [t for t in args.trees.split(",") if t]:
        print("\n".join(selectivity(key)))
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"(other processes on the machine slow every tool alike)")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps([c.to_json() for c in cells], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
