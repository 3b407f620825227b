from __future__ import annotations

import re

import libcst as cst
from libcst.metadata import PositionProvider

from patchaudit.analysis.names import callee_name
from patchaudit.inputs.cst import string_literal as string_value
from patchaudit.lint.fixes import make_fix, replace_span
from patchaudit.lint.rule import PYTHON, TEXT, Example, Rule
from patchaudit.model.findings import Fix, Severity

VAR = "SGLANG_MM_AVOID_RETOKENIZE"
#: the strings SGLang's EnvBool reads as False (anything else it cannot parse falls back to True)
FALSE_STRINGS = frozenset({"false", "0", "no", "n"})
#: YAML 1.1 also reads these bare words as booleans false
YAML_FALSE = FALSE_STRINGS | {"off"}

_ASSIGN_RE = re.compile(rf"(?<![\w$]){VAR}\s*=\s*(?P<q>[\"']?)(?P<v>[A-Za-z0-9]+)(?P=q)(?![\w.])")
_DOCKER_SPACE_RE = re.compile(rf"^\s*(?:ENV|ARG)\s+{VAR}\s+(?P<q>[\"']?)(?P<v>[A-Za-z0-9]+)(?P=q)\s*$", re.I)
_YAML_KEY_RE = re.compile(
    rf"^\s*(?:-\s+)?(?P<kq>[\"']?){VAR}(?P=kq)\s*:\s*(?P<q>[\"']?)(?P<v>[A-Za-z0-9]+)(?P=q)\s*(?:#.*)?$"
)
_YAML_NAME_RE = re.compile(rf"^(?P<ind>\s*(?:-\s+)?)name\s*:\s*(?P<q>[\"']?){VAR}(?P=q)\s*(?:#.*)?$")
_YAML_VALUE_RE = re.compile(r"^\s*(?:-\s+)?value\s*:\s*(?P<q>[\"']?)(?P<v>[A-Za-z0-9]+)(?P=q)\s*(?:#.*)?$")


def is_false_string(value: str, yaml: bool = False) -> bool:
    return value.lower() in (YAML_FALSE if yaml else FALSE_STRINGS)


def scan_line(line: str, flavor: str) -> list[tuple[int, str]]:
    """(column, value) of every place the guard is set to a false value in one text line."""
    return [(col, value) for col, value, _ in scan_line_spans(line, flavor)]


def scan_line_spans(line: str, flavor: str) -> list[tuple[int, str, tuple[int, int]]]:
    """`scan_line`, with the (start, end) columns of each false value (what the fix rewrites)."""
    stripped = line.lstrip()
    if not stripped or stripped.startswith("#"):
        return []
    hits = [(m.start(), m.group("v"), m.span("v")) for m in _ASSIGN_RE.finditer(line) if is_false_string(m.group("v"))]
    if flavor == "dockerfile":
        m = _DOCKER_SPACE_RE.match(line)
        if m and is_false_string(m.group("v")):
            hits.append((line.index(VAR), m.group("v"), m.span("v")))
    if flavor == "yaml":
        m = _YAML_KEY_RE.match(line)
        if m and is_false_string(m.group("v"), yaml=True):
            hits.append((line.index(VAR), m.group("v"), m.span("v")))
    return hits


#: the true value the fix writes for each false one, in the same case (SGLang reads all as true)
_TRUE_FOR = {"false": "true", "0": "1", "no": "yes", "n": "y", "off": "on"}


def true_value(value: str) -> str:
    """The true value the fix writes instead of the false `value`, in its case."""
    new = _TRUE_FOR.get(value.lower(), "1")
    if value.isupper():
        return new.upper()
    if value[:1].isupper():
        return new.capitalize()
    return new


def guard_fix(edit) -> Fix | None:
    """The (unsafe: it turns the guard back on, which changes what the engine does) fix."""
    return make_fix(f"set {VAR} back to a true value", [edit], safe=False)


class RetokenizeGuardDisabled(Rule):
    """
    Flags `SGLANG_MM_AVOID_RETOKENIZE` set to a false value, anywhere.

    ## What it does
    Finds the environment variable `SGLANG_MM_AVOID_RETOKENIZE` set to a value
    SGLang reads as false (`0`, `false`, `no`, `n`, any case; `False`/`0` in
    Python; `EnvBool(False)`): in Python (`os.environ[...] = ...`,
    `os.environ.setdefault`, `env={...}` dicts, keyword arguments,
    `envs.SGLANG_MM_AVOID_RETOKENIZE.set(False)`, a patch turning the default
    `EnvBool(True)` into `EnvBool(False)`, command strings), shell scripts
    (`export`, `VAR=0 cmd`), Dockerfiles (`ENV VAR=false`, `ENV VAR 0`), YAML
    (`VAR: "0"`, `- name: VAR` / `value: "false"`, `- VAR=0`), `.env` files,
    and the lines patches add to any of them.  Truthy values are clean.

    ## Why is this bad?
    The guard is what keeps SGLang from decoding a pre-tokenized multimodal
    prompt and re-tokenizing it: with it on, the caller's ids are kept and only
    the image placeholders are expanded.  Turned off, every id prompt with an
    image is decoded and re-encoded, and non-canonical sequences drift
    (`[479, 3770]` -> `[9149]`): the trainer's tokens and the engine's no longer
    line up, and with router replay the recorded routing no longer matches.

    ## Example
    ```shell
    export SGLANG_MM_AVOID_RETOKENIZE=0
    ```

    ## Use instead
    Leave the variable unset (it defaults to on) or set it to `1`.

    Fix (unsafe: it changes what the engine does): the false value becomes the
    matching true one (`0` -> `1`, `false` -> `true`, `False` -> `True`,
    `EnvBool(False)` -> `EnvBool(True)`), in Python, shell, Dockerfiles, YAML,
    `.env` files and the lines a patch adds to any of them.

    ## Incident
    sgl-project/sglang#26555 added the guard (default on) to stop
    re-tokenization drift of token-id VLM requests (the drift broke router
    replay in RL, where routing is recorded per token).
    """

    code = "PA104"
    roles = frozenset({"port-check"})
    name = "retokenize-guard-disabled"
    severity = Severity.ERROR
    kinds = frozenset({PYTHON, TEXT})
    requires = ((VAR,),)
    fix = "unsafe"
    #: not local (`Rule.local`): the Python side matches the *value* of string literals
    #: (`string_value` joins implicit concatenations and decodes escapes), so
    #: `os.environ["SGLANG_MM_AVOID_" "RETOKENIZE"] = "0"` sets the guard in a
    #: statement whose source does not hold the variable's name; pruning would drop
    #: it whenever the name appears elsewhere in the file
    local = False
    METADATA_DEPENDENCIES = (PositionProvider,)

    VALID = [
        Example(f'os.environ["{VAR}"] = "1"\n'),
        Example(f'os.environ.setdefault("{VAR}", "true")\n'),
        Example(f'subprocess.run(cmd, env={{"{VAR}": "1", "OTHER": "0"}})\n'),
        Example(f'value = os.environ.get("{VAR}", "0")\n', title="reading is not setting"),
        Example(f'os.environ["{VAR}"] = flag\n', title="unknown value"),
        Example(f"    {VAR} = EnvBool(True)\n".lstrip()),
        Example(f"export {VAR}=1\n", kind="shell"),
        Example(f"# export {VAR}=0\n", kind="shell", title="a comment"),
        Example(f"ENV {VAR}=true\n", kind="dockerfile"),
        Example(f"ENV {VAR} 1\n", kind="dockerfile"),
        Example(f'env:\n  {VAR}: "1"\n', kind="yaml"),
        Example(f'env:\n  - name: {VAR}\n    value: "true"\n  - name: OTHER\n    value: "0"\n', kind="yaml"),
        Example(f"{VAR}=1\n", kind="env"),
        Example(f"{VAR}=off\n", kind="env", title="SGLang cannot parse 'off' and keeps the default (on)"),
        Example(
            f"""\
            --- a/python/sglang/srt/environ.py
            +++ b/python/sglang/srt/environ.py
            @@ -1,2 +1,2 @@
             class Envs:
            -    {VAR} = EnvBool(False)
            +    {VAR} = EnvBool(True)
            """,
            kind="patch",
        ),
    ]
    INVALID = [
        Example(
            f'import os\nos.environ["{VAR}"] = "0"\n', line=2, expected_fix=f'import os\nos.environ["{VAR}"] = "1"\n'
        ),
        Example(
            f'os.environ.setdefault("{VAR}", "false")\n',
            expected_fix=f'os.environ.setdefault("{VAR}", "true")\n',
        ),
        Example(f"envs.{VAR}.set(False)\n", title="False", expected_fix=f"envs.{VAR}.set(True)\n"),
        Example(
            f'cmd = "{VAR}=0 python -m sglang.launch_server"\n',
            title="in a command string",
            expected_fix=f'cmd = "{VAR}=1 python -m sglang.launch_server"\n',
        ),
        Example(f'subprocess.run(cmd, env={{"{VAR}": "false"}})\n'),
        Example(f'env = dict(os.environ, {VAR}="0")\n'),
        Example(f"envs.{VAR}.set(False)\n"),
        Example(f'monkeypatch.setenv("{VAR}", "0")\n'),
        Example(f'cmd = "{VAR}=0 python -m sglang.launch_server --model m"\n', title="a command string"),
        Example(
            f"""\
            --- a/python/sglang/srt/environ.py
            +++ b/python/sglang/srt/environ.py
            @@ -1,2 +1,2 @@
             class Envs:
            -    {VAR} = EnvBool(True)
            +    {VAR} = EnvBool(False)
            """,
            kind="patch",
            line=6,
        ),
        Example(
            f"""\
            --- a/python/sglang/srt/environ.py
            +++ b/python/sglang/srt/environ.py
            @@ -1,2 +1,3 @@
             class Envs:
            -    {VAR} = EnvBool(True)
            +    {VAR} = EnvBool(False)
            +    OTHER = EnvBool(True)
            """,
            kind="patch",
            line=6,
            expected_fix=f"""\
            --- a/python/sglang/srt/environ.py
            +++ b/python/sglang/srt/environ.py
            @@ -1,2 +1,3 @@
             class Envs:
            -    {VAR} = EnvBool(True)
            +    {VAR} = EnvBool(True)
            +    OTHER = EnvBool(True)
            """,
            title="EnvBool(False) in a patch",
        ),
        Example(f"#!/bin/bash\nexport {VAR}=0\n", kind="shell", line=2, expected_fix=f"#!/bin/bash\nexport {VAR}=1\n"),
        Example(
            f"#!/bin/bash\nexport {VAR}=0\n",
            kind="shell",
            line=2,
            expected_fix=f"#!/bin/bash\nexport {VAR}=0\n",
            unsafe_fixes=False,
            title="--fix alone leaves the unsafe fix out",
        ),
        Example(f"{VAR}=false python train.py\n", kind="shell"),
        Example(
            f"FROM python:3.11\nENV {VAR}=false\n",
            kind="dockerfile",
            line=2,
            expected_fix=f"FROM python:3.11\nENV {VAR}=true\n",
        ),
        Example(
            f"FROM python:3.11\nENV {VAR} 0\n",
            kind="dockerfile",
            line=2,
            expected_fix=f"FROM python:3.11\nENV {VAR} 1\n",
        ),
        Example(f'env:\n  {VAR}: "0"\n', kind="yaml", line=2, expected_fix=f'env:\n  {VAR}: "1"\n'),
        Example(
            f'env:\n  - name: {VAR}\n    value: "False"\n',
            kind="yaml",
            line=2,
            expected_fix=f'env:\n  - name: {VAR}\n    value: "True"\n',
        ),
        Example(f"environment:\n  - {VAR}=0\n", kind="yaml", line=2, expected_fix=f"environment:\n  - {VAR}=1\n"),
        Example(f"{VAR}=0\n", kind="env", expected_fix=f"{VAR}=1\n"),
        Example(
            f"""\
            --- a/docker/Dockerfile
            +++ b/docker/Dockerfile
            @@ -1,2 +1,3 @@
             FROM lmsysorg/sglang:latest
            +ENV {VAR}=0
             RUN pip install slime
            """,
            kind="patch",
            line=5,
            expected_fix=f"""\
            --- a/docker/Dockerfile
            +++ b/docker/Dockerfile
            @@ -1,2 +1,3 @@
             FROM lmsysorg/sglang:latest
            +ENV {VAR}=1
             RUN pip install slime
            """,
        ),
    ]

    # ----- Python -------------------------------------------------------------
    @staticmethod
    def _false_value(node: cst.BaseExpression | None) -> str | None:
        """The false value `node` sets, as written, or None when it is not certainly false."""
        if node is None:
            return None
        s = string_value(node)
        if s is not None:
            return repr(s) if is_false_string(s) else None
        if isinstance(node, cst.Name) and node.value == "False":
            return "False"
        if isinstance(node, cst.Integer) and node.value == "0":
            return "0"
        if isinstance(node, cst.Call) and callee_name(node.func) in ("EnvBool", "EnvBoolWithAlias") and node.args:
            inner = RetokenizeGuardDisabled._false_value(node.args[0].value)
            return f"EnvBool({inner})" if inner else None
        return None

    def _flag(self, node: cst.CSTNode, value: str, value_node: cst.CSTNode | None = None) -> None:
        self.report(
            node,
            f"`{VAR}` set to {value}: SGLang will decode token-id prompts and re-tokenize "
            f"them (token drift between trainer and engine); leave it unset or set it to 1",
            fix=self._python_fix(value_node) if value_node is not None else None,
        )

    def _python_fix(self, node: cst.CSTNode) -> Fix | None:
        """The fix rewriting the false value `node` (a string, `False`, `0`, `EnvBool(False)`,
        or a command string holding `VAR=0`) in place, when it sits on one line."""
        if isinstance(node, cst.Call) and node.args:
            return self._python_fix(node.args[0].value)
        if isinstance(node, cst.Name) and node.value == "False":
            new = "True"
        elif isinstance(node, cst.Integer) and node.value == "0":
            new = "1"
        elif isinstance(node, cst.SimpleString):
            raw = node.value
            q = len(node.prefix) + len(node.quote)
            inner = raw[q : len(raw) - len(node.quote)]
            if is_false_string(inner):
                new = raw[:q] + true_value(inner) + raw[len(raw) - len(node.quote) :]
            else:  # a command string: each `VAR=0` in it
                spans = [sp for _, _, sp in scan_line_spans(inner, "shell")] if "\n" not in inner else []
                if not spans:
                    return None
                for a, b in reversed(spans):
                    inner = inner[:a] + true_value(inner[a:b]) + inner[b:]
                new = raw[:q] + inner + raw[len(raw) - len(node.quote) :]
        else:
            return None
        pos = self.get_metadata(PositionProvider, node)
        if pos.start.line != pos.end.line:
            return None
        return guard_fix(replace_span(self.unit, pos.start.line, pos.start.column, pos.end.column, new))

    @staticmethod
    def _is_var(node: cst.BaseExpression | None) -> bool:
        if node is None:
            return False
        if string_value(node) == VAR:
            return True
        return isinstance(node, (cst.Name, cst.Attribute)) and callee_name(node) == VAR

    def visit_Assign(self, node: cst.Assign) -> None:
        value = self._false_value(node.value)
        if value is None:
            return
        for t in node.targets:
            tgt = t.target
            if (
                isinstance(tgt, cst.Subscript)
                and len(tgt.slice) == 1
                and isinstance(tgt.slice[0].slice, cst.Index)
                and self._is_var(tgt.slice[0].slice.value)
            ):
                self._flag(node, value, node.value)
            elif isinstance(tgt, (cst.Name, cst.Attribute)) and callee_name(tgt) == VAR:
                self._flag(node, value, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if callee_name(node.target) == VAR if isinstance(node.target, (cst.Name, cst.Attribute)) else False:
            value = self._false_value(node.value)
            if value is not None:
                self._flag(node, value, node.value)

    def visit_Call(self, node: cst.Call) -> None:
        name = callee_name(node.func)
        args = [a for a in node.args if a.keyword is None and not a.star]
        if name in ("setdefault", "putenv", "setenv", "__setitem__") and len(args) >= 2 and self._is_var(args[0].value):
            value = self._false_value(args[1].value)
            if value:
                self._flag(node, value, args[1].value)
        elif (
            name in ("set", "override")
            and isinstance(node.func, cst.Attribute)
            and callee_name(node.func.value) == VAR
            and args
        ):
            value = self._false_value(args[0].value)
            if value:
                self._flag(node, value, args[0].value)
        for a in node.args:
            if a.keyword is not None and a.keyword.value == VAR:
                value = self._false_value(a.value)
                if value:
                    self._flag(a, value, a.value)

    def visit_DictElement(self, node: cst.DictElement) -> None:
        if self._is_var(node.key):
            value = self._false_value(node.value)
            if value:
                self._flag(node, value, node.value)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        s = string_value(node)
        if s and VAR in s and s != VAR:
            for line in s.splitlines():
                for _, value in scan_line(line, "shell"):
                    self._flag(node, repr(value), node)
                    return

    # ----- text files and hunks --------------------------------------------
    def check_text(self, unit) -> None:
        lines = unit.lines
        for i, line in enumerate(lines, 1):
            if VAR not in line:
                continue
            for col, value, (a, b) in scan_line_spans(line, unit.flavor):
                fix = guard_fix(replace_span(unit, i, a, b, true_value(value)))
                self.report_at(i, col, i, col + len(VAR), self._message(value), fix=fix)
            if unit.flavor == "yaml":
                m = _YAML_NAME_RE.match(line)
                if m:
                    self._yaml_name_value(lines, i, len(m.group("ind")))

    def _yaml_name_value(self, lines: list[str], i: int, key_col: int) -> None:
        """`- name: VAR` then `value: "false"` among the keys of the same list item."""
        for j in range(i + 1, min(len(lines), i + 8) + 1):
            text = lines[j - 1]
            if not text.strip() or text.lstrip().startswith("#"):
                continue
            indent = len(text) - len(text.lstrip())
            if indent < key_col or (indent <= key_col and text.lstrip().startswith("-")):
                return
            m = _YAML_VALUE_RE.match(text)
            if m and indent == key_col:
                if is_false_string(m.group("v"), yaml=True):
                    col = lines[i - 1].index(VAR)
                    a, b = m.span("v")
                    fix = guard_fix(replace_span(self.unit, j, a, b, true_value(m.group("v"))))
                    self.report_at(i, col, j, len(text), self._message(m.group("v")), fix=fix)
                return

    @staticmethod
    def _message(value: str) -> str:
        return (
            f"`{VAR}` set to {value!r}: SGLang will decode token-id prompts and re-tokenize them "
            f"(token drift between trainer and engine); leave it unset or set it to 1"
        )
