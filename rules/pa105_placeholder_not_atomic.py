from __future__ import annotations

import fnmatch
import re
import string
from typing import Any, Iterator

import libcst as cst
from libcst.metadata import PositionProvider

from patchaudit.analysis.names import callee_name
from patchaudit.inputs.cst import string_literal as string_value
from patchaudit.inputs.linear_regex import NotLinear, compile_linear
from patchaudit.lint.rule import PYTHON, TEXT, Example, Rule, RuleOptionError
from patchaudit.model.findings import Severity

DEFAULT_PATTERN = r"<\|[^|<>\s]+\|>"
DEFAULT_NAMES = (
    "*image_token*",
    "*video_token*",
    "*audio_token*",
    "*media_token*",
    "*image_placeholder*",
    "*video_placeholder*",
    "*audio_placeholder*",
    "*media_placeholder*",
    "*placeholder_token*",
    "*media_pad*",
    "*image_pad*",
    "*video_pad*",
    "*pad_token*",
)
#: calls whose string arguments reach the tokenizer or are spliced into a prompt
DEFAULT_CALLS = (
    "encode",
    "encode_plus",
    "encode_batch",
    "batch_encode_plus",
    "tokenize",
    "convert_tokens_to_ids",
    "tokenizer",
    "processor",
    "apply_chat_template",
    "replace",
    "join",
)
#: a whole value (no pattern segment in it) is judged only when it looks like one token
_MAX_TOKEN_LEN = 100
#: pieces shown in a message before it is cut short
_SHOWN = 12

_TEXT_ASSIGN_RE = re.compile(
    r"(?:^|[\s{,])(?:export\s+)?(?P<kq>[\"']?)(?P<name>[A-Za-z_][\w.-]*)(?P=kq)\s*[:=]\s*"
    r"(?P<q>[\"']?)(?P<v>[^\"'\s#,}]+)(?P=q)"
)


# --------------------------------------------------------------------------
# the examples' tokenizer: a character-level BPE written as tokenizer.json


def _example_tokenizer() -> dict[str, Any]:
    """A tiny, deterministic tokenizer.json: one id per printable ASCII character, a few merges
    (so `<image>` becomes one ordinary id), and three registered tokens."""
    chars = [c for c in string.printable if c not in "\t\r\x0b\x0c"]
    vocab = {c: i for i, c in enumerate(chars)}
    merges = [
        ["<", "|"],
        ["|", ">"],
        ["i", "m"],
        ["a", "g"],
        ["ag", "e"],
        ["im", "age"],
        ["<", "image"],
        ["<image", ">"],
    ]
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    added: list[dict[str, Any]] = []
    for content, special in (("<|media_pad|>", True), ("<|im_end|>", True), ("<|image_pad|>", False)):
        added.append(
            {
                "id": len(vocab) + len(added),
                "content": content,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": special,
            }
        )
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": {"type": "Fuse"},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": merges,
        },
    }


EXAMPLE_TOKENIZER = _example_tokenizer()

KIMI_HUNK = """\
--- a/components/src/dynamo/vllm/multimodal_utils/request_processor.py
+++ b/components/src/dynamo/vllm/multimodal_utils/request_processor.py
@@ -10,3 +10,4 @@ class RequestProcessor:
     def __init__(self, tokenizer):
         self.tokenizer = tokenizer
-        self.image_placeholder = "<|media_pad|>"
+        self.image_placeholder = "<|kimi_image_placeholder|>"
+        self.pad_id = tokenizer.convert_tokens_to_ids("<|media_pad|>")
"""

FIXED_HUNK = """\
--- a/components/src/dynamo/vllm/multimodal_utils/request_processor.py
+++ b/components/src/dynamo/vllm/multimodal_utils/request_processor.py
@@ -10,3 +10,4 @@ class RequestProcessor:
     def __init__(self, tokenizer):
         self.tokenizer = tokenizer
-        self.image_placeholder = "<|kimi_image_placeholder|>"
+        self.image_placeholder = "<|media_pad|>"
+        self.pad_id = tokenizer.convert_tokens_to_ids("<|media_pad|>")
"""


def _ex(code: str, **kw: Any) -> Example:
    return Example(code, tokenizer=EXAMPLE_TOKENIZER, **kw)


class PlaceholderNotAtomic(Rule):
    """
    Flags a media placeholder or pad token that the tokenizer does not keep as one registered token.

    ## What it does
    Needs the model's tokenizer: `patchaudit check --tokenizer PATH` (a local
    `tokenizer.json` or a model folder holding one) or `tokenizer = "..."` under
    `[tool.patchaudit]`.  **Without a tokenizer this rule does not run and
    reports nothing**, whatever the code says.

    It collects the string literals used as media placeholders or pad tokens,
    in Python files and in the lines patches add:
    - the value assigned to a name, attribute, keyword argument, dict key or
      YAML/.env key that looks like a placeholder (`image_token`,
      `image_placeholder`, `media_pad`, `placeholder_token`, `pad_token`, ...);
    - every `<|...|>`-shaped piece of a string passed to `encode`, `tokenize`,
      `convert_tokens_to_ids`, `tokenizer(...)`, `processor(...)`,
      `apply_chat_template`, `replace` or `join`, or concatenated (`+`, `*`,
      f-string, `.format`) into a prompt.

    Each one must encode to exactly one id, and that id must be one of the
    tokenizer's registered special/added tokens.  The message lists the ids
    and token strings a placeholder shatters into.

    Options (`[tool.patchaudit.rules.PA105]`): `pattern` (regex of the
    placeholder-shaped pieces, default `<\\|[^|<>\\s]+\\|>`), `names` /
    `extend-names` (globs on the lower-cased target name), `calls` (callee
    names).  Files that mention none of `<|`, `token`, `placeholder`, `pad`,
    `image` or `media` are not read.

    ## Why is this bad?
    Engines find images in a prompt by the placeholder's id.  A string that is
    not a registered token goes through ordinary BPE and silently splits into
    several ids: one image becomes several ids, the engine finds no
    placeholder (or the wrong count) and the prompt the model sees no longer
    matches what the trainer recorded.  Flags such as tiktoken's
    `allow_special` only choose a special-aware encoder; they do not check that
    the string is registered.  A string that happens to be one ordinary
    vocabulary id is fragile too: next to other text BPE can merge it
    differently.

    ## Example
    ```python
    # the checkpoint registers <|media_pad|>, not <|kimi_image_placeholder|>
    self.image_placeholder = "<|kimi_image_placeholder|>"
    ```

    ## Use instead
    ```python
    self.image_placeholder = "<|media_pad|>"   # one registered token, one id
    ```
    or register the placeholder as a special token of the tokenizer.

    ## Incident
    ai-dynamo/dynamo#12281: for Kimi-K3 the frontend emitted
    one `<|media_pad|>` per image while vLLM matched
    `<|kimi_image_placeholder|>`, "a plain string that is not in the"
    vocabulary; review found that `allow_special: true` "is not a membership
    check. An unregistered token falls through to ordinary BPE and silently
    shatters, so one image becomes several ids."
    """

    code = "PA105"
    roles = frozenset({"port-check"})
    name = "placeholder-not-atomic"
    severity = Severity.ERROR
    kinds = frozenset({PYTHON, TEXT})
    needs = frozenset({"tokenizer"})
    requires = (("<|",), ("token",), ("placeholder",), ("pad",), ("image",), ("media",))
    regex_options = frozenset({"pattern"})
    options = {
        "pattern": DEFAULT_PATTERN,
        "names": list(DEFAULT_NAMES),
        "extend-names": [],
        "calls": list(DEFAULT_CALLS),
    }
    METADATA_DEPENDENCIES = (PositionProvider,)

    VALID = [
        _ex('self.image_placeholder = "<|media_pad|>"\n', title="a registered special token"),
        _ex('image_token = "<|image_pad|>"\n', title="a registered non-special added token"),
        _ex('ids = tokenizer.encode("<|media_pad|>" * 3 + "done<|im_end|>")\n', title="encode of registered tokens"),
        _ex('log.info("see <|kimi_image_placeholder|> in the docs")\n', title="a string that is no placeholder"),
        _ex('image_token = "<|media_pad|><|media_pad|>"\n', title="a run of registered tokens"),
        _ex('tokens = MultimodalSpecialTokens(image_token="<|media_pad|>")\n', title="keyword argument"),
        _ex(FIXED_HUNK, kind="patch", title="the fix: the removed line is not judged"),
        _ex('env:\n  image_token: "<|media_pad|>"\n', kind="yaml", title="YAML key"),
        Example(
            'self.image_placeholder = "<|kimi_image_placeholder|>"\n', title="no tokenizer given: the rule does not run"
        ),
    ]
    INVALID = [
        _ex(
            'self.image_placeholder = "<|kimi_image_placeholder|>"\n',
            line=1,
            contains="'<|kimi_image_placeholder|>' is not a registered token",
            title="the Kimi-K3 placeholder of ai-dynamo/dynamo#12281",
        ),
        _ex(KIMI_HUNK, kind="patch", line=7, contains="shatters into", title="a patch adds the placeholder"),
        _ex(
            'prompt = "Describe " + "<|kimi_image_placeholder|>" * n\n',
            contains="shatters",
            title="concatenated into a prompt",
        ),
        _ex('ids = tokenizer.encode(f"{question}<|vision_pad|>")\n', title="f-string passed to encode"),
        _ex('IMAGE_TOKEN = "<image>"\n', contains="ordinary vocabulary id", title="one id but not registered"),
        _ex('cfg = {"media_pad": "<|mediapad|>"}\n', title="dict key"),
        _ex('env:\n  image_token: "<|kimi_image_placeholder|>"\n', kind="yaml", line=2, title="YAML key"),
        _ex(
            'text = prompt.replace("<image>", "<|image|>")\n',
            count=1,
            contains="'<|image|>'",
            title="replace into a prompt (the plain <image> is not judged)",
        ),
        _ex(
            'image_token = "<|media_pad|><|vision_pad|>"\n',
            contains="'<|vision_pad|>'",
            title="one piece of a run is not registered",
        ),
        _ex('image_token = "\u56fe\u50cf"\n', contains="no ids at all", title="characters the tokenizer lacks"),
    ]

    def __init__(self, unit=None, context=None):
        super().__init__(unit, context)
        try:  # the checkout's pattern: RE2, linear time ("(a+)+b" under re hangs on 42 characters)
            self._pattern = compile_linear(self.opts.get("pattern") or DEFAULT_PATTERN)
        except NotLinear as exc:
            raise RuleOptionError(f"[tool.patchaudit.rules.PA105] pattern: not a valid regex: {exc}") from None
        self._names = [
            n.lower() for n in list(self.opts.get("names", DEFAULT_NAMES)) + list(self.opts.get("extend-names", []))
        ]
        self._calls = frozenset(self.opts.get("calls", DEFAULT_CALLS))
        self._seen: set[tuple[int, int, str]] = set()

    # ----- judging one string ----------------------------------------------
    def _verdict(self, piece: str) -> str | None:
        """None when `piece` is one registered token; otherwise what is wrong with it."""
        tok = self.context.tokenizer
        ids = tok.encode(piece)
        if len(ids) == 1 and tok.is_added(ids[0]) and tok.token(ids[0]) == piece:
            return None
        pieces = tok.tokens(ids)
        if not ids:
            return (
                f"{piece!r} encodes to no ids at all with this tokenizer (its characters are unknown to it); "
                f"use a registered special token{self._suggestion()} or register this one"
            )
        if len(ids) == 1:
            return (
                f"{piece!r} is an ordinary vocabulary id ({ids[0]}, {pieces[0]!r}), not a registered "
                f"special/added token of the tokenizer: next to other text BPE can merge it differently; "
                f"register it as a special token"
            )
        shown_ids = ", ".join(str(i) for i in ids[:_SHOWN]) + (", ..." if len(ids) > _SHOWN else "")
        shown = ", ".join(repr(p) for p in pieces[:_SHOWN]) + (", ..." if len(ids) > _SHOWN else "")
        return (
            f"{piece!r} is not a registered token of the tokenizer: it shatters into {len(ids)} ids "
            f"[{shown_ids}] ({shown}), so one placeholder becomes {len(ids)} ids; use a registered "
            f"special token{self._suggestion()} or register this one"
        )

    def _suggestion(self) -> str:
        tok = self.context.tokenizer
        media = [
            a.content
            for a in tok.added_tokens()
            if re.search(r"image|media|video|vision|audio|pad|placeholder", a.content, re.I)
        ]
        if not media:
            return ""
        more = ", ..." if len(media) > 4 else ""
        return " (the tokenizer has " + ", ".join(media[:4]) + more + ")"

    def _pieces(self, value: str, whole: bool) -> Iterator[str]:
        """The placeholder-shaped pieces of `value`; with `whole`, the value itself when it has none."""
        found = [m.group(0) for m in self._pattern.finditer(value)]
        if found:
            yield from dict.fromkeys(found)
        elif whole and value and len(value) <= _MAX_TOKEN_LEN and not any(c.isspace() for c in value):
            yield value

    def _check_node(self, node: cst.CSTNode, value: str, raw: str | None, whole: bool) -> None:
        pos = self.get_metadata(PositionProvider, node)
        for piece in self._pieces(value, whole):
            line, col, end_line, end_col = pos.start.line, pos.start.column, pos.end.line, pos.end.column
            at = raw.find(piece) if raw is not None and pos.start.line == pos.end.line else -1
            if at >= 0:
                col, end_col = pos.start.column + at, pos.start.column + at + len(piece)
            key = (line, col, piece)
            if key in self._seen:
                continue
            self._seen.add(key)
            problem = self._verdict(piece)
            if problem:
                self.report_at(line, col, end_line, end_col, problem)

    # ----- where placeholders are -------------------------------------------
    def _is_placeholder_name(self, name: str | None) -> bool:
        if not name:
            return False
        low = name.lower().replace("-", "_")
        return any(fnmatch.fnmatchcase(low, g) for g in self._names)

    @staticmethod
    def _target_name(node: cst.BaseExpression) -> str | None:
        if isinstance(node, (cst.Name, cst.Attribute)):
            return callee_name(node)
        if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            return string_value(node.slice[0].slice.value)
        return None

    def _leaves(self, node: cst.CSTNode) -> Iterator[tuple[cst.CSTNode, str, str | None]]:
        """String-literal leaves of an expression built by concatenation: (node, value, raw text)."""
        if isinstance(node, cst.SimpleString):
            v = string_value(node)
            if v is not None:
                yield node, v, node.value
        elif isinstance(node, cst.ConcatenatedString):
            v = string_value(node)
            if v is not None:
                yield node, v, None
            else:
                yield from self._leaves(node.left)
                yield from self._leaves(node.right)
        elif isinstance(node, cst.FormattedString):
            for part in node.parts:
                if isinstance(part, cst.FormattedStringText):
                    yield part, part.value, part.value
        elif isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Multiply)):
            yield from self._leaves(node.left)
            yield from self._leaves(node.right)
        elif isinstance(node, (cst.List, cst.Tuple)):
            for el in node.elements:
                yield from self._leaves(el.value)

    def _check_expr(self, node: cst.CSTNode, whole: bool) -> None:
        for leaf, value, raw in self._leaves(node):
            self._check_node(leaf, value, raw, whole and isinstance(leaf, (cst.SimpleString, cst.ConcatenatedString)))

    def _check_named_value(self, value: cst.BaseExpression | None) -> None:
        if value is None:
            return
        if isinstance(value, (cst.SimpleString, cst.ConcatenatedString)):
            self._check_expr(value, whole=True)
        else:
            self._check_expr(value, whole=False)

    def visit_Assign(self, node: cst.Assign) -> None:
        if any(self._is_placeholder_name(self._target_name(t.target)) for t in node.targets):
            self._check_named_value(node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if self._is_placeholder_name(self._target_name(node.target)):
            self._check_named_value(node.value)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None and self._is_placeholder_name(node.keyword.value):
            self._check_named_value(node.value)

    def visit_DictElement(self, node: cst.DictElement) -> None:
        if self._is_placeholder_name(string_value(node.key)):
            self._check_named_value(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        name = callee_name(node.func)
        if name == "format" and isinstance(node.func, cst.Attribute):
            self._check_expr(node.func.value, whole=False)
        if name not in self._calls:
            return
        if name == "join" and isinstance(node.func, cst.Attribute):
            self._check_expr(node.func.value, whole=False)
        for arg in node.args:
            self._check_expr(arg.value, whole=False)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, (cst.Add, cst.Multiply)):
            self._check_expr(node, whole=False)

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        if any(isinstance(p, cst.FormattedStringExpression) for p in node.parts):
            self._check_expr(node, whole=False)

    # ----- YAML, .env, shell -------------------------------------------------
    def check_text(self, unit) -> None:
        for i, line in enumerate(unit.lines, 1):
            if line.lstrip().startswith("#"):
                continue
            for m in _TEXT_ASSIGN_RE.finditer(line):
                if not self._is_placeholder_name(m.group("name").rsplit(".", 1)[-1]):
                    continue
                value = m.group("v")
                for piece in self._pieces(value, whole=True):
                    problem = self._verdict(piece)
                    if problem:
                        col = m.start("v") + max(value.find(piece), 0)
                        self.report_at(i, col, i, col + len(piece), problem)
