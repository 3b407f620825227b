"""Engine sources (directory, git revision, wheel, sdist) and strip detection.

Every source is built here in a temp dir: a small sglang-like package tree,
a GitPython repository of it with tags v1/v2, a wheel made with zipfile and an
sdist made with tarfile.  Nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import zipfile

import git
import pytest

from patchaudit.engine import limits as L
from patchaudit.engine.sources import (
    DirectorySource,
    EngineError,
    GitSource,
    SdistSource,
    WheelSource,
    detect_strip,
    map_path,
    open_engine,
)

PROC = "sglang/srt/multimodal/processors"
BASE_V1 = """\
class BaseMultimodalProcessor:
    def __init__(self, hf_config, server_args, _processor):
        self._processor = _processor

    def legacy_load_mm_data(
        self,
        prompt,
        multimodal_tokens,
        image_data=None,
    ):
        return prompt, multimodal_tokens, image_data
"""
BASE_V2 = """\
class BaseMultimodalProcessor:
    def __init__(self, hf_config, server_args, _processor):
        self._processor = _processor

    def legacy_load_mm_data(
        self,
        prompt,
        multimodal_tokens,
        image_data=None,
        input_ids=None,
    ):
        return prompt, multimodal_tokens, image_data, input_ids
"""
QWEN_V1 = """\
from sglang.srt.multimodal.processors.base_processor import BaseMultimodalProcessor


class QwenVLImageProcessor(BaseMultimodalProcessor):
    async def process_mm_data_async(self, image_data, input_text, request_obj):
        base_output = self.legacy_load_mm_data(
            prompt=input_text,
            multimodal_tokens=self.mm_tokens,
            image_data=image_data,
        )
        return base_output
"""
QWEN_V2 = QWEN_V1 + "\n\n# qwen3-vl support\n"

# package-relative contents (paths under the package root)
PKG_V2 = {
    "sglang/__init__.py": "__version__ = '1.0'\n",
    "sglang/srt/__init__.py": "",
    "sglang/srt/multimodal/__init__.py": "",
    f"{PROC}/__init__.py": "",
    f"{PROC}/base_processor.py": BASE_V2,
    f"{PROC}/qwen_vl.py": QWEN_V2,
}
PKG_V1 = dict(PKG_V2, **{f"{PROC}/base_processor.py": BASE_V1, f"{PROC}/qwen_vl.py": QWEN_V1})
BASE = f"{PROC}/base_processor.py"
QWEN = f"{PROC}/qwen_vl.py"
BASE_MOD = "sglang.srt.multimodal.processors.base_processor"

# where the package root lives inside each kind of source
LAYOUT = {"dir": "python/", "git": "python/", "wheel": "", "sdist": "sglang-1.0/python/"}


def write_tree(root, files):
    for rel, text in files.items():
        p = os.path.join(root, *rel.split("/"))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w", encoding="utf-8") as fh:
            fh.write(text)


def checkout_files(pkg):
    files = {"python/" + k: v for k, v in pkg.items()}
    files["README.md"] = "# sglang\n"
    files["python/pyproject.toml"] = "[project]\nname = 'sglang'\n"
    return files


ACTOR = git.Actor("Engine Dev", "dev@example.com")


def commit_all(repo, message):
    repo.git.add("--all")
    return repo.index.commit(message, author=ACTOR, committer=ACTOR)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """All four kinds of engine source, at v2 (git also has v1)."""
    tmp = tmp_path_factory.mktemp("engines")
    out = {}

    d = tmp / "checkout"
    write_tree(str(d), checkout_files(PKG_V2))
    out["dir"] = str(d)

    r = tmp / "repo"
    repo = git.Repo.init(str(r))
    write_tree(str(r), checkout_files(PKG_V1))
    c1 = commit_all(repo, "sglang 1.0")
    repo.create_tag("v1", ref=c1)
    write_tree(str(r), {"python/" + BASE: BASE_V2})
    c2 = commit_all(repo, "legacy_load_mm_data: take input_ids")
    write_tree(str(r), {"python/" + QWEN: QWEN_V2})
    c3 = commit_all(repo, "qwen-vl: qwen3 note")
    repo.create_tag("v2", ref=c3)
    repo.close()
    out["git"] = f"{r}@v2"
    out["repo"] = str(r)
    out["commits"] = {"c1": c1.hexsha, "c2": c2.hexsha, "c3": c3.hexsha}

    w = tmp / "sglang-1.0-py3-none-any.whl"
    with zipfile.ZipFile(str(w), "w", zipfile.ZIP_DEFLATED) as zf:
        for rel, text in PKG_V2.items():
            zf.writestr(rel, text)
        zf.writestr("sglang-1.0.dist-info/METADATA", "Name: sglang\nVersion: 1.0\n")
        zf.writestr("sglang-1.0.dist-info/RECORD", "")
    out["wheel"] = str(w)

    s = tmp / "sglang-1.0.tar.gz"
    with tarfile.open(str(s), "w:gz") as tf:
        for rel, text in checkout_files(PKG_V2).items():
            add_tar(tf, "sglang-1.0/" + rel, text.encode())
        add_tar(tf, "sglang-1.0/PKG-INFO", b"Name: sglang\n")
    out["sdist"] = str(s)
    return out


def add_tar(tf, name, data, **kw):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    for k, v in kw.items():
        setattr(ti, k, v)
    tf.addfile(ti, io.BytesIO(data))


KINDS = ["dir", "git", "wheel", "sdist"]
CLASSES = {"dir": DirectorySource, "git": GitSource, "wheel": WheelSource, "sdist": SdistSource}


@pytest.fixture(params=KINDS)
def source(request, built):
    src = open_engine(built[request.param], name="sglang")
    yield request.param, src
    src.close()


# ---------------------------------------------------------------------------
# reading


def test_open_dispatches_on_spec(source):
    kind, src = source
    assert isinstance(src, CLASSES[kind])
    assert src.name == "sglang"
    assert src.label
    assert "sglang" in repr(src)


def test_same_files_and_contents_through_every_kind(source):
    kind, src = source
    root = LAYOUT[kind]
    files = src.files()
    assert files == sorted(files)
    for rel, text in PKG_V2.items():
        assert root + rel in files, (kind, rel)
        assert src.has(root + rel)
        assert src.read_text(root + rel) == text
        assert src.read_bytes(root + rel) == text.encode()
    assert not any(f.startswith(".git/") or "/.git/" in f for f in files)
    # files() is a copy: callers cannot corrupt the cache
    files.clear()
    assert src.files()


def test_missing_and_unsafe_paths_read_as_none(source):
    kind, src = source
    root = LAYOUT[kind]
    for bad in (root + "sglang/nope.py", "../etc/passwd", "/etc/passwd", root + "sglang/../sglang/__init__.py", ""):
        assert src.read_bytes(bad) is None, bad
        assert src.read_text(bad) is None, bad
        assert not src.has(bad), bad
    # "./" and doubled slashes are normalised
    assert src.read_text("./" + root + "sglang//__init__.py") == PKG_V2["sglang/__init__.py"]


def test_read_text_keeps_undecodable_bytes(tmp_path):
    write_tree(str(tmp_path), {"pkg/__init__.py": ""})
    (tmp_path / "pkg" / "latin.py").write_bytes(b"x = '\xe9'\n")
    src = open_engine(str(tmp_path))
    text = src.read_text("pkg/latin.py")
    assert text.encode("utf-8", "surrogateescape") == b"x = '\xe9'\n"


def test_module_path_and_name(source):
    kind, src = source
    root = LAYOUT[kind]
    assert src.module_path(BASE_MOD) == root + BASE
    assert src.module_path("sglang.srt.multimodal.processors.qwen_vl") == root + QWEN
    assert src.module_path("sglang.srt") == root + "sglang/srt/__init__.py"
    assert src.module_path("sglang") == root + "sglang/__init__.py"
    assert src.module_path("sglang.nope") is None
    assert src.module_path("not a module") is None
    assert src.module_name(root + BASE) == BASE_MOD
    assert src.module_name(root + "sglang/srt/__init__.py") == "sglang.srt"
    assert src.module_name(root + "sglang/__init__.py") == "sglang"
    assert src.module_name(root + "sglang/nope.py") is None
    for f in src.files():
        if f.endswith(".py"):
            assert src.module_path(src.module_name(f)) == f


def test_module_path_with_namespace_packages(tmp_path):
    # real sglang wheels have no sglang/srt/__init__.py (PEP 420 namespace)
    write_tree(
        str(tmp_path),
        {
            "sglang/__init__.py": "",
            "sglang/srt/managers/__init__.py": "",
            "sglang/srt/managers/io_struct.py": "",
            "sglang/srt/utils.py": "",
            "sglang-1.0.dist-info/METADATA": "",
        },
    )
    src = open_engine(str(tmp_path))
    assert src.module_path("sglang.srt.utils") == "sglang/srt/utils.py"
    assert src.module_name("sglang/srt/utils.py") == "sglang.srt.utils"
    assert src.module_name("sglang/srt/managers/io_struct.py") == "sglang.srt.managers.io_struct"
    assert src.module_path("sglang.srt.managers.io_struct") == "sglang/srt/managers/io_struct.py"


# ---------------------------------------------------------------------------
# strip levels

STRIP_CASES = {
    # kind: {patch path style: (strip, prefix)}
    "dir": {"a/python/": (1, ""), "python/": (0, ""), "": (0, "python/")},
    "git": {"a/python/": (1, ""), "python/": (0, ""), "": (0, "python/")},
    "wheel": {"a/python/": (2, ""), "python/": (1, ""), "": (0, "")},
    "sdist": {"a/python/": (1, "sglang-1.0/"), "python/": (0, "sglang-1.0/"), "": (0, "sglang-1.0/python/")},
}


@pytest.mark.parametrize("style", ["a/python/", "python/", ""])
def test_detect_strip(source, style):
    kind, src = source
    if style.startswith("a/"):  # git-style diffs: a/ on one side, b/ on the other
        paths = ["a/python/" + BASE, "b/python/" + QWEN]
    else:
        paths = [style + BASE, style + QWEN]
    strip, prefix = detect_strip(paths, src)
    assert (strip, prefix) == STRIP_CASES[kind][style]
    for p in paths:
        mapped = map_path(p, strip, prefix)
        assert src.has(mapped), mapped
    assert src.read_text(map_path(paths[0], strip, prefix)) == BASE_V2


def test_detect_strip_majority_and_new_files(source):
    kind, src = source
    # a new file the engine lacks does not change the answer; /dev/null is ignored
    paths = ["a/python/" + BASE, "b/python/" + QWEN, "b/python/sglang/srt/brand_new.py", "/dev/null"]
    assert detect_strip(paths, src) == STRIP_CASES[kind]["a/python/"]


def test_detect_strip_prefers_smallest_strip_on_ties(tmp_path):
    # "x/y.py" exists both at the root and under "y/": strip 0 and strip 1 tie
    write_tree(str(tmp_path), {"x/y.py": "", "y.py": ""})
    src = open_engine(str(tmp_path))
    assert detect_strip(["x/y.py"], src) == (0, "")


def test_detect_strip_nothing_matches(source):
    kind, src = source
    with pytest.raises(EngineError) as ei:
        detect_strip(["a/vllm/engine/llm_engine.py", "b/vllm/other.py"], src)
    msg = str(ei.value)
    assert "a/vllm/engine/llm_engine.py" in msg and "b/vllm/other.py" in msg
    with pytest.raises(EngineError):
        detect_strip(["/dev/null"], src)


def test_map_path():
    assert map_path("a/python/sglang/x.py", 2, "") == "sglang/x.py"
    assert map_path("a/python/sglang/x.py", 1, "sglang-1.0") == "sglang-1.0/python/sglang/x.py"
    assert map_path("a//python/./x.py", 1, "") == "python/x.py"
    assert map_path("a/x.py", 2, "") is None
    assert map_path("a/x.py", 5, "") is None
    assert map_path("/dev/null", 0, "") is None
    assert map_path("/abs/x.py", 0, "") is None
    assert map_path("/abs/x.py", 1, "") == "abs/x.py"  # as patch -p1 does
    assert map_path("a/../../etc/passwd", 1, "") is None


# ---------------------------------------------------------------------------
# git specifics


def git_state(repo_path):
    repo = git.Repo(repo_path)
    try:
        status = repo.git.status("--porcelain", "--untracked-files=all")
        head = repo.head.commit.hexsha
    finally:
        repo.close()
    with open(os.path.join(repo_path, ".git", "index"), "rb") as fh:
        index = hashlib.sha256(fh.read()).hexdigest()
    tree = sorted(
        os.path.relpath(os.path.join(d, f), repo_path)
        for d, dirs, fs in os.walk(repo_path)
        if ".git" not in d.split(os.sep)
        for f in fs
    )
    return status, head, index, tree


def test_git_reads_revisions_without_touching_work_tree_or_index(built):
    repo_path = built["repo"]
    before = git_state(repo_path)
    assert before[0] == ""  # clean
    v1 = open_engine(f"{repo_path}@v1", name="old")
    v2 = open_engine(f"{repo_path}@v2", name="new")
    try:
        assert v1.read_text("python/" + BASE) == BASE_V1
        assert v2.read_text("python/" + BASE) == BASE_V2
        assert v1.sha == built["commits"]["c1"]
        assert v1.label.endswith(f"@v1 ({v1.sha[:7]})")
        # a revision by abbreviated sha and by HEAD~N
        mid = open_engine(f"{repo_path}@{built['commits']['c2'][:10]}")
        assert mid.read_text("python/" + BASE) == BASE_V2 and mid.read_text("python/" + QWEN) == QWEN_V1
        assert open_engine(f"{repo_path}@HEAD~2").sha == v1.sha
        v2.files()
        v2.line_commits("python/" + BASE, 1, 20, since=v1)
        v2.blob(v1.sha[:7])
        mid.close()
    finally:
        v1.close()
        v2.close()
    # the work tree at HEAD (v2) is read as plain files: a directory spec is not a revision
    plain = open_engine(repo_path)
    assert isinstance(plain, DirectorySource)
    assert not any(f.startswith(".git/") for f in plain.files())
    assert git_state(repo_path) == before


def test_git_reads_the_revision_not_the_dirty_work_tree(built, tmp_path):
    repo_path = built["repo"]
    target = os.path.join(repo_path, "python", *BASE.split("/"))
    with open(target, encoding="utf-8") as fh:
        original = fh.read()
    try:
        with open(target, "w", encoding="utf-8") as fh:
            fh.write("dirty\n")
        src = open_engine(f"{repo_path}@v2")
        assert src.read_text("python/" + BASE) == BASE_V2
        src.close()
    finally:
        with open(target, "w", encoding="utf-8") as fh:
            fh.write(original)


def test_git_blob_by_abbreviated_sha(built):
    repo_path = built["repo"]
    repo = git.Repo(repo_path)
    v1_blob = repo.git.rev_parse(f"v1:python/{BASE}")
    v2_blob = repo.git.rev_parse(f"v2:python/{BASE}")
    tree_sha = repo.git.rev_parse("v1^{tree}")
    repo.close()
    src = open_engine(f"{repo_path}@v2")
    try:
        # as in "index 1a2b3c4..5d6e7f8 100644": the pre-image blob, found from v2
        assert src.blob(v1_blob[:7]) == BASE_V1.encode()
        assert src.blob(v2_blob[:12]) == BASE_V2.encode()
        assert src.blob(v1_blob) == BASE_V1.encode()
        assert src.blob("0000000") is None  # new file
        assert src.blob("deadbeef") is None  # not in the repository
        assert src.blob(tree_sha[:10]) is None  # not a blob
        assert src.blob("xyz") is None and src.blob("--batch") is None
    finally:
        src.close()
    for kind in ("dir", "wheel", "sdist"):
        other = open_engine(built[kind])
        assert other.blob(v1_blob[:7]) is None
        other.close()


def test_line_commits_names_the_commit_that_changed_the_lines(built):
    repo_path = built["repo"]
    v1 = open_engine(f"{repo_path}@v1")
    v2 = open_engine(f"{repo_path}@v2")
    try:
        # legacy_load_mm_data's signature: lines 5-12 in v2
        commits = v2.line_commits("python/" + BASE, 5, 12, since=v1)
        assert [c["sha"] for c in commits] == [built["commits"]["c2"]]
        c = commits[0]
        assert c["summary"] == "legacy_load_mm_data: take input_ids"
        assert c["author"] == "Engine Dev"
        assert c["date"][:4].isdigit()
        # unchanged lines, and the class header
        assert v2.line_commits("python/" + BASE, 1, 3, since=v1) == []
        # the qwen file changed in c3 only
        assert [c["sha"] for c in v2.line_commits("python/" + QWEN, 1, 100, since=v1)] == [built["commits"]["c3"]]
        # end past the file is clamped; nonsense ranges and missing paths give []
        assert v2.line_commits("python/" + BASE, 9, 10_000, since=v1)
        assert v2.line_commits("python/" + BASE, 50, 60, since=v1) == []
        assert v2.line_commits("python/sglang/nope.py", 1, 2, since=v1) == []
        assert v2.line_commits("-Lfoo", 1, 2, since=v1) == []
        # since must be a revision of the same repository
        assert v2.line_commits("python/" + BASE, 5, 12, since=open_engine(built["wheel"])) == []
    finally:
        v1.close()
        v2.close()
    wheel = open_engine(built["wheel"])
    assert wheel.line_commits(BASE, 1, 5, since=wheel) == []


# ---------------------------------------------------------------------------
# refusals


def test_refuses_option_like_specs_and_revisions(built, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for spec in ("--output=x", "-x", f"{built['repo']}@--output=x", f"{built['repo']}@-n1"):
        with pytest.raises(EngineError) as ei:
            open_engine(spec, name="sglang")
        assert "sglang" in str(ei.value)
    assert not os.path.exists(tmp_path / "x") and os.listdir(tmp_path) == []


def test_refuses_missing_revision_file_and_non_repo(built, tmp_path):
    with pytest.raises(EngineError, match="no-such-rev"):
        open_engine(f"{built['repo']}@no-such-rev")
    with pytest.raises(EngineError, match="does not exist"):
        open_engine(str(tmp_path / "missing.whl"))
    with pytest.raises(EngineError, match="does not exist"):
        open_engine(str(tmp_path / "missing") + "@v1")
    with pytest.raises(EngineError, match="not a git repository"):
        open_engine(f"{built['dir']}@v1")
    with pytest.raises(EngineError):
        open_engine("")
    other = tmp_path / "notes.txt"
    other.write_text("x")
    with pytest.raises(EngineError, match="notes.txt"):
        open_engine(str(other))
    broken = tmp_path / "broken.whl"
    broken.write_bytes(b"not a zip")
    with pytest.raises(EngineError, match="broken.whl"):
        open_engine(str(broken))
    broken_tar = tmp_path / "broken.tar.gz"
    broken_tar.write_bytes(b"\x1f\x8b not really gzip")
    with pytest.raises(EngineError, match="broken.tar.gz"):
        open_engine(str(broken_tar))


def test_directory_skips_symlinks_out_of_root(tmp_path):
    outside = tmp_path / "outside"
    write_tree(str(outside), {"secret.py": "SECRET = 1\n", "pkg/leak.py": "LEAK = 1\n"})
    root = tmp_path / "engine"
    write_tree(str(root), {"sglang/__init__.py": "", "sglang/real.py": "x = 1\n"})
    os.symlink(str(outside / "secret.py"), str(root / "sglang" / "evil.py"))
    os.symlink(str(outside / "pkg"), str(root / "sglang" / "evildir"))
    os.symlink("../../outside/secret.py", str(root / "sglang" / "relative_evil.py"))
    os.symlink("real.py", str(root / "sglang" / "alias.py"))  # stays inside: fine
    os.symlink("..", str(root / "sglang" / "loop"))  # a cycle: not walked forever
    src = open_engine(str(root))
    files = src.files()
    assert "sglang/real.py" in files and "sglang/alias.py" in files
    assert src.read_text("sglang/alias.py") == "x = 1\n"
    for bad in ("sglang/evil.py", "sglang/evildir/leak.py", "sglang/relative_evil.py"):
        assert bad not in files
        assert not src.has(bad)
        assert src.read_bytes(bad) is None
    assert not any("leak" in f or "secret" in f for f in files)
    reasons = dict(src.skipped)
    assert "symlink leaves the engine root" == reasons["sglang/evil.py"]
    # a fresh source that was never listed refuses the same reads
    fresh = open_engine(str(root))
    assert fresh.read_bytes("sglang/evil.py") is None
    assert fresh.read_bytes("sglang/evildir/leak.py") is None


def make_hostile_zip(path):
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("sglang/__init__.py", "")
        zf.writestr("sglang/ok.py", "ok = 1\n")
        zf.writestr("../evil.py", "evil = 1\n")
        zf.writestr("sglang/../../evil2.py", "evil = 2\n")
        zf.writestr("/abs.py", "evil = 3\n")
        link = zipfile.ZipInfo("sglang/link.py")
        link.create_system = 3
        link.external_attr = 0o120777 << 16
        zf.writestr(link, "/etc/passwd")
        zf.writestr("sglang-1.0.dist-info/METADATA", "")


def test_zip_hostile_members_are_skipped(tmp_path):
    whl = tmp_path / "evil-1.0-py3-none-any.whl"
    make_hostile_zip(str(whl))
    before = sorted(os.listdir(tmp_path))
    src = open_engine(str(whl))
    assert src.files() == ["sglang-1.0.dist-info/METADATA", "sglang/__init__.py", "sglang/ok.py"]
    assert src.read_text("sglang/ok.py") == "ok = 1\n"
    for bad in ("../evil.py", "evil.py", "abs.py", "/abs.py", "sglang/link.py", "evil2.py"):
        assert src.read_bytes(bad) is None
    reasons = dict(src.skipped)
    assert reasons["../evil.py"] == "'..' in member name"
    assert reasons["/abs.py"] == "absolute member name"
    assert reasons["sglang/link.py"] == "symlink member"
    assert sorted(os.listdir(tmp_path)) == before  # nothing extracted
    assert detect_strip(["a/python/sglang/ok.py"], src) == (2, "")


def test_tar_hostile_members_are_skipped(tmp_path):
    sd = tmp_path / "evil-1.0.tar.gz"
    with tarfile.open(str(sd), "w:gz") as tf:
        add_tar(tf, "evil-1.0/python/sglang/__init__.py", b"")
        add_tar(tf, "./evil-1.0/python/sglang/ok.py", b"ok = 1\n")
        add_tar(tf, "../evil.py", b"evil = 1\n")
        add_tar(tf, "/abs.py", b"evil = 1\n")
        add_tar(tf, "evil-1.0/python/sglang/link.py", b"", type=tarfile.SYMTYPE, linkname="/etc/passwd")
        add_tar(tf, "evil-1.0/python/sglang/hard.py", b"", type=tarfile.LNKTYPE, linkname="../evil.py")
    before = sorted(os.listdir(tmp_path))
    src = open_engine(str(sd))
    assert src.files() == ["evil-1.0/python/sglang/__init__.py", "evil-1.0/python/sglang/ok.py"]
    assert src.read_text("evil-1.0/python/sglang/ok.py") == "ok = 1\n"
    reasons = dict(src.skipped)
    assert reasons["../evil.py"] == "'..' in member name"
    assert reasons["/abs.py"] == "absolute member name"
    assert reasons["evil-1.0/python/sglang/link.py"] == "symlink member"
    assert reasons["evil-1.0/python/sglang/hard.py"] == "hard link member"
    assert sorted(os.listdir(tmp_path)) == before


def test_plain_tar_and_member_budget(tmp_path, monkeypatch):
    sd = tmp_path / "sglang-1.0.tar"
    with tarfile.open(str(sd), "w") as tf:
        add_tar(tf, "sglang-1.0/sglang/__init__.py", b"")
        add_tar(tf, "sglang-1.0/sglang/big.py", b"x" * 5000)
        add_tar(tf, "sglang-1.0/sglang/small.py", b"s = 1\n")
    # files past the in-memory budget are listed and read by streaming again
    monkeypatch.setattr(L, "SDIST_KEEP_BYTES", 100)
    src = open_engine(str(sd))
    assert src.read_bytes("sglang-1.0/sglang/big.py") == b"x" * 5000
    assert src.read_bytes("sglang-1.0/sglang/small.py") == b"s = 1\n"
    assert detect_strip(["b/python/sglang/small.py"], src) == (2, "sglang-1.0/")


def test_archive_size_and_count_limits(tmp_path, monkeypatch, built):
    big = tmp_path / "big-1.0-py3-none-any.whl"
    with zipfile.ZipFile(str(big), "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("big/__init__.py", "")
        zf.writestr("big/huge.bin", b"\0" * 4096)
    monkeypatch.setattr(L, "MAX_MEMBER_BYTES", 1024)
    src = open_engine(str(big))
    assert src.files() == ["big/__init__.py"]
    assert "limit" in dict(src.skipped)["big/huge.bin"]
    monkeypatch.setattr(L, "MAX_TOTAL_BYTES", 500)
    with pytest.raises(EngineError, match="big-1.0-py3-none-any.whl"):
        open_engine(str(big))
    with pytest.raises(EngineError, match="sglang-1.0.tar.gz"):
        open_engine(built["sdist"])  # its members add up to more than 500 bytes
    monkeypatch.setattr(L, "MAX_TOTAL_BYTES", 1 << 30)
    monkeypatch.setattr(L, "MAX_MEMBERS", 3)
    with pytest.raises(EngineError, match="members"):
        open_engine(built["wheel"])
    with pytest.raises(EngineError, match="members"):
        open_engine(built["sdist"])


def test_directory_read_over_limit_raises(tmp_path, monkeypatch):
    write_tree(str(tmp_path), {"pkg/__init__.py": "", "pkg/big.py": "x" * 4096})
    monkeypatch.setattr(L, "MAX_MEMBER_BYTES", 1024)
    src = open_engine(str(tmp_path))
    with pytest.raises(EngineError, match="pkg/big.py"):
        src.read_bytes("pkg/big.py")


def test_import_does_not_load_gitpython():
    import subprocess
    import sys

    code = "import sys, patchaudit.engine.sources; print('git' in sys.modules)"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True)
    assert out.stdout.strip() == "False"


def test_directory_hides_vcs_metadata_even_through_symlinks(tmp_path):
    write_tree(str(tmp_path), {".git/config": "[core]\n", "pkg/__init__.py": "", "pkg/__pycache__/x.pyc": ""})
    os.symlink("../.git", str(tmp_path / "pkg" / "gitdir"))
    os.symlink("../.git/config", str(tmp_path / "pkg" / "config"))
    src = open_engine(str(tmp_path))
    assert src.files() == ["pkg/__init__.py"]
    for bad in (".git/config", "pkg/gitdir/config", "pkg/config", "pkg/__pycache__/x.pyc"):
        assert src.read_bytes(bad) is None and not src.has(bad)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_archive_kinds_refuse_a_fifo_without_blocking(tmp_path):
    """The archive kinds open their file through the one guarded reader: a FIFO (a path
    swapped after open_engine looked at it) is refused, never opened (it would block)."""
    for cls, name in ((WheelSource, "e.whl"), (SdistSource, "e.tar.gz")):
        fifo = tmp_path / name
        os.mkfifo(fifo)
        with pytest.raises(EngineError, match="not a regular file"):
            cls(str(fifo), name="sglang")


def test_engine_modules_open_files_only_through_the_reader():
    """No engine source module opens a file itself (builtin open, gzip/bz2/lzma.open):
    patchaudit.files.reader does, with its guards."""
    import ast

    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "patchaudit", "engine")
    bad = []
    for name in ("sources", "base", "directory", "gitsource", "wheel", "sdist", "archives", "limits"):
        path = os.path.join(root, name + ".py")
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                if isinstance(f, ast.Name) and f.id == "open":
                    bad.append(f"{name}.py:{node.lineno}: open()")
                if (
                    isinstance(f, ast.Attribute)
                    and f.attr == "open"
                    and isinstance(f.value, ast.Name)
                    and f.value.id in ("gzip", "bz2", "lzma", "io", "os")
                ):
                    bad.append(f"{name}.py:{node.lineno}: {f.value.id}.open()")
    assert bad == []


@pytest.mark.parametrize("srt_init", [True, False])
def test_detect_strip_never_maps_onto_another_module_with_the_same_file_name(tmp_path, srt_init):
    """Regression (issue 17): with a strip level and prefix of its own choosing, path
    detection mapped `python/sglang/jit_kernel/utils.py` onto `sglang/srt/utils.py`."""
    eng = tmp_path / "eng"
    for rel in ("sglang/__init__.py", "sglang/srt/utils.py", "sglang/srt/other.py", "sglang/srt/lora/__init__.py"):
        (eng / rel).parent.mkdir(parents=True, exist_ok=True)
        (eng / rel).write_text("x = 1\n")
    if srt_init:
        (eng / "sglang/srt/__init__.py").write_text("")
    src = open_engine(str(eng))
    with pytest.raises(EngineError, match="none of the patch paths"):
        detect_strip(["a/python/sglang/jit_kernel/utils.py", "b/python/sglang/jit_kernel/utils.py"], src)
    # -p2 maps the file the engine has; the one it lacks is missing, not another file
    paths = ["a/python/sglang/jit_kernel/utils.py", "a/python/sglang/srt/other.py"]
    assert detect_strip(paths, src) == (2, "")
    assert map_path(paths[0], 2, "") == "sglang/jit_kernel/utils.py" and not src.has("sglang/jit_kernel/utils.py")


SCM_VERSION = """\
# file generated by setuptools-scm
from __future__ import annotations

version: str
__version__: str
__version_tuple__: tuple[int | str, ...]

__version__ = version = '0.5.15.post1'
__version_tuple__ = version_tuple = (0, 5, 15, 'post1')
"""


def _tree(root, files: dict[str, str]):
    for rel, content in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(content)
    return root


def test_engine_label_reads_setuptools_scm_version_not_a_nested_package(tmp_path):
    """Regression (issue 17): an unpacked SGLang tree without a dist-info folder was
    labelled "batch_invariant_ops 0.1.0"; `sglang/_version.py` says 0.5.15.post1."""
    from patchaudit.engine.versions import engine_summary, engine_versions

    root = _tree(
        tmp_path / "tree",
        {
            "sglang/__init__.py": "from sglang.version import __version__\n",
            "sglang/_version.py": SCM_VERSION,
            "sglang/version.py": "from sglang._version import __version__\n",
            "sglang/srt/batch_invariant_ops/__init__.py": '__version__ = "0.1.0"\n',
            "foo/__init__.py": "",
            "foo-1.2.dist-info/METADATA": "Metadata-Version: 2.1\nName: foo\nVersion: 1.2\n",
        },
    )
    src = open_engine(str(root), name="sglang")
    versions = engine_versions(src)
    assert versions["sglang"] == "0.5.15.post1" and versions["foo"] == "1.2"
    assert "batch_invariant_ops" not in versions
    ctx = type("Ctx", (), {"source": src})
    assert engine_summary(ctx).startswith("sglang 0.5.15.post1 (")


@pytest.mark.parametrize(
    "files, expected",
    [
        ({"pkg/__init__.py": "", "pkg/_version.py": "version_tuple = (1, 4, 0, 'rc2')\n"}, "1.4.0.rc2"),
        ({"pkg/__init__.py": "", "pyproject.toml": '[project]\nname = "pkg"\nversion = "2.0.1"\n'}, "2.0.1"),
        ({"pkg/__init__.py": "", "setup.py": 'setup(name="pkg", version="3.1", packages=["pkg"])\n'}, "3.1"),
        (
            {"pkg/__init__.py": '__version__ = "0.9"\n', "pkg-1.0.dist-info/METADATA": "Name: pkg\nVersion: 1.0\n"},
            "1.0",
        ),
    ],
)
def test_engine_versions_from_metadata_and_files(tmp_path, files, expected):
    from patchaudit.engine.versions import engine_versions

    src = open_engine(str(_tree(tmp_path / "t", files)), name="pkg")
    assert engine_versions(src)["pkg"] == expected


def test_engine_version_from_a_git_tag_on_the_revision(tmp_path):
    from patchaudit.engine.versions import engine_versions

    root = _tree(tmp_path / "repo", {"sglang/__init__.py": "", "sglang/x.py": "x = 1\n"})
    repo = git.Repo.init(root)
    repo.index.add(["sglang/__init__.py", "sglang/x.py"])
    repo.index.commit("release")
    repo.create_tag("v0.5.15.post1")
    sha = repo.head.commit.hexsha
    src = open_engine(f"{root}@{sha}", name="sglang")
    assert engine_versions(src)["sglang"] == "0.5.15.post1"


# ---------------------------------------------------------------------------
# --engine NAME=SOURCE must hold the package NAME (issue 17)

PROC = "class Processor:\n    def load(self, prompt):\n        ids = self.tokenize(prompt)\n        return ids\n"
FAILING = (
    "--- a/python/sglang/srt/proc.py\n+++ b/python/sglang/srt/proc.py\n"
    "@@ -1,4 +1,4 @@\n class Processor:\n     def load(self, prompt):\n"
    "-        ids = self.tokenize_v2(prompt)\n+        ids = self.tokenize_v3(prompt)\n         return ids\n"
)


def _check(cwd, *args):
    from patchaudit.cli import main
    from patchaudit.testing import cli_runner

    old = os.getcwd()
    os.chdir(cwd)
    try:
        return cli_runner().invoke(main, ["check", "--no-cache", *args])
    finally:
        os.chdir(old)


def test_engine_without_the_named_package_is_an_error(tmp_path):
    eng = _tree(tmp_path / "eng", {"foo/__init__.py": "", "bar/__init__.py": "", "bar/x.py": "x = 1\n"})
    (tmp_path / "fix.patch").write_text(FAILING)
    res = _check(tmp_path, "--engine", f"sglang={eng}", "fix.patch")
    assert res.exit_code == 2, res.output
    assert f"--engine sglang={eng}: no package `sglang` there (found: bar, foo)" in res.output
    # a vllm tree named sglang: the same
    vllm = _tree(tmp_path / "vllm-tree", {"vllm/__init__.py": "", "vllm/engine.py": "x = 1\n"})
    res = _check(tmp_path, "--engine", f"sglang={vllm}", "fix.patch")
    assert res.exit_code == 2 and "no package `sglang` there (found: vllm)" in res.output


def test_engine_that_is_the_package_folder_is_read_from_its_parent(tmp_path):
    """Regression: `--engine sglang=.../site-packages/sglang` found no engine package and
    printed "All checks passed" with exit 0."""
    site = _tree(
        tmp_path / "site-packages",
        {"sglang/__init__.py": "", "sglang/srt/proc.py": PROC, "sglang/_version.py": SCM_VERSION},
    )
    (tmp_path / "fix.patch").write_text(FAILING)
    res = _check(tmp_path, "--engine", f"sglang={site / 'sglang'}", "fix.patch")
    assert res.exit_code == 1, res.output
    assert "is the package folder itself: read as the package `sglang` of" in res.output
    assert "PA201" in res.output and "sglang/srt/proc.py" in res.output
    assert "All checks passed" not in res.output
