"""Run settings: command-line options merged over `[tool.patchaudit]`.

`Settings` is what the runner reads.  `load_pyproject` finds the nearest
pyproject.toml with a `[tool.patchaudit]` table (walking up from the paths
checked) and validates it: unknown keys and bad values raise `ConfigError`
naming the file and the key (exit code 2).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[no-redef]


class ConfigError(Exception):
    pass


@dataclass
class EngineSpec:
    name: str
    source: str
    strip: int | None = None


@dataclass
class Settings:
    select: list[str] | None = None
    ignore: list[str] = field(default_factory=list)
    extend_select: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    exclude: list[str] = field(default_factory=list)
    engines: list[EngineSpec] = field(default_factory=list)
    rule_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    tokenizer: str | None = None
    jobs: int | None = None
    cache: bool = True
    cache_dir: str | None = None
    config_path: str | None = None
    #: engine package names whose attributes count as monkey-patch targets
    engine_packages: list[str] = field(default_factory=lambda: ["sglang", "vllm", "megatron"])
    max_file_size: int = 64 * 1024 * 1024
    max_nesting: int = 200

    def options_for(self, code: str) -> dict[str, Any]:
        return self.rule_options.get(code, {})


_KEYS = {
    "select", "ignore", "extend-select", "per-file-ignores", "exclude", "engines", "rules",
    "tokenizer", "jobs", "cache", "cache-dir", "engine-packages", "max-file-size", "max-nesting",
}


def find_pyproject(paths: list[str]) -> Path | None:
    starts = [Path(p).resolve() for p in paths] or [Path.cwd()]
    for start in starts:
        cur = start if start.is_dir() else start.parent
        while True:
            cand = cur / "pyproject.toml"
            if cand.is_file():
                try:
                    data = tomllib.loads(cand.read_text(encoding="utf-8"))
                except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                    raise ConfigError(f"{cand}: cannot read: {exc}") from exc
                if "patchaudit" in data.get("tool", {}):
                    return cand
            if cur.parent == cur:
                break
            cur = cur.parent
    return None


def _str_list(path: Path, key: str, value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: [tool.patchaudit] {key}: expected a list of strings, got {value!r}")
    return list(value)


def load_pyproject(path: Path) -> Settings:
    try:
        doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    data = doc.get("tool", {}).get("patchaudit") if isinstance(doc.get("tool"), dict) else None
    if data is None:
        raise ConfigError(f"{path}: no [tool.patchaudit] table")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: [tool.patchaudit] must be a table")
    s = Settings(config_path=str(path))
    for key, value in data.items():
        if key not in _KEYS:
            raise ConfigError(f"{path}: [tool.patchaudit] unknown key {key!r} "
                              f"(known: {', '.join(sorted(_KEYS))})")
        if key == "select":
            s.select = _str_list(path, key, value)
        elif key == "ignore":
            s.ignore = _str_list(path, key, value)
        elif key == "extend-select":
            s.extend_select = _str_list(path, key, value)
        elif key == "exclude":
            s.exclude = _str_list(path, key, value)
        elif key == "engine-packages":
            s.engine_packages = _str_list(path, key, value)
        elif key == "per-file-ignores":
            if not isinstance(value, dict):
                raise ConfigError(f"{path}: [tool.patchaudit] per-file-ignores: expected a table of glob = [codes]")
            s.per_file_ignores = {g: _str_list(path, f"per-file-ignores.{g}", v) for g, v in value.items()}
        elif key == "engines":
            if not isinstance(value, dict):
                raise ConfigError(f"{path}: [tool.patchaudit] engines: expected a table of name = source")
            for name, spec in value.items():
                if isinstance(spec, str):
                    s.engines.append(EngineSpec(name, _resolve(path, spec)))
                elif isinstance(spec, dict):
                    extra = set(spec) - {"source", "strip"}
                    if extra or "source" not in spec:
                        raise ConfigError(f"{path}: [tool.patchaudit] engines.{name}: expected keys "
                                          f"'source' and optional 'strip', got {sorted(spec)}")
                    strip = spec.get("strip")
                    if strip is not None and (not isinstance(strip, int) or strip < 0):
                        raise ConfigError(f"{path}: [tool.patchaudit] engines.{name}.strip: expected a "
                                          f"non-negative integer, got {strip!r}")
                    s.engines.append(EngineSpec(name, _resolve(path, spec["source"]), strip))
                else:
                    raise ConfigError(f"{path}: [tool.patchaudit] engines.{name}: expected a string or a table")
        elif key == "rules":
            if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
                raise ConfigError(f"{path}: [tool.patchaudit] rules: expected tables [tool.patchaudit.rules.CODE]")
            s.rule_options = {k.upper(): dict(v) for k, v in value.items()}
        elif key == "tokenizer":
            if not isinstance(value, str):
                raise ConfigError(f"{path}: [tool.patchaudit] tokenizer: expected a path string")
            s.tokenizer = _resolve(path, value)
        elif key == "jobs":
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{path}: [tool.patchaudit] jobs: expected a positive integer, got {value!r}")
            s.jobs = value
        elif key == "cache":
            if not isinstance(value, bool):
                raise ConfigError(f"{path}: [tool.patchaudit] cache: expected true or false, got {value!r}")
            s.cache = value
        elif key == "cache-dir":
            if not isinstance(value, str):
                raise ConfigError(f"{path}: [tool.patchaudit] cache-dir: expected a path string")
            s.cache_dir = _resolve(path, value)
        elif key in ("max-file-size", "max-nesting"):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{path}: [tool.patchaudit] {key}: expected a positive integer, got {value!r}")
            setattr(s, key.replace("-", "_"), value)
    _check_rules(path, s)
    return s


def _rule_catalogue(s: Settings):
    """(rule codes, code -> rule class), without importing the rule pack (and
    libcst) when the libcst-free rule index is there: a pre-commit run that
    parses nothing must not pay for it."""
    try:
        from patchaudit import __version__
        from patchaudit.cache import cache_root
        from patchaudit.rule_index import rule_index
    except ImportError:  # pragma: no cover - the index is an optimisation
        from patchaudit.rule import all_rules

        rules = all_rules()
        return list(rules), rules.__getitem__
    root = cache_root(s) if s.cache else None
    index = rule_index(str(root / __version__) if root is not None else None)
    return list(index), lambda code: index[code].load()


def _check_rules(path: Path, s: Settings) -> None:
    """Rule codes, exclude globs and per-rule options name things that exist."""
    rules, load = _rule_catalogue(s)

    def codes(key: str, values: list[str]) -> None:
        for c in values:
            cu = c.strip().upper()
            if cu != "ALL" and (not cu or not any(code.startswith(cu) for code in rules)):
                raise ConfigError(f"{path}: [tool.patchaudit] {key}: unknown rule code or prefix {c!r} "
                                  f"(see `patchaudit rules`)")

    codes("select", s.select or [])
    codes("ignore", s.ignore)
    codes("extend-select", s.extend_select)
    for glob, values in s.per_file_ignores.items():
        codes(f"per-file-ignores.{glob!r}", values)
    if s.exclude:
        from patchaudit.inputs.discover import _spec_from_lines

        for pattern in s.exclude:
            try:
                _spec_from_lines([pattern])
            except Exception as exc:
                raise ConfigError(f"{path}: [tool.patchaudit] exclude: bad pattern {pattern!r}: {exc}") from None
    for code, opts in s.rule_options.items():
        if code not in rules:
            raise ConfigError(f"{path}: [tool.patchaudit.rules.{code}]: unknown rule code {code!r}")
        rule = load(code)
        for name, value in opts.items():
            if name not in rule.options:
                known = ", ".join(sorted(rule.options)) or "none"
                raise ConfigError(f"{path}: [tool.patchaudit.rules.{code}] {name}: unknown option "
                                  f"(options of {code}: {known})")
            default = rule.options[name]
            if default is not None and not _same_type(value, default):
                raise ConfigError(f"{path}: [tool.patchaudit.rules.{code}] {name}: expected "
                                  f"{type(default).__name__}, got {value!r}")


def _same_type(value: Any, default: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    return isinstance(value, type(default))


def _resolve(config: Path, value: str) -> str:
    """Relative engine/tokenizer paths are relative to the pyproject.toml."""
    base, sep, rev = value.rpartition("@") if ("@" in value and not os.path.exists(value)) else (value, "", "")
    if base and not os.path.isabs(base) and not base.startswith("-"):
        base = str((config.parent / base))
    return base + (sep + rev if sep else "")
