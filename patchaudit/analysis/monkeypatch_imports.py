"""Version gates that live in the module importing a patch module.

A fork that supports several engine versions often picks its patch module in
the package's `__init__.py`:

```python
if sgl.__version__ == "0.5.2":
    from roll.third_party.sglang import v052_patch
elif sgl.__version__ in ["0.5.4.post2", "0.5.5.post3"]:
    from roll.third_party.sglang import v054_patch
```

The patches inside `v054_patch/engine.py` then only ever run on those
versions, whatever their own file says.  `import_gates` finds, for a module,
the `__init__.py` files of its enclosing packages (up to `LEVELS` up) that
import it (or the package holding it), and compiles the conditions around
those imports with the collector's machinery (one `Gate`: the `or` of every
place that imports it, each the `and` of its enclosing conditions).  An
unconditional import anywhere means no gate.

No I/O: the caller passes `read(path) -> text | None` (the guarded reader).
"""

from __future__ import annotations

import os
from typing import Callable, Iterable

import libcst as cst

from patchaudit.analysis.monkeypatch_collector import Collector
from patchaudit.analysis.monkeypatch_gates import Cond, Gate

#: how many enclosing packages are searched for the import
LEVELS = 3


class _ImportSites(Collector):
    """Records, for one `__init__.py`, the gates around each import of `name`."""

    def __init__(self, path: str, packages: Iterable[str], name: str):
        super().__init__(path, packages)
        self.name = name
        self.found: list[tuple[Gate, ...]] = []

    def _hit(self, dotted: str) -> bool:
        return self.name in dotted.split(".")

    def visit_Import(self, node) -> None:
        for alias in node.names:
            if self._hit(_dotted(alias.name)):
                self.found.append(tuple(self.gates))

    def visit_ImportFrom(self, node) -> None:
        module = _dotted(node.module) if node.module is not None else ""
        names = [] if isinstance(node.names, cst.ImportStar) else [_dotted(a.name) for a in node.names]
        if self._hit(module) or any(n == self.name for n in names):
            self.found.append(tuple(self.gates))

    def visit_Call(self, node) -> None:
        from patchaudit.inputs.cst import string_literal

        if {"importlib.import_module", "builtins.__import__"} & self.callee(node) and node.args:
            s = string_literal(node.args[0].value)
            if s and self._hit(s.lstrip(".")):
                self.found.append(tuple(self.gates))


def _dotted(node) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


def _conjunction(gates: tuple[Gate, ...]) -> Cond:
    parts = [g.cond if g.polarity else Cond("not", (g.cond,)) for g in gates]
    out = parts[0]
    for p in parts[1:]:
        out = Cond("and", (out, p))
    return out


_MEMO: dict[tuple, "Gate | None | bool"] = {}


def _gate_in(init_path: str, text: str, name: str, packages: tuple[str, ...]) -> Gate | None | bool:
    """The gate `init_path` puts on importing `name`: a Gate, False when it imports it
    unconditionally, None when it does not import it (or cannot be read)."""
    key = (init_path, hash(text), name, packages)
    if key not in _MEMO:
        if len(_MEMO) > 256:
            _MEMO.clear()
        _MEMO[key] = _compute_gate(init_path, text, name, packages)
    return _MEMO[key]


def _compute_gate(init_path: str, text: str, name: str, packages: tuple[str, ...]) -> Gate | None | bool:
    from libcst.metadata import MetadataWrapper

    try:
        module = cst.parse_module(text)
        visitor = _ImportSites(init_path, packages, name)
        MetadataWrapper(module, unsafe_skip_copy=True).visit(visitor)
    except (cst.ParserSyntaxError, RecursionError, ValueError):
        return None
    if not visitor.found:
        return None
    if any(not gates for gates in visitor.found):
        return False
    cond = _conjunction(visitor.found[0])
    texts = [" and ".join(g.describe() for g in visitor.found[0])]
    for gates in visitor.found[1:]:
        cond = Cond("or", (cond, _conjunction(gates)))
        texts.append(" and ".join(g.describe() for g in gates))
    where = " or ".join(dict.fromkeys(texts))
    return Gate(cond, True, f"{where} (the condition under which {init_path} imports `{name}`)")


def import_gates(
    path: str, packages: Iterable[str], read: Callable[[str], str | None], levels: int = LEVELS
) -> tuple[Gate, ...]:
    """The gates the enclosing packages' `__init__.py` put on importing the module at `path`."""
    packages = tuple(packages)
    out: list[Gate] = []
    here = os.path.normpath(path)
    name = os.path.splitext(os.path.basename(here))[0]
    directory = os.path.dirname(here)
    if name == "__init__":
        name, directory = os.path.basename(directory), os.path.dirname(directory)
    for _ in range(levels):
        init = os.path.join(directory, "__init__.py")
        text = read(init) if directory else None
        if text is None:
            break
        if init != here and any(p in text for p in packages):
            got = _gate_in(init, text, name, packages)
            if isinstance(got, Gate):
                out.append(got)
        name, directory = os.path.basename(directory), os.path.dirname(directory)
    return tuple(out)
