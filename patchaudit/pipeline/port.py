"""`patchaudit port`: carry a patch set from the engine release OLD to NEW.

The patches are taken in the order the build applies them (the recipe's, through
the plan; else as given), each on the new release as the earlier ported patches
left it (a stacked set), and each hunk in its patch's order (`port_hunks.py`: the
recipe's applier, the drop of a change upstream already has, the three-way merge,
bump's relocation).  Every placed hunk is verified before it is kept: the checks
on its file (`port_hunks.check_port`), then the rules pass over the ported set
(`port_verify.py`: PA204's signature check and the TITO rules, through `bump`'s
real pipeline on NEW with the ported patches applied).  A hunk that fails a check
is flagged, its change left out of the output, with the reason and the nearest
place; a conflict gets a `.rej` block with git's markers around a copy of the region.

Nothing is written here: `port_output.write_outputs` writes what the command asks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable

from patchaudit.engine.sources import EngineError, EngineSource, detect_strip, map_path
from patchaudit.inputs.patches import FileSection, Hunk, PatchFile
from patchaudit.model.findings import FileError
from patchaudit.pipeline.port_hunks import (
    Check,
    HunkPort,
    Text,
    already_there,
    check_port,
    conflict_region,
    exactly,
    merge3,
    module_defines,
    place,
)
from patchaudit.pipeline.port_output import PatchOut, header_for, section_header, unified_hunks

__all__ = ["PortError", "PortReport", "port_patches"]


class PortError(Exception):
    """Bad options, an unreadable engine or patch (exit code 2)."""


@dataclass
class PortReport:
    engine: str
    old_label: str
    new_label: str
    hunks: list[HunkPort] = field(default_factory=list)
    outs: list[PatchOut] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    rules_checked: bool = False
    forced_seen: set[tuple[str, int]] = field(default_factory=set)

    @property
    def flagged(self) -> list[HunkPort]:
        return [h for h in self.hunks if not h.ported]

    @property
    def exit_code(self) -> int:
        return 1 if self.flagged or self.errors else 0

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for h in self.hunks:
            out[h.status] = out.get(h.status, 0) + 1
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "from": self.old_label,
            "to": self.new_label,
            "counts": self.counts(),
            "rules_checked": self.rules_checked,
            "patches": [{"patch": o.source, "output": o.name, "conflicts": len(o.rejects)} for o in self.outs],
            "hunks": [h.to_json() for h in self.hunks],
            "errors": [{"path": e.path, "line": e.line, "message": e.message} for e in self.errors],
        }


def _read(src: EngineSource, path: str | None) -> Text | None:
    if not path:
        return None
    data = src.read_bytes(path)
    if data is None:
        return None
    text = data.decode("utf-8", errors="surrogateescape")
    lines = text.split("\n")
    eol = text.endswith("\n")
    if eol:
        lines.pop()
    return Text(lines, eol or not text)


def _top_level_defined(hunk: Hunk) -> set[str]:
    import re

    out: set[str] = set()
    for ln in hunk.lines:
        if ln.kind == "+":
            m = re.match(r"(?:async def|def|class) (\w+)|(\w+)\s*[:=]", ln.text)
            if m:
                out.add(m.group(1) or m.group(2))
    return out


class Sides:
    """OLD and NEW as the patches ported so far left them (in memory)."""

    def __init__(self, old: EngineSource, new: EngineSource, patches: list[PatchFile], strip: int | None):
        self.old, self.new = old, new
        raw = [s.raw_path for p in patches for s in p.sections if s.raw_path]
        self.old_map = self._strip(old, raw, strip)
        self.new_map = self._strip(new, raw, strip)
        self.texts: dict[tuple[str, str], Text | None] = {}
        self._audit: Any = None
        #: (file, old file, text before, text after) -> the checks of a placed hunk, kept across passes
        self.checked: dict = {}
        #: NEW file -> the top-level names the set's hunks define in it (a later hunk may define
        #: what an earlier one uses; the end-of-port check confirms they are there)
        self.pending: dict[str, set[str]] = {}
        for p in patches:
            for sec, h in p.iter_hunks():
                path = self.path("new", sec.raw_path) or sec.path
                self.pending.setdefault(path, set()).update(_top_level_defined(h))

    @staticmethod
    def _strip(src: EngineSource, raw: list[str], strip: int | None) -> tuple[int, str]:
        try:
            n, prefix = detect_strip(raw, src)
        except EngineError:
            return (strip if strip is not None else 1), ""
        return (strip, prefix) if strip is not None else (n, prefix)

    def path(self, side: str, raw: str) -> str | None:
        n, prefix = self.old_map if side == "old" else self.new_map
        return map_path(raw, n, prefix)

    def get(self, side: str, path: str | None) -> Text | None:
        if path is None:
            return None
        key = (side, path)
        if key not in self.texts:
            self.texts[key] = _read(self.old if side == "old" else self.new, path)
        return self.texts[key]

    def released(self, side: str, path: str | None) -> Text | None:
        """The file as the release has it (no patch applied)."""
        if path is None:
            return None
        key = (f"released-{side}", path)
        if key not in self.texts:
            self.texts[key] = _read(self.old if side == "old" else self.new, path)
        return self.texts[key]

    def put(self, side: str, path: str, text: Text | None) -> None:
        self.texts[(side, path)] = text

    def patch_path(self, engine_path: str, like: FileSection) -> str:
        """The path (without a/ b/) a patch names for a NEW engine file, in the form of
        `like` (a path of the same patch)."""
        _n, prefix = self.new_map
        stripped = like.path  # without a/ b/
        like_engine = (self.path("new", like.raw_path) or stripped)[len(prefix) :]
        head = stripped[: len(stripped) - len(like_engine)] if stripped.endswith(like_engine) else ""
        return head + (engine_path[len(prefix) :] if prefix and engine_path.startswith(prefix) else engine_path)

    def resolver(self) -> Callable[[str, int, str, str], bool | None]:
        def resolve(path: str, level: int, module: str, name: str) -> bool | None:
            dotted = module
            if level:
                here = self.new.module_name(path)
                if not here:
                    return None
                parts = here.split(".")[
                    : -level if not path.endswith("__init__.py") else len(here.split(".")) - level + 1
                ]
                dotted = ".".join(parts + ([module] if module else []))
            if not dotted:
                return None
            top = dotted.split(".")[0]
            if not any(r == top or r.startswith(top + "/") or r == top for r in self._roots()):
                return None  # not the engine's module: not ours to judge
            mod_path = self.new.module_path(dotted)
            if mod_path is None:
                return False
            if self.new.module_path(f"{dotted}.{name}") is not None:
                return True
            got = self.get("new", mod_path)
            return module_defines(got.lines if got else None, name)

        return resolve

    def _roots(self) -> list[str]:
        return [r.rsplit("/", 1)[-1] for r in self.new.package_roots()] + [
            r.split("/")[0] for r in self.new.package_roots()
        ]

    def audit(self, engine: str, settings: Any) -> Any:
        if self._audit is None:
            from patchaudit.pipeline.bump_audit import BumpAudit

            self._audit = BumpAudit(engine, self.old, self.new, self.old_map[0], settings)
        return self._audit


@dataclass
class Job:
    """What a port run is given (the command's options, resolved)."""

    engine: str
    fuzz: dict[str, int]  # patch -> the recipe's fuzz (0: git apply)
    settings: Any
    forced: dict[tuple[str, int], str] = field(default_factory=dict)  # (patch, @@ line) -> flag reason
    progress: Callable[[str], None] | None = None


_INDEX: dict[tuple[str, int], Any] = {}


def _symbol(src: EngineSource, path: str, text: Text, line: int) -> str | None:
    from patchaudit.engine.definitions import index_module

    if not path.endswith(".py"):
        return None
    body = "\n".join(text.lines) + "\n"
    key = (path, hash(body))
    if key not in _INDEX:
        if len(_INDEX) > 16:
            _INDEX.clear()
        _INDEX[key] = index_module(path, body)
    return _INDEX[key].symbol_at(line)


def _relocate(sides: Sides, job: Job, opath: str, old: Text, hunk: Hunk, fuzz: int) -> tuple[str, str, Text] | None:
    """(NEW file, NEW symbol, the file with the hunk) where the code the hunk patches moved."""
    from patchaudit.analysis.upstream import first_change

    try:
        reloc = sides.audit(job.engine, job.settings).relocation(opath)
    except Exception:  # a relocation that crashes never costs the port: the hunk is flagged
        return None
    if reloc is None:
        return None
    symbol = _symbol(sides.old, opath, old, first_change(hunk, hunk.source_start))
    mv = reloc.destination(symbol)
    dest = mv.path if mv is not None else reloc.new_path
    target = sides.get("new", dest)
    if dest is None or target is None:
        return None
    status, result, _line, _off = place(target, hunk, max(fuzz, 0))
    if status not in ("clean", "offset", "fuzz"):
        return None
    return dest, (mv.new if mv is not None else ""), result


def _shim(text: Text) -> bool:
    """NEW keeps the file as a re-export (`from .x import *`): its code moved."""
    return any(t.startswith("from ") and " import *" in t for t in text.lines)


def _imports(hunk: Hunk, old: Text | None, new: Text, near: int) -> Text | None:
    """The hunk's added import lines merged into NEW's import block (`analysis/port_imports`)."""
    from patchaudit.analysis.port_imports import merge_imports
    from patchaudit.pipeline.port_hunks import map_line

    if old is not None:
        first = next((i for i, ln in enumerate(hunk.lines) if ln.kind != " "), 0)
        near = map_line(old.lines, new.lines, max(0, hunk.target_start - 1 + first)) or near
    got = merge_imports([(ln.kind, ln.text) for ln in hunk.lines], new.lines, near)
    return None if got is None or got == new.lines else Text(got, new.eol)


def _attempt(sides: Sides, job: Job, row: HunkPort, sec: FileSection, hunk: Hunk, fuzz: int) -> tuple[str, Text] | None:
    """Place the hunk (row's status and detail set); the file it goes to and its new text,
    or None when it is dropped or flagged."""
    opath = sides.path("old", sec.raw_path) or row.path
    old, new = sides.get("old", opath), sides.get("new", row.path)
    old_after = None
    if old is not None:
        st, res, _l, _o = place(old, hunk, fuzz)
        old_after = res if st in ("clean", "offset", "fuzz") else None
    if sec.is_new and new is None:
        row.status, row.where = "clean", (row.path, 1)
        return row.path, Text([ln.text for ln in hunk.lines if ln.kind != "-"], True)
    if new is not None:
        status, result, line, off = place(new, hunk, fuzz)
        if status in ("clean", "offset", "fuzz"):
            row.status, row.where = status, (row.path, line)
            row.detail = f"offset {off:+d}" if status == "offset" else ("fuzz" if status == "fuzz" else "")
            in_order = _imports(hunk, old, new, line) if status != "clean" else None
            if in_order is not None and in_order.lines != result.lines:
                # the patch's import lines break the order NEW keeps its imports in: isort's place
                row.status, row.detail = "merged", "import lines placed in isort order"
                return row.path, in_order
            return row.path, result
        there = (exactly(), line) if status == "already-applied" else already_there(hunk, old, new)
        if there is not None:
            row.status, row.where = "dropped", (row.path, there[1])
            row.detail = f"upstream has it at {row.path}:{there[1]} ({there[0]})"
            return None
        if old is not None and old_after is not None:
            merged = merge3(old, old_after, new, line)
            if merged is not None and merged.lines != new.lines:
                row.status, row.where = "merged", (row.path, line)
                return row.path, merged
        imports = _imports(hunk, old, new, line)
        if imports is not None:
            row.status, row.where, row.detail = "merged", (row.path, line), "import lines merged in isort order"
            return row.path, imports
    if old is not None and (new is None or _shim(new)):
        moved = _relocate(sides, job, opath, old, hunk, fuzz)
        if moved is not None:
            dest, symbol, result = moved
            row.status, row.where = "moved", (dest, 1)
            row.detail = f"moved to {dest}" + (f" (`{symbol}`)" if symbol else "")
            return dest, result
    if new is None:
        row.flag(f"{row.path} is not in {sides.new.label} and its code was not found elsewhere")
        return None
    near = line
    row.flag("does not apply and the three-way merge conflicts", (row.path, near))
    if old is not None and old_after is not None:
        row.conflict = conflict_region(old, old_after, new, near)
    return None


def _verify(sides: Sides, row: HunkPort, hunk: Hunk, opath: str, dest: str, before: Text, after: Text) -> bool:
    released = (sides.released("old", opath), sides.released("new", dest)) if dest == row.path else None
    key = (dest, opath, hash(tuple(before.lines)), hash(tuple(after.lines)))
    if key not in sides.checked:  # a later pass meets the same texts again
        sides.checked[key] = check_port(
            dest, before, after, sides.resolver(), released, frozenset(sides.pending.get(dest, ()))
        )
    checks, added = sides.checked[key]
    checks = list(checks)
    row.checks, row.added_lines = checks, sorted(added)
    failed = [c for c in checks if not c.ok]
    if not failed:
        return True
    dup = next((c for c in failed if c.name == "duplicates"), None)
    if dup is not None and _own_duplicate(sides, opath, hunk):
        dup.ok, dup.detail = True, "the patch defines it twice on the old release too: " + dup.detail
        failed.remove(dup)
        if not failed:
            return True
    if dup is not None:
        there = already_there(hunk, sides.get("old", opath), before)
        if there is not None:
            row.status, row.where = "dropped", (dest, there[1])
            row.detail = f"upstream has it at {dest}:{there[1]} ({there[0]})"
            return False
    first = next((ln for ln in sorted(added)), 1)
    row.flag(f"{row.status} but " + "; ".join(c.detail for c in failed), (dest, first))
    return False


def _own_duplicate(sides: Sides, opath: str, hunk: Hunk) -> bool:
    """Whether the hunk defines a name twice on OLD too (the patch's own doing: PA204's
    override check in the rules pass judges what it does to NEW's callers)."""
    from patchaudit.analysis.port_checks import duplicate_definitions
    from patchaudit.pipeline.port_hunks import added_lines

    old = sides.get("old", opath)
    if old is None:
        return False
    status, after, _l, _o = place(old, hunk, 0)
    if status not in ("clean", "offset"):
        return False
    return bool(duplicate_definitions(old.lines, after.lines, added_lines(old, after)))


def _port_section(sides: Sides, job: Job, patch: PatchFile, sec: FileSection, rows: list[HunkPort], touched) -> None:
    fuzz = job.fuzz.get(patch.path, 0)
    npath = sides.path("new", sec.raw_path) or sec.path
    opath = sides.path("old", sec.raw_path)
    for hunk in sec.hunks:
        row = HunkPort(patch.path, len(rows) + 1, hunk.header_line, npath)
        row.added_texts = {ln.text.strip() for ln in hunk.lines if ln.kind == "+" and ln.text.strip()}
        row.added_imports = {t for t in row.added_texts if t.startswith(("import ", "from ")) or t.endswith(",")}
        rows.append(row)
        _port_hunk(sides, job, patch, sec, hunk, row, touched, fuzz)
        old = sides.get("old", opath)
        if opath and old is not None:  # OLD as the old patch leaves it: the next hunk's base
            st, res, _l, _o = place(old, hunk, fuzz)
            if st in ("clean", "offset", "fuzz"):
                sides.put("old", opath, res)


def _port_hunk(sides: Sides, job: Job, patch, sec, hunk, row: HunkPort, touched, fuzz: int) -> None:
    if sec.is_binary or sec.is_deleted or sec.rename_from:
        row.flag("a binary, deleted or renamed file: port it by hand")
        return
    placed = _attempt(sides, job, row, sec, hunk, fuzz)
    if placed is None:
        return
    dest, after = placed
    before = sides.get("new", dest) or Text([], True)
    opath = sides.path("old", sec.raw_path) or row.path
    if not _verify(sides, row, hunk, opath, dest, before, after):
        return
    forced = job.forced.get((patch.path, hunk.header_line))
    if forced:
        name, _, reason = forced.partition("\t")
        row.checks.append(Check(name, False, reason))
        row.flag(f"{row.status} but {reason}", row.where)
        return
    if dest not in touched:
        touched[dest] = (before, sec)
    sides.put("new", dest, after)


def _port_patch(sides: Sides, job: Job, patch: PatchFile, name: str, report: PortReport) -> None:
    rows: list[HunkPort] = []
    touched: dict[str, tuple[Text, FileSection | None]] = {}
    out = PatchOut(patch.path, name)
    for sec in patch.sections:
        _port_section(sides, job, patch, sec, rows, touched)
    for r in rows:
        conflict = getattr(r, "conflict", None)
        if conflict:
            out.rejects.append(f"# {patch.path}: hunk #{r.hunk} (line {r.header_line}) on {r.path}")
            out.rejects.extend(conflict)
    text: list[str] = [raw for _, raw in patch.header]
    ends = [s.header_line for s in patch.sections[1:]] + [len(patch.lines) + 1]
    for sec, end in zip(patch.sections, ends):
        npath = sides.path("new", sec.raw_path) or sec.path
        if npath in touched:
            text += _section_text(sides, patch, sec, end, npath, touched.pop(npath))
    for dest, entry in touched.items():  # files the hunks were followed to
        p = sides.patch_path(dest, entry[1]) if entry[1] is not None else dest
        text += header_for(p) + _body(sides, dest, entry[0])
    out.text = "\n".join(text) + ("\n" if text else "")
    report.outs.append(out)
    report.hunks.extend(rows)


def _body(sides: Sides, path: str, before: Text) -> list[str]:
    after = sides.get("new", path) or Text([], True)
    return unified_hunks(before.lines, after.lines, before.eol, after.eol)


def _section_text(sides, patch, sec, end, npath, entry) -> list[str]:
    before, _ = entry
    body = _body(sides, npath, before)
    if not body:
        return []
    head = section_header(patch, sec, end)
    if sec.is_new and not before.lines:
        body = [b.replace("@@ -1,0 ", "@@ -0,0 ", 1) if b.startswith("@@ -1,0 ") else b for b in body]
    return head + body


def port_patches(
    patches: list[PatchFile], names: list[str], old: EngineSource, new: EngineSource, job: Job, strip: int | None
) -> PortReport:
    """Port `patches` (in the order applied) from OLD to NEW; the report holds the outputs."""
    checked: dict = {}
    for _ in range(3):  # a hunk flagged for an unused import can leave another one unused
        report, sides = _port_all(patches, names, old, new, job, strip, checked)
        more = _unused_imports(report, sides)
        if not more:
            break
        job.forced.update(more)
    return report


def _unused_imports(report: PortReport, sides: Sides) -> dict[tuple[str, int], str]:
    """Ported hunks that add an import nothing in the ported file uses (the code that used
    it was flagged, or upstream dropped it): flagged, as the maintainers drop them."""
    from patchaudit.analysis.port_checks import unused_imports

    out = _undefined_at_end(report, sides)
    for r in report.hunks:
        if not r.ported or r.status == "dropped" or (r.patch, r.header_line) in report.forced_seen:
            continue
        if not r.added_imports or (r.patch, r.header_line) in out:
            continue
        final = sides.get("new", r.where[0] if r.where else r.path)
        idle = unused_imports(final.lines, r.added_imports) if final is not None else []
        if idle:
            out[(r.patch, r.header_line)] = (
                "imports\tit imports " + ", ".join(f"`{n}`" for n in idle) + ", which nothing in the ported file uses"
            )
    return out


def _undefined_at_end(report: PortReport, sides: Sides) -> dict[tuple[str, int], str]:
    """Ported hunks whose added code reads a global the finished file does not define (a
    name a later hunk was to define, and that hunk was flagged)."""
    from patchaudit.analysis.port_checks import undefined_names

    out: dict[tuple[str, int], str] = {}
    for r in report.hunks:
        dest = r.where[0] if r.where else r.path
        if not r.ported or r.status == "dropped" or not dest.endswith(".py") or not sides.pending.get(dest):
            continue
        final = sides.get("new", dest)
        if final is None:
            continue
        added = {i + 1 for i, t in enumerate(final.lines) if t.strip() in r.added_texts}
        base = sides.released("new", dest)
        gone = undefined_names(final.lines, added, base.lines if base is not None else None)
        if gone:
            out[(r.patch, r.header_line)] = "names\tnot defined in the ported file: " + ", ".join(
                f"`{p.name}`" for p in gone
            )
    return out


def _port_all(patches, names, old, new, job: Job, strip: int | None, checked: dict) -> tuple[PortReport, Sides]:
    report = PortReport(job.engine, old.label, new.label)
    report.forced_seen = set(job.forced)
    sides = Sides(old, new, patches, strip)
    sides.checked = checked
    for patch, name in zip(patches, names):
        if job.progress is not None:
            job.progress(os.path.basename(patch.path))
        try:
            _port_patch(sides, job, patch, name, report)
        except (EngineError, OSError) as exc:
            report.errors.append(FileError(patch.path, f"cannot port: {exc}"))
    return report, sides
