"""Recipes: how a repository's build applies its patches, read from its text.

A recipe is a Dockerfile, a shell script or a quilt `series` file.  `read_recipe(path,
kind, text)` walks it as the build would (without running anything) and returns the
steps that matter to patches:

- `PatchStep`: a patch applied (`git apply [--check] [--3way|-3] [-pN] [-R|--reverse]`,
  `git am`, `patch -pN [-F n] [-R] [--dry-run] < f` / `-i f` / `--input=f`,
  `git -C DIR apply`), with the directory it runs in and the tool's options;
- `SedStep`: `sed -i 's/A/B/[g]' FILE...`, an in-place edit of a file;
- `CopyStep`: a Dockerfile `COPY`/`ADD` from the build context;
- `CheckoutStep`: `git clone URL [DIR]`, `git checkout REV`, `git clone --branch REV`;
- `PinStep`: `pip install NAME==VERSION`, and the base images (`FROM image:tag`).

Variables are the recipe's own: Dockerfile `ARG` defaults and `ENV` values (build
arguments given on the command line are not known: the defaults are what the recipe
says), shell assignments and `export`s, `${VAR:-default}`, `for VAR in ...` loops.
`${VAR}`, `${VAR:-d}`, `${VAR-d}`, `${VAR:=d}` and `$VAR` are expanded outside single
quotes; `$(dirname "$0")`, `$(dirname "${BASH_SOURCE[0]}")` and `$(cd ... && pwd)`
around them are the script's folder, `$(pwd)` the current folder; any other command
substitution or unknown variable expands to `UNKNOWN`, so a path built from it matches
no file.  Each step remembers which variables its path used (`used`), so the plan can
tell that `docker/patch/${PATCH_VERSION}` selected one folder of several.

Paths are left as the recipe names them (absolute in the build's file system, a
container's or the host's); matching them to the repository's files is the plan's
(patchaudit/pipeline/plan.py).  Nothing here knows an engine beyond its name.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

from patchaudit.inputs.dockerfile import copy_args, instructions, run_script
from patchaudit.inputs.shellcmd import MAX_COMMAND, Branch, Loop, Simple, parse_script, words
from patchaudit.inputs.shellvars import MAX_EXPANDED, MAX_EXPANSIONS, MAX_RECIPE_TEXT, UNKNOWN, Budget, expand

#: loop items and steps one recipe may produce (a hostile recipe cannot make the plan unbounded)
MAX_STEPS = 10_000
#: commands one recipe's walk may visit (loop bodies count once per item)
MAX_WORK = 20_000
#: `if`/`for`/`while` nested deeper than this is not read
MAX_NESTING = 50


@dataclass
class PatchStep:
    recipe: str
    line: int
    tool: str  # "patch" | "git-apply" | "git-am" (patchaudit.patching.appliers)
    path: str  # the patch as the command names it, absolute
    cwd: str  # the folder the command runs in (git -C applied)
    options: dict = field(default_factory=dict)  # strip, fuzz, three_way, reverse, check_only
    used: dict = field(default_factory=dict)  # variables the path's expansion used
    from_glob: bool = False  # `path` is a glob (a `for f in dir/*.patch` loop)


@dataclass
class SedStep:
    recipe: str
    line: int
    script: str  # the sed script word(s) (`s/a/b/g`)
    files: list[str]  # absolute paths
    cwd: str
    in_place: bool = True
    extended: bool = False  # -E / -r


@dataclass
class CopyStep:
    recipe: str
    line: int
    sources: list[str]  # relative to the build context, expanded
    dest: str  # absolute (WORKDIR applied)
    used: dict = field(default_factory=dict)


@dataclass
class CheckoutStep:
    recipe: str
    line: int
    folder: str  # absolute
    rev: str | None = None
    url: str | None = None


@dataclass
class PinStep:
    recipe: str
    line: int
    package: str
    version: str
    image: bool = False  # a FROM line's image tag (`package` is the image name)


@dataclass
class Recipe:
    path: str
    kind: str  # dockerfile | shell | series
    steps: list = field(default_factory=list)
    env: dict = field(default_factory=dict)  # the variables at the end (shell) or per last stage
    problems: list = field(default_factory=list)  # (line, message): what was not understood
    work: int = 0  # commands walked (bounded by MAX_WORK: nested loops of long lists)
    budget: Budget = field(default_factory=lambda: Budget())


def _abs(cwd: str, p: str) -> str:
    return posixpath.normpath(p if p.startswith("/") else posixpath.join(cwd, p))


TOO_MUCH = f"more than {MAX_WORK:,} commands or {MAX_STEPS:,} steps: the rest of the recipe is not read"
TOO_LONG = (
    f"a variable's value would make a command longer than {MAX_EXPANDED:,} characters, or the recipe expands "
    f"more than {MAX_EXPANSIONS:,} variables (`A=$A$A`?): such a value is not known and names no file"
)
TOO_MUCH_TEXT = f"its commands expand to more than {MAX_RECIPE_TEXT:,} characters: the rest of the recipe is not read"
TOO_DEEP = f"`if`/`for`/`while` nested more than {MAX_NESTING} deep: what is inside is not read"
LONG_COMMAND = f"a command longer than {MAX_COMMAND:,} characters (after expansion): it is not read"
#: the problems a run reports as errors (the recipe's bounds: patchaudit/pipeline/plan.py)
BOUNDS = (TOO_MUCH, TOO_LONG, TOO_MUCH_TEXT, TOO_DEEP, LONG_COMMAND)


class _Walker:
    """Walks one shell text: its variables, its folder, the steps it produces."""

    def __init__(self, recipe: Recipe, env: dict, cwd: str, script_dir: str, persist_cd: bool = True):
        self.recipe = recipe
        self.env = env
        self.cwd = cwd
        self.script_dir = script_dir
        self.persist_cd = persist_cd
        self.origins: dict = {}  # per variable: the recipe variables its value was built from

    def problem(self, line: int, message: str) -> None:
        """Note `message` once per recipe."""
        if all(m != message for _, m in self.recipe.problems):
            self.recipe.problems.append((line, message))

    def run(self, stmts: list, depth: int = 0) -> None:
        if depth > MAX_NESTING:
            self.problem(getattr(stmts[0], "line", 0) if stmts else 0, TOO_DEEP)
            return
        for st in stmts:
            self.recipe.work += 1
            if len(self.recipe.steps) > MAX_STEPS or self.recipe.work > MAX_WORK:
                if not self.recipe.problems or self.recipe.problems[-1][1] != TOO_MUCH:
                    self.recipe.problems.append((getattr(st, "line", 0), TOO_MUCH))
                return
            if isinstance(st, Simple):
                self.simple(st.text, st.line)
                if len(self.recipe.steps) > MAX_STEPS:  # one command naming thousands of files
                    del self.recipe.steps[MAX_STEPS + 1 :]
            elif isinstance(st, Loop):
                self.loop(st, depth)
            elif isinstance(st, Branch):
                for arm in st.arms:
                    self.run(arm, depth + 1)

    def expand(self, text: str, line: int, used: dict | None = None) -> str:
        """`text` expanded in the walker's variables and folder, within the recipe's budget."""
        budget = self.recipe.budget
        was = budget.too_long
        budget.too_long = False
        out = expand(text, self.env, self.script_dir, self.cwd, used, self.origins, budget=budget)
        if budget.too_long:
            self.problem(line, TOO_LONG)
        budget.too_long = budget.too_long or was
        return out

    def words(self, text: str, line: int) -> list[str] | None:
        """The words of an expanded command; None (the problem noted) when it is not read."""
        budget = self.recipe.budget
        budget.text += len(text)
        if budget.text > MAX_RECIPE_TEXT:
            self.problem(line, TOO_MUCH_TEXT)
            self.recipe.work = MAX_WORK + 1  # the walk stops at the next command
            return None
        if len(text) > MAX_COMMAND:
            self.problem(line, LONG_COMMAND)
            return None
        got = words(text)
        if got is None:
            self.recipe.problems.append((line, "unclosed quote: the command is not read"))
        return got

    def loop(self, st: Loop, depth: int = 0) -> None:
        if not st.var:
            self.run(st.body, depth + 1)
            return
        used: dict = {}
        got = self.words(self.expand(st.items, st.line, used), st.line) or []
        self.recipe.work += len(got) // 10
        for item in got[:MAX_STEPS]:
            if self.recipe.work > MAX_WORK:
                break
            globbed = any(ch in item for ch in "*?[")
            self.env[st.var] = _abs(self.cwd, item) if globbed else item
            self.origins[st.var] = dict(used)
            before = len(self.recipe.steps)
            self.run(st.body, depth + 1)
            if globbed:
                for step in self.recipe.steps[before:]:
                    if isinstance(step, PatchStep):
                        step.from_glob = True
                        step.used.update(used)
        self.env.pop(st.var, None)

    def simple(self, text: str, line: int) -> None:
        used: dict = {}
        argv = self.words(self.expand(text, line, used), line)
        if argv is None:
            return
        # leading assignments: X=1 cmd, or X=1 alone (a shell variable)
        assigns = []
        while argv and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", argv[0]):
            assigns.append(argv.pop(0))
        if not argv:
            for a in assigns:
                k, _, v = a.partition("=")
                self.env[k] = v
                self.origins[k] = dict(used)
            return
        cmd = argv[0]
        if cmd in ("export", "declare", "local", "readonly"):
            for a in argv[1:]:
                if "=" in a and not a.startswith("-"):
                    k, _, v = a.partition("=")
                    self.env[k] = v
                    self.origins[k] = dict(used)
            return
        if cmd == "cd":
            target = next((a for a in argv[1:] if not a.startswith("-")), None)
            if target and UNKNOWN not in target:
                self.cwd = _abs(self.cwd, target)
            return
        if cmd in ("sudo", "time", "command", "exec", "nohup", "env"):
            argv = argv[1:]
            cmd = argv[0] if argv else ""
        if cmd == "git":
            self.git(argv, line, used)
        elif cmd == "patch":
            self.patch(argv, line, used)
        elif cmd == "sed":
            self.sed(argv, line)
        elif cmd in ("pip", "pip3", "uv") or (cmd.startswith("python") and argv[1:3] == ["-m", "pip"]):
            self.pip(argv, line)

    def git(self, argv: list[str], line: int, used: dict) -> None:
        cwd = self.cwd
        k = 1
        while k < len(argv) and argv[k].startswith("-"):
            if argv[k] == "-C" and k + 1 < len(argv):
                cwd = _abs(cwd, argv[k + 1])
                k += 2
                continue
            k += 2 if argv[k] == "-c" else 1
        sub, rest = (argv[k], argv[k + 1 :]) if k < len(argv) else ("", [])
        if sub in ("apply", "am"):
            opts: dict = {}
            files = []
            for a in rest:
                if a in ("--check",):
                    opts["check_only"] = True
                elif a in ("--3way", "-3"):
                    opts["three_way"] = True
                elif a in ("-R", "--reverse"):
                    opts["reverse"] = True
                elif re.fullmatch(r"-p\d+", a):
                    opts["strip"] = int(a[2:])
                elif a.startswith("--directory=") or a.startswith("-"):
                    continue
                elif a in ("<", ">"):
                    continue
                else:
                    files.append(a)
            for f in files:
                if UNKNOWN in f:
                    continue
                tool = "git-am" if sub == "am" else "git-apply"
                self.recipe.steps.append(PatchStep(self.recipe.path, line, tool, _abs(cwd, f), cwd, opts, dict(used)))
        elif sub == "clone":
            pos = [a for a in rest if not a.startswith("-")]
            branch = None
            for j, a in enumerate(rest):
                if a in ("--branch", "-b") and j + 1 < len(rest):
                    branch = rest[j + 1]
                    if branch in pos:
                        pos.remove(branch)
            if pos:
                url = pos[0]
                folder = pos[1] if len(pos) > 1 else posixpath.basename(url.rstrip("/")).removesuffix(".git")
                self.recipe.steps.append(CheckoutStep(self.recipe.path, line, _abs(cwd, folder), branch, url))
        elif sub == "checkout":
            pos = [a for a in rest if not a.startswith("-")]
            if pos and pos[0] != "--" and UNKNOWN not in pos[0]:
                self.recipe.steps.append(CheckoutStep(self.recipe.path, line, cwd, pos[0]))

    def patch(self, argv: list[str], line: int, used: dict) -> None:
        opts: dict = {}
        files: list[str] = []
        cwd = self.cwd
        k = 1
        while k < len(argv):
            a = argv[k]
            nxt = argv[k + 1] if k + 1 < len(argv) else None
            if a == "<" and nxt:
                files.append(nxt)
                k += 2
                continue
            if re.fullmatch(r"-p\d+", a):
                opts["strip"] = int(a[2:])
            elif a == "-p" and nxt and nxt.isdigit():
                opts["strip"] = int(nxt)
                k += 1
            elif re.fullmatch(r"-F\d+", a):
                opts["fuzz"] = int(a[2:])
            elif a in ("-F", "--fuzz") and nxt and nxt.isdigit():
                opts["fuzz"] = int(nxt)
                k += 1
            elif a.startswith("--fuzz="):
                opts["fuzz"] = int(a.split("=", 1)[1]) if a.split("=", 1)[1].isdigit() else None
            elif a in ("-R", "--reverse"):
                opts["reverse"] = True
            elif a == "--dry-run":
                opts["check_only"] = True
            elif a in ("-i", "--input") and nxt:
                files.append(nxt)
                k += 1
            elif a.startswith("--input="):
                files.append(a.split("=", 1)[1])
            elif a in ("-d", "--directory") and nxt:
                cwd = _abs(cwd, nxt)
                k += 1
            elif a.startswith("--directory="):
                cwd = _abs(cwd, a.split("=", 1)[1])
            k += 1
        for f in files:
            if UNKNOWN not in f:
                self.recipe.steps.append(
                    PatchStep(self.recipe.path, line, "patch", _abs(cwd, f), cwd, opts, dict(used))
                )

    def sed(self, argv: list[str], line: int) -> None:
        in_place = False
        extended = False
        scripts: list[str] = []
        files: list[str] = []
        k = 1
        while k < len(argv):
            a = argv[k]
            if a in ("-i", "--in-place") or a.startswith("-i") and not a.startswith("-i="):
                in_place = True
            elif a.startswith("--in-place="):
                in_place = True
            elif a in ("-E", "-r", "--regexp-extended"):
                extended = True
            elif a in ("-e", "--expression") and k + 1 < len(argv):
                scripts.append(argv[k + 1])
                k += 1
            elif a.startswith("-") and len(a) > 1:
                if "E" in a[1:] or "r" in a[1:]:
                    extended = True
                if "i" in a[1:]:
                    in_place = True
            elif not scripts:
                scripts.append(a)
            else:
                files.append(a)
            k += 1
        if not in_place or not files:
            return
        for s in scripts:
            self.recipe.steps.append(
                SedStep(
                    self.recipe.path,
                    line,
                    s,
                    # `~/x`: the shell's home folder, unknown here: kept as written
                    [f if UNKNOWN in f or f.startswith("~") else _abs(self.cwd, f) for f in files],
                    self.cwd,
                    True,
                    extended,
                )
            )

    def pip(self, argv: list[str], line: int) -> None:
        if "install" not in argv:
            return
        for a in argv[argv.index("install") + 1 :]:
            m = re.fullmatch(r"([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([A-Za-z0-9_.+\-!]+)", a)
            if m:
                self.recipe.steps.append(PinStep(self.recipe.path, line, m.group(1).lower(), m.group(2)))


def read_recipe(path: str, kind: str, text: str, folder: str | None = None) -> Recipe:
    """The steps of one recipe (`kind`: dockerfile, shell or series); never raises for bad
    input (what it cannot read is in `problems`).  `folder`: the recipe's folder as an
    absolute path (a script's `$(dirname "$0")`, a series file's patches)."""
    recipe = Recipe(path, kind)
    script_dir = folder or posixpath.dirname(path.replace("\\", "/")) or "."
    if kind == "dockerfile":
        _dockerfile(recipe, text)
    elif kind == "series":
        _series(recipe, text, script_dir)
    else:
        env: dict = {}
        walker = _Walker(recipe, env, script_dir, script_dir)
        walker.run(parse_script(text))
        recipe.env = env
    return recipe


def _series(recipe: Recipe, text: str, folder: str) -> None:
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        opts: dict = {}
        for o in parts[1:]:
            if re.fullmatch(r"-p\d+", o):
                opts["strip"] = int(o[2:])
            elif o in ("-R",):
                opts["reverse"] = True
        recipe.steps.append(
            PatchStep(recipe.path, n, "patch", posixpath.join(folder, parts[0]), folder, opts or {"strip": 1})
        )


def _dockerfile(recipe: Recipe, text: str) -> None:
    global_args: dict = {}
    env: dict = {}
    workdir = "/"
    in_stage = False
    for inst in instructions(text):
        kw, args, line = inst.keyword, inst.args, inst.line
        if kw == "ARG":
            for w in words(args.replace("\\\n", " ")) or []:
                name, eq, value = w.partition("=")
                target = env if in_stage else global_args
                if eq:
                    target[name] = expand(value, {**global_args, **env}, "/", workdir, budget=recipe.budget)
                elif name in global_args and in_stage:
                    env[name] = global_args[name]
                else:
                    target.setdefault(name, "")
        elif kw == "FROM":
            in_stage = True
            env = {}
            workdir = "/"
            image = expand(args.split()[0] if args.split() else "", global_args, "/", "/", budget=recipe.budget)
            name, _, tag = (
                image.partition("@")[0].rpartition(":") if ":" in image.rsplit("/", 1)[-1] else (image, "", "")
            )
            recipe.steps.append(PinStep(recipe.path, line, name, tag, image=True))
        elif kw == "ENV":
            got = words(args.replace("\\\n", " ")) or []
            if got and "=" not in got[0] and len(got) >= 2:
                env[got[0]] = expand(" ".join(got[1:]), env, "/", workdir, budget=recipe.budget)
            else:
                for w in got:
                    k, eq, v = w.partition("=")
                    if eq:
                        env[k] = expand(v, env, "/", workdir, budget=recipe.budget)
        elif kw == "WORKDIR":
            workdir = _abs(workdir, expand(args.strip(), env, "/", workdir, budget=recipe.budget))
        elif kw in ("COPY", "ADD"):
            copied = copy_args(inst)
            if copied is None:
                continue
            got = copied
            used: dict = {}
            srcs = [expand(s, env, "/", workdir, used, budget=recipe.budget) for s in got[:-1]]
            dest = _abs(workdir, expand(got[-1], env, "/", workdir, budget=recipe.budget))
            if got[-1].endswith("/") or len(srcs) > 1:
                dest += "/"
            recipe.steps.append(CopyStep(recipe.path, line, srcs, dest, used))
        elif kw == "RUN":
            walker = _Walker(recipe, dict(env), workdir, "/")
            body = run_script(inst)
            walker.run(parse_script(body, line))
    recipe.env = env
    if recipe.budget.too_long:
        recipe.problems.append((0, TOO_LONG))
