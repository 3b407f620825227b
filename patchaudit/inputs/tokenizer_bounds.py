"""What a `tokenizer.json` may make the `tokenizers` library allocate, checked before it loads.

The library runs a tokenizer's normalizer, pre-tokenizer and decoder as they are written: a
checkout's `tokenizer.json` whose normalizer (or decoder) replaces one character by 8 MiB made
it allocate gigabytes and abort the whole process (SIGABRT, no report).  So the JSON is read
first, and a tokenizer is refused (TokenizerError naming the file and the JSON path) when

- a string of its pipeline (a `Replace` content, a `Prepend`, a `Metaspace` replacement, a
  `Split` pattern) or a token of its vocabulary or added tokens is longer than `MAX_PIECE`;
- the pipeline can grow a text more than `MAX_GROWTH` times: the product, over a
  normalizer's (or decoder's) steps, of what one character may become (a `Replace` content's
  length, the longest string of a `Precompiled` character map);
- a `Precompiled` character map is larger than `MAX_CHARSMAP`.

`max_piece(data)` is then the most text one id may decode to (its longest token times the
decoder's growth): `tokens` bounds a sample's decoded size with it (pipeline/tokens.py).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

#: the longest string of a tokenizer's pipeline, and the longest token (real ones: < 300)
MAX_PIECE = 4096
#: how many times a normalizer or a decoder may grow a text (real ones: 1 to ~20)
MAX_GROWTH = 256
#: the largest `Precompiled` character map (base64; T5's and XLM-R's are ~300 KB)
MAX_CHARSMAP = 8 * 1024 * 1024
_SECTIONS = ("normalizer", "pre_tokenizer", "decoder", "post_processor")
_LISTS = ("normalizers", "pretokenizers", "decoders", "processors")


class TooLarge(ValueError):
    """The tokenizer could make the library allocate without bound (the message says where)."""


def check(data: dict) -> int:
    """Raise TooLarge for a tokenizer past the bounds; else the decoder's growth."""
    growth = {}
    for section in _SECTIONS:
        growth[section] = _growth(data.get(section), section)
        if growth[section] > MAX_GROWTH:
            raise TooLarge(
                f"{section}: can grow a text {growth[section]:,} times (limit {MAX_GROWTH}): "
                f"its replacements are too long"
            )
    for k, added in enumerate(data.get("added_tokens") or []):
        content = added.get("content") if isinstance(added, dict) else None
        if isinstance(content, str) and len(content) > MAX_PIECE:
            raise TooLarge(f"added_tokens[{k}].content: {len(content):,} characters (limit {MAX_PIECE:,})")
    model = data.get("model")
    vocab = model.get("vocab") if isinstance(model, dict) else None
    pieces = vocab.keys() if isinstance(vocab, dict) else (v[0] for v in vocab or () if isinstance(v, list) and v)
    for piece in pieces:
        if isinstance(piece, str) and len(piece) > MAX_PIECE:
            raise TooLarge(f"model.vocab: a token of {len(piece):,} characters (limit {MAX_PIECE:,})")
    return growth["decoder"]


def max_piece(data: dict, decoder_growth: int) -> int:
    """The most characters one id can decode to (its longest token through the decoder)."""
    longest = max((len(a.get("content", "")) for a in data.get("added_tokens") or [] if isinstance(a, dict)), default=1)
    model = data.get("model")
    vocab = model.get("vocab") if isinstance(model, dict) else None
    if isinstance(vocab, dict):
        longest = max([longest, *(len(p) for p in vocab if isinstance(p, str))])
    elif isinstance(vocab, list):
        longest = max([longest, *(len(v[0]) for v in vocab if isinstance(v, list) and v and isinstance(v[0], str))])
    return max(1, longest) * max(1, decoder_growth)


def _growth(node: Any, where: str) -> int:
    """What one character may become through `node` (a component, or a Sequence of them)."""
    if isinstance(node, list):
        out = 1
        for k, child in enumerate(node):
            out *= _growth(child, f"{where}[{k}]")
            if out > MAX_GROWTH:
                return out
        return out
    if not isinstance(node, dict):
        return 1
    for key in _LISTS:
        if isinstance(node.get(key), list):
            return _growth(node[key], f"{where}.{key}")
    out = 1
    for key, value in node.items():
        if key == "precompiled_charsmap":
            out = max(out, _charsmap_growth(value, f"{where}.{key}"))
        elif isinstance(value, str):
            if len(value) > MAX_PIECE:
                raise TooLarge(f"{where}.{key}: {len(value):,} characters (limit {MAX_PIECE:,})")
            if key in ("content", "replacement"):
                out = max(out, len(value))
        elif isinstance(value, dict) and key == "pattern":
            for k2, v2 in value.items():
                if isinstance(v2, str) and len(v2) > MAX_PIECE:
                    raise TooLarge(f"{where}.pattern.{k2}: {len(v2):,} characters (limit {MAX_PIECE:,})")
    return out


def _charsmap_growth(value: Any, where: str) -> int:
    """The longest string a `Precompiled` map normalizes a character to (its pool's)."""
    if not isinstance(value, str):
        return 1
    if len(value) > MAX_CHARSMAP:
        raise TooLarge(f"{where}: {len(value):,} characters (limit {MAX_CHARSMAP:,})")
    try:
        blob = base64.b64decode(value, validate=False)
    except (binascii.Error, ValueError):
        return 1  # the library refuses it
    if len(blob) < 4:
        return 1
    trie = int.from_bytes(blob[:4], "little")
    pool = blob[4 + trie :]
    return max((len(s) for s in pool.split(b"\0")), default=1)
