"""The renderers of `patchaudit inventory`: text (one block per engine symbol),
markdown (a table) and JSON.  Every value escaped (patchaudit/model/escape.py)."""

from __future__ import annotations

from patchaudit.model.escape import json_text, md_code, md_text, safe_lines, visible
from patchaudit.pipeline.inventory import Inventory, Row

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
    parts = [
        f"{s['symbols']} engine symbol{'s' if s['symbols'] != 1 else ''} touched at {s['sites']} "
        f"site{'s' if s['sites'] != 1 else ''} ({s['hunk_symbols']} by patch hunks, "
        f"{s['monkeypatch_symbols']} by monkey-patches) in {s['files']} file{'s' if s['files'] != 1 else ''}"
    ]
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
    return (
        json_text(
            {
                "engines": inv.engines,
                "rows": [r.to_json() for r in inv.rows],
                "summary": inv.summary(),
                "errors": [e.to_json() for e in inv.errors],
            }
        )
        + "\n"
    )


RENDERERS = {"text": render_text, "markdown": render_markdown, "json": render_json}
