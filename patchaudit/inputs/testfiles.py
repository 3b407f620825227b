"""Which files of a tree are tests (`tests/`, `test_*.py`, `*_test.py`, `conftest.py`)."""

from __future__ import annotations

import os
import re

_TEST_NAME_RE = re.compile(r"(^test_.*|.*_test|^conftest)\.py$")


def is_test_file(path: str) -> bool:
    parts = path.replace(os.sep, "/").split("/")
    return any(p in ("tests", "test", "testing") for p in parts[:-1]) or bool(_TEST_NAME_RE.match(parts[-1]))
