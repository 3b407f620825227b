"""The project's layer order and size limits, read from the source (no imports).

`docs/architecture.md` explains the layers; `tests/test_architecture.py` holds
the project to them.  Both read every import statement of `patchaudit/` and
`rules/`: at module level, inside functions, under `if TYPE_CHECKING:`, and
`importlib.import_module("a.literal")`.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: lowest first: a module may import its own layer and the layers before it
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("model", ("patchaudit.model",)),
    ("files", ("patchaudit.files",)),
    ("inputs", ("patchaudit.inputs",)),
    ("engine", ("patchaudit.engine",)),
    ("patching", ("patchaudit.patching",)),
    ("units", ("patchaudit.units",)),
    ("analysis", ("patchaudit.analysis",)),
    ("lint", ("patchaudit.lint",)),
    ("rules", ("patchaudit.rules",)),
    ("config", ("patchaudit.config",)),
    ("pipeline", ("patchaudit.pipeline",)),
    ("reporters", ("patchaudit.reporters",)),
    ("server", ("patchaudit.server",)),
    ("commands", ("patchaudit.commands",)),
    ("cli", ("patchaudit.cli", "patchaudit.__main__")),
    ("testing", ("patchaudit.testing",)),
]
#: the package root holds the version only: anyone may import it, it imports nothing
ROOT = "patchaudit"

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def module_files(repo: Path = REPO) -> dict[str, Path]:
    """Dotted module name -> file, for patchaudit/ and the rule pack (rules/ is patchaudit.rules)."""
    out: dict[str, Path] = {}
    for top, pkg in (("patchaudit", ["patchaudit"]), ("rules", ["patchaudit", "rules"])):
        for p in sorted((repo / top).rglob("*.py")):
            parts = pkg + list(p.relative_to(repo / top).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


def layer_of(module: str) -> int | None:
    """Index of the module's layer in LAYERS; None for the package root."""
    if module == ROOT:
        return None
    for i, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return i
    raise KeyError(f"{module}: in no layer of tests/architecture.py (add it to LAYERS and docs/architecture.md)")


@dataclasses.dataclass(frozen=True)
class Edge:
    importer: str
    imported: str
    line: int


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> list[Edge]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    edges: list[Edge] = []

    def add(name: str, line: int) -> None:
        target = _resolve(name, modules)
        if target is not None and target != module:
            edges.append(Edge(module, target, line))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "patchaudit":
                    add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            if base.split(".")[0] != "patchaudit":
                continue
            for alias in node.names:   # `from pkg import module` imports the module
                full = f"{base}.{alias.name}"
                add(full if full in modules else base, node.lineno)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str) and node.args[0].value.startswith("patchaudit"):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name == "import_module":
                add(node.args[0].value, node.lineno)
    return edges


def all_edges(repo: Path = REPO) -> list[Edge]:
    modules = module_files(repo)
    return [e for m, p in modules.items() for e in imports_of(m, p, modules)]


def layer_violations(edges: list[Edge]) -> list[str]:
    out = []
    for e in edges:
        if e.imported == ROOT:
            continue
        if e.importer == ROOT:
            out.append(f"{e.importer}:{e.line} imports {e.imported}: the package root imports nothing")
            continue
        a, b = layer_of(e.importer), layer_of(e.imported)
        assert a is not None and b is not None
        if b > a:
            out.append(f"{e.importer}:{e.line} ({LAYERS[a][0]}) imports {e.imported} ({LAYERS[b][0]}), "
                       f"a higher layer")
    return out


def cycles(edges: list[Edge]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.importer, set()).add(e.imported)
        graph.setdefault(e.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        comp.append(m)
                        if m == node:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def private_imports(repo: Path = REPO) -> list[str]:
    """Private names used across modules: `from patchaudit.x import _name` (not a module), and
    `mod._name` where `mod` is a patchaudit module bound by an import."""
    modules = module_files(repo)
    out = []
    for m, p in modules.items():
        tree = ast.parse(p.read_text(encoding="utf-8"))
        package = m if p.name == "__init__.py" else m.rpartition(".")[0]
        aliases: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - (node.level - 1)] + ([base] if base else []))
                if base.split(".")[0] != "patchaudit":
                    continue
                for alias in node.names:
                    if f"{base}.{alias.name}" in modules:
                        aliases.add(alias.asname or alias.name)
                    elif alias.name.startswith("_") and not alias.name.startswith("__"):
                        out.append(f"{m}:{node.lineno} imports the private name {alias.name} from {base}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "patchaudit" and alias.asname:
                        aliases.add(alias.asname)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases \
                    and node.attr.startswith("_") and not node.attr.startswith("__"):
                out.append(f"{m}:{node.lineno} uses the private name {node.value.id}.{node.attr}")
    return out


# ---------------------------------------------------------------------------
# the "may not" column of docs/architecture.md, beyond the import order

#: who may build a `Finding` or a `Report`: the model that defines them, the rule framework
#: and the rule pack (a rule reports), the driver (it maps reports to findings), the rule tests
BUILDERS = ("patchaudit.model", "patchaudit.lint", "patchaudit.rules", "patchaudit.pipeline", "patchaudit.testing")
#: a rule code as a literal: the codes are the rule pack's, named by it and by the docs
RULE_CODE = re.compile(r"\bPA[0-9]{3}\b")
#: modules of the standard library whose use is I/O
IO_MODULES = ("subprocess", "shutil", "socket", "urllib", "http", "tempfile", "io", "glob", "pathlib")
#: calls that are I/O: the builtin open and the os functions that touch the file system
IO_CALLS = {"open"} | {f"os.{n}" for n in (
    "open", "stat", "lstat", "listdir", "scandir", "walk", "remove", "unlink", "rename", "replace", "makedirs",
    "mkdir", "rmdir", "readlink", "symlink", "chmod", "system", "popen",
    "path.exists", "path.isfile", "path.isdir", "path.islink", "path.getsize", "path.getmtime", "path.realpath",
)}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings or other bare string statements."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            out.add(id(node.value))
    return out


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _in(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def finding_builders(repo: Path = REPO) -> list[str]:
    """`Finding(...)`/`Report(...)` built outside the rule pack, the rule framework and the driver."""
    out = []
    for m, p in module_files(repo).items():
        if _in(m, BUILDERS):
            continue
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and _dotted(node.func).rpartition(".")[2] in ("Finding", "Report"):
                name = _dotted(node.func).rpartition(".")[2]
                out.append(f"{m}:{node.lineno} builds a {name} (only rules/, lint and the driver may)")
    return out


def analysis_io(repo: Path = REPO) -> list[str]:
    """I/O in `patchaudit.analysis`: an import of `patchaudit.files` or of an I/O module of the
    standard library, or a call of `open`/an `os` file-system function."""
    out = []
    modules = module_files(repo)
    for e in all_edges(repo):
        if _in(e.importer, ("patchaudit.analysis",)) and _in(e.imported, ("patchaudit.files",)):
            out.append(f"{e.importer}:{e.line} imports {e.imported} (analysis does no I/O)")
    for m, p in modules.items():
        if not _in(m, ("patchaudit.analysis",)):
            continue
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            for n in names:
                if n.split(".")[0] in IO_MODULES:
                    out.append(f"{m}:{node.lineno} imports {n} (analysis does no I/O)")
            if isinstance(node, ast.Call) and _dotted(node.func) in IO_CALLS:
                out.append(f"{m}:{node.lineno} calls {_dotted(node.func)} (analysis does no I/O)")
    return out


def rule_code_literals(repo: Path = REPO) -> list[str]:
    """String literals naming a rule code outside the rule pack (docstrings and comments may)."""
    out = []
    for m, p in module_files(repo).items():
        if _in(m, ("patchaudit.rules",)):
            continue
        tree = ast.parse(p.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                hit = RULE_CODE.search(node.value)
                if hit:
                    out.append(f"{m}:{node.lineno} names the rule code {hit.group()} (declare a role: Rule.roles)")
    return out


# ---------------------------------------------------------------------------
# sizes


def _string_lines(tree: ast.AST) -> set[int]:
    """Lines that hold only (part of) a string literal of several lines: docstrings, examples."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.end_lineno and \
                node.end_lineno > node.lineno:
            lines.update(range(node.lineno + 1, node.end_lineno))
    return lines


def is_rule_file(path: Path, repo: Path = REPO) -> bool:
    return path.parent == repo / "rules"


def module_lines(path: Path, repo: Path = REPO) -> int:
    """Lines of the module; for a rule file, without the inner lines of its multi-line strings
    (its docs and the examples that are its tests)."""
    text = path.read_text(encoding="utf-8")
    n = len(text.splitlines())
    if is_rule_file(path, repo):
        n -= len(_string_lines(ast.parse(text)))
    return n


def function_sizes(path: Path, repo: Path = REPO) -> list[tuple[str, int, int]]:
    """(qualified name, first line, lines) of every function from its `def` line, its
    decorators and docstring not counted;
    in a rule file the inner lines of multi-line strings are not counted either."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _string_lines(tree) if is_rule_file(path, repo) else set()
    out: list[tuple[str, int, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    start = child.lineno
                    body = child.body
                    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                            and isinstance(body[0].value.value, str):
                        start = body[0].end_lineno or start
                        if len(body) == 1:
                            start = child.end_lineno or start
                    first = child.lineno   # from `def`: decorators (click options) are not its body
                    doc_lines = start - child.lineno
                    total = (child.end_lineno or child.lineno) - first + 1 - doc_lines
                    total -= len([n for n in range(first, (child.end_lineno or first) + 1) if n in skip])
                    out.append((name, child.lineno, total))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def size_violations(repo: Path = REPO) -> list[str]:
    out = []
    for m, p in module_files(repo).items():
        n = module_lines(p, repo)
        if n > MAX_MODULE_LINES:
            out.append(f"{p.relative_to(repo)}: {n} lines (limit {MAX_MODULE_LINES})")
        for name, line, size in function_sizes(p, repo):
            if size > MAX_FUNCTION_LINES:
                out.append(f"{p.relative_to(repo)}:{line} {name}: {size} lines (limit {MAX_FUNCTION_LINES})")
    return out


if __name__ == "__main__":   # python tests/architecture.py: the report, for a contributor
    edges = all_edges()
    for problem in layer_violations(edges) + [" <-> ".join(c) for c in cycles(edges)] + private_imports() \
            + finding_builders() + analysis_io() + rule_code_literals() + size_violations():
        print(problem)
