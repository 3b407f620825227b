"""Run settings: command-line options merged over the configuration file.

`Settings` is what the runner reads.  `find_pyproject` finds the nearest
configuration at or above the run's project root (`project_root`: never a nested one the
paths happen to name): in each folder, as ruff, `.patchaudit.toml`, then `patchaudit.toml` (the
keys at the top level; found even when empty; a file holding only a `[tool...]` table is read
as a pyproject.toml, so `--config ci.toml` with `[tool.patchaudit]` keeps working), then a
pyproject.toml with a `[tool.patchaudit]` table; `load_pyproject` reads one and validates it:
unknown keys and bad values raise `ConfigError` naming the file and the key (exit code 2).

The configuration of a checked tree is the pull request's: it cannot raise the
safety limits past hard caps.  `max-nesting` above `HARD_MAX_NESTING` (libcst's
native parser crashes at about 1,300 nested brackets), `max-file-size` above
`HARD_MAX_FILE_SIZE` are errors naming the file, key and line
(`Settings.problems`: exit code 2), and the scan goes on with the default;
`jobs` is clamped to the machine's CPUs.  pyproject.toml is read through `patchaudit.files.reader`
(a regular file of at most `MAX_CONFIG_FILE` bytes), and TOML nested too
deeply for the parser is an error, not a traceback.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patchaudit.config.discovery import (  # noqa: F401  (re-exported: the settings' callers find them here)
    CONFIG_NAMES,
    MAX_CONFIG_FILE,
    ROOT_MARKERS,
    ConfigError,
    find_pyproject,
    own_config,
    project_root,
    read_toml,
)

#: libcst's native parser crashes the process (SIGSEGV) at about 1,300 nested brackets
#: (patchaudit/units/nesting.py): a configuration cannot ask for more than this
HARD_MAX_NESTING = 1000
#: the largest `max-file-size` a configuration may set (2**63-1 must not reach read())
HARD_MAX_FILE_SIZE = 256 * 1024 * 1024


def _cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@dataclass
class EngineSpec:
    name: str
    source: str
    strip: int | None = None
    #: where a run found it when no flag named it ("engine-dirs", "installed", "cache",
    #: "downloaded": engine/resolve.py); "" for an engine given
    origin: str = field(default="", compare=False)


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
    #: the whole-repository pre-pass of the dataflow rules (pipeline/repo_index.py); false:
    #: each module on its own, as before it (faster, blind to flows across modules)
    whole_repository: bool = True
    cache_dir: str | None = None
    #: (pyproject.toml, line, value) when `cache_dir` comes from a configuration found in
    #: the checked tree: it must stay inside that file's folder (None: the user's choice)
    cache_dir_origin: tuple[str, int | None, str] | None = None
    #: why the cache was not used (FileError: file, key, line), reported by `check`
    cache_errors: list = field(default_factory=list)
    #: values of the configuration refused with the default used instead (FileError: file,
    #: key, line): a limit above its hard cap, an exclude pattern unsafe without re2
    problems: list = field(default_factory=list)
    config_path: str | None = None
    #: `[tool.patchaudit.engines.NAME] patches = [...]` (config/bindings.py Binding)
    engine_bindings: list = field(default_factory=list)
    #: exact mode, per patch (absolute path): the plan's word (pipeline/plan.py `scope`):
    #: ("engine", NAME, Applier) or ("skip", why); set by run_check when engines are given
    patch_scope: dict = field(default_factory=dict)
    #: the whole-repository pre-pass's view per repository rule (`{"PA102": RepoView}`), set
    #: for the run by pipeline/repo_index.py `prepare_repo`; not part of the cache's run key
    #: (each file's key covers what it sees of the view: pipeline/parallel.py `_repo_key`)
    repo: dict = field(default_factory=dict)
    #: engine package names whose attributes count as monkey-patch targets
    engine_packages: list[str] = field(default_factory=lambda: ["sglang", "vllm", "megatron"])
    max_file_size: int = 64 * 1024 * 1024
    max_nesting: int = 200
    #: Python texts larger than this are never handed to libcst or ast (patchaudit/inputs/pyast.py)
    max_parse_size: int = 2 * 1024 * 1024
    #: `jobs` comes from the command line: the scheduler may start more workers than CPUs
    #: (up to 4 per CPU); otherwise it never does (patchaudit/pipeline/parallel.py)
    jobs_forced: bool = False
    #: the folder the run's paths belong to (`project_root`): `--fix` writes only below it,
    #: through no symlink (pipeline/fix.py); None: each fixed file's own folder
    project_root: str | None = None
    #: `extend-rules`: local rule folders or files (absolute), loaded from the run's
    #: configuration only (patchaudit/config/local_rules.py)
    extend_rules: list[str] = field(default_factory=list)
    #: the local rules' codes and a digest of their sources (part of the result cache's key)
    local_rules: tuple[str, ...] = ()
    local_rules_stamp: str = ""
    #: `fixable` / `unfixable` (ruff's): the rules whose fixes `--fix` applies (None: all)
    fixable: list[str] | None = None
    unfixable: list[str] = field(default_factory=list)
    #: `engine-dirs` (absolute) and `--engine-dir`: folders of wheels, sdists and git clones
    #: where an engine the plan names by version is looked for first (engine/resolve.py)
    engine_dirs: list[str] = field(default_factory=list)
    #: `offline = true`, `--offline`, `PATCHAUDIT_OFFLINE=1`: never download an engine
    offline: bool = False

    def options_for(self, code: str) -> dict[str, Any]:
        return self.rule_options.get(code, {})


_KEYS = {
    "select",
    "ignore",
    "extend-select",
    "per-file-ignores",
    "exclude",
    "engines",
    "rules",
    "tokenizer",
    "jobs",
    "cache",
    "whole-repository",
    "cache-dir",
    "engine-packages",
    "max-file-size",
    "max-nesting",
    "max-parse-size",
    "extend-rules",
    "fixable",
    "unfixable",
    "engine-dirs",
    "offline",
}


def _str_list(path: Path, key: str, value: Any) -> list[str]:
    """A list of strings; a bare string is an error too (`select = "PA102"` is not
    `select = ["PA102"]`: ruff refuses it the same way), naming the file, key and line."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        line = _key_line(path, key.split(".")[0])
        where = f"{path}:{line}" if line else str(path)
        hint = f" (write {key} = [{value!r}])" if isinstance(value, str) else ""
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        raise ConfigError(
            f"{where}: [tool.patchaudit] {key}: expected a list of strings, got {type(value).__name__} {shown}{hint}"
        )
    return list(value)


def _set_engines(s: Settings, path: Path, value: Any) -> None:
    """`engines = {name = source | {source, strip}}`: appended to `s.engines`."""
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: [tool.patchaudit] engines: expected a table of name = source")
    for name, spec in value.items():
        if isinstance(spec, str):
            s.engines.append(EngineSpec(name, _resolve(path, spec)))
        elif isinstance(spec, dict):
            extra = set(spec) - {"source", "strip", "patches"}
            if extra or ("source" not in spec and "patches" not in spec):
                raise ConfigError(
                    f"{path}: [tool.patchaudit] engines.{name}: expected keys "
                    f"'source', optional 'strip' and 'patches', got {sorted(spec)}"
                )
            if "patches" in spec:  # a binding of patch globs to this engine (config/bindings.py)
                from patchaudit.config.bindings import parse_binding

                try:
                    s.engine_bindings.append(
                        parse_binding(path, name, spec["patches"], _key_line(path, f"engines.{name}.patches"))
                    )
                except ValueError as exc:
                    raise ConfigError(str(exc)) from None
                if "source" not in spec:
                    continue
            if not isinstance(spec["source"], str):
                raise ConfigError(
                    f"{path}: [tool.patchaudit] engines.{name}.source: expected a path string, got {spec['source']!r}"
                )
            strip = spec.get("strip")
            if strip is not None and (not isinstance(strip, int) or isinstance(strip, bool) or strip < 0):
                raise ConfigError(
                    f"{path}: [tool.patchaudit] engines.{name}.strip: expected a non-negative integer, got {strip!r}"
                )
            s.engines.append(EngineSpec(name, _resolve(path, spec["source"]), strip))
        else:
            raise ConfigError(f"{path}: [tool.patchaudit] engines.{name}: expected a string or a table")


def _set_limit(s: Settings, path: Path, key: str, value: Any) -> None:
    """`max-file-size`, `max-nesting`, `max-parse-size`: a positive integer, at most the hard limit."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{path}: [tool.patchaudit] {key}: expected a positive integer, got {value!r}")
    attr = key.replace("-", "_")
    cap, why = (
        (HARD_MAX_NESTING, "deeper Python crashes libcst's native parser")
        if key == "max-nesting"
        else (HARD_MAX_FILE_SIZE, "the largest a configuration may set")
    )
    if key == "max-parse-size":
        from patchaudit.inputs.pyast import HARD_MAX_PARSE_SIZE

        cap, why = HARD_MAX_PARSE_SIZE, "libcst needs about 600 bytes of memory per byte it parses"
    if value > cap:  # a safety limit the checked tree cannot raise
        shown = str(value) if len(str(value)) <= 30 else f"{str(value)[:27]}..."
        _refuse(
            s,
            path,
            key,
            f"[tool.patchaudit] {key} = {shown} is above the hard limit of {cap} "
            f"({why}): using the default, {getattr(s, attr)}",
        )
    else:
        setattr(s, attr, value)


def load_pyproject(path: Path | str, local_rules: bool = True) -> Settings:
    """The settings of a configuration file: a pyproject.toml's `[tool.patchaudit]`, or
    the top level of any other file (`patchaudit.toml`, `.patchaudit.toml`); its
    `extend-rules` are imported (the run's local rules) unless `local_rules` is false (a
    command that runs no rule)."""
    path = Path(path)
    if not own_config(path):
        return _load(path, None, local_rules)
    doc = read_toml(path)
    if set(doc) == {"tool"}:  # `--config ci.toml` holding a `[tool.patchaudit]` table, as before
        return _load(path, None, local_rules)
    try:
        s = _load(path, doc, local_rules)
    except ConfigError as exc:  # the messages name the table of a pyproject.toml: not ours
        raise ConfigError(str(exc).replace("[tool.patchaudit] ", "")) from None
    s.problems = [type(p)(p.path, p.message.replace("[tool.patchaudit] ", ""), p.line) for p in s.problems]
    return s


def _load(path: Path, data: Any, local_rules: bool = True) -> Settings:
    """`data`: the table to read (an own file's top level), or None for a pyproject.toml."""
    if data is None:
        doc = read_toml(path)
        data = doc.get("tool", {}).get("patchaudit") if isinstance(doc.get("tool"), dict) else None
        if data is None:
            raise ConfigError(f"{path}: no [tool.patchaudit] table")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: [tool.patchaudit] must be a table")
    s = Settings(config_path=str(path))
    for key, value in data.items():
        if key not in _KEYS:
            raise ConfigError(f"{path}: [tool.patchaudit] unknown key {key!r} (known: {', '.join(sorted(_KEYS))})")
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
            s.per_file_ignores = {g: _str_list(path, f"per-file-ignores.{g!r}", v) for g, v in value.items()}
        elif key == "engines":
            _set_engines(s, path, value)
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
            # a setting, not a fork bomb: the checked tree cannot make this machine start
            # more workers than it has CPUs (a `jobs = 4` written on a laptop still works
            # on a 2-core CI runner, with 2)
            s.jobs = min(value, _cpus())
        elif key == "cache":
            if not isinstance(value, bool):
                raise ConfigError(f"{path}: [tool.patchaudit] cache: expected true or false, got {value!r}")
            s.cache = value
        elif key == "whole-repository":
            if not isinstance(value, bool):
                raise ConfigError(f"{path}: [tool.patchaudit] whole-repository: expected true or false, got {value!r}")
            s.whole_repository = value
        elif key == "cache-dir":
            if not isinstance(value, str):
                raise ConfigError(f"{path}: [tool.patchaudit] cache-dir: expected a path string")
            # relative to the pyproject.toml (no `@REV` splitting: it is a folder);
            # kept inside its folder unless the user says the file is theirs (apply_cache_options)
            s.cache_dir = os.path.join(os.path.dirname(os.path.abspath(path)), value)
            s.cache_dir_origin = (str(path), _key_line(path, "cache-dir"), value)
        elif key in ("max-file-size", "max-nesting", "max-parse-size"):
            _set_limit(s, path, key, value)
        elif key == "extend-rules":
            s.extend_rules = _str_list(path, key, value)
        else:
            _set_fix_or_engine_key(s, path, key, value)
    if local_rules:
        _load_local_rules(path, s)
        _check_rules(path, s)
    else:
        _forget_local_rules()
    return s


def _set_fix_or_engine_key(s: Settings, path: Path, key: str, value: Any) -> None:
    """`fixable`, `unfixable` (ruff's), `engine-dirs` (relative to the configuration file's
    folder) and `offline`."""
    if key == "fixable":
        s.fixable = _str_list(path, key, value)
    elif key == "unfixable":
        s.unfixable = _str_list(path, key, value)
    elif key == "engine-dirs":
        folder = os.path.dirname(os.path.abspath(path))
        s.engine_dirs = [
            os.path.normpath(os.path.join(folder, os.path.expanduser(d))) for d in _str_list(path, key, value)
        ]
    elif key == "offline":
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: [tool.patchaudit] offline: expected true or false, got {value!r}")
        s.offline = value


def _load_local_rules(path: Path, s: Settings) -> None:
    """`extend-rules` of this, the run's configuration: imported here, and only here
    (patchaudit/config/local_rules.py, SECURITY.md); none when the key is absent."""
    from patchaudit.config import local_rules

    if not s.extend_rules:
        local_rules.activate({})
        return
    from patchaudit.config.registry import pack_index, user_cache_dir

    try:
        loaded = local_rules.load(s.extend_rules, path, set(pack_index(user_cache_dir())))
    except local_rules.LocalRuleError as exc:
        raise ConfigError(str(exc)) from None
    s.local_rules, s.local_rules_stamp = loaded.codes, loaded.stamp


def _forget_local_rules() -> None:
    from patchaudit.config import local_rules

    local_rules.activate({})


def _rule_catalogue(s: Settings):
    """(rule codes, code -> rule class), without importing the rule pack (and
    libcst) when the libcst-free rule index is there: a pre-commit run that
    parses nothing must not pay for it."""
    try:
        from patchaudit.config.registry import rule_index, user_cache_dir
    except ImportError:  # pragma: no cover - the index is an optimisation
        from patchaudit.config.registry import all_rules

        rules = all_rules()
        return list(rules), rules.__getitem__
    # the per-user copy only: the command line (--no-cache, --cache-dir) is not applied
    # yet, so nothing is written in the checked tree from here
    index = rule_index(user_cache_dir())
    return list(index), lambda code: index[code].load()


def _check_rules(path: Path, s: Settings) -> None:
    """Rule codes, exclude globs and per-rule options name things that exist."""
    rules, load = _rule_catalogue(s)

    def codes(key: str, values: list[str]) -> None:
        for c in values:
            cu = c.strip().upper()
            if cu != "ALL" and (not cu or not any(code.startswith(cu) for code in rules)):
                raise ConfigError(
                    f"{path}: [tool.patchaudit] {key}: unknown rule code or prefix {c!r} (see `patchaudit rules`)"
                )

    codes("select", s.select or [])
    codes("ignore", s.ignore)
    codes("extend-select", s.extend_select)
    for glob, values in s.per_file_ignores.items():
        codes(f"per-file-ignores.{glob!r}", values)
    if s.exclude:
        from patchaudit.inputs.discover import spec_from_lines

        kept = []
        for pattern in s.exclude:
            unsafe: list = []
            try:
                spec_from_lines([pattern], source=str(path), problems=unsafe)
            except Exception as exc:
                raise ConfigError(f"{path}: [tool.patchaudit] exclude: bad pattern {pattern!r}: {exc}") from None
            if unsafe:  # without re2: a pattern that would backtrack for ever is dropped
                _refuse(s, path, "exclude", f"[tool.patchaudit] exclude: {unsafe[0].message}")
            else:
                kept.append(pattern)
        s.exclude = kept
    for code, opts in s.rule_options.items():
        if code not in rules:
            raise ConfigError(f"{path}: [tool.patchaudit.rules.{code}]: unknown rule code {code!r}")
        rule = load(code)
        for name, value in opts.items():
            if name not in rule.options:
                known = ", ".join(sorted(rule.options)) or "none"
                raise ConfigError(
                    f"{path}: [tool.patchaudit.rules.{code}] {name}: unknown option (options of {code}: {known})"
                )
            default = rule.options[name]
            if default is not None and not _same_type(value, default):
                raise ConfigError(
                    f"{path}: [tool.patchaudit.rules.{code}] {name}: expected {type(default).__name__}, got {value!r}"
                )
            if name in getattr(rule, "regex_options", ()):
                _check_regex(path, code, name, value)


def _check_regex(path: Path, code: str, name: str, value: Any) -> None:
    """A rule option that is a regular expression runs under RE2 (linear time) or is refused."""
    from patchaudit.inputs.linear_regex import NotLinear, compile_linear

    for pattern in value if isinstance(value, list) else [value]:
        try:
            compile_linear(str(pattern))
        except NotLinear as exc:
            raise ConfigError(f"{path}: [tool.patchaudit.rules.{code}] {name}: {exc}") from None


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


def _refuse(s: Settings, path: Path, key: str, message: str) -> None:
    """A refused value of the configuration: an error naming the file, key and line."""
    from patchaudit.model.findings import FileError

    s.problems.append(FileError(str(path), message, _key_line(path, key)))


def _key_line(path: Path, key: str) -> int | None:
    """The line of `path` that sets `[tool.patchaudit] key` (for messages), or None."""
    import re

    from patchaudit.files.reader import read_text

    try:  # a second read of the file, through the guarded reader (bounded, regular files only)
        text = read_text(str(path), MAX_CONFIG_FILE)
    except OSError:  # ReadError too
        return None

    def dotted(s: str) -> str:
        return ".".join(p.strip().strip("\"'") for p in s.split("."))

    want, table = (key if own_config(path) else f"tool.patchaudit.{key}"), ""
    for n, line in enumerate(text.splitlines(), 1):
        header = re.match(r"\s*\[\[?([^\]]*)\]", line)
        if header:
            table = dotted(header.group(1))
            continue
        name, eq, _ = line.partition("=")
        if eq and dotted(f"{table}.{name}" if table else name) == want:
            return n
    return None


def _env_true(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def apply_cache_options(
    s: Settings, cache_dir: str | None = None, no_cache: bool = False, explicit_config: bool = False, environ=None
) -> Settings:
    """The user's own cache settings over the configuration's.

    - `--config FILE` given by the user: its `cache-dir` is the user's (may be anywhere);
      a `cache-dir` of a pyproject.toml found by discovery must stay inside its folder
      (checked by `patchaudit.pipeline.cache.cache_root`);
    - `PATCHAUDIT_CACHE_DIR`, then `--cache-dir` (relative to the current directory)
      replace it and may point anywhere;
    - `PATCHAUDIT_NO_CACHE=1` or `--no-cache` turn the cache off."""
    environ = os.environ if environ is None else environ
    if explicit_config:
        s.cache_dir_origin = None
    for chosen in (environ.get("PATCHAUDIT_CACHE_DIR"), cache_dir):
        if chosen:
            s.cache_dir = os.path.abspath(os.path.expanduser(chosen))
            s.cache_dir_origin = None
    if no_cache or _env_true(environ.get("PATCHAUDIT_NO_CACHE")):
        s.cache = False
    return s


def apply_engine_options(s: Settings, engine_dirs=(), offline: bool = False, environ=None) -> Settings:
    """`--engine-dir DIR` (repeatable, relative to the current folder: searched before the
    configuration's `engine-dirs`), and `--offline` or `PATCHAUDIT_OFFLINE=1` (no engine is
    ever downloaded: patchaudit/engine/resolve.py)."""
    environ = os.environ if environ is None else environ
    if engine_dirs:
        s.engine_dirs = [os.path.abspath(os.path.expanduser(d)) for d in engine_dirs] + s.engine_dirs
    if offline or _env_true(environ.get("PATCHAUDIT_OFFLINE")):
        s.offline = True
    return s
