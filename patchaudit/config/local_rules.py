"""Local rules: `[tool.patchaudit] extend-rules = ["tools/patchaudit_rules"]`.

A repository's own conventions (its TITO helpers, its engine patch layout) as
rules of the same shape as the built-in ones (patchaudit/lint/rule.py: a
`Rule` subclass with a code, docs and VALID/INVALID examples), kept in the
repository and loaded with the run's configuration, as Fixit's local rules are.

This is the one place patchaudit imports code of the checked tree
(SECURITY.md).  It happens only

- when the run's one configuration (the `pyproject.toml` given with
  `--config`, or else the one found for the run by walking up from the paths)
  has `extend-rules`: a `pyproject.toml` elsewhere in the scanned tree is
  never read, so it never loads anything;
- from inside that configuration's folder: an entry is a folder of rule
  modules (every `*.py` not starting with `_`, like the built-in pack, with
  relative imports between them) or one `.py` file, relative to the
  `pyproject.toml`, and one that resolves outside its folder (`..`, an
  absolute path, a symlink out) is an error, and so is a folder any member of
  which (at any depth: a helper, `__init__.py`, a subpackage) is a symlink out;
- by the commands that run rules (`check`, `bump`, `rules`, `explain`,
  `test-rules`): `plan`, `tokens` and `inventory` read the configuration with
  `load_pyproject(..., local_rules=False)` and import nothing.

A local rule's code must not be a built-in one, nor defined twice.  The loaded
rules are the process's `LOCAL` (replaced by each configuration loaded), which
`registry.all_rules` and `registry.rule_index` add to the pack; `stamp` (a
digest of their sources) is part of the result cache's key, so editing a local
rule re-checks the files it ran on.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: code -> rule class of the local rules of the run's configuration
LOCAL: dict[str, Any] = {}
#: the package every local rule module is imported under
PACKAGE = "patchaudit_local_rules"
_CODE = re.compile(r"[A-Z]+[0-9]+")


class LocalRuleError(Exception):
    """A local rule that cannot be loaded: the message names the configuration file and key."""


@dataclass(frozen=True)
class Loaded:
    codes: tuple[str, ...]
    stamp: str  # digest of the rule sources, for the result cache's key


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except (ValueError, OSError, RuntimeError):
        return False
    return True


#: entries of a rule folder looked at (files and folders, all levels) before it is refused
MAX_MEMBERS = 10_000


def _members_inside(entry: Path, root: Path, where: str, raw: str) -> None:
    """LocalRuleError unless every member of the folder `entry` (a module, `__init__.py`,
    a helper imported relatively, a subpackage, at any depth) stays inside `root`: a
    member that is a symlink out (`_helpers.py -> ~/elsewhere.py`) would be imported
    from outside the configuration's folder.  Links are not followed by the walk."""
    seen = 0
    for folder, dirs, files in os.walk(entry, followlinks=False):
        for name in dirs + files:
            seen += 1
            if seen > MAX_MEMBERS:
                raise LocalRuleError(f"{where}: {raw!r} holds more than {MAX_MEMBERS} entries: not loaded")
            member = Path(folder) / name
            if member.is_symlink() and not _inside(member, root):
                shown = os.path.relpath(member, root)
                raise LocalRuleError(
                    f"{where}: {raw!r}: {shown} is a symlink out of the folder of the configuration: not loaded"
                )


def _sources(entry: Path) -> list[Path]:
    if entry.is_dir():
        return sorted(p for p in entry.iterdir() if p.suffix == ".py" and p.is_file())
    return [entry]


def _stamp(files: list[Path]) -> str:
    from patchaudit.files.reader import read_bytes

    h = hashlib.sha256()
    for p in files:
        h.update(os.fsencode(str(p)) + b"\0" + read_bytes(str(p)) + b"\0")
    return h.hexdigest()[:32]


def _package(name: str, folder: Path | None) -> types.ModuleType:
    """A package module `name` searched in `folder` (None: the empty top package)."""
    if name in sys.modules:
        return sys.modules[name]
    init = folder / "__init__.py" if folder is not None else None
    if init is not None and init.is_file():
        spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(folder)])
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    module = types.ModuleType(name)
    module.__path__ = [str(folder)] if folder is not None else []
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
    module.__spec__.submodule_search_locations = list(module.__path__)
    sys.modules[name] = module
    return module


def _modules(entry: Path, slug: str) -> list[types.ModuleType]:
    """Import the rule modules of one entry (a folder or a file)."""
    _package(PACKAGE, None)
    if entry.is_dir():
        pkg = f"{PACKAGE}.{slug}"
        _package(pkg, entry)
        names = [p.stem for p in _sources(entry) if not p.name.startswith("_")]
        return [importlib.import_module(f"{pkg}.{n}") for n in names]
    name = f"{PACKAGE}.{slug}"
    if name in sys.modules:
        return [sys.modules[name]]
    spec = importlib.util.spec_from_file_location(name, entry)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return [module]


def _slug(entry: Path, root: Path) -> str:
    rel = os.path.relpath(entry, root)
    digest = hashlib.sha256(os.fsencode(str(entry.resolve()))).hexdigest()[:8]
    return re.sub(r"\W", "_", Path(rel).with_suffix("").as_posix()) + "_" + digest


def rules_of(entry: Path, root: Path, where: str) -> dict[str, Any]:
    """The rule classes of one entry, by code (LocalRuleError naming `where` if it cannot be loaded)."""
    from patchaudit.lint.rule import is_rule_class

    try:
        modules = _modules(entry, _slug(entry, root))
    except Exception as exc:  # the repository's own code: any error is its error, exit 2
        raise LocalRuleError(f"{where}: {entry}: cannot import: {exc!r}") from None
    found: dict[str, Any] = {}
    for module in modules:
        for obj in vars(module).values():
            if is_rule_class(obj, module.__name__):
                if not _CODE.fullmatch(obj.code) or not obj.name:
                    raise LocalRuleError(
                        f"{where}: {module.__name__}.{obj.__name__}: a rule needs a code of capital letters "
                        f"and digits (ACME101) and a name, got {obj.code!r}, {obj.name!r}"
                    )
                if obj.code in found:
                    raise LocalRuleError(f"{where}: rule code {obj.code} defined twice in {entry}")
                found[obj.code] = obj
    return found


def load(entries: list[str], config: Path, builtin: set[str], *, confine: bool = True, where: str = "") -> Loaded:
    """Load the local rules of `entries` (paths relative to the `config` file's folder) as
    the run's `LOCAL`; LocalRuleError naming the file and key for anything wrong.
    `confine=False` (paths the user typed: `patchaudit test-rules PATHS`, relative to
    the folder `config` names) lets an entry lie anywhere."""
    root = config if not confine and config.is_dir() else config.parent
    where = where or f"{config}: [tool.patchaudit] extend-rules"
    found: dict[str, Any] = {}
    files: list[Path] = []
    for raw in entries:
        entry = Path(raw) if os.path.isabs(raw) else root / raw
        if not os.path.lexists(entry):
            raise LocalRuleError(f"{where}: {raw!r} does not exist (relative to {root})")
        if confine and not _inside(entry, root):
            raise LocalRuleError(f"{where}: {raw!r} is outside the folder of {config.name}: not loaded")
        if not entry.is_dir() and entry.suffix != ".py":
            raise LocalRuleError(f"{where}: {raw!r} is neither a folder of rule modules nor a .py file")
        if confine and entry.is_dir():
            _members_inside(entry, root, where, raw)
        for code, rule in rules_of(entry, root, where).items():
            if code in builtin or code in found:
                raise LocalRuleError(f"{where}: rule code {code} of {raw!r} is already defined")
            found[code] = rule
        files += _sources(entry)
    activate(found)
    return Loaded(tuple(sorted(found)), _stamp(files) if files else "")


def activate(rules: dict[str, Any]) -> None:
    """Make `rules` the run's local rules (an empty dict: none)."""
    LOCAL.clear()
    LOCAL.update(rules)
