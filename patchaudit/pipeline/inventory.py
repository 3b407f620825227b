"""The driver of `patchaudit inventory`: every engine symbol the fork touches,
by a hunk of a `.patch`/`.diff` file (the engine symbol enclosing the hunk) or
by a runtime monkey-patch in Python (its target), with where, how and, with
engines given, whether the symbol still exists in each engine and where it is
defined there (patchaudit/commands/inventory.py describes the command;
patchaudit/reporters/inventory.py renders the result)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from patchaudit.config.settings import Settings

_HEADER_DEF = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)")


@dataclass
class Row:
    symbol: str  # dotted engine symbol (module.Class.method)
    source: str  # "hunk" | "monkey-patch"
    how: str  # hunk | replaced | wrapped | added | mocked
    path: str  # the fork file (patch or .py)
    line: int  # its line there (the hunk's @@ line, the patch statement)
    detail: str = ""  # hunk: "#2 clean"; monkey-patch: form (assign, setattr, mock.patch)
    engine: str | None = None  # the engine checked (title), None without engines
    exists: str = "-"  # yes | no | unknown | gated off | not checked | -
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
            inv.rows.append(
                Row(
                    symbol,
                    "hunk",
                    "hunk",
                    src.path,
                    hunk.header_line,
                    f"#{hunk.index + 1}",
                    note="enclosing symbol from the @@ header" if m and section.is_python else "",
                )
            )
        return
    from patchaudit.engine.versions import engine_title
    from patchaudit.units.exact import exact_units

    _, _, result = exact_units(patch, ctx, report_path=src.path)
    for rec in result.sections:
        path = rec.engine_path or rec.section.path
        module = (ctx.source.module_name(path) if path and path.endswith(".py") else None) or _module_from_patch_path(
            path or rec.section.path, packages
        )
        title = engine_title(ctx, module.split(".", 1)[0])
        for h in rec.hunks:
            symbol = f"{module}.{h.symbol}" if h.symbol else module
            exists = {"failed": "no", "missing-file": "no", "not-in-source": "not checked"}.get(h.status, "yes")
            status = (
                h.status
                + (f" {h.offset:+d}" if h.status == "offset" else "")
                + (f" {h.fuzz}" if h.status == "fuzz" else "")
            )
            note = ""
            if h.status == "failed":
                note = "hunk does not apply" + (f" (nearest match at line {h.nearest[0]})" if h.nearest else "")
            elif h.status == "missing-file":
                note = f"{path} does not exist in this engine"
            elif h.status == "not-in-source":
                note = f"{rec.section.path} is not in this engine source (its kind holds only the packages)"
            inv.rows.append(
                Row(
                    symbol,
                    "hunk",
                    "hunk",
                    src.path,
                    h.patch_line,
                    f"#{h.index + 1} {status}",
                    title,
                    exists,
                    f"{path}:{h.line}" if h.line and exists == "yes" else None,
                    note,
                )
            )


def _monkeypatch_rows(
    path: str, text: str, ctxs: list, packages: tuple[str, ...], inv: Inventory, settings: Settings
) -> None:
    from patchaudit.analysis.monkeypatch import collect, contexts_for, gated_off, resolve_target
    from patchaudit.engine.versions import engine_title
    from patchaudit.pipeline.bump_monkeypatch import include_tests
    from patchaudit.pipeline.run_rules import guarded_reader

    for mp in collect(path, text, packages, include_tests(settings), guarded_reader(settings)):
        symbol = mp.target
        detail = mp.form
        if mp.function:
            detail += f" in {mp.function}()"
        base: dict[str, Any] = dict(
            symbol=symbol, source="monkey-patch", how=mp.how, path=mp.path, line=mp.line, detail=detail
        )
        if len(mp.targets) > 1:
            base["note"] = "or " + ", ".join(mp.targets[1:])
        if not ctxs:
            inv.rows.append(Row(**base))
            continue
        chosen, why = contexts_for(mp, ctxs, packages)
        if not chosen:
            note = "; ".join(x for x in (base.get("note", ""), why) if x)
            inv.rows.append(Row(**{**base, "note": note}, engine="", exists="not checked"))
            continue
        for ctx in chosen:
            title = engine_title(ctx, mp.top)
            gate = gated_off(mp, ctx)
            if gate is not None:
                inv.rows.append(
                    Row(
                        **{**base, "note": f"not applied: {gate.describe()} is false"}, engine=title, exists="gated off"
                    )
                )
                continue
            target, got = resolve_target(mp, ctx)
            exists = {"found": "yes", "missing": "no"}.get(got.state, "unknown")
            note = base.get("note", "")
            if got.state == "missing":
                note = got.reason + (f"; renamed to {' or '.join(got.suggestions)}?" if got.suggestions else "")
                if mp.how == "added":
                    note = "the fork adds it (a backport shim or a marker it tests for)"
            elif got.state == "unknown":
                note = got.reason
            inv.rows.append(
                Row(
                    **{**base, "symbol": target, "note": note},
                    engine=title,
                    exists=exists,
                    definition=got.where if got.state == "found" else None,
                )
            )


def build_inventory(paths: list[str], settings: Settings) -> Inventory:
    from patchaudit.analysis.monkeypatch_filter import engine_packages
    from patchaudit.engine.versions import engine_summary
    from patchaudit.inputs.discover import PATCH, PYTHON, discover
    from patchaudit.model.findings import FileError
    from patchaudit.pipeline.context import open_engines

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
        from patchaudit.pipeline.analyse import read_error

        try:  # the one guarded reader: a FIFO or a device is refused, never opened
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
                _monkeypatch_rows(src.path, text, ctxs, packages, inv, settings)
        except RecursionError:
            inv.errors.append(FileError(src.path, "input nested too deeply (recursion limit)"))
        except Exception as exc:  # one bad file never stops the inventory
            inv.errors.append(FileError(src.path, f"internal error: {exc!r}"))
    inv.rows.sort(key=lambda r: (r.symbol, r.path, r.line, r.engine or ""))
    return inv
