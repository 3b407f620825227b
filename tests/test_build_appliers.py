"""The build's own applier (issue 17): what exact mode predicts for `git apply`,
`git apply --3way` and GNU `patch` equals what the command does on the same tree.

Every case builds a real git repository (GitPython): the engine at v1, the patch made
with `git diff` from v1, the engine moved on to v2.  The oracles run the real commands:
`git apply --reject --verbose` (per hunk: applied at which line, or rejected),
`git apply --check` (the patch applies or not), `git apply --3way` (merged or conflict),
and `patch --dry-run -F n` (per hunk: succeeded, offset, fuzz, FAILED, reversed).
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

git = pytest.importorskip("git")

from patchaudit.engine.sources import open_engine  # noqa: E402
from patchaudit.inputs.patches import parse_patch  # noqa: E402
from patchaudit.patching.appliers import GIT_APPLY, Applier  # noqa: E402
from patchaudit.units.engines import EngineContext  # noqa: E402
from patchaudit.units.exact import exact_units  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("patch") is None, reason="GNU patch not installed")

BODY = [f"line_{i} = {i}" for i in range(1, 41)]


def text(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


class Case:
    """A repository: `files` at v1, the patch (`edit` of v1, as `git diff`), `drift` at v2."""

    def __init__(self, tmp_path, files: dict[str, list[str]], edit: dict[str, list[str]], drift: dict[str, list[str]]):
        self.root = tmp_path / "engine"
        self.repo = git.Repo.init(self.root)
        with self.repo.config_writer() as cw:
            cw.set_value("user", "name", "t")
            cw.set_value("user", "email", "t@example.com")
        self._write(files)
        self.repo.git.add(A=True)
        self.repo.index.commit("v1")
        self._write(edit)
        self.patch_text = self.repo.git.diff() + "\n"
        self.repo.git.checkout("--", ".")
        self._write(drift)
        self.repo.git.add(A=True)
        self.repo.index.commit("v2")
        self.repo.create_tag("v2")
        (tmp_path / "fix.patch").write_text(self.patch_text)
        self.patch_path = str(tmp_path / "fix.patch")

    def _write(self, files: dict[str, list[str]]) -> None:
        for name, lines in files.items():
            path = self.root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text(lines))

    # ----- oracles -------------------------------------------------------
    def git_apply(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["git", "apply", *args, self.patch_path], cwd=self.root, capture_output=True, text=True, check=False
        )

    def git_hunks(self) -> tuple[dict[tuple[str, int], str], bool]:
        """git apply --reject --verbose: {(file, hunk #): clean | offset | failed}, applies
        (from --check); the work tree is restored afterwards."""
        applies = self.git_apply("--check").returncode == 0
        res = self.git_apply("--reject", "--verbose")
        out: dict[tuple[str, int], str] = {}
        current = None
        for line in (res.stderr + res.stdout).splitlines():
            m = re.match(r"Checking patch (.+)\.\.\.", line)
            if m:
                current = m.group(1)
            m = re.match(r"Hunk #(\d+) succeeded at \d+", line)
            if m:
                out[(current, int(m.group(1)))] = "offset"
            m = re.match(r"Applying patch (.+) with", line)
            if m:
                current = m.group(1)
            m = re.match(r"Rejected hunk #(\d+)", line)
            if m:
                out[(current, int(m.group(1)))] = "failed"
        self.repo.git.checkout("--", ".")
        for rej in self.root.rglob("*.rej"):
            rej.unlink()
        return out, applies

    def gnu(self, *args: str) -> tuple[dict[tuple[str, int], str], int]:
        """patch --dry-run: {(file, hunk #): offset | fuzz | failed | reversed}, exit code."""
        res = subprocess.run(
            ["patch", "-p1", "--dry-run", *args, "-i", self.patch_path],
            cwd=self.root,
            capture_output=True,
            text=True,
            check=False,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # no terminal to answer "Assume -R?"
        )
        out: dict[tuple[str, int], str] = {}
        current = None
        for line in res.stdout.splitlines():
            m = re.match(r"checking file (.+)", line)
            if m:
                current = m.group(1)
            if "Reversed (or previously applied) patch detected" in line:
                out[(current, 1)] = "reversed"
            m = re.match(r"Hunk #(\d+) (succeeded|FAILED) at \d+(?: with fuzz (\d+))?", line)
            if m:
                out[(current, int(m.group(1)))] = (
                    "failed" if m.group(2) == "FAILED" else ("fuzz" if m.group(3) else "offset")
                )
        return out, res.returncode

    # ----- the tool --------------------------------------------------------
    def predict(self, applier: Applier, spec: str | None = None):
        source = open_engine(spec or str(self.root), name="sglang")
        patch = parse_patch(self.patch_path, self.patch_text)
        ctx = EngineContext(source, 1, "")
        return exact_units(patch, ctx, self.patch_path, applier=applier)

    def statuses(self, result) -> dict[tuple[str, int], str]:
        return {(h.section_path, h.index + 1): h.status for h in result.hunks}


def _git_view(statuses: dict[tuple[str, int], str]) -> dict[tuple[str, int], str]:
    """The tool's statuses as git's verbose output tells them apart."""
    out = {}
    for k, v in statuses.items():
        if v == "offset":
            out[k] = "offset"
        elif v in ("failed", "already-applied"):
            out[k] = "failed"
    return out


def shifted(lines: list[str], n: int) -> list[str]:
    return [f"top_{i} = {i}" for i in range(n)] + lines


GIT = Applier(tool=GIT_APPLY)


# ---------------------------------------------------------------------------
# git apply


def test_git_apply_offset_applies(tmp_path):
    edit = list(BODY)
    edit[20] = "line_21 = 'patched'"
    case = Case(tmp_path, {"a.py": BODY}, {"a.py": edit}, {"a.py": shifted(BODY, 3)})
    py, _, result = case.predict(GIT)
    oracle, applies = case.git_hunks()
    assert applies and result.patch_applied
    assert _git_view(case.statuses(result)) == oracle == {("a.py", 1): "offset"}
    assert py and py[0].mode == "exact"  # the patched file is the build's result


@pytest.mark.parametrize("fuzz", [1, 2])
def test_git_apply_takes_no_fuzz_gnu_patch_does(tmp_path, fuzz):
    edit = list(BODY)
    edit[20] = "line_21 = 'patched'"
    drift = list(BODY)
    for k in range(fuzz):  # the outermost context lines changed upstream
        drift[17 + k] = f"line_{18 + k} = 'changed upstream'"
    case = Case(tmp_path, {"a.py": BODY}, {"a.py": edit}, {"a.py": drift})
    py, _, result = case.predict(GIT)
    oracle, applies = case.git_hunks()
    assert not applies and not result.patch_applied
    assert _git_view(case.statuses(result)) == oracle == {("a.py", 1): "failed"}
    assert result.stopped_at is result.hunks[0]
    assert all(u.mode != "exact" for u in py)  # no half-applied file is linted as the build's
    gnu, code = case.gnu()
    gnu_result = case.predict(Applier())[2]
    assert gnu == {("a.py", 1): "fuzz"} and code == 0
    assert [(h.status, h.fuzz) for h in gnu_result.hunks] == [("fuzz", fuzz)]
    if fuzz == 2:  # -F1: GNU patch fails it too
        gnu1, code1 = case.gnu("-F1")
        assert gnu1 == {("a.py", 1): "failed"} and code1 == 1
        assert [h.status for h in case.predict(Applier(fuzz=1))[2].hunks] == ["failed"]


def test_git_apply_failing_hunk_in_the_middle_of_a_multi_file_patch(tmp_path):
    files = {"a.py": BODY, "b.py": BODY, "c.py": BODY}
    edit = {n: [*BODY[:10], f"{n[0]} = 'patched'", *BODY[11:30], f"{n[0]}2 = 'again'", *BODY[31:]] for n in files}
    drift = dict(files)
    drift["b.py"] = [*BODY[:10], "rewritten = 'upstream'", *BODY[11:]]  # b.py hunk 1's line
    case = Case(tmp_path, files, edit, drift)
    py, _, result = case.predict(GIT)
    oracle, applies = case.git_hunks()
    assert not applies and not result.patch_applied
    assert _git_view(case.statuses(result)) == oracle == {("b.py", 1): "failed"}
    assert (result.stopped_at.section_path, result.stopped_at.index) == ("b.py", 0)
    # the real command: nothing of the patch is written, a.py included
    assert case.git_apply().returncode == 1
    assert (case.root / "a.py").read_text() == text(BODY)
    assert all(u.mode != "exact" for u in py)
    from patchaudit.rules.pa201_hunk_does_not_apply import HunkDoesNotApply
    from patchaudit.units import PatchUnit

    rule = HunkDoesNotApply()
    rule.check_patch(PatchUnit(path=case.patch_path, patch=None, engine=result))
    assert len(rule.reports) == 1
    assert "git apply stops here: nothing of this patch is applied and the build stops at this patch" in (
        rule.reports[0].message
    )
    # GNU patch applies a.py and c.py and fails b.py's first hunk only
    gnu, code = case.gnu()
    assert code == 1 and gnu == {("b.py", 1): "failed"}
    gnu_result = case.predict(Applier())[2]
    assert gnu_result.patch_applied and [h.status for h in gnu_result.hunks if h.status != "clean"] == ["failed"]


def test_already_applied_git_fails_gnu_skips_or_reverts(tmp_path):
    edit = list(BODY)
    edit[20] = "line_21 = 'patched'"
    case = Case(tmp_path, {"a.py": BODY}, {"a.py": edit}, {"a.py": edit})
    _, _, result = case.predict(GIT)
    oracle, applies = case.git_hunks()
    assert not applies and oracle == {("a.py", 1): "failed"}
    assert [(h.status, h.action) for h in result.hunks] == [("already-applied", "git-fails")]
    assert result.stopped_at is result.hunks[0]
    from patchaudit.model.findings import Severity
    from patchaudit.rules.pa208_hunk_already_applied import HunkAlreadyApplied
    from patchaudit.units import PatchUnit

    rule = HunkAlreadyApplied()
    rule.check_patch(PatchUnit(path=case.patch_path, patch=None, engine=result))
    (report,) = rule.reports
    assert report.severity == Severity.ERROR and "`git apply` fails on it" in report.message
    # GNU patch: no terminal -> skipped, exit 1; -N the same; -t reverses it
    for args, action in (((), "gnu-skips"), (("-N",), "gnu-skips"), (("-t",), "gnu-reverts")):
        gnu, code = case.gnu(*args)
        assert gnu == {("a.py", 1): "reversed"}
        assert code == (0 if "-t" in args else 1)
        applier = Applier(strip=1, forward="-N" in args, batch="-t" in args)
        assert [h.action for h in case.predict(applier)[2].hunks] == [action]


def test_fuzzy_reverse_match_is_not_already_applied(tmp_path):
    """Regression: a deletion whose post-image, with fuzz 2, is two common context lines
    found elsewhere was reported already applied; only an exact reverse match counts."""
    body = [*BODY[:10], "x = 1", "y = x", *BODY[10:20], "x = 1", "DELETED = 0", "y = x", *BODY[20:]]
    edit = [line for line in body if line != "DELETED = 0"]
    drift = [line if line != "DELETED = 0" else "DELETED = 'changed upstream'" for line in body]
    case = Case(tmp_path, {"a.py": body}, {"a.py": edit}, {"a.py": drift})
    gnu_result = case.predict(Applier())[2]
    gnu, code = case.gnu("-f")
    assert gnu == {("a.py", 1): "failed"} and code == 1
    assert [h.status for h in gnu_result.hunks] == ["failed"]
    # (the reversed check GNU makes on a first hunk, at every fuzz level, finds it)
    from patchaudit.patching.apply import apply_hunks, split_lines

    lines, eol = split_lines(text(drift))
    specs = [h.to_spec() for h in parse_patch(case.patch_path, case.patch_text).sections[0].hunks]
    fuzzy = apply_hunks(lines, specs, ends_with_newline=eol).hunks[0]
    assert (fuzzy.status, fuzzy.fuzz) == ("already-applied", 2)


# ---------------------------------------------------------------------------
# git apply --3way (the engine is the repository at v2: the index line's blob is there)


def _three_way_case(tmp_path, conflicting: bool) -> Case:
    edit = list(BODY)
    edit[20] = "line_21 = 'patched'"
    drift = list(BODY)
    drift[22] = "line_23 = 'changed upstream'"  # in the hunk's trailing context: direct apply fails
    if conflicting:
        drift[20] = "line_21 = 'changed upstream too'"
    return Case(tmp_path, {"a.py": BODY}, {"a.py": edit}, {"a.py": drift})


@pytest.mark.parametrize("conflicting", [False, True])
def test_git_apply_three_way(tmp_path, conflicting):
    case = _three_way_case(tmp_path, conflicting)
    assert case.git_apply("--check").returncode == 1  # a direct application fails
    three = Applier(tool=GIT_APPLY, three_way=True)
    py, _, result = case.predict(three, spec=f"{case.root}@v2")
    res = case.git_apply("--3way")
    assert (res.returncode == 0) == (not conflicting) == result.patch_applied
    (h,) = result.hunks
    if conflicting:
        assert (h.status, h.action) == ("failed", "conflict")
        assert "<<<<<<<" in (case.root / "a.py").read_text()
    else:
        assert (h.status, h.action) == ("merged", "merged")
        (unit,) = [u for u in py if u.mode == "exact"]
        assert unit.text == (case.root / "a.py").read_text()  # the merge git made
    # without the blob (a plain folder engine) --3way is git apply's direct application
    plain = case.predict(three)[2]
    assert [x.status for x in plain.hunks] == ["failed"] and not plain.patch_applied


# ---------------------------------------------------------------------------
# many small cases: every hunk's outcome and the written file, as git writes them


def _random_case(seed: int, distinct: bool = False):
    import random

    rnd = random.Random(seed)
    words = [f"w{i} = {i}" for i in range(1000 if distinct else rnd.randint(3, 12))]
    orig = [rnd.choice(words) for _ in range(rnd.randint(5, 60))]

    def edit(lines: list[str], tag: str, times: int) -> list[str]:
        out = list(lines)
        for _ in range(times):
            i = rnd.randrange(len(out) + 1)
            op = rnd.random()
            if op < 0.4:
                out.insert(i, f"{tag}{rnd.randint(0, 9)} = 0")
            elif out and op < 0.7:
                del out[min(i, len(out) - 1)]
            elif out:
                out[min(i, len(out) - 1)] = f"{tag}{rnd.randint(0, 9)} = 1"
        return out

    return orig, edit(orig, "new", rnd.randint(1, 5)), edit(orig, "up", rnd.randint(0, 12)), rnd.choice([1, 2, 3])


@pytest.mark.parametrize("options", [(), ("-C1",), ("--unidiff-zero",)])
@pytest.mark.parametrize("seed", range(40))
def test_git_apply_agrees_with_git_on_random_drift(tmp_path, seed, options):
    from patchaudit.patching.gitapply import git_apply_hunks
    from patchaudit.patching.sides import split_lines

    orig, new, drift, context = _random_case(seed)
    if "--unidiff-zero" in options:
        context = 0
    (tmp_path / "o").write_text(text(orig))
    (tmp_path / "n").write_text(text(new))
    diff = subprocess.run(
        ["git", "diff", "--no-index", f"-U{context}", "o", "n"], cwd=tmp_path, capture_output=True, text=True
    ).stdout
    if not diff:
        pytest.skip("no change")
    diff = diff.replace("a/o", "a/f").replace("b/n", "b/f")
    work = tmp_path / "w"
    git.Repo.init(work)
    (work / "f").write_text(text(drift))
    res = subprocess.run(
        ["git", "apply", "--reject", "--verbose", *options, "-"], cwd=work, input=diff, capture_output=True, text=True
    )
    said = res.stderr + res.stdout
    theirs: dict[int, tuple[str, int | None]] = {}
    for m in re.finditer(r"Hunk #(\d+) succeeded at (\d+) \(offset (-?\d+) lines?\)", said):
        theirs[int(m.group(1))] = ("offset", int(m.group(2)))
    for m in re.finditer(r"Rejected hunk #(\d+)", said):
        theirs[int(m.group(1))] = ("failed", None)
    hunks = [h.to_spec() for h in parse_patch("p", diff).sections[0].hunks]
    lines, eol = split_lines(text(drift))
    got = git_apply_hunks(
        lines,
        hunks,
        ends_with_newline=eol,
        unidiff_zero="--unidiff-zero" in options,
        context=1 if "-C1" in options else None,
    )
    mine = {}
    for r in got.hunks:
        status = "failed" if r.status in ("failed", "already-applied") else r.status
        if status == "fuzz":  # git says "succeeded at" (and "Context reduced") when the line moved
            status = "offset" if r.offset else "clean"
        if status != "clean":
            mine[r.index + 1] = (status, r.line if status == "offset" else None)
    assert mine == theirs, said
    written = text(got.lines) if got.ends_with_newline else "\n".join(got.lines)
    assert written == (work / "f").read_text()


@pytest.mark.parametrize("seed", range(60))
def test_three_way_merge_agrees_with_git_merge_file(tmp_path, seed):
    from patchaudit.patching import threeway

    base, theirs, ours, _ = _random_case(1000 + seed, distinct=True)  # real files: mostly distinct lines
    for name, lines in (("b", base), ("o", ours), ("t", theirs)):
        (tmp_path / name).write_text(text(lines))
    res = subprocess.run(["git", "merge-file", "-p", "o", "b", "t"], cwd=tmp_path, capture_output=True, text=True)
    merged = threeway.merge(base, ours, threeway.changes(base, theirs, threeway.THEIRS))
    if res.returncode == 0:
        assert merged.clean and text(merged.lines) == res.stdout
    else:
        assert not merged.clean


def test_reverse_undoes_an_applied_patch_as_the_commands_do(tmp_path):
    edit = list(BODY)
    edit[20] = "line_21 = 'patched'"
    case = Case(tmp_path, {"a.py": BODY}, {"a.py": edit}, {"a.py": [*shifted(edit, 2)]})
    assert case.git_apply("-R", "--check").returncode == 0
    gnu, code = case.gnu("-R")
    assert code == 0 and gnu == {("a.py", 1): "offset"}
    for applier in (Applier(tool=GIT_APPLY, reverse=True), Applier(strip=1, reverse=True)):
        py, _, result = case.predict(applier)
        assert [h.status for h in result.hunks] == ["offset"] and result.patch_applied
        (unit,) = [u for u in py if u.mode == "exact"]
        assert unit.text == text(shifted(BODY, 2))
    # forward, the same tree: already applied (exact), and the patch is not applied by git
    assert [h.status for h in case.predict(GIT)[2].hunks] == ["already-applied"]


def test_a_file_missing_from_a_checkout_stops_git_apply_not_one_a_wheel_never_has(tmp_path):
    files = {"sglang/__init__.py": ["x = 0"], "sglang/a.py": BODY, "csrc/k.py": BODY}
    edit = {"sglang/a.py": [*BODY[:5], "y = 1", *BODY[6:]], "csrc/k.py": [*BODY[:5], "k = 1", *BODY[6:]]}
    case = Case(tmp_path, files, edit, dict(files))
    (case.root / "csrc" / "k.py").unlink()
    assert case.git_apply("--check").returncode == 1  # "csrc/k.py: No such file or directory"
    result = case.predict(GIT)[2]
    assert not result.patch_applied and result.stopped_at.status == "missing-file"
    # an installed engine (dist-info): it never has the checkout's csrc/, sglang/a.py applies
    (case.root / "sglang-1.0.dist-info").mkdir()
    (case.root / "sglang-1.0.dist-info" / "METADATA").write_text("Name: sglang\nVersion: 1.0\n")
    result = case.predict(GIT)[2]
    assert result.patch_applied and {h.status for h in result.hunks} == {"clean", "not-in-source"}
    (outside,) = [h for h in result.hunks if h.status == "not-in-source"]
    assert outside.to_json()["target"] == "csrc/k.py"  # the path as the patch writes it


def test_git_apply_three_way_takes_an_already_applied_change_once(tmp_path):
    edit = list(BODY)
    edit[20] = "line_21 = 'patched'"
    case = Case(tmp_path, {"a.py": BODY}, {"a.py": edit}, {"a.py": edit})
    three = Applier(tool=GIT_APPLY, three_way=True)
    _, _, result = case.predict(three, spec=f"{case.root}@v2")
    assert case.git_apply("--3way").returncode == 0
    assert (case.root / "a.py").read_text() == text(edit)
    assert result.patch_applied and [(h.status, h.action) for h in result.hunks] == [("already-applied", "merged")]
    from patchaudit.rules.pa208_hunk_already_applied import HunkAlreadyApplied
    from patchaudit.units import PatchUnit

    rule = HunkAlreadyApplied()
    rule.check_patch(PatchUnit(path=case.patch_path, patch=None, engine=result))
    (report,) = rule.reports
    assert report.severity is None and "`git apply --3way` merges it" in report.message
