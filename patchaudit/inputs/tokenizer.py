"""The model's tokenizer, read from a local `tokenizer.json` (never downloaded).

`load_tokenizer(path)` takes a `tokenizer.json` file or a model folder holding
one, plus the folder's `tokenizer_config.json` / `special_tokens_map.json` when
present, and returns a `Tokenizer`: encode/decode the way an engine that
decodes and re-tokenizes does (no BOS/EOS added, special tokens kept as text),
token strings, and which strings are registered special/added tokens.

The Rust-backed `tokenizers` library is an optional extra
(`pip install 'patchaudit[tokenizer]'`); it is imported here, lazily, and only
when a tokenizer is asked for.  Every problem (library missing, path missing,
bad JSON, not a tokenizer) raises `TokenizerError` naming the file.

Files are read through `patchaudit.files.reader`: only regular files (a
tokenizer path of `/dev/zero` or `/dev/stdin` is refused, never read), at most
`MAX_TOKENIZER_FILE` bytes; JSON nested too deeply for the parser, or holding a
number too long for Python's int conversion, is an error naming the file.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

INSTALL_HINT = "pip install 'patchaudit[tokenizer]'"
TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILES = ("tokenizer_config.json", "special_tokens_map.json")
#: the special-token keys of transformers' tokenizer configuration
_SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
_LIST_KEYS = ("additional_special_tokens", "extra_special_tokens")
#: the largest tokenizer.json (or configuration file) read; real ones are up to ~35 MB
MAX_TOKENIZER_FILE = 256 * 1024 * 1024


def _reraise_if_not_library(exc: BaseException) -> None:
    """Let through what is not the library failing on its input.  Besides a bare
    Exception, `tokenizers` (Rust, through pyo3) turns a panic on a hostile
    tokenizer.json (a "Precompiled" normalizer without its charsmap, say) into
    pyo3's PanicException, which derives from BaseException."""
    if not isinstance(exc, Exception) and type(exc).__name__ != "PanicException":
        raise exc


class TokenizerError(Exception):
    """A tokenizer that cannot be used; the message names the file."""


def _import_tokenizers():
    try:
        import tokenizers  # noqa: F401
    except ImportError as exc:
        raise TokenizerError(
            f"tokenizer checks need the `tokenizers` library, which is not installed "
            f"({exc}); install it with: {INSTALL_HINT}"
        ) from None
    return tokenizers


@dataclass(frozen=True)
class AddedInfo:
    """A token registered on top of the model's vocabulary (atomic: matched before the model runs)."""

    id: int
    content: str
    special: bool


def _cleanup(text: str) -> str:
    """transformers' `clean_up_tokenization` (applied by `decode` when the config asks for it)."""
    return (
        text.replace(" .", ".")
        .replace(" ?", "?")
        .replace(" !", "!")
        .replace(" ,", ",")
        .replace(" ' ", "'")
        .replace(" n't", "n't")
        .replace(" 'm", "'m")
        .replace(" 's", "'s")
        .replace(" 've", "'ve")
        .replace(" 're", "'re")
    )


class Tokenizer:
    """A loaded tokenizer.  Picklable (worker processes rebuild it from its JSON)."""

    def __init__(
        self, json_text: str, *, path: str, config: dict[str, Any] | None = None, config_paths: Sequence[str] = ()
    ):
        self.path = path
        self.config_paths = tuple(config_paths)
        self._json_text = json_text
        self._config = dict(config or {})
        #: the most characters one id may decode to (set by load_tokenizer: tokenizer_bounds.py)
        self.max_piece = 1
        self._build()

    # ----- construction ----------------------------------------------------
    def _build(self) -> None:
        tokenizers = _import_tokenizers()
        try:
            tok = tokenizers.Tokenizer.from_str(self._json_text)
        except BaseException as exc:  # the library raises a bare Exception for every parse problem
            _reraise_if_not_library(exc)
            raise TokenizerError(
                f"{self.path}: not a tokenizer.json the `tokenizers` library can read: {exc}"
            ) from None
        self._tok = tok
        self.clean_up_spaces = bool(self._config.get("clean_up_tokenization_spaces", False))
        special_strings = _configured_special_tokens(self._config)
        declared = _configured_added_tokens(self._config)
        # tokens a transformers load would add on top of tokenizer.json
        to_add: list[Any] = []
        for content, special in [(c, s) for c, s in declared] + [(c, True) for c in special_strings]:
            if (
                content
                and content not in {a.content for a in self._added_from(tok)}
                and content not in {t.content for t in to_add}
            ):
                to_add.append(tokenizers.AddedToken(content, special=special, normalized=not special))
        for t in to_add:
            if t.special:
                tok.add_special_tokens([t])
            else:
                tok.add_tokens([t])
        self.added: dict[str, AddedInfo] = {a.content: a for a in self._added_from(tok)}
        self.special_strings = frozenset(special_strings) | frozenset(c for c, a in self.added.items() if a.special)
        self.vocab_size = tok.get_vocab_size(with_added_tokens=True)
        self._max_id = max([self.vocab_size - 1] + [a.id for a in self.added.values()])
        self._holes: bool | None = None

    @staticmethod
    def _added_from(tok) -> list[AddedInfo]:
        return [AddedInfo(i, t.content, bool(t.special)) for i, t in sorted(tok.get_added_tokens_decoder().items())]

    def __getstate__(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "config_paths": self.config_paths,
            "json": self._json_text,
            "config": self._config,
            "max_piece": self.max_piece,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.max_piece = state.get("max_piece", 1)
        self.path = state["path"]
        self.config_paths = tuple(state["config_paths"])
        self._json_text = state["json"]
        self._config = state["config"]
        self._build()

    @property
    def fingerprint(self) -> str:
        """Identity of the tokenizer's content (for caches keyed on run settings)."""
        h = hashlib.sha256(self._json_text.encode("utf-8"))
        h.update(json.dumps(self._config, sort_keys=True, default=str).encode("utf-8"))
        return h.hexdigest()

    def __repr__(self) -> str:
        return f"Tokenizer({self.path!r}, vocab={self.vocab_size}, added={len(self.added)})"

    # ----- encode / decode -------------------------------------------------
    # The library raises a bare `Exception` for a tokenizer it loaded but cannot run
    # (an `unk_token` missing from the vocabulary, ...): these four say TokenizerError.
    def encode(self, text: str) -> list[int]:
        """Ids of `text`, special tokens recognised, nothing added around it."""
        try:
            return list(self._tok.encode(text, add_special_tokens=False).ids)
        except BaseException as exc:
            _reraise_if_not_library(exc)
            raise TokenizerError(f"{self.path}: encode failed: {exc}") from None

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """`encode` of many texts, in the library's threads (without offsets when it can skip them)."""
        fast = getattr(self._tok, "encode_batch_fast", None) or self._tok.encode_batch
        try:
            return [e.ids for e in fast(list(texts), add_special_tokens=False)]
        except BaseException as exc:
            _reraise_if_not_library(exc)
            raise TokenizerError(f"{self.path}: encode failed: {exc}") from None

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids` with special tokens kept (what an engine re-tokenizes)."""
        try:
            text = self._tok.decode(list(ids), skip_special_tokens=False)
        except BaseException as exc:
            _reraise_if_not_library(exc)
            raise TokenizerError(f"{self.path}: decode failed: {exc}") from None
        return _cleanup(text) if self.clean_up_spaces else text

    def decode_batch(self, seqs: Sequence[Sequence[int]]) -> list[str]:
        try:
            texts = self._tok.decode_batch([list(s) for s in seqs], skip_special_tokens=False)
        except BaseException as exc:
            _reraise_if_not_library(exc)
            raise TokenizerError(f"{self.path}: decode failed: {exc}") from None
        return [_cleanup(t) for t in texts] if self.clean_up_spaces else list(texts)

    # ----- vocabulary ------------------------------------------------------
    def token(self, token_id: int) -> str | None:
        """The token string of an id (`"Ġtr"`), None for an id outside the vocabulary."""
        return self._tok.id_to_token(token_id)

    def tokens(self, ids: Iterable[int]) -> list[str]:
        out = []
        for i in ids:
            t = self.token(i)  # "" is a token: only None is unknown
            out.append(t if t is not None else f"<unknown id {i}>")
        return out

    def token_to_id(self, token: str) -> int | None:
        return self._tok.token_to_id(token)

    @property
    def max_id(self) -> int:
        """The largest id the tokenizer knows."""
        return self._max_id

    def has_holes(self) -> bool:
        """Some id at or below `max_id` maps to no token (usually none).  Counted from the
        vocabulary, never by walking the ids: a hostile tokenizer.json may give one added
        token the id 2**32 - 1."""
        if self._holes is None:
            known = set(self._tok.get_vocab(with_added_tokens=True).values())
            self._holes = len(known) < self._max_id + 1
        return self._holes

    def is_valid_id(self, token_id: int) -> bool:
        """An id the tokenizer knows (decode silently drops unknown ids)."""
        return 0 <= token_id <= self._max_id and self._tok.id_to_token(token_id) is not None

    def is_added(self, token: str | int) -> bool:
        """A registered added token (special or not): matched whole, before the model splits text."""
        if isinstance(token, int):
            content = self.token(token)
            return content is not None and content in self.added and self.added[content].id == token
        return token in self.added

    def is_special(self, token: str | int) -> bool:
        """A special token: registered as special in tokenizer.json or named so in the configuration."""
        content = self.token(token) if isinstance(token, int) else token
        if content is None or content not in self.added:
            return False
        return content in self.special_strings

    def added_tokens(self) -> list[AddedInfo]:
        return sorted(self.added.values(), key=lambda a: a.id)


# --------------------------------------------------------------------------
# configuration files


def _token_content(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _configured_special_tokens(config: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for key in _SPECIAL_KEYS:
        c = _token_content(config.get(key))
        if c:
            out.append(c)
    for key in _LIST_KEYS:
        value = config.get(key)
        items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        for v in items:
            c = _token_content(v)
            if c:
                out.append(c)
    return out


def _id_key(key: Any) -> int:
    """A token id written as a string key ("151643"), 0 for anything else ("²" is a digit
    to str.isdigit but not to int; a key of 5000 digits passes Python's int-string limit)."""
    text = str(key)
    if text.isascii() and text.isdigit() and len(text) <= 18:
        return int(text)
    return 0


def _configured_added_tokens(config: dict[str, Any]) -> list[tuple[str, bool]]:
    decoder = config.get("added_tokens_decoder")
    out: list[tuple[str, bool]] = []
    if isinstance(decoder, dict):
        for _, spec in sorted(decoder.items(), key=lambda kv: _id_key(kv[0])):
            c = _token_content(spec)
            if c:
                out.append((c, bool(spec.get("special", False)) if isinstance(spec, dict) else False))
    return out


def _read_text(path: str) -> str:
    from patchaudit.files.reader import ReadError, read_bytes

    try:
        data = read_bytes(path, MAX_TOKENIZER_FILE)
    except ReadError as exc:
        reason = exc.reason if exc.reason.startswith("cannot read") else f"cannot read: {exc.reason}"
        raise TokenizerError(f"{path}: {reason}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TokenizerError(f"{path}: not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None


def _loads(path: str, text: str) -> Any:
    """`json.loads`, every failure a TokenizerError naming the file."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TokenizerError(f"{path}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise TokenizerError(f"{path}: not read: JSON nested too deeply") from None
    except ValueError as exc:  # a number of more than 4300 digits (Python's int-string limit)
        raise TokenizerError(f"{path}: not read: {str(exc).split(':')[0]}") from None


def _read_json(path: str) -> Any:
    return _loads(path, _read_text(path))


def _merge_configs(folder: str) -> tuple[dict[str, Any], list[str]]:
    """tokenizer_config.json, then special_tokens_map.json over it (as transformers reads them)."""
    config: dict[str, Any] = {}
    used: list[str] = []
    for name in CONFIG_FILES:
        p = os.path.join(folder, name)
        # a FIFO, a device or a dangling link under a config file's name is an error, not skipped
        if not os.path.lexists(p) or os.path.isdir(p):
            continue
        data = _read_json(p)
        if not isinstance(data, dict):
            raise TokenizerError(f"{p}: expected a JSON object, got {type(data).__name__}")
        for key, value in data.items():
            if key in _LIST_KEYS and isinstance(config.get(key), list) and isinstance(value, list):
                config[key] = config[key] + [v for v in value if v not in config[key]]
            else:
                config[key] = value
        used.append(p)
    return config, used


def load_tokenizer(path: str | os.PathLike[str]) -> Tokenizer:
    """Load a local `tokenizer.json`, or the one in a model folder, with its configuration."""
    path = os.fspath(path)
    _import_tokenizers()  # the missing extra is the first thing to say
    if not os.path.lexists(path):  # a dangling link or a loop is named by the reader below
        raise TokenizerError(
            f"{path}: no such tokenizer file or folder (give a local tokenizer.json or a "
            f"model folder holding one; nothing is downloaded)"
        )
    folder: str | None
    if os.path.isdir(path):
        folder, file = path, os.path.join(path, TOKENIZER_FILE)
        if not os.path.lexists(file) or os.path.isdir(file):
            others = [
                n
                for n in ("tokenizer.model", "tiktoken.model", "vocab.json", "tokenizer_config.json")
                if os.path.exists(os.path.join(path, n))
            ]
            found = f" (found {', '.join(others)})" if others else ""
            raise TokenizerError(
                f"{path}: no {TOKENIZER_FILE} in this folder{found}; patchaudit reads the fast "
                f"tokenizer file: write one with transformers' "
                f"`AutoTokenizer.from_pretrained(...).save_pretrained(...)`"
            )
    else:
        file = path
        # config files beside a tokenizer.json belong to the same model
        folder = (os.path.dirname(path) or ".") if os.path.basename(path) == TOKENIZER_FILE else None
    text = _read_text(file)
    data = _loads(file, text)
    if not isinstance(data, dict) or "model" not in data:
        raise TokenizerError(f'{file}: not a tokenizer.json (a JSON object with a "model" key is expected)')
    from patchaudit.inputs import tokenizer_bounds

    try:  # before the library sees it: what it may allocate is bounded (tokenizer_bounds.py)
        growth = tokenizer_bounds.check(data)
    except tokenizer_bounds.TooLarge as exc:
        raise TokenizerError(f"{file}: refused, it could make the tokenizer allocate without bound: {exc}") from None
    config, used = _merge_configs(folder) if folder else ({}, [])
    tok = Tokenizer(text, path=file, config=config, config_paths=used)
    tok.max_piece = tokenizer_bounds.max_piece(data, growth)
    _probe(tok, file)
    return tok


#: text every usable tokenizer can encode and decode: printable ASCII, a space run,
#: a newline, non-ASCII letters and a special-token-shaped string
_PROBE = "".join(chr(c) for c in range(32, 127)) + "  \n\u00e9\u4e2d <|im_end|>"


def _probe(tok: "Tokenizer", file: str) -> None:
    """A tokenizer.json the library loads may still fail on first use (an `unk_token`
    missing from its vocabulary, a broken normalizer): try it once, here, so that the
    failure is one error naming the file instead of a crash in the middle of a rule."""
    try:
        ids = tok.encode(_PROBE)
        tok.decode(ids)
        tok.decode_batch([ids, ids[:1]])
        tok.encode_batch(["truly", ""])
        tok.tokens(ids)
    except TokenizerError as exc:
        raise TokenizerError(f"{file}: the tokenizer cannot encode text: {exc}") from None
