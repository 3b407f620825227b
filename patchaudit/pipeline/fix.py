"""`--fix`, `--diff`, `--unsafe-fixes`: applying the fixes the findings of a check carry.

A rule declares what fixes it offers (`Rule.fix`: None, "safe", "unsafe"; ruff's
FixAvailability) and attaches each one to its finding (`Finding.fix`, edits in
the reported file: patchaudit/lint/fixes.py).  `fix_findings` takes a finished
check run and, file by file:

1. collects the fixes to apply: the safe ones, and the unsafe ones too with
   `--unsafe-fixes` (a fix is safe only if it says so *and* its rule declares
   "safe"); the fixes of a rule that declares none are ignored;
2. applies those whose edits do not overlap (identical fixes, like two findings of
   one comment, count once); in a `.patch` file through patchaudit/patching/patchedit.py,
   which recounts the hunk headers, drops hunks that became no-ops and sections left
   empty;
3. re-checks the new text in memory, with the same rules, engines and tokenizer
   (`analyse_file` on the new bytes; a patch of a recipe's set on the engine with the
   set's earlier patches applied): a fix that makes the file worse (a new error
   of the run, a new PA301/PA302/PA201/PA202, more findings of error severity of any rule) is
   dropped with a message, the others are kept (tried one by one when the set fails);
   a fixed patch of a set is kept only if the whole set still applies with the recipe's
   command (pipeline/fix_stack.py), else none of its fixes is written and the run says why;
4. runs again on the re-checked findings for the fixes left out because they
   overlapped, as ruff's fix loop does, at most `MAX_PASSES` times.

Nothing is written here: `write_fixes` writes every changed file atomically
(patchaudit/files/atomic.py) and only when all could be staged, so one failure
writes nothing; `--diff` renders the changes instead (reporters/fixdiff.py).
A file the run reported an error for, or one that is not UTF-8, is not fixed.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from patchaudit.config.registry import codes_with_role
from patchaudit.config.settings import Settings
from patchaudit.inputs.discover import PATCH, PYTHON, SourceFile, classify
from patchaudit.model.findings import FileError, Finding, Fix
from patchaudit.pipeline.results import RunResult

if TYPE_CHECKING:  # pragma: no cover
    from patchaudit.lint.rule import Rule

#: passes of the fix loop over one file (ruff: 100; a patch needs few)
MAX_PASSES = 10


@dataclass
class FileFix:
    path: str
    old: str
    new: str
    fixed: int = 0  # findings whose fix was applied
    #: exact mode: how the hunks of the new text apply (HunkRecord.to_json() dicts), None: not re-checked
    hunks: list[dict] | None = None
    #: the file as it was read (its fstat): it is replaced only while it is still that file
    stat: Any = None
    #: its findings before the fixes, and the ones `remaining` holds for it after them
    before: list[Finding] = field(default_factory=list)
    after: list[Finding] = field(default_factory=list)
    #: why the fixed text was not written (the file keeps its findings and counts no fix)
    refused: str | None = None


@dataclass
class FixOutcome:
    files: list[FileFix] = field(default_factory=list)
    #: the findings after the fixes: re-checked findings of the changed files, the rest as they were
    remaining: list[Finding] = field(default_factory=list)
    #: findings with a fix that only `--unsafe-fixes` applies
    unsafe_available: int = 0
    #: what the user should hear: fixes dropped, files not fixed
    messages: list[str] = field(default_factory=list)

    @property
    def fixed(self) -> int:
        return sum(f.fixed for f in self.files if f.refused is None)

    def unwritten(self, ff: FileFix, why: str) -> None:
        """`ff` was not written: it counts no fix, and keeps the findings it had."""
        ff.refused = why
        gone = {id(f) for f in ff.after}
        self.remaining = [f for f in self.remaining if id(f) not in gone] + ff.before
        self.remaining.sort(key=Finding.sort_key)
        ff.after = []

    @property
    def changed(self) -> list[FileFix]:
        return [f for f in self.files if f.new != f.old]


def effective_fix(f: Finding, rules: dict[str, type[Rule]]) -> Fix | None:
    """The fix of `f` as its rule declares it: None if the rule declares no fix, unsafe
    if the rule declares its fixes unsafe."""
    rule = rules.get(f.code)
    if f.fix is None or rule is None or getattr(rule, "fix", None) not in ("safe", "unsafe"):
        return None
    if rule.fix == "unsafe" and f.fix.safe:
        return Fix(f.fix.description, f.fix.edits, safe=False)
    return f.fix


def apply_edits(path: str, text: str, fixes: list[Fix]) -> str:
    """`text` with the edits of `fixes` (they must not overlap); PatchEditError if they cannot be applied."""
    from patchaudit.patching.patchedit import apply_line_edits, edit_patch

    edits = [e for fx in fixes for e in fx.edits]
    if classify(path) == PATCH:
        return edit_patch(text, edits)
    return apply_line_edits(text, edits)


def _overlaps(a: Fix, b: Fix) -> bool:
    for x in a.edits:
        for y in b.edits:
            # an insertion before line L "covers" the gap before L
            if x.line <= max(y.end_line, y.line) and y.line <= max(x.end_line, x.line):
                return True
    return False


def _choose(candidates: list[tuple[Finding, Fix]]) -> tuple[list[tuple[Fix, list[Finding]]], bool]:
    """Non-overlapping fixes in file order (identical fixes merged), and whether some were left out."""
    chosen: list[tuple[Fix, list[Finding]]] = []
    left = False
    for f, fx in sorted(candidates, key=lambda c: (min(e.line for e in c[1].edits), c[0].sort_key())):
        same = next((c for c in chosen if c[0].edits == fx.edits), None)
        if same is not None:
            same[1].append(f)
        elif any(_overlaps(fx, c[0]) for c in chosen):
            left = True
        else:
            chosen.append((fx, [f]))
    return chosen, left


class _Checker:
    """Re-checks a file's new text in memory with the run's rules, engines and tokenizer."""

    def __init__(self, settings: Settings):
        from patchaudit.pipeline.context import load_tokenizer, open_engines
        from patchaudit.pipeline.run_rules import resolve_rules

        self.settings = settings
        self.rules = resolve_rules(settings)
        self._engines: Any = None
        self._opened = False
        self._open = lambda: open_engines(settings)
        self.tokenizer = load_tokenizer(settings) if settings.tokenizer else None
        self.hunks: dict[tuple[str, str], list[dict]] = {}  # (path, text) -> its exact-mode hunk records

    @property
    def engines(self) -> Any:
        if not self._opened:
            self._engines, self._opened = self._open(), True
        return self._engines

    def check(self, path: str, text: str) -> tuple[list[Finding], list[FileError]]:
        from patchaudit.pipeline.analyse import analyse_file

        kind = classify(path) or "text"
        res = analyse_file(
            SourceFile(path, kind), self.settings, self.rules, self.engines, self.tokenizer, data=text.encode("utf-8")
        )
        self.hunks[(path, text)] = res.hunks
        return res.findings, res.errors


def _worse(before: list[Finding], after: list[Finding], errors: list[FileError]) -> str | None:
    """Why the findings `after` a fix are worse than `before`, or None."""
    if errors:
        return f"the fixed file has errors ({errors[0].message})"
    # the rules whose new findings always refuse a fix: the patch no longer reads, no longer
    # parses as Python, or applies worse (a hunk that fails or needs fuzz)
    for code in codes_with_role("breaks-patch"):
        if sum(f.code == code for f in after) > sum(f.code == code for f in before):
            return f"it introduces {code}"
    old = Counter(f.code for f in before if f.severity.value == "error")
    new = Counter(f.code for f in after if f.severity.value == "error")
    for code, n in new.items():
        if n > old.get(code, 0):
            return f"it introduces a new {code} error"
    return None


def _breaks_python(path: str, old: str, new: str) -> bool:
    from patchaudit.inputs.pyast import parse_uncached

    return classify(path) == PYTHON and parse_uncached(new) is None and parse_uncached(old) is not None


def _describe(fx: Fix, findings: list[Finding]) -> str:
    f = findings[0]
    return f"{f.path}:{f.line}: {f.code} ({fx.description})"


def _apply_pass(
    ff: FileFix, chosen: list[tuple[Fix, list[Finding]]], before: list[Finding], checker: _Checker, out: FixOutcome
) -> tuple[list[Finding], bool]:
    """Apply `chosen` to `ff.new`, re-checked; (the findings of the new text, whether it changed)."""
    from patchaudit.patching.patchedit import PatchEditError

    def attempt(fixes: list[tuple[Fix, list[Finding]]]) -> tuple[str, list[Finding]] | str:
        try:
            text = apply_edits(ff.path, ff.new, [fx for fx, _ in fixes])
        except PatchEditError as exc:
            return f"it cannot be applied: {exc}"
        if _breaks_python(ff.path, ff.new, text):  # the rules' pre-filter may not parse the file at all
            return "the fixed Python does not parse"
        findings, errors = checker.check(ff.path, text)
        why = _worse(before, findings, errors)
        return why if why is not None else (text, findings)

    def solve(base: list, items: list) -> tuple[list, tuple[str, list[Finding]] | None]:
        """The fixes of `items` that can be kept on top of `base`: all if they pass together,
        else each half on its own (bisection: a few bad fixes cost a few re-checks each)."""
        got = attempt(base + items)
        if not isinstance(got, str):
            return items, got
        if len(items) == 1:
            out.messages.append(f"fix dropped for {_describe(*items[0])}: {got}")
            return [], None
        mid = len(items) // 2
        left, left_got = solve(base, items[:mid])
        right, right_got = solve(base + left, items[mid:])
        return left + right, right_got or left_got

    kept, best = solve([], chosen)
    if best is None:
        return before, False
    ff.new = best[0]
    ff.fixed += sum(len(fs) for _, fs in kept)
    return best[1], True


def _root(path: str, root: str | None) -> str:
    """The folder a fixed file is reached from: the run's project root (its path and
    everything above are the user's; below it no symlink is followed), or, for a caller
    that names none, the file's own folder."""
    return root if root is not None else os.path.dirname(os.path.abspath(path))


def _read(path: str, settings: Settings) -> tuple[str, os.stat_result]:
    """The text of `path` as `--fix` will replace it: read through no symlink below the
    project root, a regular file only (Refused, ReadError)."""
    from patchaudit.files.reader import decode_utf8
    from patchaudit.files.safefs import below, open_folder

    root = _root(path, settings.project_root)
    parts = below(root, path)
    with open_folder(root, parts[:-1]) as folder:
        data, st = folder.read_file(parts[-1], settings.max_file_size)
    return decode_utf8(path, data), st


def fix_findings(
    result: RunResult,
    settings: Settings,
    *,
    unsafe: bool = False,
    refilter: Callable[[list[Finding]], list[Finding]] | None = None,
) -> FixOutcome:
    """The fixes of `result`'s findings applied in memory (module docstring).  `refilter`
    is applied to the re-checked findings of a changed file (the run's --diff-base or
    baseline filter), so the remaining findings are those the user would be shown."""
    from patchaudit.config.registry import all_rules

    rules = all_rules()
    out = FixOutcome()
    by_path: dict[str, list[Finding]] = {}
    for f in result.findings:
        by_path.setdefault(f.path, []).append(f)
    broken = {e.path for e in result.errors}
    checker: _Checker | None = None
    accepted: dict[str, str] = {}  # fixed patches (absolute path -> new text) their sets were verified with
    for path, findings in by_path.items():
        fixable = [(f, fx) for f in findings if (fx := effective_fix(f, rules)) is not None]
        applied = [(f, fx) for f, fx in fixable if fx.safe or unsafe]
        out.unsafe_available += len(fixable) - len(applied)
        if not applied:
            out.remaining.extend(findings)
            continue
        if path in broken:
            out.messages.append(f"{path}: not fixed: the check reported an error for this file")
            out.remaining.extend(findings)
            continue
        try:
            text, st = _read(path, settings)
        except OSError as exc:  # ReadError, Refused (a symlink, a FIFO, outside the root)
            out.messages.append(f"{path}: not fixed: {_why(exc, path)}")
            out.remaining.extend(findings)
            continue
        checker = checker or _Checker(settings)
        ff = FileFix(path, text, text, stat=st, before=list(findings))
        current = _fix_file(ff, findings, applied, rules, unsafe, checker, out)
        if ff.new != ff.old and classify(path) == PATCH:
            current = _keep_the_set(ff, findings, current, accepted, checker, out)
        ff.hunks = checker.hunks.get((path, ff.new)) if ff.new != ff.old else None
        checker.hunks.clear()
        out.files.append(ff)
        if ff.new == ff.old:
            out.remaining.extend(findings)
        else:
            # the rules that see the whole patch set are not re-run on one file: their findings stay
            kept = [f for f in findings if _sees_set(rules, f.code)]
            ff.after = kept + (refilter(current) if refilter else current)
            out.remaining.extend(ff.after)
    out.remaining.sort(key=Finding.sort_key)
    return out


def _keep_the_set(
    ff: FileFix, findings: list[Finding], current: list[Finding], accepted: dict, checker: _Checker, out: FixOutcome
) -> list[Finding]:
    """A fixed patch of a recipe's set is kept only if the whole set still applies with the
    recipe's command (pipeline/fix_stack.py); else its fixes are not written, and the run
    says why.  The findings of the text kept."""
    import os

    from patchaudit.pipeline.fix_stack import stack_breaks

    key = os.path.abspath(ff.path)
    why = stack_breaks(key, {**accepted, key: ff.new}, checker.settings, checker.engines)
    if why is None:
        accepted[key] = ff.new
        return current
    out.messages.append(f"{ff.path}: fixes not written ({ff.fixed} refused): {why}")
    ff.new, ff.fixed = ff.old, 0
    return findings


def _sees_set(rules: dict[str, type[Rule]], code: str) -> bool:
    rule = rules.get(code)
    return bool(rule is not None and rule.sees_patch_set())


def _fix_file(
    ff: FileFix,
    findings: list[Finding],
    applied: list[tuple[Finding, Fix]],
    rules: dict[str, type[Rule]],
    unsafe: bool,
    checker: _Checker,
    out: FixOutcome,
) -> list[Finding]:
    """The fix loop on one file; returns the findings of its final text."""
    current = findings
    candidates = applied
    for _ in range(MAX_PASSES):
        chosen, left = _choose(candidates)
        if not chosen:
            break
        current, changed = _apply_pass(ff, chosen, current, checker, out)
        if not changed or not left:
            break
        candidates = [(f, fx) for f in current if (fx := effective_fix(f, rules)) is not None and (fx.safe or unsafe)]
    return current


def _why(exc: OSError, path: str = "") -> str:
    """What `exc` says about `path`; a folder on the way that was refused is named."""
    reason = str(getattr(exc, "reason", None) or exc.strerror or exc)
    where = getattr(exc, "path", None) or exc.filename
    if isinstance(where, str) and path and os.path.abspath(where) != os.path.abspath(path):
        return f"{os.path.relpath(where) if not os.path.isabs(path) else where} {reason}"
    return reason


def write_fixes(outcome: FixOutcome, root: str | None = None) -> list[FileError]:
    """Write every changed file, whole or not at all.  Each is reached from `root` (the
    project root) one folder at a time without following a symlink, checked to be the
    regular, writable file that was read (Folder.check_rewrite), and staged to a temporary
    file in that folder, renamed over it at the end (dir-fd: a folder swapped meanwhile
    is never written into).  If one cannot be staged, none is written; a file not
    written counts no fix and keeps its findings (FixOutcome.unwritten)."""
    from patchaudit.files.safefs import Folder, below, open_folder

    folders: dict[tuple[str, ...], Folder] = {}
    staged: list[tuple[FileFix, Folder, str, str]] = []  # (file, folder, its name, temporary name)
    errors: list[FileError] = []
    try:
        for ff in outcome.changed:
            try:
                top = _root(ff.path, root)
                parts = below(top, ff.path)
                key = (top, *parts[:-1])
                if key not in folders:
                    folders[key] = open_folder(top, parts[:-1])
                folder = folders[key]
                st = folder.check_rewrite(parts[-1], ff.stat)
                fd, tmp = folder.temp(".patchaudit-")
                staged.append((ff, folder, parts[-1], tmp))
                with os.fdopen(fd, "wb") as fh:
                    fh.write(ff.new.encode("utf-8", "surrogateescape"))
                    fh.flush()
                    os.fsync(fh.fileno())
                    if hasattr(os, "fchmod"):
                        os.fchmod(fh.fileno(), stat.S_IMODE(st.st_mode))
            except (OSError, ValueError) as exc:
                why = _why(exc, ff.path) if isinstance(exc, OSError) else str(exc)
                for _, where, _, tmp in staged:
                    where.unlink(tmp)
                for other in outcome.changed:
                    outcome.unwritten(other, why if other is ff else "another fixed file could not be written")
                return [FileError(ff.path, f"cannot write the fixed file: {why}; no file was changed")]
        for ff, folder, name, tmp in staged:
            try:
                folder.check_rewrite(name, ff.stat)  # still the file that was read
                folder.rename(tmp, name)
            except OSError as exc:
                folder.unlink(tmp)
                outcome.unwritten(ff, _why(exc, ff.path))
                errors.append(FileError(ff.path, f"cannot write the fixed file: {_why(exc, ff.path)}"))
    finally:
        for folder in folders.values():
            folder.close()
    return errors


def summary(outcome: FixOutcome, diff: bool) -> list[str]:
    """ruff's closing lines: "Found N errors (M fixed, K remaining)." / "Would fix M errors.",
    and how many more `--unsafe-fixes` would fix."""
    lines = []
    fixed, left = outcome.fixed, len(outcome.remaining)
    if diff:
        lines.append(f"Would fix {fixed} error{'s' if fixed != 1 else ''}.")
    else:
        total = fixed + left
        lines.append(f"Found {total} error{'s' if total != 1 else ''} ({fixed} fixed, {left} remaining).")
    if outcome.unsafe_available:
        n = outcome.unsafe_available
        lines.append(f"{n} fix{'es' if n != 1 else ''} available with --unsafe-fixes.")
    return lines
