"""Findings snapshot: prove that a change leaves patchaudit's findings as they were.

    python bench/snapshot.py record bench/snapshot.txt    # before the change
    python bench/snapshot.py compare bench/snapshot.txt   # after: exit 1 on any difference

It runs patchaudit (the one installed, or the checkout given by `--code DIR`, put
first on PYTHONPATH) with `--no-cache` on:

* `check examples/`                                        (fragment mode)
* `check examples/patches examples/bump/patches examples/monkeypatch
   --engine sglang=<0.5.15.post1 wheel>`                  (exact mode, PA206/PA207)
* `bump examples/bump/patches --from <0.5.12.post1 wheel> --to <0.5.15.post1 wheel>`
* `check` on the benchmark trees (`bench/data/trees/`: SGLang 0.5.15.post1 and
  verl 0.9.1, as `bench/run.py` prepares them)

and writes one line per finding: the command's key, `path:line:col`, the code,
the severity and a SHA-1 of the message and trace.  The snapshot holds no
engine source text (only digests), so it can be committed; `--full FILE` also
keeps the whole JSON for a readable diff (keep that one out of the repository:
it quotes engine code).  Wheels are downloaded into `bench/data/` with
`pip download --no-deps` when absent.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import run as bench  # noqa: E402  (bench/run.py: wheels and trees)


def commands() -> dict[str, tuple[list[str], Path]]:
    new = str(bench.wheel("sglang", "0.5.15.post1"))
    old = str(bench.wheel("sglang", "0.5.12.post1"))
    ex = REPO / "examples"
    out: dict[str, tuple[list[str], Path]] = {
        "check-examples": (["check", "--no-cache", "--format", "json", "."], ex),
        "exact-examples": (["check", "--no-cache", "--format", "json", "--engine", f"sglang={new}",
                            "patches", "bump/patches", "monkeypatch"], ex),
        "bump-examples": (["bump", "bump/patches", "--engine", "sglang", "--from", old, "--to", new,
                           "--format", "json"], ex),
    }
    for key in ("sglang", "verl"):
        root, _ = bench.tree(key)
        out[f"tree-{key}"] = (["check", "--no-cache", "--format", "json", "."], root)
    return out


def findings_of(doc) -> list[dict]:
    if isinstance(doc, dict):
        for k in ("findings", "results"):
            if isinstance(doc.get(k), list):
                return doc[k]
        return []
    return doc if isinstance(doc, list) else []


def lines_of(key: str, doc) -> list[str]:
    out = []
    for f in findings_of(doc):
        rest = {k: v for k, v in f.items() if k not in ("path", "line", "column", "code", "severity")}
        digest = hashlib.sha1(json.dumps(rest, sort_keys=True).encode()).hexdigest()[:16]
        out.append(f"{key} {f.get('path')}:{f.get('line')}:{f.get('column')} {f.get('code')} "
                   f"{f.get('severity')} {digest}")
    if isinstance(doc, dict):
        errors = doc.get("errors") or []
        for e in errors:
            out.append(f"{key} error {json.dumps(e, sort_keys=True)}")
    return sorted(out)


def take(code: str | None) -> tuple[list[str], dict]:
    env = dict(os.environ)
    if code:
        env["PYTHONPATH"] = os.pathsep.join([str(Path(code).resolve()), env.get("PYTHONPATH", "")])
    lines: list[str] = []
    full: dict = {}
    for key, (args, cwd) in commands().items():
        proc = subprocess.run([sys.executable, "-m", "patchaudit", *args], cwd=cwd, env=env,
                              capture_output=True, text=True)
        if proc.returncode not in (0, 1):
            lines.append(f"{key} exit {proc.returncode}")
        try:
            doc = json.loads(proc.stdout)
        except json.JSONDecodeError:
            lines.append(f"{key} unparsable-output {hashlib.sha1(proc.stdout.encode()).hexdigest()[:16]}")
            doc = None
        full[key] = doc
        got = lines_of(key, doc)
        print(f"{key}: {len(got)} lines (exit {proc.returncode})", file=sys.stderr)
        lines.extend(got)
    return lines, full


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["record", "compare"])
    ap.add_argument("snapshot")
    ap.add_argument("--code", help="a patchaudit checkout to run instead of the installed one")
    ap.add_argument("--full", help="also write the whole JSON output here")
    a = ap.parse_args()
    lines, full = take(a.code)
    if a.full:
        Path(a.full).write_text(json.dumps(full, indent=1, sort_keys=True), encoding="utf-8")
    if a.mode == "record":
        Path(a.snapshot).write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"recorded {len(lines)} lines in {a.snapshot}", file=sys.stderr)
        return 0
    want = Path(a.snapshot).read_text(encoding="utf-8").splitlines()
    gone = sorted(set(want) - set(lines))
    new = sorted(set(lines) - set(want))
    for line in gone:
        print(f"- {line}")
    for line in new:
        print(f"+ {line}")
    print(f"{len(want)} lines recorded, {len(lines)} now: {len(gone)} gone, {len(new)} new", file=sys.stderr)
    return 1 if gone or new else 0


if __name__ == "__main__":
    sys.exit(main())
