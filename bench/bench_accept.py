"""The table and the acceptance lines of bench/run.py: every bound of issues 7, 16 and 21 as
PASS/FAIL on this run's medians (`[ -- ]` where the row was not run)."""

from __future__ import annotations

from bench_data import RL_TREES
from bench_timing import Cell

LOAD = ", 1 core busy"
#: issue 21: under load the default jobs may be this much slower than 1 job
LOAD_SLACK = 1.10
BOUND_RL, BOUND_WARM, BOUND_ONE, BOUND_ONE_16 = 1.0, 0.2, 0.25, 0.3
BOUND_EXACT, BOUND_BUMP, BOUND_RSS = 3.0, 10.0, 500.0


def find(cells: list[Cell], tree: str, tool: str, config: str, *, exact: bool = False) -> Cell | None:
    for c in cells:
        if c.tree == tree and c.tool == tool and (c.config == config if exact else c.config.startswith(config)):
            return c
    return None


def table(cells: list[Cell]) -> list[str]:
    out = [
        "",
        f"{'tree':8} {'tool':10} {'configuration':50} {'median':>9}  {'runs':>4}  {'peak RSS':>9}  {'x pa*':>7}  check",
        "-" * 130,
    ]
    for tree_key in dict.fromkeys(c.tree for c in cells):
        ref = find(cells, tree_key, "patchaudit", "PA101, cold, default jobs", exact=True)
        for c in (c for c in cells if c.tree == tree_key):
            ratio = f"{c.median / ref.median:6.1f}x" if ref and c.tool not in ("patchaudit", "floor") else ""
            rss = f"{c.peak_mb:6.0f} MB" if c.peak_mb is not None else ""
            out.append(
                f"{c.tree:8} {c.tool:10} {c.config:50} {c.median:8.3f}s  {len(c.times):>4}  {rss:>9}  "
                f"{ratio:>7}  {c.check}"
            )
    out += [
        "",
        "* peer's median / patchaudit PA101 cold with the default jobs on the same tree.",
        "  peak RSS: the largest process of a run (its own or one of its workers'), the maximum over the runs.",
    ]
    return out


class Lines:
    def __init__(self) -> None:
        self.out: list[str] = []

    def __call__(self, text: str, ok: bool | None) -> None:
        mark = "PASS" if ok else "FAIL"
        self.out.append(f"  [{mark}] {text}" if ok is not None else f"  [ -- ] {text} (not measured)")

    def head(self, text: str) -> None:
        self.out.append(text)

    def floor(self, cell: Cell | None, bound: float | None = None) -> None:
        """Under the line before: the floor of that bound on this machine (bench/floors.py)."""
        if cell is None:
            return
        room = f"; {bound - cell.median:+.3f}s of the bound left above it" if bound is not None else ""
        self.out.append(f"         floor: {cell.median:.3f}s, {cell.config}: {cell.check}{room}")


def _jobs_lines(cells: list[Cell], line: Lines) -> None:
    """Default jobs against 1 job, per tree and configuration (and under load)."""
    trees = list(dict.fromkeys(c.tree for c in cells if c.tool == "patchaudit" and c.tree != "slime"))
    for loaded in (False, True):
        suffix = LOAD if loaded else ""
        slack = LOAD_SLACK if loaded else 1.0
        for t in trees:
            for label in ("PA101", "default rules"):
                one = find(cells, t, "patchaudit", f"{label}, cold, 1 job{suffix}", exact=True)
                dflt = find(cells, t, "patchaudit", f"{label}, cold, default jobs{suffix}", exact=True)
                if not one or not dflt:
                    continue
                what = "not more than 10% slower than" if loaded else "never slower than"
                line(
                    f"{t}: {label} cold{' with one core busy' if loaded else ''}, default jobs {what} 1 job: "
                    f"{dflt.median:.3f}s vs {one.median:.3f}s ({dflt.median / one.median:.2f}x)",
                    dflt.median <= slack * one.median,
                )
        if not loaded and not trees:
            line("default jobs vs 1 job", None)
    if not any(c.config.endswith(LOAD) for c in cells):
        line("under load (one core busy): default jobs vs 1 job", None)


def _same_findings(cells: list[Cell], line: Lines) -> None:
    """Findings identical with 1 job and the default jobs, cold and warm."""
    groups: dict[tuple[str, str], list[Cell]] = {}
    for c in cells:
        if c.tool == "patchaudit" and c.tree != "slime" and "changed file" not in c.config:
            label = c.config.split(",")[0]
            groups.setdefault((c.tree, label), []).append(c)
    for (t, label), group in groups.items():
        if len(group) < 2:
            continue
        differ = [c.config for c in group[1:] if c.found != group[0].found]
        line(
            f"{t}: {label}: the same {len(group[0].found)} findings in every configuration "
            f"({', '.join(c.config.split(', ', 1)[1] for c in group)})"
            + (f"; DIFFER: {', '.join(differ)}" if differ else ""),
            not differ,
        )


def _rl_lines(cells: list[Cell], line: Lines) -> None:
    """Each RL framework: the default rules cold under 1 s and faster than semgrep's taint rule."""
    for t in RL_TREES:
        d = find(cells, t, "patchaudit", "default rules, cold, default jobs", exact=True)
        taint = find(cells, t, "semgrep", "PA102 taint rule, ")
        taint = taint if taint and "literal" not in taint.config else None
        lit = find(cells, t, "semgrep", "PA102 taint rule, literal names")
        line(
            f"{t}: default rules cold under {BOUND_RL:g} s: {d.median:.3f}s" if d else f"{t}: default rules cold",
            d.median < BOUND_RL if d else None,
        )
        line.floor(find(cells, t, "floor", "default rules cold"), BOUND_RL)
        line(
            f"{t}: default rules cold faster than the semgrep PA102 taint rule: {d.median:.2f}s vs "
            f"{taint.median:.2f}s (findings {d.findings} / PA102 {sum(f[2] == 'PA102' for f in d.found)} vs "
            f"{taint.findings})"
            if d and taint
            else f"{t}: default rules vs semgrep taint",
            d.median < taint.median if d and taint else None,
        )
        if d and lit:
            line(
                f"{t}: default rules cold faster than the taint rule's literal-names variant (semgrep's "
                f"pre-filter on): {d.median:.2f}s vs {lit.median:.2f}s (its findings {lit.findings})",
                d.median < lit.median,
            )


def _issue21(cells: list[Cell], line: Lines) -> None:
    get = find
    sg = get(cells, "sglang", "semgrep", "PA101")
    pa101 = get(cells, "sglang", "patchaudit", "PA101, cold, default jobs", exact=True)
    dflt = get(cells, "sglang", "patchaudit", "default rules, cold, default jobs", exact=True)
    line(
        f"default rules cold on SGLang no slower than semgrep's one PA101 rule: {dflt.median:.2f}s vs {sg.median:.2f}s"
        if dflt and sg
        else "default rules on SGLang vs semgrep",
        dflt.median <= sg.median if dflt and sg else None,
    )
    line.floor(find(cells, "sglang", "floor", "default rules cold"), sg.median if sg else None)
    line(
        f"PA101 cold on SGLang >= 5x faster than semgrep: {sg.median / pa101.median:.1f}x"
        if pa101 and sg
        else "PA101 vs semgrep",
        sg.median / pa101.median >= 5 if pa101 and sg else None,
    )
    _rl_lines(cells, line)
    warm = get(cells, "sglang", "patchaudit", "default rules, warm")
    line(
        f"warm re-scan of SGLang under {BOUND_WARM:g} s: {warm.median:.3f}s" if warm else "warm re-scan",
        warm.median < BOUND_WARM if warm else None,
    )
    one = get(cells, "sglang", "patchaudit", "default rules, 1 changed file")
    line(
        f"one changed file (whole-repository analysis on) under {BOUND_ONE:g} s: {one.median:.3f}s"
        if one
        else "one changed file",
        one.median < BOUND_ONE if one else None,
    )
    line.floor(find(cells, "sglang", "floor", "python + import libcst"), BOUND_ONE)
    exact = [c for c in cells if c.tree == "slime" and c.config.startswith("exact")]
    for c in exact:
        line(f"{c.config}: under {BOUND_EXACT:g} s per patch set: {c.median:.2f}s", c.median < BOUND_EXACT)
    if not exact:
        line(f"exact mode per slime patch set under {BOUND_EXACT:g} s (give --slime PATH)", None)
    bump = get(cells, "slime", "patchaudit", "bump")
    line(
        f"{bump.config} under {BOUND_BUMP:g} s: {bump.median:.2f}s ({bump.peak_mb:.0f} MB)"
        if bump
        else f"bump under {BOUND_BUMP:g} s (give --slime PATH)",
        bump.median < BOUND_BUMP if bump else None,
    )
    rss = [
        c
        for c in cells
        if c.tree == "sglang" and c.tool == "patchaudit" and c.config.startswith("default") and c.peak_mb is not None
    ]
    top = max(rss, key=lambda c: c.peak_mb or 0.0) if rss else None
    line(
        f"peak RSS of the default rules on SGLang under {BOUND_RSS:g} MB: {top.peak_mb:.0f} MB ({top.config})"
        if top
        else "peak RSS of the default rules on SGLang",
        (top.peak_mb or 0.0) < BOUND_RSS if top else None,
    )
    _same_findings(cells, line)


def _earlier(cells: list[Cell], line: Lines) -> None:
    """The bounds of issue 7 (the benchmark's start) and issue 16 (whole-repository analysis)."""
    get = find
    pa101 = get(cells, "sglang", "patchaudit", "PA101, cold, default jobs", exact=True)
    fx = get(cells, "sglang", "fixit", "PA101")
    line(
        f"PA101 cold on SGLang >= 100x faster than fixit: {fx.median / pa101.median:.1f}x"
        if pa101 and fx
        else "PA101 vs fixit",
        fx.median / pa101.median >= 100 if pa101 and fx else None,
    )
    floors = [c for c in cells if c.tree == "sglang" and c.tool == "libcst"]
    for jobs in ("1 job", "default jobs"):
        d = get(cells, "sglang", "patchaudit", f"default rules, cold, {jobs}", exact=True)
        # the 1-process floor for 1 job, the floor with the most processes for the default
        floor = floors[0] if jobs == "1 job" and floors else (floors[-1] if floors else None)
        line(
            f"default rules cold on SGLang ({jobs}) <= 1/3 of the {floor.config}: {d.median / floor.median:.2f} of it"
            if d and floor
            else f"default rules vs parse floor ({jobs})",
            d.median <= floor.median / 3 if d and floor else None,
        )
    dv = get(cells, "verl", "patchaudit", "default rules, cold, default jobs", exact=True)
    sv = get(cells, "verl", "semgrep", "PA101")
    line(
        f"default rules cold on verl faster than semgrep's one rule: {dv.median:.2f}s vs {sv.median:.2f}s"
        if dv and sv
        else "default rules on verl vs semgrep",
        dv.median < sv.median if dv and sv else None,
    )
    warm = get(cells, "sglang", "patchaudit", "default rules, warm")
    line(
        f"warm re-scan of SGLang under 0.5 s: {warm.median:.3f}s" if warm else "warm re-scan",
        warm.median < 0.5 if warm else None,
    )
    one = get(cells, "sglang", "patchaudit", "default rules, 1 changed file")
    line(
        f"one changed file under {BOUND_ONE_16:g} s (issue 16): {one.median:.3f}s" if one else "one changed file",
        one.median < BOUND_ONE_16 if one else None,
    )
    line.floor(find(cells, "sglang", "floor", "python + import libcst"), BOUND_ONE_16)
    judged = [c for c in cells if c.check.startswith(("ok (", "DIFFERS")) or c.config.startswith("exact")]
    bad = [c for c in judged if c.check.startswith("DIFFERS") or "NOT APPLIED" in c.check]
    line(
        f"every tool reports the planted PA101 finding, every patch set applied ({len(bad)} of {len(judged)} differ)"
        if judged
        else "the planted PA101 finding",
        not bad if judged else None,
    )


def report(cells: list[Cell]) -> str:
    line = Lines()
    line.head("")
    line.head("Acceptance of issue 21 (medians of this run):")
    _jobs_lines(cells, line)
    _issue21(cells, line)
    line.head("")
    line.head("Earlier bounds (issues 7 and 16):")
    _earlier(cells, line)
    return "\n".join(table(cells) + line.out)
