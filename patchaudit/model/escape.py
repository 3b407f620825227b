"""The one place that turns text a checkout controls into output.

A checkout controls file names, the paths inside its patches (git quotes them,
so a path can hold a newline or an escape sequence), hunk lines, symbols,
sample ids, and every message that quotes one of them.  All of it reaches a
terminal, a CI log, a pull-request comment or a report only through the
functions here (tests/test_security_output.py).

**Human formats** (text, markdown, github annotations, every line on stderr,
`explain`, the inventory/tokens/bump text renderers) show every character
that could act instead of being read as a visible escape, with `visible()`:

| what                                                        | shown as              |
|-------------------------------------------------------------|-----------------------|
| tab, newline, carriage return                               | `\\t` `\\n` `\\r`       |
| other C0 controls and DEL (U+0000-U+001F, U+007F)           | `\\x1b`, `\\x7f`        |
| a byte of a file name that is not UTF-8 (0x80-0xFF)         | `\\xff`                |
| C1 controls (U+0080-U+009F, U+009B is a CSI of its own)     | `\\u009b`              |
| format characters: bidi controls (U+202A-U+202E,            | `\\u202e`, `\\U000e0041` |
| U+2066-U+2069, U+200E/F, U+061C), zero-width characters,    |                       |
| U+FEFF, tags; line and paragraph separators U+2028/U+2029;  |                       |
| variation selectors, U+034F and the Hangul fillers          |                       |
| (invisible); lone surrogates                                |                       |

`\\xNN` is a byte (an ASCII control, or an undecodable byte of a file name:
Python holds it as the surrogate U+DCNN), `\\uNNNN` a code point.  Backslashes
are shown as they are: a file literally named `a\\x1b` prints like one holding
an ESC, which is fine for reading; the json report keeps the exact name.

GitHub's runner also obeys workflow commands on any line of stdout or stderr
that starts with `::` (after blanks) and, in its legacy form, `##[command]`
anywhere in a line.  `visible()` writes `##[` as `##\\x5b`; `safe_lines()`
writes a `:` that starts a line as `\\x3a`.  `safe()` is both, for one line.
Annotations themselves are written with `command_data()`/`command_property()`
(the runner's escapes: `%` `\\r` `\\n` as `%25` `%0D` `%0A`, and in property
values `:` `,` as `%3A` `%2C`).

**Machine formats** (json, sarif, the baseline, the json of inventory, bump and
tokens) keep every string exactly, except that an undecodable byte of a file
name becomes the same `\\xff` text (`data()`): the output is valid UTF-8.
`json_text()` also writes DEL, C1, format and separator characters as JSON
`\\uNNNN` escapes and `##[` as `##\\u005b`: the same value for a JSON reader,
but nothing a terminal or a CI log acts on.  URIs (SARIF) percent-encode the
file name's bytes (`x%FF.py`), which is exact.

**Markdown** (`md_text`, `md_code`, `md_fence`): no file name or hunk line
breaks out of its table cell, code span or code block (`|`, backticks and
newlines escaped or fenced around), and `<` `>` `&` outside code are HTML
entities.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

_ESCAPE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
# invisible characters that are not format characters (and are ignored by some matchers)
_INVISIBLE = frozenset(
    {0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0, *range(0x180B, 0x1810), *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)}
)
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
_NOT_PLAIN_ASCII = re.compile(r"[^\x20-\x7e]")
_LINE_START_COLON = re.compile(r"^([^\S\n]*):(?=:)", re.M)
_LEGACY_COMMAND = "##["


def _needs_escape(ch: str) -> bool:
    return unicodedata.category(ch) in _ESCAPE_CATEGORIES or ord(ch) in _INVISIBLE


def _escape_char(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    cp = ord(ch)
    if cp < 0x80:
        return f"\\x{cp:02x}"
    if 0xDC80 <= cp <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
        return f"\\x{cp - 0xDC00:02x}"
    if cp <= 0xFFFF:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def visible(text: Any, keep: str = "") -> str:
    """`text` with every control, format, separator and invisible character as a visible escape
    (the table above), and `##[` as `##\\x5b`.  Characters in `keep` are left as they are."""
    text = str(text)
    if text.isprintable() and _LEGACY_COMMAND not in text:
        return text

    def repl(m: re.Match) -> str:
        ch = m.group()
        if ch in keep or not _needs_escape(ch):
            return ch
        return _escape_char(ch)

    return _NOT_PLAIN_ASCII.sub(repl, text).replace(_LEGACY_COMMAND, "##\\x5b")


def safe_lines(text: str) -> str:
    """Rendered text whose values went through `visible()`: no line starts a workflow command.
    The first `:` of a `::` that starts a line (after blanks) is shown as `\\x3a`, `##[` as
    `##\\x5b`."""
    if "::" in text:
        text = _LINE_START_COLON.sub(r"\1\\x3a", text)
    return text.replace(_LEGACY_COMMAND, "##\\x5b")


def safe(text: Any) -> str:
    """One line for a terminal or a log (a message on stderr): everything escaped, newlines too."""
    return safe_lines(visible(text))


def text_block(text: Any) -> str:
    """Several lines (its newlines kept), each escaped as `safe()` does."""
    return safe_lines("\n".join(visible(line) for line in str(text).split("\n")))


# --------------------------------------------------------------------------
# GitHub workflow commands


def command_data(text: str) -> str:
    """The message of a workflow command: escaped (but for its newlines), then `%`, `\\r`,
    `\\n` as `%25`, `%0D`, `%0A`, so the command stays on one line."""
    text = visible(text, keep="\r\n")
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def command_property(text: str) -> str:
    """A property value of a workflow command (`file=`, `title=`): as `command_data`, and `:`,
    `,` as `%3A`, `%2C`."""
    return command_data(text).replace(":", "%3A").replace(",", "%2C")


# --------------------------------------------------------------------------
# machine formats


_SURROGATE = re.compile("[\ud800-\udfff]")


def data(text: str) -> str:
    """A string for a machine format: exact, but an undecodable byte (a lone surrogate) is the
    `\\xff` text human formats show for it (other lone surrogates: `\\udNNN`)."""
    if not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub(lambda m: _escape_char(m.group()), text)


def data_tree(obj: Any) -> Any:
    """`data()` on every string (keys too) of a JSON-like tree."""
    if isinstance(obj, str):
        return data(obj)
    if isinstance(obj, dict):
        return {data_tree(k): data_tree(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [data_tree(v) for v in obj]
    return obj


_JSON_SUSPECT = re.compile(r"[^\x00-\x7e]|##\[")


def _json_escape(m: re.Match) -> str:
    s = m.group()
    if s == "##[":
        return "##\\u005b"
    if not _needs_escape(s):
        return s
    cp = ord(s)
    if cp > 0xFFFF:
        cp -= 0x10000
        return f"\\u{0xD800 + (cp >> 10):04x}\\u{0xDC00 + (cp & 0x3FF):04x}"
    return f"\\u{cp:04x}"


def json_text(obj: Any, indent: int | None = 2) -> str:
    """`obj` as JSON, valid UTF-8 (`data_tree`), with the characters a terminal or a CI log would
    act on written as JSON escapes (the parsed value is the same)."""
    text = json.dumps(data_tree(obj), indent=indent, ensure_ascii=False)
    if text.isascii() and _LEGACY_COMMAND not in text and "\x7f" not in text:
        return text
    # outside strings JSON has only ASCII punctuation and no `#`: every match is inside a string
    return _JSON_SUSPECT.sub(_json_escape, text)


def path_bytes(path: str) -> bytes:
    """The bytes of a file name (an undecodable byte back as that byte), for URIs."""
    try:
        return path.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return path.encode("utf-8", "surrogatepass")


# --------------------------------------------------------------------------
# markdown


_BACKTICKS = re.compile(r"`+")


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def md_code(text: Any, table: bool = False) -> str:
    """`text` as one inline code span: the fence is longer than any run of backticks in it."""
    text = visible(text)
    longest = max((len(m.group()) for m in _BACKTICKS.finditer(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip(" ") else ""
    out = f"{fence}{pad}{text}{pad}{fence}"
    return out.replace("|", "\\|") if table else out


def md_text(text: Any, table: bool = False) -> str:
    """Markdown-safe text that keeps the code spans it has (`name` in a message): outside them
    `&` `<` `>` are HTML entities and a backtick with no partner is escaped; in a table cell
    `|` is escaped everywhere (GFM reads `\\|` as a pipe even inside code spans)."""
    text = visible(text)
    runs = list(_BACKTICKS.finditer(text))
    out: list[str] = []
    pos = 0
    k = 0
    while k < len(runs):
        run = runs[k]
        n = len(run.group())
        close = next((j for j in range(k + 1, len(runs)) if len(runs[j].group()) == n), None)
        if close is None:  # literal backticks
            out.append(_html(text[pos : run.start()]) + "\\`" * n)
            pos = run.end()
            k += 1
            continue
        out.append(_html(text[pos : run.start()]))
        out.append(text[run.start() : runs[close].end()])
        pos = runs[close].end()
        k = close + 1
    out.append(_html(text[pos:]))
    result = "".join(out)
    return result.replace("|", "\\|") if table else result


def md_fence(lines: list[str]) -> str:
    """A backtick fence longer than any backtick run in `lines` (so none of them closes it)."""
    longest = max((len(m.group()) for line in lines for m in _BACKTICKS.finditer(line)), default=0)
    return "`" * max(3, longest + 1)
