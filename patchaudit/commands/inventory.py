"""`patchaudit inventory PATHS... [--engine NAME=SOURCE]...`

The fork's whole patch surface in one table: every engine symbol touched, by
a hunk of a `.patch`/`.diff` file (the engine symbol enclosing the hunk) or by
a runtime monkey-patch in Python (its target), with where, how (hunk /
replaced / wrapped / added / mocked) and, with engines given, whether the
symbol still exists in each engine and where it is defined there.

Without an engine, hunks are named from their path and their `@@ ... @@`
header (a hint: the header shows the nearest `def`/`class` above the hunk) and
nothing is looked up.  With engines, each patch is applied in memory (exact
mode) to the engine that fits it, and each monkey-patch is looked up in every
engine that has its package (for a module of a per-version patch package,
only the engine of that version; a patch under a version gate that is false
for an engine is listed as gated off there).

Exit code: 0, or 2 when a path could not be read or the configuration or an
engine is bad.  The inventory lists; `patchaudit check --engine ...` judges
(PA201, PA206, PA207).
"""

from __future__ import annotations

import re
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

import click

from patchaudit.commands.check import emit, parse_engine_option
from patchaudit.config.settings import ConfigError, Settings, find_pyproject, load_pyproject
from patchaudit.model.escape import json_text, md_code, md_text, safe, safe_lines, visible

_HEADER_DEF = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)")


@dataclass
class Row:
    symbol: str                    # dotted engine symbol (module.Class.method)
    source: str                    # "hunk" | "monkey-patch"
    how: str                       # hunk | replaced | wrapped | added | mocked
    path: str                      # the fork file (patch or .py)
    line: int                      # its line there (the hunk's @@ line, the patch statement)
    detail: str = ""               # hunk: "#2 clean"; monkey-patch: form (assign, setattr, mock.patch)
    engine: str | None = None      # the engine checked (title), None without engines
    exists: str = "-"              # yes | no | unknown | gated off | not checked | -
    definition: str | None = None  # engine path:line of the symbol
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Inventory:
    rows: list[Row] = field(default_factory=list)
    engines: list[str] = field(default_factory=list)
    errors: list[Any] = field(default_factory=list)
    files: int = 0

    def summary(self) -> dict[str, Any]:
        symbols = {r.symbol for r in self.rows}
        by_state: dict[str, int] = {}
        for r in self.rows:
            if r.engine is not None:
                by_state[r.exists] = by_state.get(r.exists, 0) + 1
        return {
            "files": self.files,
            "sites": len({(r.path, r.line, r.symbol) for r in self.rows}),
            "symbols": len(symbols),
            "hunk_symbols": len({r.symbol for r in self.rows if r.source == "hunk"}),
            "monkeypatch_symbols": len({r.symbol for r in self.rows if r.source == "monkey-patch"}),
            "exists": by_state,
        }


# --------------------------------------------------------------------------
# building the inventory


def _module_from_patch_path(path: str, packages: tuple[str, ...]) -> str:
    """`python/sglang/srt/x.py` -> `sglang.srt.x` (from the first engine package
    component; else the path without its a/ b/ prefix)."""
    parts = [p for p in path.replace("\\", "/").split("/") if p and p != "."]
    for k, comp in enumerate(parts):
        if comp in packages:
            parts = parts[k:]
            break
    else:
        if parts and parts[0] in ("a", "b"):
            parts = parts[1:]
    if parts and parts[-1].endswith(".py"):
        parts[-1] = parts[-1][:-3]
        if parts[-1] == "__init__":
            parts.pop()
        return ".".join(parts)
    return "/".join(parts)


def _hunk_rows(src, data: bytes, engines, packages: tuple[str, ...], inv: Inventory) -> None:
    from patchaudit.inputs.patches import read_patch

    patch = read_patch(src.path, data)
    ctx = engines.for_patch(patch) if engines is not None else None
    if ctx is None:
        for section, hunk in patch.iter_hunks():
            if section.is_binary:
                continue
            module = _module_from_patch_path(section.path, packages)
            m = _HEADER_DEF.match(hunk.section_header or "")
            symbol = f"{module}.{m.group(1)}" if m and section.is_python else module
            inv.rows.append(Row(symbol, "hunk", "hunk", src.path, hunk.header_line, f"#{hunk.index + 1}",
                                note="enclosing symbol from the @@ header" if m and section.is_python else ""))
        return
    from patchaudit.analysis.monkeypatch import engine_title
    from patchaudit.units.exact import exact_units

    _, _, result = exact_units(patch, ctx, report_path=src.path)
    for rec in result.sections:
        path = rec.engine_path or rec.section.path
        module = ctx.source.module_name(path) if path and path.endswith(".py") else None
        module = module or _module_from_patch_path(path or rec.section.path, packages)
        title = engine_title(ctx, module.split(".", 1)[0])
        for h in rec.hunks:
            symbol = f"{module}.{h.symbol}" if h.symbol else module
            exists = {"failed": "no", "missing-file": "no"}.get(h.status, "yes")
            status = h.status + (f" {h.offset:+d}" if h.status == "offset" else "") + (
                f" {h.fuzz}" if h.status == "fuzz" else "")
            note = ""
            if h.status == "failed":
                note = "hunk does not apply" + (f" (nearest match at line {h.nearest[0]})" if h.nearest else "")
            elif h.status == "missing-file":
                note = f"{path} does not exist in this engine"
            inv.rows.append(Row(symbol, "hunk", "hunk", src.path, h.patch_line, f"#{h.index + 1} {status}",
                                title, exists, f"{path}:{h.line}" if h.line and exists == "yes" else None, note))


def _monkeypatch_rows(path: str, text: str, ctxs: list, packages: tuple[str, ...], inv: Inventory) -> None:
    from patchaudit.analysis import monkeypatch as mpmod

    for mp in mpmod.collect(path, text, packages):
        symbol = mp.target
        detail = mp.form
        if mp.function:
            detail += f" in {mp.function}()"
        base = dict(symbol=symbol, source="monkey-patch", how=mp.how, path=mp.path, line=mp.line, detail=detail)
        if len(mp.targets) > 1:
            base["note"] = "or " + ", ".join(mp.targets[1:])
        if not ctxs:
            inv.rows.append(Row(**base))
            continue
        chosen, why = mpmod.contexts_for(mp, ctxs, packages)
        if not chosen:
            note = "; ".join(x for x in (base.get("note", ""), why) if x)
            inv.rows.append(Row(**{**base, "note": note}, engine="", exists="not checked"))
            continue
        for ctx in chosen:
            title = mpmod.engine_title(ctx, mp.top)
            gate = mpmod.gated_off(mp, ctx)
            if gate is not None:
                inv.rows.append(Row(**{**base, "note": f"not applied: {gate.describe()} is false"},
                                    engine=title, exists="gated off"))
                continue
            target, got = mpmod.resolve_target(mp, ctx)
            exists = {"found": "yes", "missing": "no"}.get(got.state, "unknown")
            note = base.get("note", "")
            if got.state == "missing":
                note = got.reason + (f"; renamed to {' or '.join(got.suggestions)}?" if got.suggestions else "")
                if mp.how == "added":
                    note = "the fork adds it (a backport shim or a marker it tests for)"
            elif got.state == "unknown":
                note = got.reason
            inv.rows.append(Row(**{**base, "symbol": target, "note": note}, engine=title, exists=exists,
                                definition=got.where if got.state == "found" else None))


def build_inventory(paths: list[str], settings: Settings) -> Inventory:
    from patchaudit.model.findings import FileError
    from patchaudit.inputs.discover import PATCH, PYTHON, discover
    from patchaudit.analysis.monkeypatch import engine_packages, engine_summary
    from patchaudit.pipeline.runner import open_engines

    inv = Inventory()
    files, errors = discover(paths, settings.exclude)
    inv.errors.extend(list(getattr(settings, "problems", ())) + list(errors))
    engines = open_engines(settings)
    ctxs = engines.contexts() if engines is not None else []
    packages = engine_packages(settings)
    if engines is not None:
        inv.engines = [engine_summary(c) for c in ctxs]
    for src in files:
        if src.kind not in (PATCH, PYTHON):
            continue
        inv.files += 1
        from patchaudit.files.reader import ReadError, read_bytes
        from patchaudit.pipeline.runner import read_error

        try:   # the one guarded reader: a FIFO or a device is refused, never opened
            data = read_bytes(src.path, settings.max_file_size)
        except ReadError as exc:
            inv.errors.append(read_error(exc))
            continue
        try:
            if src.kind == PATCH:
                _hunk_rows(src, data, engines, packages, inv)
            else:
                try:
                    text = data.decode("utf-8-sig")
                except UnicodeDecodeError as exc:
                    inv.errors.append(FileError(src.path, f"not valid UTF-8 (byte 0x{data[exc.start]:02x})"))
                    continue
                _monkeypatch_rows(src.path, text, ctxs, packages, inv)
        except RecursionError:
            inv.errors.append(FileError(src.path, "input nested too deeply (recursion limit)"))
        except Exception as exc:  # one bad file never stops the inventory
            inv.errors.append(FileError(src.path, f"internal error: {exc!r}"))
    inv.rows.sort(key=lambda r: (r.symbol, r.path, r.line, r.engine or ""))
    return inv


# --------------------------------------------------------------------------
# rendering

COLUMNS = ("symbol", "how", "where", "exists", "definition", "note")


def _cells(r: Row, many_engines: bool) -> list[str]:
    """The cells of a row, raw (each renderer escapes them for its format)."""
    how = r.how if r.source == "monkey-patch" else "hunk"
    detail = f" ({r.detail})" if r.detail else ""
    exists = r.exists
    if many_engines and r.engine:
        exists = f"{r.exists} [{r.engine}]"
    return [r.symbol, how + detail, f"{r.path}:{r.line}", exists, r.definition or "", r.note]


def _summary_line(inv: Inventory) -> str:
    s = inv.summary()
    parts = [f"{s['symbols']} engine symbol{'s' if s['symbols'] != 1 else ''} touched at {s['sites']} "
             f"site{'s' if s['sites'] != 1 else ''} ({s['hunk_symbols']} by patch hunks, "
             f"{s['monkeypatch_symbols']} by monkey-patches) in {s['files']} file{'s' if s['files'] != 1 else ''}"]
    if inv.engines:
        states = ", ".join(f"{v} {k}" for k, v in sorted(s["exists"].items()))
        parts.append(f"checked against {', '.join(inv.engines)}: {states or 'nothing to check'}")
    return visible("; ".join(parts) + ".")


def render_text(inv: Inventory) -> str:
    """One block per engine symbol: its sites, and under each site what every
    engine checked says.  Every value escaped (patchaudit/model/escape.py)."""
    v = visible
    if not inv.rows:
        return safe_lines("No engine symbol is patched.\n" + _summary_line(inv) + "\n")
    out: list[str] = []
    groups: dict[str, dict[tuple[str, int], list[Row]]] = {}
    for r in inv.rows:
        groups.setdefault(r.symbol, {}).setdefault((r.path, r.line), []).append(r)
    how_w = max(len(r.how) for r in inv.rows)
    for symbol, sites in groups.items():
        out.append(v(symbol))
        for (path, line), rows in sites.items():
            first = rows[0]
            detail = f"  ({v(first.detail)})" if first.detail else ""
            out.append(f"    {v(first.how).ljust(how_w)}  {v(path)}:{line}{detail}")
            for r in rows:
                if r.engine is None:
                    if r.note:
                        out.append(f"    {' ' * how_w}  {v(r.note)}")
                    continue
                where = f" at {v(r.definition)}" if r.definition else ""
                engine = f"{v(r.engine)}: " if r.engine else ""
                note = f" ({v(r.note)})" if r.note else ""
                out.append(f"    {' ' * how_w}  {engine}{v(r.exists)}{where}{note}")
    return safe_lines("\n".join(out) + "\n\n" + _summary_line(inv) + "\n")


def _md(text: str) -> str:
    return md_text(text, table=True)


def render_markdown(inv: Inventory) -> str:
    many = len(inv.engines) > 1
    headers = ["Symbol", "How", "Where", "Exists", "Engine definition", "Note"]
    rows = [_cells(r, many) for r in inv.rows]
    if not inv.engines:
        headers = headers[:3] + headers[5:]
        rows = [c[:3] + c[5:] for c in rows]
    out = ["## Patch surface", ""]
    if inv.engines:
        out += [f"Engines: {', '.join(md_code(e) for e in inv.engines)}", ""]
    if rows:
        out.append("| " + " | ".join(headers) + " |")
        out.append("|" + "|".join("---" for _ in headers) + "|")
        for c in rows:
            cells = [md_code(c[0], table=True)] + [_md(x) for x in c[1:]]
            cells[2] = md_code(c[2], table=True)
            if inv.engines and c[4]:
                cells[4] = md_code(c[4], table=True)
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    else:
        out += ["No engine symbol is patched.", ""]
    out.append(_md(_summary_line(inv)))
    return safe_lines("\n".join(out) + "\n")


def render_json(inv: Inventory) -> str:
    return json_text({
        "engines": inv.engines,
        "rows": [r.to_json() for r in inv.rows],
        "summary": inv.summary(),
        "errors": [e.to_json() for e in inv.errors],
    }) + "\n"


RENDERERS = {"text": render_text, "markdown": render_markdown, "json": render_json}


@click.command("inventory")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--engine", multiple=True, metavar="NAME=SOURCE",
              help="Engine source to look the symbols up in: a directory, PATH@REV of a git repository, a "
                   "wheel or sdist. Repeatable (one per engine package, or one per version of a per-version "
                   "patch package).")
@click.option("--format", "fmt", type=click.Choice(sorted(RENDERERS)), default="text", show_default=True)
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write the inventory to FILE.")
@click.option("--config", type=click.Path(exists=True, dir_okay=False), help="A pyproject.toml to read.")
def inventory(paths, engine, fmt, output, config) -> None:
    """List every engine symbol the patches and runtime monkey-patches under PATHS touch."""
    from patchaudit.pipeline.runner import RunError

    paths = list(paths) or ["."]
    try:
        cfg = config or find_pyproject(paths)
        settings = load_pyproject(cfg) if cfg else Settings()
        if engine:
            settings.engines = [parse_engine_option(e) for e in engine]
        inv = build_inventory(paths, settings)
    except (ConfigError, RunError) as exc:
        click.echo(safe(f"patchaudit: error: {exc}"), err=True)
        sys.exit(2)
    for err in inv.errors:
        click.echo(safe(err), err=True)
    emit(RENDERERS[fmt](inv), output)
    sys.exit(2 if inv.errors else 0)
