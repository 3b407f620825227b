"""History corpus: recall and precision of the TITO rules on real fix commits.

    python bench/corpus/eval.py [--mirrors DIR] [--rows bench/corpus/rows.tsv] [--only REPO]

Each row of `rows.tsv` (tab-separated, `#` comments) names a repository (`owner/name`, or
`pypi:NAME` with a release version in place of the commit), a commit, a path and a line
in that commit's tree, a rule, and a label: `positive` (the hazard is there: the commit before a fix) or `negative` (it is not: the fix, or code that
looks alike and is safe), with a one-line reason. Rows were labelled by reading the diff,
before running the tool.

For every (repository, commit) the script lays the tree out under
`bench/data/corpus/<owner+name>-<commit>/` from a bare mirror
(`<mirrors>/<owner>+<name>/repo`, as the session tool `fetch github:OWNER/NAME` leaves
it; every text file that the mirror holds, nothing executed), adds an empty
`[tool.patchaudit]` table so that the run has default settings and its root there, runs
`python -m patchaudit check --no-cache --format json --exit-zero .` once, and scores
each row:

* a row matches when the run reports the row's rule (PA106 and PA107 count as one
  group, as the issue scores them) in the row's path within `--window` lines (default
  5) of the row's line, at the finding's own line or at a step of its trace;
* positive + match: found (true positive); positive, no match: missed;
* negative + match: a false alarm; negative, no match: right.

Per rule it prints recall (found / positives) and precision (found / (found + false
alarms on negative rows)), and lists every miss and false alarm. Not run by the test
suite: it needs the mirrors and minutes of CPU.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import zipfile
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DATA = REPO / "bench" / "data" / "corpus"
GROUPS = {"PA106": "PA106/PA107", "PA107": "PA106/PA107"}
TEXT_SUFFIXES = (".py", ".sh", ".patch", ".diff", ".yaml", ".yml", ".toml", ".env", ".cfg", ".txt")


def group(code: str) -> str:
    return GROUPS.get(code, code)


def read_rows(path: Path) -> list[dict]:
    rows = []
    with path.open(newline="") as f:
        lines = [l for l in f if l.strip() and not l.startswith("#")]
    for n, rec in enumerate(csv.reader(lines, delimiter="\t"), 1):
        if len(rec) != 7:
            sys.exit(f"{path}: row {n}: expected 7 tab-separated fields, got {len(rec)}: {rec!r}")
        repo, commit, fpath, line, rule, label, reason = rec
        if label not in ("positive", "negative"):
            sys.exit(f"{path}: row {n}: label must be positive or negative, not {label!r}")
        rows.append(dict(repo=repo, commit=commit, path=fpath, line=int(line), rule=rule, label=label, reason=reason))
    return rows


def _wanted(path: str) -> bool:
    base = path.rsplit("/", 1)[-1]
    return path.endswith(TEXT_SUFFIXES) or base.startswith("Dockerfile") or base == "series"


def lay_out(mirror: Path, commit: str, dest: Path) -> Path:
    """The tree of COMMIT as files under DEST (text files only; blobs the mirror lacks skipped)."""
    if (dest / ".laid").exists():
        return dest
    git = ["git", "--git-dir", str(mirror)]
    listing = subprocess.run(git + ["ls-tree", "-r", "-z", commit], capture_output=True, check=True).stdout
    entries = []
    for rec in listing.split(b"\0"):
        if not rec:
            continue
        meta, raw = rec.split(b"\t", 1)
        mode, kind, sha = meta.split()
        name = raw.decode("utf-8", "surrogateescape")
        if kind == b"blob" and mode != b"120000" and _wanted(name):
            entries.append((sha, name))
    proc = subprocess.Popen(git + ["cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin and proc.stdout
    proc.stdin.write(b"".join(sha + b"\n" for sha, _ in entries))
    proc.stdin.close()
    for _sha, name in entries:
        head = proc.stdout.readline().split()
        if head[1] == b"missing":
            continue
        data = proc.stdout.read(int(head[2]))
        proc.stdout.read(1)
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    proc.wait()
    (dest / "pyproject.toml").write_text("[tool.patchaudit]\n")
    _own_repository(dest)
    (dest / ".laid").write_text(commit + "\n")
    return dest


def _own_repository(dest: Path) -> None:
    """The tree as a git repository of its own, as a checkout is: bench/data/ is ignored by
    this repository's .gitignore, which would otherwise hide every file of the tree."""
    if not (dest / ".git").exists():
        subprocess.run(["git", "init", "-q", str(dest)], check=True)


def lay_out_wheel(name: str, version: str, dest: Path) -> Path:
    """A release's wheel (`pip download --no-deps NAME==VERSION` into bench/data/) as files."""
    if (dest / ".laid").exists():
        return dest
    wheels = sorted((REPO / "bench" / "data").glob(f"{name.replace('-', '_')}-{version}-*.whl"))
    if not wheels:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", f"{name}=={version}"]
        subprocess.run(cmd + ["-d", str(REPO / "bench" / "data")], check=True)
        wheels = sorted((REPO / "bench" / "data").glob(f"{name.replace('-', '_')}-{version}-*.whl"))
    with zipfile.ZipFile(wheels[0]) as z:
        for info in z.infolist():
            if _wanted(info.filename) and not info.is_dir() and ".." not in info.filename.split("/"):
                target = dest / info.filename
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(z.read(info))
    (dest / "pyproject.toml").write_text("[tool.patchaudit]\n")
    _own_repository(dest)
    (dest / ".laid").write_text(f"{name}=={version}\n")
    return dest


def run_patchaudit(tree: Path, python: str) -> list[dict]:
    out = tree / ".findings.json"
    if not out.exists():
        proc = subprocess.run(
            [python, "-m", "patchaudit", "check", "--no-cache", "--format", "json", "--exit-zero", "."],
            cwd=tree,
            capture_output=True,
            text=True,
        )
        if proc.returncode not in (0, 1):
            print(f"  patchaudit exited {proc.returncode} in {tree}: {proc.stderr.strip()[-500:]}", file=sys.stderr)
        out.write_text(proc.stdout or "[]")
    doc = json.loads(out.read_text() or "[]")
    return doc.get("findings", []) if isinstance(doc, dict) else doc


def _at(path: str, line: int, row: dict, window: int) -> bool:
    return path.removeprefix("./") == row["path"] and abs(int(line) - row["line"]) <= window


def matches(row: dict, findings: list[dict], window: int) -> list[dict]:
    """The findings of the row's rule (group) at the row's place: the reported line, or a
    step of its trace (a flow is reported at its sink; the row may name its source)."""
    want = group(row["rule"])
    hit = []
    for f in findings:
        if group(f.get("code", "")) != want:
            continue
        places = [(f.get("path", ""), f.get("line", 0))]
        places += [(s.get("path", ""), s.get("line", 0)) for s in f.get("trace") or []]
        if any(_at(p, ln, row, window) for p, ln in places):
            hit.append(f)
    return hit


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=Path, default=HERE / "rows.tsv")
    ap.add_argument("--mirrors", type=Path, default=Path(os.environ.get("PATCHAUDIT_MIRRORS", "/work/.mirror")))
    ap.add_argument("--python", default=sys.executable, help="the Python that runs patchaudit")
    ap.add_argument("--window", type=int, default=5)
    ap.add_argument("--only", help="only rows of this repository (owner/name)")
    ap.add_argument("--fresh", action="store_true", help="run patchaudit again even if a result is recorded")
    args = ap.parse_args(argv)
    rows = read_rows(args.rows)
    if args.only:
        rows = [r for r in rows if r["repo"] == args.only]
    trees: dict[tuple[str, str], list[dict]] = {}
    for key in sorted({(r["repo"], r["commit"]) for r in rows}):
        repo, commit = key
        dest = DATA / f"{repo.replace('/', '+').replace(':', '-')}-{commit}"
        if repo.startswith("pypi:"):
            tree = lay_out_wheel(repo.removeprefix("pypi:"), commit, dest)
        else:
            mirror = args.mirrors / repo.replace("/", "+") / "repo"
            if not mirror.is_dir():
                print(f"skip {repo}: no mirror at {mirror} (fetch github:{repo})", file=sys.stderr)
                continue
            tree = lay_out(mirror, commit, dest)
        _own_repository(tree)
        if args.fresh:
            (tree / ".findings.json").unlink(missing_ok=True)
        print(f"{repo}@{commit}: checking", file=sys.stderr)
        trees[key] = run_patchaudit(tree, args.python)
    stats: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    problems = []
    for r in rows:
        key = (r["repo"], r["commit"])
        if key not in trees:
            continue
        g = group(r["rule"])
        hit = bool(matches(r, trees[key], args.window))
        if r["label"] == "positive":
            stats[g]["positives"] += 1
            stats[g]["found" if hit else "missed"] += 1
            if not hit:
                problems.append(("missed", r))
        else:
            stats[g]["negatives"] += 1
            if hit:
                stats[g]["false alarms"] += 1
                problems.append(("false alarm", r))
    print(f"{'rule':<12} {'pos':>4} {'found':>6} {'neg':>4} {'false':>6} {'recall':>7} {'precision':>9}")
    for g in sorted(stats):
        s = stats[g]
        recall = s["found"] / s["positives"] if s["positives"] else float("nan")
        flagged = s["found"] + s["false alarms"]
        precision = s["found"] / flagged if flagged else float("nan")
        print(
            f"{g:<12} {s['positives']:>4} {s['found']:>6} {s['negatives']:>4} {s['false alarms']:>6} "
            f"{recall:>7.2f} {precision:>9.2f}"
        )
    for what, r in problems:
        print(f"{what}: {r['repo']}@{r['commit']} {r['path']}:{r['line']} {r['rule']} -- {r['reason']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
