"""Values kept for one run by the text they were made from, bounded by the text's size.

What an earlier stage made of a Python text (the `ast` gate's facts, a libcst module)
and a later stage of the same run may use instead of parsing the text again: the
whole-repository pre-pass keeps them, the scan finds them by the text
(patchaudit/analysis/gate.py `_PINNED`, patchaudit/units `_HANDED`).  At most `limit`
characters of text are kept over the run (the first ones); a run starts and ends with
`clear`.
"""

from __future__ import annotations

from typing import Any

_ABSENT = object()


class TextMemo:
    __slots__ = ("_items", "_size")

    def __init__(self) -> None:
        self._items: dict[str, Any] = {}
        self._size = 0  # characters of text kept so far in this run (a `pop` gives none back)

    def keep(self, text: str, value: Any, limit: int) -> bool:
        """Keep `value` for `text` unless one is kept already or the run's `limit` (in
        characters of text) would be passed; whether it was kept."""
        if text in self._items or self._size + len(text) > limit:
            return False
        self._items[text] = value
        self._size += len(text)
        return True

    def room(self, text: str, limit: int) -> bool:
        """Whether `keep(text, ..., limit)` would keep a value (to spare making it)."""
        return text not in self._items and self._size + len(text) <= limit

    def __contains__(self, text: object) -> bool:
        return text in self._items

    def __getitem__(self, text: str) -> Any:
        return self._items[text]

    def __len__(self) -> int:
        return len(self._items)

    def pop(self, text: str, default: Any = None) -> Any:
        return self._items.pop(text, default)

    def clear(self) -> None:
        self._items.clear()
        self._size = 0
