"""`discover` (os.scandir and string paths) returns exactly what the pathlib
implementation it replaced returned: the same files, in the same order, with
the same display paths, and the same errors.

`_reference_discover` below is the previous implementation, kept verbatim
(only renamed), and every case here compares the two on real temp trees:
nested .gitignore files with negations and directory patterns, `.git`
folders and files, virtualenvs, SKIP_DIRS, symlinked files inside and outside
the scanned root, symlinked directories, exclude patterns, roots given as ".",
as absolute paths, as subfolders, from outside the cwd and from "/", files
named explicitly and missing paths; then seeded random trees, and the
repository's own tree.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from patchaudit.model.findings import FileError
from patchaudit.inputs import discover as D
from patchaudit.inputs.discover import (
    PATCH,
    PYTHON,
    SKIP_DIRS,
    SourceFile,
    _looks_like_patch,
    spec_from_lines,
    classify,
    discover,
)

REPO = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------
# the previous implementation, verbatim


def _ref_display(p: Path) -> str:
    try:
        rel = os.path.relpath(p)
    except ValueError:
        return str(p)
    return str(p) if rel.startswith("..") else rel


class _RefIgnores:
    """Hierarchical .gitignore matching with pathspec."""

    def __init__(self) -> None:
        self._specs: dict[Path, object | None] = {}
        # folder -> the (folder, spec) pairs that judge paths in it, nearest first
        self._chains: dict[tuple[Path, Path], list[tuple[Path, object]]] = {}

    def _spec(self, folder: Path):
        if folder not in self._specs:
            spec = None
            gi = folder / ".gitignore"
            try:
                if gi.is_file():
                    import pathspec  # noqa: F401

                    spec = spec_from_lines(gi.read_text(errors="replace").splitlines())
            except (OSError, ValueError):
                spec = None
            self._specs[folder] = spec
        return self._specs[folder]

    def _chain(self, folder: Path, top: Path) -> list[tuple[Path, object]]:
        key = (folder, top)
        chain = self._chains.get(key)
        if chain is None:
            spec = self._spec(folder)
            chain = [(folder, spec)] if spec is not None else []
            if not (folder == top or (folder / ".git").exists() or folder.parent == folder):
                chain = chain + self._chain(folder.parent, top)
            self._chains[key] = chain
        return chain

    def ignored(self, path: Path, is_dir: bool, top: Path) -> bool:
        for folder, spec in self._chain(path.parent, top):
            rel = path.relative_to(folder).as_posix() + ("/" if is_dir else "")
            if spec.match_file(rel):  # type: ignore[attr-defined]
                return True
        return False


def _ref_repo_top(start: Path) -> Path:
    p = start
    while True:
        if (p / ".git").exists():
            return p
        if p.parent == p:
            return start
        p = p.parent


def _reference_discover(paths: list[str], exclude: list[str] | None = None) -> tuple[list[SourceFile], list[FileError]]:
    """The files to check, in a stable order, and the paths that could not be read."""
    files: list[SourceFile] = []
    errors: list[FileError] = []
    seen: set[Path] = set()
    exclude_spec = None
    if exclude:
        exclude_spec = spec_from_lines(exclude)
    ignores = _RefIgnores()

    def add(p: Path, kind: str, key: Path | None = None) -> None:
        key = key or p.resolve()
        if key in seen:
            return
        seen.add(key)
        files.append(SourceFile(_ref_display(p), kind))

    for raw in paths:
        p = Path(raw)
        if not p.exists() and not p.is_symlink():
            errors.append(FileError(raw, "no such file or directory"))
            continue
        if p.is_file():
            kind = classify(raw) or (PYTHON if raw.endswith(".py") else None)
            if kind is None:
                # named explicitly but of no known kind: read as a patch if it looks like one
                kind = PATCH if _looks_like_patch(p) else None
            if kind is None:
                errors.append(FileError(raw, "not a file patchaudit reads (.patch/.diff, .py, shell, Dockerfile, YAML, .env)"))
                continue
            add(p, kind)
            continue
        root = p.resolve()
        top = _ref_repo_top(root)
        for dirpath, dirnames, filenames in os.walk(p, followlinks=False):
            d = Path(dirpath)
            dres = d.resolve()
            keep = []
            for name in sorted(dirnames):
                sub = d / name
                if name in SKIP_DIRS or (sub / "pyvenv.cfg").exists() or sub.is_symlink():
                    continue
                if ignores.ignored(dres / name, True, top):
                    continue
                if exclude_spec is not None and exclude_spec.match_file(_ref_display(sub) + "/"):
                    continue
                keep.append(name)
            dirnames[:] = keep
            for name in sorted(filenames):
                kind = classify(name)
                if kind is None:
                    continue
                f = d / name
                if f.is_symlink():
                    try:
                        real = f.resolve(strict=True)
                    except (OSError, RuntimeError):
                        continue
                    if root not in real.parents:
                        continue  # never follow a link out of the scanned tree
                if ignores.ignored(dres / name, False, top):
                    continue
                if exclude_spec is not None and exclude_spec.match_file(_ref_display(f)):
                    continue
                # a file that is no symlink, in a resolved folder, is its own real path
                add(f, kind, None if f.is_symlink() else dres / name)
    return files, errors


# --------------------------------------------------------------------------
# helpers


def _outcome(fn, paths, exclude):
    try:
        return fn(list(paths), exclude)
    except Exception as e:  # the reference raises on a symlink loop named explicitly
        return ("raised", type(e))


#: errors the reference did not report: FIFOs, devices and symlink loops named
#: explicitly, and dangling symlinks named or met in the walk, are errors now, where
#: the reference skipped them or raised (tests/test_security_readers.py checks them)
_NEW_ERRORS = ("not a regular file", "dangling symlink", "symlink loop")


def _same(paths, exclude=None):
    """Both implementations agree; returns the files for further assertions."""
    expected = _outcome(_reference_discover, paths, exclude)
    got = _outcome(discover, paths, exclude)
    assert got[0] != "raised", (paths, exclude, got)
    new = [e for e in got[1] if e.message.startswith(_NEW_ERRORS)]
    got = (got[0], [e for e in got[1] if e not in new])
    if expected[0] == "raised":   # a symlink loop named explicitly: an error now
        assert any(e.message.startswith("symlink loop") for e in new), (paths, new)
        return got[0]
    assert got == expected, (paths, exclude)
    return got[0]


def _write(root: Path, rel: str, text: str = "x = 1\n") -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def _link(root: Path, rel: str, target: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, p)


def _build(tmp: Path) -> Path:
    """A repository `outer` (with a sibling `outside`) holding every case."""
    outer = tmp / "outer"
    # repository top, and a .gitignore above it that must not apply inside it
    _write(outer, ".git/HEAD", "ref: refs/heads/main\n")
    _write(outer, ".git/hooks/pre-commit.sh", "echo\n")
    _write(tmp, ".gitignore", "*.yaml\n")
    _write(outer, ".gitignore",
           "*.gen.py\n!keep.gen.py\nbuild/\n/rootonly.py\nlogs/**/*.sh\n# comment\n\n"
           "docs\n!docs/api/\n*.tmp.sh\ntrailing\\ space.py\n")
    for rel in ("a.py", "b.sh", "keep.gen.py", "x.gen.py", "rootonly.py", "Dockerfile", "Containerfile.dev",
                "c.yaml", "c.yml", ".env", ".env.local", "prod.env", "readme.txt", "x.pyi", "run.bash",
                "z.tmp.sh", "with space.py", "ünïcode.py", "[brackets].py", "#hash.py", "star*.py",
                "..dots.py", ".hidden.py", "B.py", "_under.py", "setup.cfg", "trailing space.py",
                "docs/a.py", "docs/api/b.py", "build/x.py", "build/sub/y.py",
                "logs/top.sh", "logs/2024/run.sh", "logs/2024/keep.py"):
        _write(outer, rel)
    _write(outer, "p.patch", "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    _write(outer, "notes.txt", "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    # a nested .gitignore: negation of a parent pattern, directory patterns, anchoring
    _write(outer, "pkg/.gitignore", "!*.gen.py\n*.yml\nsub/\n!sub/\n/deep/\ntmp*/\n!tmp_keep/\n")
    for rel in ("pkg/m.py", "pkg/n.gen.py", "pkg/cfg.yml", "pkg/cfg.yaml", "pkg/rootonly.py",
                "pkg/sub/s.py", "pkg/deep/d.py", "pkg/more/deep/d2.py", "pkg/tmp1/t.py",
                "pkg/tmp_keep/t.py", "pkg/node_modules/n.py", "pkg/__pycache__/c.py",
                "pkg/.pytest_cache/v.py", "pkg/site-packages/s.py", "pkg/x/y/z/w.py",
                "pkg/x/y/z/w.sh", "pkg/x/.ipynb_checkpoints/c.py"):
        _write(outer, rel)
    # a .gitignore that is a folder, and an unparsable one (pathspec raises ValueError)
    _write(outer, "odd/.gitignore/inner.py")
    _write(outer, "odd/o.py")
    _write(outer, "bad/.gitignore", "*.py\n!\n")
    _write(outer, "bad/b.py")
    _write(outer, "empty/.gitignore", "")
    _write(outer, "empty/e.py")
    # virtualenvs (by pyvenv.cfg, whatever the name) and SKIP_DIRS
    _write(outer, "envx/pyvenv.cfg", "home = /usr\n")
    _write(outer, "envx/bin/activate.sh")
    _write(outer, "envx/lib/x.py")
    _write(outer, "venv/a.py")
    _write(outer, ".venv/a.py")
    _write(outer, ".tox/a.py")
    _write(outer, "notvenv/pyvenv.cfg.bak")
    _write(outer, "notvenv/n.py")
    (outer / "cfgdir" / "pyvenv.cfg").mkdir(parents=True)  # a folder named pyvenv.cfg still counts
    _write(outer, "cfgdir/c.py")
    # nested repositories: a .git folder, and a .git file (a submodule)
    _write(outer, "nested/.git/HEAD", "ref: refs/heads/main\n")
    _write(outer, "nested/.gitignore", "*.py\n!ok.py\n")
    _write(outer, "nested/ok.py")
    _write(outer, "nested/no.py")
    _write(outer, "nested/inner/x.gen.py")
    _write(outer, "nested/inner/q.tmp.sh")  # the outer "*.tmp.sh" stops at nested/.git
    _write(outer, "submod/.git", "gitdir: ../.git/modules/submod\n")
    _write(outer, "submod/s.gen.py")
    # a folder named like a file kind, a folder whose name starts with ".."
    _write(outer, "folder.py/inside.py")
    _write(outer, "..weird/w.py")
    # symlinks: files in and out of the root, dangling, a loop, directories
    _write(tmp, "outside/o.py")
    _write(tmp, "outside/o.sh")
    _link(outer, "links/in_a.py", "../a.py")              # a duplicate of a.py
    _link(outer, "links/in_m.py", "../pkg/m.py")
    _link(outer, "links/to_ignored.py", "../build/x.py")  # target ignored, link not
    _link(outer, "links/to_ignored.gen.py", "../a.py")   # link ignored, target not
    _link(outer, "links/out.py", "../../outside/o.py")
    _link(outer, "links/abs_out.sh", str(tmp / "outside" / "o.sh"))
    _link(outer, "links/dangling.py", "../nowhere.py")
    _link(outer, "links/loop.py", "loop.py")
    _link(outer, "links/dirlink", "../pkg")
    _link(outer, "links/dirlink.py", "../pkg")
    _link(outer, "links/outdir", "../../outside")
    _link(outer, "links/chain.py", "in_m.py")             # a link to a link
    _link(outer, "links/txt.txt", "../a.py")               # not a kind patchaudit reads
    _link(outer, "zz_first_seen_via_link.py", "links/zz_target.py")
    _write(outer, "links/zz_target.py")
    # something that is neither a file nor a folder, with a known suffix
    if hasattr(os, "mkfifo"):
        os.mkfifo(outer / "pipe.py")
    return outer


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return _build(tmp_path_factory.mktemp("t"))


@pytest.fixture()
def tree(built, monkeypatch):
    monkeypatch.chdir(built)
    return built


# --------------------------------------------------------------------------
# the hand-built tree


ROOT_CASES = [
    ["."], [""], ["./"], ["pkg"], ["./pkg/"], ["pkg/sub", "pkg"], ["pkg", "pkg/sub"], [".", "."],
    ["pkg/../links"], ["links/dirlink"], ["links/dirlink", "pkg"], ["links/outdir"], ["links"],
    ["links/dirlink/.."], ["links/dirlink/../pkg"], ["links/dirlink/sub"], ["pkg//sub/./"],
    ["envx"], ["venv"], [".git"], ["nested"], ["submod"], ["build"], ["docs"], ["..weird"],
    ["folder.py"], ["odd/.gitignore"], ["pipe.py"], ["links/dangling.py"], ["links/loop.py"],
    ["missing.py"], ["missing_dir/", "."], [".."], ["../outside"],
]

FILE_CASES = [
    ["a.py", "."], [".", "a.py"], ["./a.py", "a.py"], ["x.gen.py"], ["build/x.py"], ["links/out.py"],
    ["links/in_a.py", "a.py"], ["readme.txt"], ["notes.txt"], ["p.patch"], ["setup.cfg"],
    ["venv/a.py"], ["Dockerfile", "pkg/m.py", "pkg/n.gen.py"], ["links/txt.txt"], ["../outside/o.py"],
]

EXCLUDES = [
    None, [], ["pkg/sub/"], ["*.sh"], ["links/"], ["/a.py"], ["a.py"], ["pkg/"], ["**/deep/**"],
    ["*.py", "!pkg/**"], ["..dots.py"], ["../outside/"], ["outer/"], ["*"], ["!*"],
]


@pytest.mark.parametrize("paths", ROOT_CASES + FILE_CASES, ids=lambda p: "|".join(p) or "<empty>")
def test_same_as_reference(tree, paths):
    _same(paths)


@pytest.mark.parametrize("exclude", EXCLUDES, ids=repr)
def test_same_with_excludes(tree, exclude):
    for paths in (["."], ["pkg", "links"], [str(tree)], [".."]):
        _same(paths, exclude)


def test_absolute_roots(tree):
    files = _same([str(tree)])
    assert SourceFile("a.py", PYTHON) in files
    _same([str(tree) + "/"])
    _same(["/" + str(tree)])  # "//tmp/...": pathlib keeps two leading slashes
    _same([str(tree / "pkg")])
    _same([str(tree / "links" / "dirlink")])
    _same([str(tree.parent / "outside")], ["*.sh"])
    _same([str(tree / "a.py"), str(tree / "links" / "out.py")])
    _same([str(tree / "missing")])


def test_other_cwds(tree, monkeypatch):
    """Display paths relative to the cwd when under it, else as given."""
    cases = [["."], [".."], ["../.."], [str(tree)], ["../links"], ["../pkg/sub"], ["../../outside"],
             ["../a.py"], ["sub"], ["m.py"]]
    for cwd in (tree / "pkg", tree / "pkg" / "x" / "y", tree.parent, tree.parent / "outside",
                tree / "envx", tree / "nested"):
        monkeypatch.chdir(cwd)
        for paths in cases:
            if not all(tree.parent in Path(p).resolve().parents for p in paths):
                continue  # stay in this test's folder
            for exclude in (None, ["pkg/", "../*.sh", "sub/"]):
                _same(paths, exclude)
    # from a folder reached through a symlink: os.getcwd() is the real path
    monkeypatch.chdir(tree / "links" / "dirlink")
    for paths in (["."], [".."], [str(tree / "links" / "dirlink")], ["../../a.py"]):
        _same(paths)


def test_from_filesystem_root(tree, monkeypatch):
    monkeypatch.chdir("/")
    files = _same([str(tree / "pkg")])
    assert files and not files[0].path.startswith("/")
    _same([str(tree / "pkg")], ["*.gen.py"])
    _same([os.path.relpath(tree / "nested", "/")])


def test_expectations(tree):
    """What the hand-built tree is for, so that the comparison is not vacuous."""
    got = [f.path for f in _same(["."])]
    for present in ("a.py", "b.sh", "keep.gen.py", "Dockerfile", "c.yaml", ".env", "p.patch", "pkg/sub/s.py",
                    "pkg/more/deep/d2.py", "pkg/tmp_keep/t.py",
                    "links/chain.py", "links/to_ignored.py", "nested/ok.py", "nested/inner/q.tmp.sh",
                    "submod/s.gen.py", "folder.py/inside.py", "notvenv/n.py", "pipe.py",
                    "zz_first_seen_via_link.py", "odd/.gitignore/inner.py", "bad/b.py", "empty/e.py"):
        if present == "pipe.py" and not hasattr(os, "mkfifo"):
            continue
        assert present in got, present
    for absent in ("x.gen.py", "rootonly.py", "build/x.py", "logs/2024/run.sh", "docs/a.py",
                   "pkg/cfg.yml", "pkg/deep/d.py", "pkg/tmp1/t.py", "pkg/node_modules/n.py", "venv/a.py",
                   "envx/lib/x.py", "cfgdir/c.py", "nested/no.py", "pkg/m.py",
                   # a nested "!*.gen.py" does not undo the parent's "*.gen.py"
                   "pkg/n.gen.py", "links/out.py", "links/abs_out.sh",
                   "links/dangling.py", "links/loop.py", "links/in_a.py", "links/in_m.py",
                   "links/to_ignored.gen.py", "links/dirlink/m.py", "nested/inner/x.gen.py", ".git/hooks/pre-commit.sh",
                   "z.tmp.sh", "trailing space.py"):
        assert absent not in got, absent
    # "..dots.py" and "..weird/" are under the cwd, but shown as given
    assert "..dots.py" in got and "..weird/w.py" in got
    # depth-first, sorted, a folder's files before its subfolders
    assert got.index("a.py") < got.index("bad/b.py") < got.index("pkg/more/deep/d2.py") < got.index("pkg/sub/s.py")
    assert got.index("pkg/sub/s.py") < got.index("pkg/tmp_keep/t.py") < got.index("submod/s.gen.py")
    # a link seen first makes its target a duplicate (chain.py -> in_m.py -> ../pkg/m.py)
    assert "links/zz_target.py" not in got
    _, errors = discover(["missing.py", "readme.txt", "notes.txt"])
    assert [e.path for e in errors] == ["missing.py", "readme.txt"]


# --------------------------------------------------------------------------
# seeded random trees

_DIR_NAMES = ["a", "b", "src", "build", "docs", "sub", "venv", "node_modules", ".hidden", "x.py",
              "..dd", "deep", "tmp1", "Z", "ü"]
_FILE_NAMES = ["m.py", "n.gen.py", "t.sh", "c.yaml", "d.yml", "Dockerfile", ".env", "p.patch",
               "q.diff", "r.txt", "s.pyi", "k.py", "..k.py", "A.py", "b c.py"]
_PATTERNS = ["*.gen.py", "!n.gen.py", "build/", "/src", "sub/", "!sub/", "**/deep/**", "*.sh", "!t.sh",
             "docs", "*.y*ml", "/m.py", "a/**/k.py", "tmp*/", "!*.py", "Z", "*.txt", "!/a/", "[ab]/",
             "**/*.pyi", "x.py/", "\\#not", "?.py"]


def _random_tree(rng: random.Random, base: Path) -> tuple[Path, list[Path]]:
    """A repository at base/r, a folder base/out beside it; the repository's folders."""
    root = base / "r"
    (root / ".git").mkdir(parents=True)
    dirs = [root]
    for _ in range(rng.randint(3, 10)):
        d = rng.choice(dirs) / rng.choice(_DIR_NAMES)
        if d in dirs:
            continue
        d.mkdir()
        dirs.append(d)
        if rng.random() < 0.1:
            (d / "pyvenv.cfg").write_text("")
        if rng.random() < 0.08:
            (d / ".git").mkdir()
    targets = list(dirs[1:])
    for d in dirs:
        for name in rng.sample(_FILE_NAMES, rng.randint(0, 4)):
            if d / name not in targets:
                (d / name).write_text("x = 1\n")
                targets.append(d / name)
        if rng.random() < 0.5:
            (d / ".gitignore").write_text("\n".join(rng.sample(_PATTERNS, rng.randint(1, 4))) + "\n")
    outside = base / "out"
    outside.mkdir()
    (outside / "o.py").write_text("")
    targets += [outside / "o.py", outside, base / "none.py"]
    for i in range(rng.randint(0, 4)):
        d = rng.choice(dirs)
        target = rng.choice(targets)
        link = d / f"l{i}{rng.choice(['.py', '', '.sh'])}"
        if link not in targets:
            os.symlink(os.path.relpath(target, d) if rng.random() < 0.5 else target, link)
            targets.append(link)
    return root, dirs[1:]


@pytest.mark.parametrize("seed", range(16))
def test_random_trees(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    root, subdirs = _random_tree(rng, tmp_path)
    monkeypatch.chdir(rng.choice([root, tmp_path, *subdirs[:3]]))
    rel = os.path.relpath(root)
    candidates = [[rel], [str(root)], [rel, rel], ["."]]
    if subdirs:
        sub = rng.choice(subdirs)
        candidates += [[os.path.relpath(sub)], [str(sub), rel]]
    for paths in candidates:
        _same(paths, rng.choice([None, None, [rng.choice(_PATTERNS)], ["*.py", "!k.py"], [rel + "/b/"]]))


# --------------------------------------------------------------------------
# real trees


def test_this_repository(monkeypatch):
    monkeypatch.chdir(REPO)
    files = _same(["."])
    assert len(files) > 100
    _same(["tests", "examples"])
    _same(["tests"], ["tests/corpus/", "tests/data/"])
    _same([str(REPO / "examples")])
    monkeypatch.chdir(REPO / "tests")
    _same([".", "../examples"])


BENCH_TREE = REPO / "bench" / "data" / "trees" / "sglang-0.5.15.post1"


@pytest.mark.skipif(not BENCH_TREE.is_dir(), reason="the benchmark tree is not checked out")
def test_benchmark_tree(monkeypatch):
    monkeypatch.chdir(BENCH_TREE)
    assert len(_same(["."], [])) > 2000


def test_public_names():
    """What other modules import from discover stays there."""
    for name in ("PATCH", "PYTHON", "TEXT_KINDS", "SKIP_DIRS", "SourceFile", "classify", "discover",
                 "spec_from_lines", "display", "read_error_message", "refusal", "_looks_like_patch"):
        assert hasattr(D, name), name
