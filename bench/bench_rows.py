"""The rows of issue 21 for bench/run.py: the RL framework trees next to a semgrep taint rule,
1 job against the default under load, exact mode on slime's patch sets, and `bump`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Callable

from bench_data import BENCH, local_wheel, py_files, tree, wheel
from bench_timing import Cell, Run, busy_core, timed

PY = sys.executable
PA = [PY, "-m", "patchaudit"]
SEMGREP_ENV = dict(os.environ, SEMGREP_ENABLE_VERSION_CHECK="0", SEMGREP_SEND_METRICS="off")
#: the patch set that bump moves, and the versions
BUMP_SET, BUMP_FROM, BUMP_TO = "v0.5.12.post1", "0.5.12.post1", "0.5.15.post1"
EXACT_REQUIRED = "v0.5.15.post1"

Say = Callable[[Cell], None]


# --------------------------------------------------------------------------
# findings


def findings_of(stdout: str) -> list[tuple]:
    """Every finding of patchaudit's JSON report (a list, or bump's object with "findings"),
    sorted, as (path, line, code, message)."""
    data = json.loads(stdout or "[]")
    if isinstance(data, dict):
        data = data.get("findings", [])
    return sorted((os.path.normpath(f["path"]), f["line"], f["code"], f["message"]) for f in data)


def by_code(found: list[tuple]) -> str:
    counts = Counter(f[2] for f in found)
    return ", ".join(f"{c} {n}" for c, n in sorted(counts.items())) or "none"


def semgrep_results(stdout: str) -> tuple[list[tuple[str, int]], str]:
    """semgrep's findings (path, line) and its errors by kind (a timeout on a file, ...)."""
    data = json.loads(stdout)
    found = sorted((os.path.normpath(r["path"]), r["start"]["line"]) for r in data["results"])
    types = [e.get("type", "error") for e in data.get("errors", [])]
    kinds = Counter(str(t[0] if isinstance(t, list) and t else t) for t in types)
    return found, ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))


# --------------------------------------------------------------------------
# running several configurations alternately


def interleaved(
    cmds: list[list[str]],
    cwd: Path,
    *,
    runs: int,
    budget: float,
    before: Callable[[], None] | None = None,
    env: dict | None = None,
    ok_codes: tuple[int, ...] = (0, 1),
) -> list[tuple[list[float], list[float], Run]]:
    """Run the commands in turn (A B A B ...), so that a change of the machine's load
    between runs falls on both alike; each gets up to `runs` runs, fewer once all of them
    together would pass `budget` seconds (at least one each)."""
    times: list[list[float]] = [[] for _ in cmds]
    rss: list[list[float]] = [[] for _ in cmds]
    first: list[Run | None] = [None for _ in cmds]
    spent = 0.0
    for i in range(max(runs, 1)):
        if i and spent / i * (i + 1) > budget:
            break
        for k, cmd in enumerate(cmds):
            run = timed(cmd, cwd, env, before)
            if run.returncode not in ok_codes:
                raise SystemExit(f"{' '.join(cmd)} (in {cwd}) exited {run.returncode}:\n{run.stderr[-3000:]}")
            times[k].append(run.seconds)
            rss[k].append(run.rss_mb)
            spent += run.seconds
            first[k] = first[k] or run
    return [(t, r, f) for t, r, f in zip(times, rss, first) if f is not None]


def pa_check(select: list[str], jobs: int | None) -> list[str]:
    """`patchaudit check` on the tree; jobs None: patchaudit's own default (no -j)."""
    return PA + ["check", "--format", "json", "--exit-zero"] + select + (["-j", str(jobs)] if jobs else []) + ["."]


def job_label(jobs: int | None) -> str:
    return "default jobs" if jobs is None else f"{jobs} job{'s' if jobs > 1 else ''}"


def jobs_cells(key: str, root: Path, label: str, select: list[str], args, *, suffix: str = "") -> list[Cell]:
    """`label`, cold, with 1 job and with the default jobs, run alternately."""
    cache = root / ".patchaudit_cache"

    def cold() -> None:
        shutil.rmtree(cache, ignore_errors=True)

    configs: list[int | None] = [1, None]
    cmds = [pa_check(select, j) for j in configs]
    out = []
    for j, (t, r, first) in zip(configs, interleaved(cmds, root, runs=args.repeat, budget=args.budget, before=cold)):
        found = findings_of(first.stdout)
        cell = Cell(key, "patchaudit", f"{label}, cold, {job_label(j)}{suffix}", t, f"{len(found)} findings", rss=r)
        cell.findings = len(found)
        cell.found = found
        out.append(cell)
    return out


# --------------------------------------------------------------------------
# RL framework trees


def rl_rows(key: str, args, say: Say, jobs: int, *, patchaudit: bool = True) -> None:
    """The default rules cold (1 job, default jobs; unless the tree's full rows ran them) next
    to the semgrep taint rule for PA102."""
    root, _ = tree(key)
    if patchaudit:
        n, size = py_files(root)
        print(f"{key}: {root} ({n} files, {size / 1e6:.1f} MB)", flush=True)
    if patchaudit and "patchaudit" not in args.skip:
        for cell in jobs_cells(key, root, "default rules", [], args):
            pa102 = [f for f in cell.found if f[2] == "PA102"]
            cell.check = f"{cell.findings} findings, PA102 {len(pa102)}"
            cell.note = "; ".join(f"{p}:{line}" for p, line, _, _ in pa102)
            say(cell)
    if "semgrep" not in args.skip and shutil.which(args.semgrep):
        with tempfile.TemporaryDirectory(prefix="bench-semgrep-") as tmp:
            literal = Path(tmp) / "semgrep_pa102_taint_literal.yaml"
            literal.write_text(literal_rule(TAINT_RULE.read_text(encoding="utf-8")), encoding="utf-8")
            for config, rule in (("PA102 taint rule", TAINT_RULE), ("PA102 taint rule, literal names", literal)):
                semgrep_cell(key, root, config, rule, args, say, jobs)


TAINT_RULE = BENCH / "semgrep_pa102_taint.yaml"
#: the literal-names variant's sources: `processor(...)` and `X.processor(...)` only.  semgrep
#: skips a file without the rule's literals only when every source and sink has one; the
#: regex of `processor-names` (`*_processor` minus verbs and other processors) gives none,
#: so the faithful rule reads and matches every file.  This variant shows semgrep's time
#: with its pre-filter (it finds less: no `mm_processor(...)`, no `self.image_text_processor`)
LITERAL_SOURCES = """\
    pattern-sources:
      - pattern-either:
          - pattern: processor($ARG, ...)
          - pattern: processor(..., **$KW, ...)
          - pattern: processor(..., images=$M, ...)
          - pattern: processor(..., videos=$M, ...)
          - pattern: $O.processor($ARG, ...)
          - pattern: $O.processor(..., **$KW, ...)
          - pattern: $O.processor(..., images=$M, ...)
          - pattern: $O.processor(..., videos=$M, ...)
          - pattern: processor.apply_chat_template(..., tokenize=True, ...)
          - pattern: $O.processor.apply_chat_template(..., tokenize=True, ...)
"""


def literal_rule(text: str) -> str:
    """The taint rule with LITERAL_SOURCES for its sources (the sinks and sanitizers kept)."""
    start, end = text.find("    pattern-sources:"), text.find("    pattern-sanitizers:")
    if start < 0 or end < start:
        sys.exit(f"{TAINT_RULE}: no `pattern-sources:` before `pattern-sanitizers:` to replace")
    return text[:start] + LITERAL_SOURCES + text[end:]


def semgrep_cell(key: str, root: Path, config: str, rule: Path, args, say: Say, jobs: int) -> None:
    cmd = [args.semgrep, "scan", "--config", str(rule), "--metrics=off", "--disable-version-check", "--json"]
    cmd += ["--quiet", "--jobs", str(jobs), "."]
    times, _, first = interleaved([cmd], root, runs=args.repeat, budget=args.budget, env=SEMGREP_ENV)[0]
    found, errors = semgrep_results(first.stdout)
    check = f"{len(found)} findings" + (f", errors: {errors}" if errors else "")
    cell = Cell(key, "semgrep", f"{config}, {jobs} jobs", times, check, findings=len(found))
    cell.note = "; ".join(f"{p}:{line}" for p, line in found)
    say(cell)


# --------------------------------------------------------------------------
# under load


def load_rows(key: str, args, say: Say) -> None:
    """Default rules cold, 1 job and the default jobs, while a busy loop holds one core."""
    if "patchaudit" in args.skip:
        return
    root, _ = tree(key)
    print(f"{key} under load (a busy loop on one core): {root}", flush=True)
    # the loop stops by itself once the row could have used its whole budget
    with busy_core(limit=2 * args.budget + 120):
        cells = jobs_cells(key, root, "default rules", [], args, suffix=", 1 core busy")
    for cell in cells:
        say(cell)


# --------------------------------------------------------------------------
# slime: exact mode per patch set, bump


def latest_pin(slime: Path) -> str | None:
    """The SGLang version docker/Dockerfile pins for the `latest` folder (patchaudit plan)."""
    dockerfile = slime / "docker" / "Dockerfile"
    if not dockerfile.is_file():
        return None
    proc = subprocess.run(
        PA + ["plan", "docker/Dockerfile", "--format", "json"], cwd=slime, capture_output=True, text=True
    )
    try:
        sets = json.loads(proc.stdout)["sets"]
    except (ValueError, KeyError):
        return None
    for s in sets:
        for p in s.get("patches", []):
            if s.get("engine") == "sglang" and "/docker/patch/latest/" in p.get("patch", "") and p.get("version"):
                return p["version"]
    return None


def patch_sets(slime: Path, wanted: list[str]) -> tuple[list[tuple[str, str, Path]], list[str]]:
    """(folder, SGLang version, wheel) of each patch set to time, and the folders left out."""
    base = slime / "docker" / "patch"
    if not base.is_dir():
        sys.exit(f"{slime}: no docker/patch/ folder (is it a slime checkout?)")
    folders = sorted(d.name for d in base.iterdir() if d.is_dir() and any(d.glob("sglang*.patch")))
    pin = latest_pin(slime) if "latest" in folders else None
    out, left = [], []
    for name in folders:
        m = re.fullmatch(r"v(\d[\w.]*?)(?:-.*)?", name)  # v0.5.9, v0.5.0rc0-cu126
        version = m.group(1) if m else (pin if name == "latest" else None)
        if wanted and name not in wanted:
            continue
        if version is None:
            left.append(f"{name} (no SGLang version)")
            continue
        whl = wheel("sglang", version) if (wanted or name == EXACT_REQUIRED) else local_wheel("sglang", version)
        if whl is None:
            left.append(f"{name} (no sglang-{version} wheel in bench/data: name it in --slime-sets to download)")
            continue
        out.append((name, version, whl))
    missing = [w for w in wanted if w not in folders]
    if missing:
        sys.exit(f"--slime-sets: {', '.join(missing)} not among {base}'s SGLang patch sets ({', '.join(folders)})")
    return out, left


def exact_rows(slime: Path, args, say: Say) -> None:
    """`patchaudit check docker/Dockerfile docker/patch/SET --engine sglang=WHEEL`, cold."""
    sets, left = patch_sets(slime, args.slime_sets)
    print(f"slime: {slime}" + (f" (left out: {'; '.join(left)})" if left else ""), flush=True)
    recipe = ["docker/Dockerfile"] if (slime / "docker" / "Dockerfile").is_file() else []
    with tempfile.TemporaryDirectory(prefix="bench-exact-") as tmp:
        cache = Path(tmp) / "cache"

        def cold() -> None:
            shutil.rmtree(cache, ignore_errors=True)

        for name, version, whl in sets:
            cmd = [*PA, "check", *recipe, f"docker/patch/{name}", "--engine", f"sglang={whl}"]
            cmd += ["--format", "json", "--exit-zero", "--cache-dir", str(cache)]
            times, rss, first = interleaved([cmd], slime, runs=args.repeat, budget=args.budget, before=cold)[0]
            found = findings_of(first.stdout)
            lost = [w for w in first.stderr.splitlines() if "not applied" in w and name in w]
            check = f"{len(found)} findings ({by_code(found)})" + (f"; NOT APPLIED: {lost[0][:80]}" if lost else "")
            cell = Cell("slime", "patchaudit", f"exact, {name} x {version} wheel, cold", times, check, rss=rss)
            cell.findings = len(found)
            cell.note = " | ".join(w.strip() for w in first.stderr.splitlines() if w.strip())[:2000]
            say(cell)


def bump_rows(slime: Path, args, say: Say) -> None:
    """`patchaudit bump` of the v0.5.12.post1 SGLang patches from 0.5.12.post1 to 0.5.15.post1."""
    folder = slime / "docker" / "patch" / BUMP_SET
    patches = sorted(str(p.relative_to(slime)) for p in folder.glob("sglang*.patch"))
    if not patches:
        print(f"bump: {folder} holds no sglang*.patch; row skipped", flush=True)
        return
    old, new = wheel("sglang", BUMP_FROM), wheel("sglang", BUMP_TO)
    with tempfile.TemporaryDirectory(prefix="bench-bump-") as tmp:
        report = Path(tmp) / "bump.json"
        cmd = [*PA, "bump", *patches, "--engine", "sglang", "--from", str(old), "--to", str(new)]
        cmd += ["--format", "json", "--exit-zero", "-o", str(report)]
        times, rss, first = interleaved([cmd], slime, runs=args.repeat, budget=args.budget)[0]
        found = findings_of(report.read_text() if report.exists() else "[]")
    cell = Cell(
        "slime",
        "patchaudit",
        f"bump {BUMP_SET}, {BUMP_FROM} -> {BUMP_TO}",
        times,
        f"{len(found)} findings ({by_code(found)})",
        rss=rss,
    )
    cell.findings = len(found)
    say(cell)


# --------------------------------------------------------------------------
# floors: what a libcst-based run cannot go below on this machine (bench/floors.py)

FLOORS = BENCH / "floors.py"


def start_floor(root: Path, path: str, args, say: Say, key: str) -> None:
    """A fresh process that starts Python, imports libcst and parses `path`: the least the
    one-changed-file row can take while the file's rules read its libcst tree."""
    times, _, _ = interleaved([[PY, str(FLOORS), "start", path]], root, runs=args.repeat, budget=args.budget)[0]
    say(Cell(key, "floor", "python + import libcst + parse of the changed file", times, "nothing else"))


def scan_floor(key: str, root: Path, args, say: Say, jobs: int) -> None:
    """The libcst and `ast` parses and the dataflow interpreter of a cold 1-job run of the default
    rules (single-threaded work), spread over `jobs` cores, plus a process importing libcst:
    the least the default rules cold can take with today's pre-filters."""
    imports, _, _ = interleaved([[PY, "-c", "import libcst"]], root, runs=args.repeat, budget=args.budget)[0]
    run = timed([PY, str(FLOORS), "scan", "."], root)
    if run.returncode != 0:
        print(f"{key}: floor not measured ({run.stderr.strip()[-300:]})", flush=True)
        return
    got = json.loads(run.stdout)
    start = sorted(imports)[len(imports) // 2]
    ast_parse = got.get("ast_parse", 0.0)
    floor = (got["parse"] + ast_parse + got["interpreter"]) / jobs + start
    check = (
        f"libcst parse {got['parse']:.2f}s ({got['parses']} parses, {got['parsed_bytes'] / 1e6:.2f} MB) + "
        f"ast parse {ast_parse:.2f}s ({got.get('ast_parses', 0)} parses, "
        f"{got.get('ast_parsed_bytes', 0) / 1e6:.2f} MB) + "
        f"interpreter {got['interpreter']:.2f}s of a {got['wall']:.2f}s 1-job run, over {jobs} cores, "
        f"+ {start:.2f}s to start with libcst"
    )
    say(Cell(key, "floor", f"default rules cold, parse + interpreter / {jobs} cores", [floor], check))
