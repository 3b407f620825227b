"""patchaudit's benchmark: real trees, side by side with its peers, and slime's patch sets.

    python bench/run.py [--repeat 5] [--budget 60] [--jobs N]
                        [--trees sglang,verl,areal,openrlhf,trl,skyrl] [--load-trees sglang,verl]
                        [--slime PATH [--slime-sets v0.5.15.post1,...]] [--wheel-dir DIR]
                        [--skip grep,parse,semgrep,fixit,patchaudit,load,exact,bump,selectivity,floors]
                        [--json FILE]

Trees (wheels downloaded with pip into bench/data/ if absent, unpacked once; see
bench/bench_data.py):
- sglang: the Python sources of the SGLang 0.5.15.post1 wheel (about 2,500 files,
  36 MB), with one file changed to hold a PA101 positive: Qwen-VL's processor
  calling `legacy_load_mm_data(` where the release calls `load_mm_data(` (the
  change slime's sglang.patch makes);
- the RL frameworks on PyPI: verl 0.9.1, areal 1.0.4, openrlhf 0.11.2, trl 1.16.0,
  skyrl 0.4.0 (their wheels' Python sources).
Each tree is made a git repository with one commit (a checkout, as users scan).

Rows (every timed run a fresh process; "default jobs" is patchaudit without -j, its
own choice; 1 job and the default jobs run alternately, cold = cache removed before
each run):
- sglang and verl: grep (read floor), the libcst parse floor (1 and N processes),
  semgrep and fixit with PA101, patchaudit PA101 and the default rules (cold with 1
  job and the default jobs, warm), and on SGLang one changed file as pre-commit
  passes it;
- each RL framework: the default rules cold (1 job, default jobs) next to semgrep
  with bench/semgrep_pa102_taint.yaml (PA102 in taint mode): time and findings;
- under load (--load-trees): the default rules cold, 1 job and default jobs, while a
  busy loop this script starts keeps one core busy;
- with --slime PATH (a slime checkout; nothing of it is copied): exact mode on each
  SGLang patch set, `check docker/Dockerfile docker/patch/SET --engine
  sglang=WHEEL` (the recipe says which patch goes to which engine, in which order,
  applied with `git apply`), and `bump` of the v0.5.12.post1 patches from
  0.5.12.post1 to 0.5.15.post1;
- the peak RSS of every patchaudit run;
- floors (bench/floors.py): a process that only starts Python, imports libcst and parses
  the changed file (the least the one-changed-file row can take), and per tree the libcst
  parses and the dataflow interpreter of a cold 1-job run spread over the cores (the least
  the default rules cold can take with today's pre-filters), printed under the bounds.
Then every acceptance figure of issue 21 (and the bounds of issues 7 and 16) as
PASS/FAIL.  Nothing here is asserted on time in the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import bench_data
from bench_accept import report
from bench_data import BENCH, FULL_TREES, LITERAL, PLANT_FILE, RL_TREES, TREES, py_files, tree
from bench_data import wheel as wheel  # bench/snapshot.py reaches the wheels and trees through run
from bench_rows import (
    bump_rows,
    exact_rows,
    findings_of,
    interleaved,
    jobs_cells,
    load_rows,
    pa_check,
    rl_rows,
    scan_floor,
    start_floor,
)
from bench_timing import Cell

PY = sys.executable


# --------------------------------------------------------------------------
# the findings of each tool


def verdict(found: set[tuple[str, int]], planted: set[tuple[str, int]]) -> str:
    if found == planted:
        return f"ok ({len(found)})"
    return f"DIFFERS: found {sorted(found)}, planted {sorted(planted)}"


def pa101_of(found: list[tuple]) -> set[tuple[str, int]]:
    return {(path, line) for path, line, code, _ in found if code == "PA101"}


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
    from patchaudit.config.registry import build_index, select_codes
    from patchaudit.config.settings import Settings
    from patchaudit.pipeline.triage import Triage

    root, _ = tree(key)
    index = build_index()
    metas = [index[c] for c in select_codes(index, None)]
    triage = Triage(metas, Settings(), None, None)
    rules = triage.by_kind["python"]
    datas = []
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(".")]
        datas += [Path(d, n).read_bytes() for n in names if n.endswith(".py")]
    total = sum(len(x) for x in datas)
    out = [
        f"{key}: pre-filter of the default rules without engine/tokenizer "
        f"({len(datas)} files, {total / 1e6:.1f} MB): files and bytes each lets through to libcst"
    ]
    settings = Settings()
    for m in rules:
        hit = [x for x in datas if m.can_match_bytes(x)]
        shown = str(m.requires)
        if m.custom_filter:  # the rule's own can_match refines its requires
            cls = m.load()
            hit = [x for x in hit if cls.can_match(x.decode("utf-8", "replace"), settings)]
            shown = "its can_match, within " + shown
        out.append(f"  {m.code} {shown[:60]:62} {len(hit):5} files {sum(map(len, hit)) / total:6.1%} of bytes")
    hit = [x for x in datas if triage.heavy("python", x)]
    out.append(f"  {'all':5} {'':62} {len(hit):5} files {sum(map(len, hit)) / total:6.1%} of bytes")
    return out


# --------------------------------------------------------------------------
# the rows of sglang and verl


def peer_rows(key: str, root: Path, planted, args, jobs: int, say) -> None:
    """grep, the parse floor, semgrep and fixit with PA101."""
    skip, R, B = set(args.skip), args.repeat, args.budget
    if "grep" not in skip:
        t, _, p = interleaved([["grep", "-rn", "--include=*.py", "-e", LITERAL, "."]], root, runs=R, budget=B)[0]
        found = grep_lines(p.stdout)
        say(
            Cell(
                key,
                "grep -r",
                "read floor (literal)",
                t,
                f"ok ({len(found)} lines)" if planted <= found else f"DIFFERS: {sorted(found)}",
            )
        )
    if "parse" not in skip:
        for j in sorted({1, jobs}):
            cmd = [PY, str(BENCH / "parse_all.py"), "-j", str(j), "."]
            t, _, p = interleaved([cmd], root, runs=R, budget=B)[0]
            say(Cell(key, "libcst", f"parse floor, {j} process{'es' if j > 1 else ''}", t, p.stdout.strip()))
    if "semgrep" not in skip and shutil.which(args.semgrep):
        cmd = [
            args.semgrep,
            "scan",
            "--config",
            str(BENCH / "semgrep_pa101.yaml"),
            "--metrics=off",
            "--disable-version-check",
            "--json",
            "--quiet",
            "--jobs",
            str(jobs),
            ".",
        ]
        env = dict(os.environ, SEMGREP_ENABLE_VERSION_CHECK="0", SEMGREP_SEND_METRICS="off")
        t, _, p = interleaved([cmd], root, runs=R, budget=B, env=env)[0]
        say(Cell(key, "semgrep", f"PA101 rule, {jobs} jobs", t, verdict(semgrep_findings(p.stdout), planted)))
    if "fixit" not in skip and shutil.which(args.fixit):
        env = dict(os.environ, PYTHONPATH=str(BENCH) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        cmd = [args.fixit, "--rules", "fixit_pa101", "lint", "."]
        t, _, p = interleaved([cmd], root, runs=args.fixit_repeat, budget=B, env=env, ok_codes=(0, 1, 2, 3))[0]
        say(Cell(key, "fixit", f"PA101 LintRule, {jobs} jobs", t, verdict(fixit_findings(p.stdout), planted)))


def pa_rows(key: str, root: Path, planted, args, say) -> None:
    """patchaudit PA101 and the default rules: cold 1 job / default jobs, warm; one changed file."""
    R, B = args.repeat, args.budget
    for label, sel in (("PA101", ["--select", "PA101"]), ("default rules", [])):
        for cell in jobs_cells(key, root, label, sel, args):
            cell.check = f"{verdict(pa101_of(cell.found), planted)}, {len(cell.found)} findings"
            say(cell)
        interleaved([pa_check(sel, None)], root, runs=1, budget=B)  # fill the cache
        t, rss, p = interleaved([pa_check(sel, None)], root, runs=R, budget=B)[0]
        found = findings_of(p.stdout)
        cell = Cell(
            key,
            "patchaudit",
            f"{label}, warm, default jobs",
            t,
            f"{verdict(pa101_of(found), planted)}, {len(found)} findings",
            rss=rss,
            findings=len(found),
        )
        cell.found = found
        say(cell)
    if not planted:
        return
    target = root / PLANT_FILE
    original = target.read_bytes()
    counter = [0]

    def touch() -> None:
        counter[0] += 1
        target.write_bytes(original + f"# edited {counter[0]}\n".encode())

    try:
        interleaved([pa_check([], None)], root, runs=1, budget=B)  # warm cache for the tree
        cmd = pa_check([], None)[:-1] + [PLANT_FILE]
        t, rss, p = interleaved([cmd], root, runs=R, budget=B, before=touch)[0]
        say(
            Cell(
                key,
                "patchaudit",
                "default rules, 1 changed file",
                t,
                verdict(pa101_of(findings_of(p.stdout)), planted),
                rss=rss,
            )
        )
        if "floors" not in args.skip:
            start_floor(root, PLANT_FILE, args, say, key)
    finally:
        target.write_bytes(original)


def bench_tree(key: str, args, jobs: int, say) -> None:
    root, planted = tree(key)
    n, size = py_files(root)
    print(f"{key}: {root} ({n} files, {size / 1e6:.1f} MB)", flush=True)
    peer_rows(key, root, planted, args, jobs, say)
    if "patchaudit" not in args.skip:
        pa_rows(key, root, planted, args, say)


# --------------------------------------------------------------------------
# main


def options() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="patchaudit's benchmark (see bench/README.md)")
    ap.add_argument("--repeat", type=int, default=5, help="runs per cell (median), default 5")
    ap.add_argument("--fixit-repeat", type=int, default=1, help="runs of fixit per tree (it is slow), default 1")
    ap.add_argument(
        "--budget",
        type=float,
        default=60.0,
        help="stop repeating a cell once it has taken this many seconds (default 60; at least one run)",
    )
    ap.add_argument("--jobs", type=int, default=None, help="the peers' jobs (default: the number of cores)")
    ap.add_argument("--trees", default=",".join(TREES), help=f"comma-separated, of {', '.join(TREES)}")
    ap.add_argument("--load-trees", default="sglang,verl", help="trees of the under-load row (default sglang,verl)")
    ap.add_argument("--slime", type=Path, default=None, help="a slime checkout: exact mode and bump rows")
    ap.add_argument(
        "--slime-sets",
        default="",
        help="patch set folders of docker/patch/ to time (default: v0.5.15.post1 and those "
        "with their SGLang wheel in bench/data/); named ones are downloaded",
    )
    ap.add_argument(
        "--wheel-dir",
        action="append",
        type=Path,
        default=[],
        help="a folder to copy wheels from before downloading them (repeatable)",
    )
    ap.add_argument(
        "--skip",
        default="",
        help="comma-separated: grep,parse,semgrep,fixit,patchaudit,load,exact,bump,selectivity,floors",
    )
    ap.add_argument("--semgrep", default="semgrep", help="the semgrep command (e.g. one in its own venv)")
    ap.add_argument("--fixit", default="fixit", help="the fixit command")
    ap.add_argument("--json", default=None, help="also write the cells as JSON to FILE")
    args = ap.parse_args()
    args.skip = [s for s in args.skip.split(",") if s]
    args.slime_sets = [s for s in args.slime_sets.split(",") if s]
    for name in ("trees", "load_trees"):
        keys = [t for t in getattr(args, name).split(",") if t]
        unknown = [t for t in keys if t not in TREES]
        if unknown:
            ap.error(f"--{name.replace('_', '-')}: unknown {', '.join(unknown)} (known: {', '.join(TREES)})")
        setattr(args, name, keys)
    if args.slime is not None and not (args.slime / "docker" / "patch").is_dir():
        ap.error(f"--slime {args.slime}: no docker/patch/ folder there")
    bench_data.WHEEL_DIRS[:] = args.wheel_dir
    return args


def versions(args: argparse.Namespace) -> None:
    import platform

    from patchaudit import __version__

    print(
        f"patchaudit {__version__}, Python {platform.python_version()}, {os.cpu_count()} cores, "
        f"{platform.platform()}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        flush=True,
    )
    for tool, command in (("semgrep", args.semgrep), ("fixit", args.fixit)):
        if tool in args.skip:
            continue
        if shutil.which(command):
            # semgrep checks for a newer version over the network unless told not to
            env = dict(os.environ, SEMGREP_ENABLE_VERSION_CHECK="0")
            try:
                v = (
                    subprocess.run([command, "--version"], capture_output=True, text=True, env=env, timeout=120)
                    .stdout.strip()
                    .splitlines()
                )
            except subprocess.TimeoutExpired:
                v = ["(--version timed out)"]
            print(f"{tool}: {v[-1] if v else '?'}", flush=True)
        else:
            print(f"{tool}: {command} not found (pip install {tool}); its rows are skipped", flush=True)


def main() -> int:
    args = options()
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
    versions(args)
    cells: list[Cell] = []

    def say(cell: Cell) -> None:
        cells.append(cell)
        rss = f"  {cell.peak_mb:5.0f} MB" if cell.peak_mb is not None else ""
        print(
            f"  {cell.tree:8} {cell.tool:10} {cell.config:50} {cell.median:9.3f} s  "
            f"(n={len(cell.times)}){rss}  {cell.check}",
            flush=True,
        )

    for key in args.trees:
        if key in FULL_TREES:
            bench_tree(key, args, jobs, say)
        if key in RL_TREES:
            rl_rows(key, args, say, jobs, patchaudit=key not in FULL_TREES)
        if "patchaudit" not in args.skip and "floors" not in args.skip:
            scan_floor(key, tree(key)[0], args, say, jobs)
    if "load" not in args.skip:
        for key in args.load_trees:
            load_rows(key, args, say)
    if args.slime is not None:
        slime = args.slime.resolve()
        if "exact" not in args.skip and "patchaudit" not in args.skip:
            exact_rows(slime, args, say)
        if "bump" not in args.skip and "patchaudit" not in args.skip:
            bump_rows(slime, args, say)
    print(report(cells))
    print("")
    if "selectivity" not in args.skip:
        for key in [k for k in args.trees if k in FULL_TREES]:
            try:
                print("\n".join(selectivity(key)))
            except Exception as exc:  # patchaudit's internals moved: the figures above stand
                print(f"{key}: pre-filter shares not available ({exc!r})")
    for c in cells:
        if c.tree in RL_TREES and c.note and (c.tool == "semgrep" or "cold, 1 job" in c.config):
            print(f"{c.tree} {c.tool} PA102 findings: {c.note}")
    print(
        f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
        f"(other processes on the machine slow every tool alike)"
    )
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps([c.to_json() for c in cells], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
