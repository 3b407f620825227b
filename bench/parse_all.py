"""The parse floor: parse every .py file under PATHS with libcst, nothing else.

    python bench/parse_all.py [-j N] PATHS...

What any libcst-based linter pays at least when it parses every file (fixit
does, plus metadata).  Files are walked in sorted order and parsed in N
processes (default 1); files libcst cannot parse are counted, not fatal.
"""

from __future__ import annotations

import argparse
import os
import sys


def files_under(paths: list[str]) -> list[str]:
    out = []
    for root in paths:
        if os.path.isfile(root):
            out.append(root)
            continue
        for d, dirs, names in os.walk(root):
            dirs[:] = sorted(x for x in dirs if x != ".git")
            out.extend(os.path.join(d, n) for n in sorted(names) if n.endswith(".py"))
    return out


def parse_one(path: str) -> tuple[int, int]:
    import libcst as cst

    with open(path, "rb") as fh:
        data = fh.read()
    try:
        cst.parse_module(data)
        return len(data), 0
    except Exception:
        return len(data), 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-j", "--jobs", type=int, default=1)
    ap.add_argument("paths", nargs="+")
    args = ap.parse_args()
    files = files_under(args.paths)
    if args.jobs > 1:
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
            results = pool.map(parse_one, files, chunksize=4)
    else:
        results = [parse_one(f) for f in files]
    size = sum(r[0] for r in results)
    failed = sum(r[1] for r in results)
    print(f"parsed {len(files) - failed} of {len(files)} files, {size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
