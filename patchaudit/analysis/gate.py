"""The dataflow rules' second pre-filter: what a module *could* feed them, read with `ast`.

PA102 and PA103 follow values through a whole module (patchaudit/analysis/dataflow.py),
which needs libcst's tree: about ten times the cost of the stdlib `ast` parse,
before the interpreter even starts.  Their byte pre-filter (`requires`) can only
ask for words ("input_ids" and "processor"), which half the files of an engine
hold.  A finding needs more than words: a *source* (a tokenizer's `.decode(...)`
call, a multimodal processor) and a *sink* (an encode, a rollout token field),
each of which is a piece of syntax the interpreter recognises by name only.
`facts(text)` reads those names once per text with `ast` (a parse and one walk)
and each rule's `can_fire` asks whether every ingredient of a finding is there.

Soundness: every check here is implied by what the rule's FlowSpec needs to
report, for the options given (the hooks are only ever called with names,
attributes, keywords, string keys and dotted callees taken from the module's
syntax, so a name the module does not contain can never match).  Anything the
gate cannot judge (a text `ast` refuses, an option of an unexpected shape)
lets the file through.  tests/test_speed_invariants.py checks it on every rule
example and on the whole corpus.
"""

from __future__ import annotations

import ast
import functools
import keyword
import re
import unicodedata
from typing import Any, Callable, Iterable

from patchaudit.inputs import pyast
from patchaudit.inputs.astnames import ANY_CALL, dotted
from patchaudit.inputs.textmemo import TextMemo

#: facts of the last few texts (Triage and the runner ask about the same text in turn)
_CACHE: dict[str, "Facts | None"] = {}
_CACHE_SIZE = 4


def literal_runs(pattern: str) -> list[str]:
    """The runs of literal characters of an fnmatch pattern (a `[...]` class is a wildcard)."""
    plain = re.sub(r"\[[^\]]*\]", "*", pattern)
    return [r for r in re.split(r"[*?]", plain) if r]


#: past this many words, `words_in` reads the text once into its identifiers instead of
#: looking for each word in it (a repository of N modules each exporting a name asked
#: N words of each of its N files: N^2, issue 40)
WORDS_BY_SUBSTRING = 64
_IDENTIFIER = re.compile(r"[^\W\d]\w*")


class Words:
    """A list of words to look for in many texts (a repository view's exported names)."""

    __slots__ = ("words", "order", "identifiers", "others")

    def __init__(self, words: list[str]):
        self.words = words
        self.order = {w: i for i, w in enumerate(words)}
        self.identifiers = frozenset(w for w in words if w.isidentifier())
        self.others = [w for w in words if not w.isidentifier()]

    def in_text(self, text: str) -> list[str]:
        """The words that occur in `text`, in their order: as substrings while they are few
        (the pre-filters' rule), past `WORDS_BY_SUBSTRING` as whole identifiers, the text read
        once (what names a function or a field is a whole identifier; a word that is not an
        identifier is still looked for as a substring)."""
        if len(self.words) <= WORDS_BY_SUBSTRING:
            return [w for w in self.words if w in text]
        found = set(self.identifiers.intersection(_IDENTIFIER.findall(text)))
        found.update(w for w in self.others if w in text)
        return sorted(found, key=self.order.__getitem__)


def literal_part(pattern: str) -> str:
    """The longest run of literal characters of an fnmatch pattern ("" when it has none)."""
    return max(literal_runs(pattern), key=len, default="")


class Call:
    __slots__ = ("name", "receiver", "dotted")

    def __init__(self, name: str | None, receiver: str | None, dotted: str | None):
        self.name = name  # last name of the callee (dataflow's CallSite.name)
        self.receiver = receiver  # dataflow.receiver_name: `self.tok.decode()` -> "tok"
        self.dotted = dotted  # CallSite.callee: "AutoProcessor.from_pretrained", "f().g"


class Facts:
    """Names and calls of one module, as the dataflow layer's hooks see them."""

    def __init__(self, text: str, tree: ast.AST):
        self.text = text
        self.names: set[str] = set()  # identifiers: names, attributes, parameters, keywords, defs
        self.strings: set[str] = set()  # string constants, and the pieces a dotted path makes of them
        self.calls: list[Call] = []
        self._annotations: list[ast.expr] = []
        self._annotation_text: list[str] | None = None
        names, strings, calls = self.names, self.strings, self.calls
        for node in pyast.walk(tree):
            t = type(node)
            if t is ast.Name:
                names.add(node.id)  # type: ignore[attr-defined]
            elif t is ast.Attribute:
                names.add(node.attr)  # type: ignore[attr-defined]
            elif t is ast.Call:
                calls.append(_call(node))  # type: ignore[arg-type]
            elif t is ast.Constant:
                v = node.value  # type: ignore[attr-defined]
                if isinstance(v, str):
                    strings.add(v)
            elif t is ast.keyword:
                if node.arg:  # type: ignore[attr-defined]
                    names.add(node.arg)  # type: ignore[attr-defined]
            elif t is ast.arg:
                names.add(node.arg)  # type: ignore[attr-defined]
                if node.annotation is not None:  # type: ignore[attr-defined]
                    self._annotations.append(node.annotation)  # type: ignore[attr-defined]
            elif t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                names.add(node.name)  # type: ignore[attr-defined]
            elif t is ast.alias:
                names.update(node.name.split("."))  # type: ignore[attr-defined]
                if node.asname:  # type: ignore[attr-defined]
                    names.add(node.asname)  # type: ignore[attr-defined]
        # a string key becomes a path component: `x["a.b"]` -> "x.a.b" (dataflow.path_matches)
        for s in list(strings):
            if "." in s or '"' in s:
                strings.update(s.replace('["', ".").replace('"]', "").split("."))

    def words(self) -> set[str]:
        return self.names | self.strings

    def __getstate__(self) -> dict[str, Any]:
        # sent back by the pre-pass's workers (`pinned`): the annotations' parts are read
        # now, the text and the annotations' nodes stay here
        self.annotation_parts()
        state = dict(self.__dict__)
        state["text"] = ""
        state["_annotations"] = []
        return state

    def annotation_parts(self) -> list[str]:
        """Each parameter annotation's parts as PA102's `param` hook splits its source text
        (quotes stripped from the ends, split at blanks, `|`, `[`, `]` and `,`), plus each
        part with its own quotes stripped: a superset of what the hook compares."""
        if self._annotation_text is None:
            out: list[str] = []
            lines = _source_lines(self.text) if self._annotations else []
            for ann in self._annotations:
                code = _segment(lines, ann)
                if code is None:
                    out.append("\0unknown")
                    continue
                code = " ".join(code.split())
                for variant in (code, code[:197] + "..." if len(code) > 200 else None):
                    if variant is None:
                        continue
                    for part in (
                        variant.strip("\"'")
                        .replace("|", " ")
                        .replace("[", " ")
                        .replace("]", " ")
                        .replace(",", " ")
                        .split()
                    ):
                        out.append(part)
                        out.append(part.strip("\"'()"))
            self._annotation_text = out
        return self._annotation_text


# --------------------------------------------------------------------------
# the quick pass: questions answered from the text alone, before any parse
#
# Each answer is a superset of what the `ast` facts above would say (a name in a
# comment or a string counts too), so a rule that rejects a file on a quick answer
# rejects no file its `ast` gate would keep: the quick pass only spares the parse
# for the files that cannot pass anyway (on SGLang most of those the byte filter
# lets through).  Limits, shared with the byte filter: a key spelled with escapes
# or split over adjacent literals ("input_" "ids") is not seen; and a text `ast`
# cannot read (which the `ast` tier lets through) is judged on its words like any
# other.  tests/test_quick_gate.py checks the superset on every rule example and
# corpus file.

#: a receiver the quick pass cannot name (a call's result, a parenthesised expression)
UNKNOWN = "\0unknown"

_WORD = re.compile(r"\w")


def quick_text(text: str) -> str:
    """The text the quick pass reads: `ast` normalises identifiers (NFKC), so a non-ASCII
    text is read normalised (its identifiers are then `ast`'s; an ASCII word of a string
    stays what it was)."""
    return text if text.isascii() else unicodedata.normalize("NFKC", text)


def call_receivers(text: str, methods: Iterable[str]) -> set[str | None]:
    """The receivers of the calls `x.m(...)` of a method in `methods`, as `Call.receiver`
    names them (`self.tok.decode()` -> "tok", `tok(x).decode()` -> "tok", a literal's or
    a subscript's method -> None), with UNKNOWN for every receiver the text does not show
    plainly."""
    names = sorted({m for m in methods if m}, key=len, reverse=True)
    if not names:
        return set()
    gap = r"(?:\s|\\(?=[\r\n])|#[^\n]*(?![^\n]))*"  # what Python allows between the parts
    rx = re.compile(r"\.%s(?:%s)%s\(" % (gap, "|".join(re.escape(m) for m in names), gap))
    out: set[str | None] = set()
    for m in rx.finditer(text):
        out.add(_receiver_before(text, m.start()))
        if UNKNOWN in out:
            break
    return out


def _receiver_before(text: str, dot: int) -> str | None:
    i = dot - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    if i < 0 or text[i] in "\n\r\\":
        return UNKNOWN  # a continuation line: a comment may stand between the parts
    c = text[i]
    if c in "\"'":
        return None  # a literal's method (`"x".encode()`)
    if c in "]}":
        return None  # a subscript's or a display's
    if c == ")":
        start = _open_paren(text, i)
        if start is None:
            return UNKNOWN
        j = start - 1
        while j >= 0 and text[j] in " \t":
            j -= 1
        if j < 0 or not _WORD.match(text[j]):
            return None if j >= 0 and text[j] in "]}\"'" else UNKNOWN
        word = _word_before(text, j)
        # `if (x).decode()`: a keyword before the parenthesis, whose content is the receiver
        return UNKNOWN if keyword.iskeyword(word) or keyword.issoftkeyword(word) else word
    if _WORD.match(c):
        return _word_before(text, i)
    return UNKNOWN


def _word_before(text: str, end: int) -> str:
    i = end
    while i >= 0 and _WORD.match(text[i]):
        i -= 1
    word = text[i + 1 : end + 1]
    return UNKNOWN if word[:1].isdigit() else word


def _open_paren(text: str, close: int) -> int | None:
    """The `(` matching the `)` at `close`, or None when the span holds a quote or a
    comment (the count could be wrong) or is unbalanced."""
    depth = 0
    for i in range(close, max(-1, close - 4000), -1):
        c = text[i]
        if c in ")]}":
            depth += 1
        elif c in "([{":
            depth -= 1
            if depth == 0:
                return i if c == "(" else None
        elif c in "\"'#":
            return None
    return None


def called_names(text: str, fragments: Iterable[str], receivers: bool = False) -> set[str]:
    """The identifiers holding one of `fragments` that are called (`name(`, `x.name(`):
    a superset of the last names (`Call.name`) of the module's calls that hold one; with
    `receivers`, also those whose method is called (`name.m(`: a superset of the
    `Call.receiver` names that hold one)."""
    frags = sorted({f for f in fragments if f}, key=len, reverse=True)
    out: set[str] = set()
    if not frags:
        return out
    rx = re.compile("|".join(re.escape(f) for f in frags))
    n = len(text)
    for m in rx.finditer(text):
        i, j = m.start(), m.end()
        while i > 0 and _WORD.match(text[i - 1]):
            i -= 1
        while j < n and _WORD.match(text[j]):
            j += 1
        k = _skip_blanks(text, j)
        if k < n and text[k] == "(":
            out.add(text[i:j])
        elif receivers and k < n and text[k] == ".":
            k = _skip_blanks(text, k + 1)
            e = k
            while e < n and _WORD.match(text[e]):
                e += 1
            if e > k and _skip_blanks(text, e) < n and text[_skip_blanks(text, e)] == "(":
                out.add(text[i:j])
    return out


def _skip_blanks(text: str, i: int) -> int:
    """The index after the blanks, line continuations and comments at `i`."""
    n = len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n\\":
            i += 1
        elif c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
        else:
            break
    return i


def _call(node: ast.Call) -> Call:
    func = node.func
    name = receiver = None
    if isinstance(func, ast.Attribute):
        name = func.attr
        obj = func.value
        if isinstance(obj, ast.Call):
            obj = obj.func
        if isinstance(obj, ast.Name):
            receiver = obj.id
        elif isinstance(obj, ast.Attribute):
            receiver = obj.attr
    elif isinstance(func, ast.Name):
        name = func.id
    return Call(name, receiver, dotted(func, ANY_CALL))


def _source_lines(text: str) -> list[bytes]:
    # ast numbers lines at \r\n, \r and \n, and counts columns in UTF-8 bytes
    return [l.encode("utf-8") for l in re.split(r"(?<=\r\n)|(?<=\r)(?!\n)|(?<=\n)", text)]


def _segment(lines: list[bytes], node: ast.expr) -> str | None:
    try:
        first, last = node.lineno - 1, node.end_lineno - 1  # type: ignore[operator]
        if first == last:
            raw = lines[first][node.col_offset : node.end_col_offset]
        else:
            raw = b"".join(
                [lines[first][node.col_offset :], *lines[first + 1 : last], lines[last][: node.end_col_offset]]
            )
        return raw.decode("utf-8")
    except (TypeError, IndexError, UnicodeDecodeError):
        return None


#: set by `quick_only()`: the `ast` tier answers "cannot tell" (None) without parsing
_QUICK_ONLY = [False]


class quick_only:
    """Within it, `facts` and `functions` answer None (the gate lets the text through)
    without parsing: the scan's main process asks the rules' filters so, when worker
    processes will ask them again in full before running the rules (the quick pass then
    keeps the files that cannot fire from being shipped to a worker, and the parse is
    done on the workers' cores)."""

    def __enter__(self) -> "quick_only":
        self._was = _QUICK_ONLY[0]
        _QUICK_ONLY[0] = True
        return self

    def __exit__(self, *exc: object) -> None:
        _QUICK_ONLY[0] = self._was


def facts(text: str) -> Facts | None:
    """The module's facts, or None when `ast` cannot read it (the gate then lets it through)."""
    if _QUICK_ONLY[0]:
        return None
    if text in _PINNED:
        return _PINNED[text]
    if text in _CACHE:
        return _CACHE[text]
    got = _read_facts(text)
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[text] = got
    return got


def _read_facts(text: str) -> Facts | None:
    tree = parse(text)
    try:
        return Facts(text, tree) if tree is not None else None
    except RecursionError:
        return None


def some_word_may_match(words: set[str], patterns: list[str]) -> bool:
    """Whether a dotted path made of `words` (names, attributes, string keys) could match one
    of `patterns` the way dataflow.path_matches or matches compares them: a pattern without
    wildcards is a dotted tail of the path, so each of its pieces is a component; otherwise
    every piece of a literal run between dots lies inside one component."""
    for p in patterns:
        if not re.search(r"[*?\[]", p):
            # no wildcard: the path's last components are the pattern's dot-pieces, exactly
            if all(piece in words for piece in p.split(".") if piece):
                return True
            continue
        pieces = [piece for run in literal_runs(p) for piece in run.split(".") if piece]
        if not pieces:
            return True
        longest = max(pieces, key=len)
        if any(longest in w for w in words):
            return True
    return False


def per_options(fn: Callable[[Any, dict[str, Any] | None], Any]) -> Callable[[Any, dict[str, Any] | None], Any]:
    """`fn(cls, options)` remembered per class and options (by their repr): a rule's
    `requires_for` is asked for every file the pre-filter reads, always with the run's
    options.  The result is shared: `fn` returns an immutable value (a tuple)."""
    memo: dict[tuple[Any, str], Any] = {}

    @functools.wraps(fn)
    def remembered(cls: Any, options: dict[str, Any] | None) -> Any:
        key = (cls, repr(sorted(options.items())) if options else "")
        if key not in memo:
            memo[key] = fn(cls, options)
        return memo[key]

    return remembered


def string_lists(options: dict[str, Any], keys: Iterable[str]) -> bool:
    return all(isinstance(options.get(k), list) and all(isinstance(v, str) for v in options[k]) for k in keys)


class FunctionFacts:
    """What one top-level function or method names (`functions`)."""

    __slots__ = ("qualname", "words", "calls", "returns", "stores")

    def __init__(self, qualname: str):
        self.qualname = qualname
        self.words: set[str] = set()  # names, attributes, keywords, string constants
        self.calls: list[tuple[Call, bool]] = []  # (call, has arguments)
        self.returns = False  # a `return <value>` or a `yield`
        self.stores: set[str] = set()  # attributes stored into, keywords passed


def functions(text: str) -> list[FunctionFacts] | None:
    """The module's top-level functions and methods with what they name (the whole-repository
    pre-pass decides from these which modules export a summary); None when `ast` cannot
    read the text."""
    if _QUICK_ONLY[0]:
        return None
    if text in _FUNCTIONS:
        _pin(text)
        return _FUNCTIONS[text]
    tree = parse(text)
    if tree is None:
        return None
    _pin(text)
    out: list[FunctionFacts] = []
    try:
        for stmt in tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append(_function_facts(stmt.name, stmt))
            elif isinstance(stmt, ast.ClassDef):
                for m in stmt.body:
                    if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        out.append(_function_facts(f"{stmt.name}.{m.name}", m))
    except RecursionError:
        return None
    if len(_FUNCTIONS) >= _CACHE_SIZE:
        _FUNCTIONS.pop(next(iter(_FUNCTIONS)))
    _FUNCTIONS[text] = out
    return out


_FUNCTIONS: dict[str, list[FunctionFacts]] = {}

# The whole-repository pre-pass asks `functions` of every module its byte filter keeps,
# long before the scan asks `facts` of the same text (on SGLang 65 of the 116 texts the
# scan parses): the module's facts are read from the tree `functions` parsed and kept for
# the run (a few hundred kB of names per MB of source), so the scan parses it no more.
# The pre-pass's forked workers send theirs back (`pinned`, `adopt`), and the scan's
# workers, forked later, inherit them.
_PINNED = TextMemo()
#: characters of text whose facts are kept for the run, at most
PIN_CHARS = 64 * 1024 * 1024


def _pin(text: str) -> None:
    """Keep the text's facts for the run (read from its tree, which `functions` just
    parsed: `parse` remembers it)."""
    if _PINNED.room(text, PIN_CHARS):
        _PINNED.keep(text, _CACHE[text] if text in _CACHE else _read_facts(text), PIN_CHARS)


def clear_pins() -> None:
    """Forget the kept facts (a new run: the whole-repository pre-pass starts)."""
    _PINNED.clear()


def pinned(text: str) -> "Facts | None | bool":
    """The facts kept for `text`, ready to be sent to another process (False: none kept)."""
    if text not in _PINNED:
        return False
    return _PINNED[text]


def adopt(text: str, got: "Facts | None") -> None:
    """Keep facts another process computed for `text` (`pinned` there)."""
    if _PINNED.keep(text, got, PIN_CHARS) and got is not None:
        got.text = text


_TREES: dict[str, "ast.Module | None"] = {}


def parse(text: str) -> "ast.Module | None":
    """`pyast.parse`, remembered for the last few texts (the gate, the pre-pass's facts and
    index ask about the same text in turn)."""
    if text in _TREES:
        return _TREES[text]
    tree = pyast.parse(text)
    if len(_TREES) >= _CACHE_SIZE:
        _TREES.pop(next(iter(_TREES)))
    _TREES[text] = tree
    return tree


def _function_facts(qualname: str, fn: ast.AST) -> FunctionFacts:
    ff = FunctionFacts(qualname)
    words = ff.words
    for node in pyast.walk(fn):
        t = type(node)
        if t is ast.Name:
            words.add(node.id)  # type: ignore[attr-defined]
        elif t is ast.Attribute:
            words.add(node.attr)  # type: ignore[attr-defined]
            if isinstance(node.ctx, ast.Store):  # type: ignore[attr-defined]
                ff.stores.add(node.attr)  # type: ignore[attr-defined]
        elif t is ast.Call:
            ff.calls.append((_call(node), bool(node.args or node.keywords)))  # type: ignore[arg-type,attr-defined]
        elif t is ast.keyword:
            if node.arg:  # type: ignore[attr-defined]
                words.add(node.arg)  # type: ignore[attr-defined]
                ff.stores.add(node.arg)  # type: ignore[attr-defined]
        elif t is ast.arg:
            words.add(node.arg)  # type: ignore[attr-defined]
        elif t is ast.Constant:
            if isinstance(node.value, str):  # type: ignore[attr-defined]
                words.add(node.value)  # type: ignore[attr-defined]
        elif (t is ast.Return and node.value is not None) or t in (ast.Yield, ast.YieldFrom):  # type: ignore[attr-defined]
            ff.returns = True
    return ff
