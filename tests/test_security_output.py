"""Nothing a checkout contains can inject into patchaudit's output (security review, item 13).

A checkout controls file names, the paths inside its patches (git quotes them, so
`+++ "b/x\\n::error file=a::pwned.py"` is a path with a newline in it), hunk lines,
symbols, sample ids, and the messages that quote them.  None of that may

- start a line with a GitHub workflow command (`::error`, `::add-mask::`,
  `::stop-commands::`, on stdout or stderr) or carry the runner's legacy
  `##[command]` form, which it obeys anywhere in a line;
- reach a terminal as a control sequence: CSI/OSC escapes (clear screen, concealed
  text, OSC 8 hyperlinks), C1 controls (U+009B is a CSI of its own), bidi
  overrides that make text read in another order;
- break a markdown report out of its table cell, code span or code block, or open
  HTML in it;
- make a report invalid UTF-8 (a file name that is not UTF-8), leave a report file
  empty or half written, or end the run with a traceback.

Every hostile file is made here, in tmp_path; the commands run as real
subprocesses, so what is checked are the bytes on stdout, stderr and in the report.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from patchaudit.pipeline.bump import BumpReport, HunkRow, Relocation, Side
from patchaudit.model.findings import FileError, Finding, Severity, Target, TraceStep
from patchaudit.reporters import render
from patchaudit.pipeline.results import RunResult

REPO = Path(__file__).resolve().parents[1]
SCHEMA_PATH = REPO / "tests" / "data" / "sarif-schema-2.1.0.json"

# a path inside a patch (git-quoted): ESC, OSC 8, newlines that start workflow commands
QUOTED_PATH = ("x\\033[2J\\033]8;;https://evil.example/\\007y\\n::stop-commands::tok\\n"
               "::add-mask::secret\\n  ::warning::indented\\n##[error]legacy\\n::error file=a::pwned.py")
# an added hunk line full of terminal escapes (raw in the patch file)
HOSTILE_CODE = ("\x1b[2J\x1b[8mhidden\x1b]8;;https://evil.example/\x07click\x1b]8;;\x07"
                "\u009b31m\u202eevil\u2066\u2069\u200b\x7f ##[add-mask]s")


def hostile_patch(path: str = QUOTED_PATH, code: str = "legacy_load_mm_data(image_data)") -> str:
    return (f'diff --git "a/{path}" "b/{path}"\n'
            f'--- "a/{path}"\n'
            f'+++ "b/{path}"\n'
            "@@ -1,2 +1,3 @@\n"
            " import os\n"
            f"+out = {code}\n"
            " x = 1\n")


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "PYTHONIOENCODING")}
    env["COLUMNS"] = "100000"  # the text report wraps and cuts to the width: see whole lines here
    return subprocess.run([sys.executable, "-m", "patchaudit", *args], cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=300)


def make_file(folder: Path, name: bytes, content: bytes) -> bool:
    """Create a file whose name is the raw bytes `name`; False where the file system refuses it."""
    full = os.path.join(os.fsencode(folder), name)
    try:
        fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except (OSError, ValueError):
        return False
    with os.fdopen(fd, "wb") as fh:
        fh.write(content)
    # a file system that stores another name (percent-encoded, normalised) does not count
    return name in os.listdir(os.fsencode(folder))


NEWLINE_PATCH = b"bad\n::error file=q::boom, ##[add-mask]x.patch"   # garbage: a PA301 finding
NEWLINE_PY = b"evil\n::warning file=w::w\x1b]8;;u\x07.py"            # not UTF-8: an error on stderr


@pytest.fixture
def hostile_tree(tmp_path):
    (tmp_path / "evil.patch").write_text(hostile_patch(code=f'legacy_load_mm_data("{HOSTILE_CODE}")'),
                                         encoding="utf-8")
    names = make_file(tmp_path, NEWLINE_PATCH, b"garbage\n") and make_file(tmp_path, NEWLINE_PY, b"x = '\xff'\n")
    return tmp_path, names


# --------------------------------------------------------------------------
# what must hold of every human output


BAD_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}


def raw_controls(text: str) -> list[str]:
    """Control, format (bidi, zero-width), surrogate and line-separator characters, but newlines."""
    return sorted({repr(c) for c in text if c != "\n" and unicodedata.category(c) in BAD_CATEGORIES})


ANNOTATION = re.compile(r"^::(error|warning|notice) (?P<props>[^:\n]*)::(?P<msg>[^\n]*)$")


def commands(text: str, annotations_ok: bool = False) -> list[str]:
    """Lines that the GitHub runner would take as workflow commands (not ours)."""
    out = []
    for line in text.split("\n"):
        if "##[" in line:
            out.append(line)
        elif line.lstrip().startswith("::") and not (annotations_ok and ANNOTATION.match(line)):
            out.append(line)
    return out


def assert_human(raw: bytes, annotations_ok: bool = False) -> str:
    assert b"Traceback" not in raw, raw.decode("utf-8", "replace")
    text = raw.decode("utf-8")    # valid UTF-8, or this raises
    assert not raw_controls(text), raw_controls(text)
    assert not commands(text, annotations_ok), commands(text, annotations_ok)
    return text


# --------------------------------------------------------------------------
# item 13: the injected path and the escape sequences, end to end


def test_text_output_of_an_injected_path(hostile_tree):
    root, names = hostile_tree
    res = run(root, "check", "--no-cache", ".")
    assert res.returncode in (1, 2)
    out = assert_human(res.stdout)
    err = assert_human(res.stderr)
    # the path is shown, escaped, on the line of the engine location
    assert "--> x\\x1b[2J\\x1b]8;;https://evil.example/\\x07y\\n::stop-commands::tok\\n::add-mask::secret" in out
    # the hunk line is shown, every escape visible
    assert "\\x1b[2J\\x1b[8mhidden\\x1b]8;;https://evil.example/\\x07click" in out
    assert "\\u009b31m\\u202eevil\\u2066\\u2069\\u200b\\x7f" in out
    if names:
        assert "bad\\n::error file=q::boom, ##\\x5badd-mask]x.patch" in out
        assert "evil\\n::warning file=w::w\\x1b]8;;u\\x07.py" in err


def test_github_output_of_an_injected_path(hostile_tree):
    root, names = hostile_tree
    res = run(root, "check", "--no-cache", "--format", "github", ".")
    assert res.returncode in (1, 2)
    out = assert_human(res.stdout, annotations_ok=True)
    err = assert_human(res.stderr)
    lines = out.splitlines()
    assert lines and all(ANNOTATION.match(line) for line in lines), lines
    (pa101,) = [line for line in lines if "title=PA101 " in line]
    msg = ANNOTATION.match(pa101).group("msg")
    assert "%0Aengine: x\\x1b[2J\\x1b]8;;https://evil.example/\\x07y\\n::stop-commands::tok" in msg
    if names:
        props = [ANNOTATION.match(line).group("props") for line in lines]
        # file= keeps the real name, escaped per the workflow-command rules
        assert any(p.startswith("file=bad%0A%3A%3Aerror file=q%3A%3Aboom%2C ##\\x5badd-mask]x.patch,line=1")
                   for p in props), props
        assert any(p.startswith("file=evil%0A%3A%3Awarning file=w%3A%3Aw\\x1b]8;;u\\x07.py") for p in props), props
        assert "evil\\n::warning file=w::w\\x1b]8;;u\\x07.py" in err


def test_workflow_command_escapes():
    from patchaudit.reporters.github import escape_data, escape_property

    assert escape_property("a:b,c%d\r\ne") == "a%3Ab%2Cc%25d%0D%0Ae"
    assert escape_data("100% a:b,c\r\n") == "100%25 a:b,c%0D%0A"
    assert escape_property("\x1b[2J\u202e##[x]") == "\\x1b[2J\\u202e##\\x5bx]"


def test_json_and_sarif_of_an_injected_path(hostile_tree):
    root, _ = hostile_tree
    for fmt in ("json", "sarif"):
        res = run(root, "check", "--no-cache", "--format", fmt, ".")
        assert b"Traceback" not in res.stderr and res.returncode in (1, 2), res.stderr
        text = res.stdout.decode("utf-8")
        doc = json.loads(text)
        assert not raw_controls(text), (fmt, raw_controls(text))   # C1 and bidi as \\u escapes
        assert not commands(text), (fmt, commands(text))
        if fmt == "json":
            (f,) = [f for f in doc if f["code"] == "PA101"]
            # lossless: the JSON string is the exact path and the exact message
            assert f["target"]["path"] == ("x\x1b[2J\x1b]8;;https://evil.example/\x07y\n::stop-commands::tok\n"
                                           "::add-mask::secret\n  ::warning::indented\n##[error]legacy\n"
                                           "::error file=a::pwned.py")


def test_markdown_bump_report_of_an_injected_path(tmp_path):
    for engine in ("e1", "e2"):
        (tmp_path / engine / "sglang" / "srt").mkdir(parents=True)
        (tmp_path / engine / "sglang" / "srt" / "x.py").write_text("import os\nx = 1\n")
    (tmp_path / "p").mkdir()
    path = "python/sglang/srt/a|b`c``d\\n## pwned\\n<img src=x>&amp;|" + QUOTED_PATH
    code = 'legacy_load_mm_data(image_data)  # ``` ~~~~ </details> | <img src=x> `x'
    (tmp_path / "p" / "evil.patch").write_text(hostile_patch(path, code), encoding="utf-8")
    res = run(tmp_path, "bump", "p", "--engine", "sglang", "--from", "e1", "--to", "e2", "--format", "markdown")
    assert res.returncode in (1, 2), res.stderr
    assert_markdown(assert_human(res.stdout))
    assert_human(res.stderr)
    res = run(tmp_path, "bump", "p", "--engine", "sglang", "--from", "e1", "--to", "e2")
    assert_human(res.stdout)
    res = run(tmp_path, "bump", "p", "--engine", "sglang", "--from", "e1", "--to", "e2", "--format", "json")
    doc = json.loads(res.stdout.decode("utf-8"))
    assert doc["hunks"][0]["target"].endswith("::error file=a::pwned.py")


def test_inventory_of_an_injected_path(hostile_tree):
    root, _ = hostile_tree
    for fmt in ("text", "markdown"):
        res = run(root, "inventory", "--format", fmt, ".")
        out = assert_human(res.stdout)
        assert_human(res.stderr)
        if fmt == "markdown":
            assert_markdown(out)
    res = run(root, "inventory", "--format", "json", ".")
    text = res.stdout.decode("utf-8")
    json.loads(text)
    assert not raw_controls(text) and not commands(text)


# --------------------------------------------------------------------------
# items 11/12: a file name that is not UTF-8


@pytest.fixture
def non_utf8_tree(tmp_path):
    if not make_file(tmp_path, b"x\xff.py", b"a = legacy_load_mm_data(prompt=t)\n"):
        pytest.skip("this file system refuses a file name that is not UTF-8")
    return tmp_path


def test_non_utf8_name_sarif_report_file(non_utf8_tree):
    jsonschema = pytest.importorskip("jsonschema")
    out = non_utf8_tree / "out.sarif"
    out.write_text("the previous report\n")
    res = run(non_utf8_tree, "check", "--no-cache", "--format", "sarif", "-o", "out.sarif", os.fsdecode(b"x\xff.py"))
    assert b"Traceback" not in res.stderr, res.stderr.decode("utf-8", "replace")
    assert res.returncode == 1, res.stderr
    doc = json.loads(out.read_bytes().decode("utf-8"))
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    errors = list(jsonschema.validators.validator_for(schema)(schema).iter_errors(doc))
    assert not errors, [e.message for e in errors[:5]]
    (result,) = doc["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "x%FF.py"
    assert sorted(os.listdir(non_utf8_tree)) == sorted(["out.sarif", "x\udcff.py"])   # no temp file left


def test_non_utf8_name_json(non_utf8_tree):
    out = non_utf8_tree / "out.json"
    out.write_text("the previous report\n")
    res = run(non_utf8_tree, "check", "--no-cache", "--format", "json", "-o", "out.json", ".")
    assert b"Traceback" not in res.stderr and res.returncode == 1, res.stderr.decode("utf-8", "replace")
    (f,) = json.loads(out.read_bytes().decode("utf-8"))
    assert f["path"] == "x\\xff.py"     # the byte, as the same \xff text every format shows
    res = run(non_utf8_tree, "check", "--no-cache", "--format", "json", ".")
    assert json.loads(res.stdout.decode("utf-8"))[0]["path"] == "x\\xff.py"


def test_non_utf8_name_human_formats(non_utf8_tree):
    for fmt in ("text", "github"):
        res = run(non_utf8_tree, "check", "--no-cache", "--format", fmt, ".")
        assert res.returncode == 1, res.stderr
        out = assert_human(res.stdout, annotations_ok=fmt == "github")
        assert "x\\xff.py" in out


def test_non_utf8_name_in_a_baseline(non_utf8_tree):
    res = run(non_utf8_tree, "check", "--no-cache", "--write-baseline", "base.json", ".")
    assert b"Traceback" not in res.stderr and res.returncode == 0, res.stderr.decode("utf-8", "replace")
    doc = json.loads((non_utf8_tree / "base.json").read_bytes().decode("utf-8"))
    assert [e["path"] for e in doc["findings"]] == ["x\\xff.py"]
    res = run(non_utf8_tree, "check", "--no-cache", "--baseline", "base.json", ".")
    assert res.returncode == 0, (res.stdout, res.stderr)


# --------------------------------------------------------------------------
# the report file is written whole or not at all


def test_report_file_is_replaced_atomically(tmp_path, monkeypatch):
    from patchaudit.files import atomic as output

    target = tmp_path / "report.json"
    target.write_text("old\n")
    output.write_atomic(str(target), "new report\n")
    assert target.read_text() == "new report\n" and os.listdir(tmp_path) == ["report.json"]

    def fail(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(output.os, "replace", fail)
    with pytest.raises(OSError):
        output.write_atomic(str(target), "a report that cannot be written\n")
    assert target.read_text() == "new report\n" and os.listdir(tmp_path) == ["report.json"]


def test_unwritable_report_is_a_message(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    res = run(tmp_path, "check", "--no-cache", "-o", "no/such/dir\x1b[2J/out.txt", "a.py")
    assert res.returncode != 0
    err = assert_human(res.stderr)
    assert "cannot write" in err and "\\x1b[2J" in err


# --------------------------------------------------------------------------
# every renderer, fed a finding whose every string is hostile


HOSTILE = ("a\n::error file=a::x\r\n  ::add-mask::s\x1b[2J\x1b]8;;u\x07\x9b\u202e\u2066\u2028\x00\x7f\udcff"
           " ##[stop-commands]t | ` `` <img src=x> & % , : \t\ufeff\u200b\U000e0041 tail")


def hostile_finding(**kw) -> Finding:
    base = dict(code="PA101", name="legacy-loader-drops-input-ids", severity=Severity.ERROR,
                message="m " + HOSTILE, path="p" + HOSTILE + ".patch", line=3, column=2, end_line=3,
                end_column=9, target=Target("t" + HOSTILE, 7, "S" + HOSTILE),
                trace=[TraceStep("p" + HOSTILE + ".patch", 2, "n" + HOSTILE),
                       TraceStep("o" + HOSTILE, 5, "n" + HOSTILE)],
                context=["@@ -1 +1 @@", "+c " + HOSTILE, "+```", "+~~~~", "   ````"], fingerprint="ab-cd-0")
    base.update(kw)
    return Finding(**base)


def hostile_result() -> RunResult:
    res = RunResult(findings=[hostile_finding()])
    res.errors = [FileError("e" + HOSTILE, "msg " + HOSTILE, 4)]
    res.files = 1
    return res


def hostile_bump() -> BumpReport:
    side = Side("fuzz", "t" + HOSTILE, fuzz=1, symbol="S" + HOSTILE)
    row = HunkRow("p" + HOSTILE + ".patch", 3, 1, "t" + HOSTILE, side, side, moved_to="m" + HOSTILE,
                  moved=side, changed_upstream=True)
    return BumpReport("eng" + HOSTILE, "old" + HOSTILE, "new" + HOSTILE, "o" + HOSTILE, "n" + HOSTILE,
                      findings=[hostile_finding()], errors=[FileError("e" + HOSTILE, "msg " + HOSTILE, 4)],
                      hunks=[row], patches=["p" + HOSTILE + ".patch"],
                      relocations=[Relocation("r" + HOSTILE, "q" + HOSTILE, 1, 2, {"A" + HOSTILE: "B" + HOSTILE},
                                              [("z" + HOSTILE, 1)])])


def test_every_human_renderer_escapes_everything():
    from patchaudit.commands.bump import render_text as bump_text

    outs = {
        "text": render("text", hostile_result(), width=10**6),  # one line per help text
        "text wrapped": render("text", hostile_result(), width=40),
        "github": render("github", hostile_result()),
        "markdown": render("markdown", hostile_result()),
        "bump markdown": render("markdown", hostile_bump()),
        "bump text": bump_text(hostile_bump()),
        "bump github": render("github", hostile_bump()),
        "error": str(FileError("e" + HOSTILE, "msg " + HOSTILE, 4)),
    }
    for name, text in outs.items():
        gh = "github" in name
        assert not raw_controls(text), (name, raw_controls(text))
        assert not commands(text, annotations_ok=gh), (name, commands(text, gh))
        text.encode("utf-8")
        if gh:
            assert all(ANNOTATION.match(line) for line in text.splitlines()), name
        if "markdown" in name:
            assert_markdown(text)
    # the escapes: visible, and the same in every format
    for name in ("text", "bump text", "error"):
        assert "a\\n::error file=a::x\\r\\n  ::add-mask::s\\x1b[2J\\x1b]8;;u\\x07\\u009b\\u202e\\u2066\\u2028" \
               "\\x00\\x7f\\xff ##\\x5bstop-commands]t" in outs[name], name
        assert "\\t\\ufeff\\u200b\\U000e0041 tail" in outs[name], name


def test_every_machine_renderer_is_valid_utf8_and_lossless():
    for name, text in {"json": render("json", hostile_result()), "sarif": render("sarif", hostile_result()),
                       "bump sarif": render("sarif", hostile_bump())}.items():
        text.encode("utf-8")
        assert not raw_controls(text) and not commands(text), name
        json.loads(text)
    (f,) = json.loads(render("json", hostile_result()))
    # everything but the undecodable byte comes back exactly; the byte is the \xff text
    assert f["message"] == "m " + HOSTILE.replace("\udcff", "\\xff")
    assert f["path"] == "p" + HOSTILE.replace("\udcff", "\\xff") + ".patch"


def test_sarif_of_hostile_strings_validates():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    validator = jsonschema.validators.validator_for(schema)(schema)
    for result in (hostile_result(), hostile_bump()):
        doc = json.loads(render("sarif", result))
        errors = list(validator.iter_errors(doc))
        assert not errors, [e.message for e in errors[:5]]
        loc = doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
        assert "%FF" in loc["uri"] and "%0A" in loc["uri"] and " " not in loc["uri"]


# --------------------------------------------------------------------------
# markdown structure


_ALLOWED_TAGS = {"<details>", "<summary>", "</summary>", "</details>", "<sub>", "</sub>"}


def _code_spans(line: str) -> tuple[str, list[str]]:
    """(the line without its code spans, problems) by CommonMark's rule: a backtick run opens a
    span closed by the next run of the same length; a run with none is literal (an error here
    unless escaped)."""
    problems = []
    out = []
    runs = [(m.start(), m.end()) for m in re.finditer(r"(?<!\\)`+", line)]
    k = 0
    last = 0
    while k < len(runs):
        s, e = runs[k]
        n = e - s
        close = next((j for j in range(k + 1, len(runs)) if runs[j][1] - runs[j][0] == n), None)
        if close is None:
            problems.append(f"unmatched backticks at {s}: {line!r}")
            k += 1
            continue
        out.append(line[last:s])
        last = runs[close][1]
        k = close + 1
    out.append(line[last:])
    return "".join(out), problems


def _cells(row: str) -> int:
    return len(re.findall(r"(?<!\\)\|", row)) - 1


def assert_markdown(text: str) -> None:
    lines = text.split("\n")
    fence = None
    table_width = None
    for line in lines:
        stripped = line.lstrip(" ")
        if fence is not None:
            m = re.match(r"(`{3,}|~{3,})\s*$", stripped)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and len(line) - len(stripped) <= 3:
                fence = None
            else:
                # a line inside the block that would close it early
                m2 = re.match(r"(`{3,}|~{3,})", stripped)
                assert not (m2 and m2.group(1)[0] == fence[0] and len(m2.group(1)) >= len(fence)
                            and len(line) - len(stripped) <= 3), line
            continue
        m = re.match(r"(`{3,}|~{3,})(\w*)$", stripped)
        if m:
            fence = m.group(1)
            continue
        rest, problems = _code_spans(line)
        assert not problems, problems
        for tag in re.findall(r"<[^>]*>?", rest):
            assert tag in _ALLOWED_TAGS, (tag, line)
        assert "&" not in re.sub(r"&(amp|lt|gt|quot|#\d+);", "", rest), line
        assert not re.match(r"\s*#{1,6} pwned", line), line
        if line.startswith("|"):
            n = _cells(line)
            if table_width is None:
                table_width = n
            assert n == table_width, (n, table_width, line)
        else:
            table_width = None
    assert fence is None, "a code block is not closed"


# --------------------------------------------------------------------------
# the command modules print only escaped text


_ESCAPE_FUNCS = {"safe", "visible", "text_block"}
_PRINTERS = {"echo", "secho", "print", "write"}


def _is_escaped(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _is_escaped(node.left) and _is_escaped(node.right)
    if isinstance(node, ast.Call):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        return name in _ESCAPE_FUNCS
    return False


def test_commands_print_only_escaped_text():
    """Every click.echo / print / stream write in patchaudit/commands/, patchaudit/cli.py and
    the renderers that print as they go (moved out of commands/: tokens, progress, bump,
    inventory) passes a string literal or the result of an escape function
    (patchaudit/model/escape.py); the few that print only numbers say so with
    `# output-safe: <why>` on the line."""
    printing = [REPO / "patchaudit" / "reporters" / f"{m}.py" for m in ("tokens", "progress", "bump", "inventory")]
    files = sorted((REPO / "patchaudit" / "commands").glob("*.py")) + [REPO / "patchaudit" / "cli.py"] + printing
    bad = []
    for path in files:
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name not in _PRINTERS:
                continue
            if name == "write" and not (isinstance(f, ast.Attribute) and
                                        ast.unparse(f.value) in ("sys.stderr", "sys.stdout", "err", "self.stream")):
                continue
            if _is_escaped(node.args[0]):
                continue
            if re.search(r"#\s*output-safe:\s*\S", lines[node.lineno - 1]):
                continue
            bad.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)[:100]}")
    assert not bad, "\n".join(bad)


# --------------------------------------------------------------------------
# tokens: a rollout file with a hostile name and sample ids


def test_tokens_output_escapes_names_and_ids(tmp_path):
    pytest.importorskip("tokenizers")
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        from test_tokenizer import build_tokenizer, write_tokenizer
    finally:
        sys.path.pop(0)
    folder = tmp_path / "model"
    folder.mkdir()
    write_tokenizer(folder, build_tokenizer())
    name = b"r\n::error file=t::x\x1b[2J.jsonl"
    lines = [json.dumps({"tokens": [1, 2, 3], "index": "id\n::add-mask::s\u202e"}), "{not json"]
    if not make_file(tmp_path, name, ("\n".join(lines) + "\n").encode()):
        pytest.skip("this file system refuses a newline in a file name")
    arg = os.fsdecode(name)
    for fmt in ("text", "json"):
        res = run(tmp_path, "tokens", "--tokenizer", str(folder), "--id-field", "index", "--all-samples",
                  "--format", fmt, arg)
        assert res.returncode == 2, res.stderr
        err = assert_human(res.stderr)
        assert "r\\n::error file=t::x\\x1b[2J.jsonl:2: error:" in err
        if fmt == "text":
            out = assert_human(res.stdout)
            assert "id\\n::add-mask::s\\u202e" in out
        else:
            text = res.stdout.decode("utf-8")
            assert not raw_controls(text) and not commands(text)
            doc = json.loads(text)
            assert doc["files"] == [arg]
