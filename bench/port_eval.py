"""`patchaudit port` on slime's real hand ports of its SGLang patch (not run by the tests).

    python bench/port_eval.py 0.5.12.post1 0.5.15.post1 [--no-rules]

For a pair OLD -> NEW: the old patch is `docker/patch/vOLD/sglang.patch` and the hand
port the new folder's `sglang*.patch` files, both as slime's mirror holds them at 624b824
(/work/.mirror/THUDM+slime/repo); the releases are the wheels in bench/data
(`pip download --no-deps sglang==X -d bench/data`).  The old patch is ported with
`patchaudit port` (the real command, its rules pass included unless --no-rules), and each
hunk of the old patch is scored against what the hand port did with its change:

- H is each file of NEW with the hand port applied (GNU patch -p2 --forward -F0 on an
  unpacked copy of the wheel, every hand patch in the Dockerfile's order);
- the hunk's change is *carried* by the hand port when at least half of its significant
  added lines (stripped, not blank or a lone bracket) are among the hand port's `+` lines,
  or (a pure removal) its removed lines are among the hand port's `-` lines; it is
  *upstream* when its added lines are already in NEW's file (90%); a hunk that is
  neither was dropped by the maintainers and is **not scored**;
- *exact*: we ported it and the post-image of our ported hunk (its context and added
  lines, as NEW has them) is a run of lines of H, and for a removal its pre-image is not;
  or we dropped it as upstream and the hand port did not carry it;
  "exact" also takes a port that differs from the hand port only in comment-only lines,
  blank lines and docstrings (the hand port to 0.5.15.post1 dropped or reworded many of
  the patch's comments and docstrings), or only in line breaks and spaces (black split a
  long line); how many of each is printed;
- *flagged*: we flagged it (whatever the hand port did);
- *silently wrong*: anything else we called ported or dropped (ported but not as H has
  it, dropped while the hand port carries it, ported while the change is upstream).
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile
import time

MIRROR = "/work/.mirror/THUDM+slime/repo"
COMMIT = "624b824"
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
ORDER = ["sglang.patch", "sglang-top_p.patch", "sglang-release_hicache.patch", "sglang-pull_weights.patch"]


def _wheel(version: str) -> str:
    got = glob.glob(os.path.join(DATA, f"sglang-{version}-*.whl"))
    if not got:
        sys.exit(f"no wheel for sglang {version} in {DATA}: pip download --no-deps sglang=={version} -d {DATA}")
    return got[0]


def _show(path: str) -> str | None:
    res = subprocess.run(["git", "--git-dir", MIRROR, "show", f"{COMMIT}:{path}"], capture_output=True, text=True)
    return res.stdout if res.returncode == 0 else None


def _sig(text: str) -> str | None:
    """A line that says something (stripped): not blank, not a comment, not a bracket or a
    lone keyword (those are in every file)."""
    s = text.strip()
    return s if len(s) >= 10 and not s.startswith("#") else None


def _hunks(text: str):
    """(path, [(kind, text)]) per hunk of a patch."""
    from patchaudit.inputs.patches import parse_patch

    for sec, h in parse_patch("p", text).iter_hunks():
        yield sec.path, [(ln.kind, ln.text) for ln in h.lines]


def _find(hay: list[str], needle: list[str]) -> bool:
    n = len(needle)
    return n == 0 or any(hay[i : i + n] == needle for i in range(len(hay) - n + 1))


def _code(lines: list[str]) -> list[str]:
    """The lines that are code: not comment-only, blank, or part of a triple-quoted string."""
    out, inside = [], False
    for t in lines:
        quotes = t.count('"""') + t.count("'''")
        if inside or quotes:
            inside = inside ^ (quotes % 2 == 1)
            continue
        if t.strip() and not t.strip().startswith("#"):
            out.append(t)
    return out


def _squash(lines: list[str]) -> str:
    return "".join("".join(t.split()) for t in _code(lines))


def _same_tokens(h_lines: list[str], hunk: list[tuple[str, str]]) -> bool:
    """Our hunk's added code (with the code line before it) is in H once whitespace and line
    breaks are ignored (the hand port reformatted it, e.g. black split a long line), and
    what it removes is not."""
    before = next((t for k, t in hunk if k == " " and _code([t])), "")
    plus = [t for k, t in hunk if k == "+"]
    minus = [t for k, t in hunk if k == "-"]
    text = _squash(h_lines)
    if not _squash(plus) or _squash([before]) + _squash(plus) not in text and _squash(plus) not in text:
        return False
    return not minus or _squash(minus) not in text or _squash(minus) in _squash(plus)


def _runs_in(h_lines: list[str], hunk: list[tuple[str, str]]) -> bool:
    """Each run of added lines of our hunk is in H with the context line before it (after
    it, at the hunk's start), and each run of removed lines is not there with it."""
    i = 0
    while i < len(hunk):
        kind = hunk[i][0]
        if kind == " ":
            i += 1
            continue
        j = i
        while j < len(hunk) and hunk[j][0] == kind:
            j += 1
        run = [t for _, t in hunk[i:j]]
        before = next((t for k, t in reversed(hunk[:i]) if k == " "), None)
        after = next((t for k, t in hunk[j:] if k == " "), None)
        seq = [before] + run if before is not None else run + ([after] if after is not None else [])
        if kind == "+" and not _find(h_lines, seq):
            return False
        if kind == "-" and _find(h_lines, seq):
            return False
        i = j
    return True


def main() -> None:
    old_v, new_v = sys.argv[1], sys.argv[2]
    rules = "--no-rules" not in sys.argv
    old_patch = _show(f"docker/patch/v{old_v}/sglang.patch")
    hand = [t for t in (_show(f"docker/patch/v{new_v}/{n}") for n in ORDER) if t]
    tmp = tempfile.mkdtemp(prefix="port-eval-")
    src = os.path.join(tmp, "sglang.patch")
    open(src, "w").write(old_patch)
    t0 = time.monotonic()
    cmd = ["patchaudit", "port", src, "--engine", "sglang", "--from", _wheel(old_v), "--to", _wheel(new_v)]
    cmd += ["-o", os.path.join(tmp, "out"), "--format", "json"] + ([] if rules else ["--no-rules"])
    res = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.monotonic() - t0
    report = json.loads(res.stdout)
    ported = open(os.path.join(tmp, "out", "sglang.patch")).read()
    # H: NEW with the hand port applied
    new_tree = os.path.join(tmp, "new")
    os.makedirs(os.path.join(new_tree, "python"))
    subprocess.run(["unzip", "-q", _wheel(new_v), "sglang/*", "-d", os.path.join(new_tree, "python")], check=True)
    pristine = os.path.join(tmp, "pristine")
    subprocess.run(["cp", "-r", new_tree, pristine], check=True)
    for k, text in enumerate(hand):
        p = os.path.join(tmp, f"hand{k}.patch")
        open(p, "w").write(text)
        subprocess.run(
            ["patch", "-p1", "--forward", "-F0", "-s", "-r", "-", "-i", p], cwd=new_tree, capture_output=True
        )
    check = subprocess.run(
        ["git", "apply", "--check", os.path.join(tmp, "out", "sglang.patch")],
        cwd=pristine + "/.",
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_DIR": os.path.join(tmp, "nogit")},
    )
    hand_plus: dict[str, set[str]] = {}
    hand_minus: dict[str, set[str]] = {}
    for text in hand:
        for path, lines in _hunks(text):
            hand_plus.setdefault(path, set()).update(s for k, t in lines if k == "+" and (s := _sig(t)))
            hand_minus.setdefault(path, set()).update(s for k, t in lines if k == "-" and (s := _sig(t)))
    ours = list(_hunks(ported))
    score = {"exact": 0, "flagged": 0, "wrong": 0, "unscored": 0, "comments": 0, "format": 0}
    wrong: list[str] = []
    flagged: list[str] = []
    for row, (path, lines) in zip(report["hunks"], _hunks(old_patch)):
        add = [s for k, t in lines if k == "+" and (s := _sig(t))]
        rem = [s for k, t in lines if k == "-" and (s := _sig(t))]

        def read(root, path=path):
            f = os.path.join(root, path)
            return open(f).read().split("\n") if os.path.exists(f) else []

        new_sig = {s for s in map(_sig, read(pristine)) if s}
        dest = (row["where"] or {}).get("path") or path
        files = [p for p in hand_plus if p.endswith(path) or p.endswith(dest)]
        any_plus = set().union(*(hand_plus[p] for p in files)) if files else set()
        any_minus = set().union(*(hand_minus[p] for p in files)) if files else set()
        carried = (add and sum(a in any_plus for a in add) >= max(1, len(add) / 2)) or (
            not add and rem and all(r in any_minus for r in rem)
        )
        upstream = bool(add) and sum(a in new_sig for a in add) >= 0.9 * len(add)
        if not carried and not upstream:
            score["unscored"] += 1
            continue
        if row["status"] == "flagged":
            score["flagged"] += 1
            flagged.append(f"  hunk #{row['hunk']} line {row['line']} {row['path']}: {row['detail'][:110]}")
            continue
        if row["status"] == "dropped":
            ok = not carried or upstream
        else:
            h_lines = (
                read(os.path.join(new_tree, "python"))
                if False
                else (
                    open(os.path.join(new_tree, "python", dest)).read().split("\n")
                    if os.path.exists(os.path.join(new_tree, "python", dest))
                    else []
                )
            )
            mine = [ls for p, ls in ours if p.endswith(dest) and set(add) <= {_sig(t) for k, t in ls if k == "+"}]
            strict = bool(mine) and _runs_in(h_lines, mine[0])
            code = set(_code([t for _, t in mine[0]])) if mine else set()
            ok = strict or (bool(mine) and _runs_in(_code(h_lines), [(k, t) for k, t in mine[0] if t in code]))
            if ok and not strict:
                score["comments"] += 1
            if not ok and mine and _same_tokens(h_lines, mine[0]):
                ok = True
                score["format"] += 1
        if ok:
            score["exact"] += 1
        else:
            score["wrong"] += 1
            wrong.append(
                f"  hunk #{row['hunk']} line {row['line']} {row['path']}: {row['status']} {row['detail'][:100]}"
            )
    scored = score["exact"] + score["flagged"] + score["wrong"]
    pct = {k: round(100 * v / scored, 1) for k, v in score.items() if k != "unscored"} if scored else {}
    print(
        f"  (of the exact: {score['comments']} differ from the hand port only in comments, docstrings or blank"
        f" lines, {score['format']} only in line breaks and spaces)"
    )
    print(f"{old_v} -> {new_v}: {len(report['hunks'])} hunks, {scored} scored, {score['unscored']} unscored")
    print(
        f"  exact {score['exact']} ({pct.get('exact')}%), flagged {score['flagged']} ({pct.get('flagged')}%), "
        f"silently wrong {score['wrong']} ({pct.get('wrong')}%)"
    )
    print(f"  port took {seconds:.1f} s (rules pass: {'on' if rules else 'off'}); counts {report['counts']}")
    print(f"  ported set applies with git apply on NEW: {check.returncode == 0} {check.stderr.strip()[:200]}")
    print("silently wrong:\n" + "\n".join(wrong))
    if "-v" in sys.argv:
        print("flagged:\n" + "\n".join(flagged))


if __name__ == "__main__":
    main()
