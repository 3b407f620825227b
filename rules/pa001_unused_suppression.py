from __future__ import annotations

import re

from patchaudit.lint.rule import Example, Rule
from patchaudit.model.findings import Edit, Finding, Fix, Severity
from patchaudit.units.suppression import SUPPRESS_RE


class UnusedSuppression(Rule):
    """
    Flags `# patchaudit: ignore[...]` comments that suppress nothing (off by default).

    ## What it does
    After the other rules have run on a file, looks at every suppression
    comment (`# patchaudit: ignore` or `# patchaudit: ignore[PA101, PA104]`)
    and reports those that did not suppress a finding on their line: a blanket
    comment on a line without findings, a listed code that reported nothing
    there, or a code that is no rule at all.  Codes of rules that could not run
    in this check (not selected, or needing an engine or tokenizer that was not
    given) are not judged, and neither are codes of the rules that judge the
    whole patch set (PA304) when given in a list.  Like ruff's RUF100
    (unused-noqa), it is opt-in: `--extend-select PA001`.

    Fix (safe): the unused codes are removed from the list, the whole comment
    when none is left (the line's code stays; a line that held only the comment
    goes, in a patch too).

    ## Why is this bad?
    A suppression outlives the problem it hid: once the code is fixed the
    comment stays, and the next real finding on that line is hidden without
    anyone deciding so.  A misspelled code (`PA11` for `PA101`) suppresses the
    wrong thing or nothing, while looking like a decision.

    ## Example
    ```python
    out = self.load_mm_data(prompt=text)  # patchaudit: ignore[PA101]
    ```

    ## Use instead
    ```python
    out = self.load_mm_data(prompt=text)
    ```

    ## Incident
    Suppression comments copied along with engine patches across versions
    (slime's `docker/patch/<version>/` folders) keep hiding findings after the
    hunk that needed them changed; ruff, flake8 and pylint all grew the same
    check (RUF100, flake8-noqa, `useless-suppression`).
    """

    code = "PA001"
    roles = frozenset({"unused-suppression"})
    name = "unused-suppression"
    severity = Severity.WARNING
    default_enabled = False
    kinds = frozenset()  # judged by the runner from the other rules' results
    fix = "safe"

    VALID = [
        Example("x = 1\n", title="no suppression"),
        Example(
            "out = self.load_mm_data(prompt=text)  # patchaudit: ignore[PA101]\n",
            title="a code of a rule that did not run (only PA001 selected)",
        ),
        Example("x = 1  # patchaudit: ignore[PA101, PA001]\n", title="PA001 listed: the comment is kept on purpose"),
    ]
    INVALID = [
        Example(
            "out = self.load_mm_data(prompt=text)  # patchaudit: ignore\n",
            line=1,
            contains="suppresses nothing",
            title="blanket comment without findings",
        ),
        Example(
            "x = 1  # patchaudit: ignore[PA999]\n",
            line=1,
            contains="unknown rule code PA999",
            title="a code that is no rule",
            expected_fix="x = 1\n",
        ),
        Example(
            "x = 1  # patchaudit: ignore[PA999, PA2]  # keep: reviewed\n",
            count=1,
            line=1,
            contains="PA999",
            title="one unknown code of two: the other stays, and the comment after it",
            expected_fix="x = 1  # patchaudit: ignore[PA2]  # keep: reviewed\n",
        ),
        Example(
            "def f():\n    # patchaudit: ignore\n    return 1\n",
            line=2,
            title="a comment alone on its line: the line goes",
            expected_fix="def f():\n    return 1\n",
        ),
        Example(
            """\
            --- a/python/sglang/srt/x.py
            +++ b/python/sglang/srt/x.py
            @@ -1,2 +1,2 @@
             a = 1
            -b = 2
            +b = 3  # patchaudit: ignore
            """,
            kind="patch",
            line=6,
            title="in an added patch line",
            expected_fix="""\
            --- a/python/sglang/srt/x.py
            +++ b/python/sglang/srt/x.py
            @@ -1,2 +1,2 @@
             a = 1
            -b = 2
            +b = 3
            """,
        ),
        Example(
            """\
            --- a/python/sglang/srt/x.py
            +++ b/python/sglang/srt/x.py
            @@ -1,2 +1,3 @@
             a = 1
            +# patchaudit: ignore[PA999]
             b = 2
            @@ -10,2 +11,2 @@
             c = 1
            -d = 2
            +d = 3
            """,
            kind="patch",
            line=5,
            title="a comment-only added line: the line goes, the next hunk moves up",
            expected_fix="""\
            --- a/python/sglang/srt/x.py
            +++ b/python/sglang/srt/x.py
            @@ -10,2 +10,2 @@
             c = 1
            -d = 2
            +d = 3
            """,
        ),
    ]

    @classmethod
    def suppression_findings(cls, path: str, unused, lines: list[str], rules, ran, known) -> list[Finding]:
        """The driver's entry for the role "unused-suppression": this rule's findings on one
        file, after the other rules ran (`unused_suppression_findings`)."""
        return unused_suppression_findings(path, unused, lines, rules, ran, known)


def unused_suppression_findings(path: str, unused, lines: list[str], rules, ran, known) -> list[Finding]:
    """PA001 findings for the unused suppressions of one file.

    `unused` is `FileResult.unused_suppressions` ((line, codes or None)),
    `lines` the text the comments were found in, `rules` the selected rule
    classes, `ran` the subset that could run on this file, `known` every rule code of the pack.
    """
    ran_codes = [r.code for r in ran if not r.sees_patch_set() and r.code != UnusedSuppression.code]
    is_patch = path.lower().endswith((".patch", ".diff"))
    out = []
    for line, codes in unused:
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        m = SUPPRESS_RE.search(text)
        column = (m.start() + 1) if m else 1
        end = (m.end() + 1) if m else column
        messages = []
        judged: list[str] = []
        if codes is None:
            messages.append("blanket `# patchaudit: ignore` suppresses nothing on this line; remove it")
        else:
            if any(UnusedSuppression.code.startswith(c) for c in codes):
                continue  # `ignore[PA001]`: the comment is kept on purpose
            for c in codes:
                if not any(k.startswith(c) for k in known):
                    messages.append(f"unknown rule code {c} in a suppression comment")
                    judged.append(c)
                elif any(k.startswith(c) for k in ran_codes):
                    messages.append(f"unused suppression: {c} reports nothing on this line; remove it")
                    judged.append(c)
        fix = removal_fix(line, text, None if codes is None else judged, is_patch) if m and messages else None
        for msg in messages:
            out.append(
                Finding(
                    code=UnusedSuppression.code,
                    name=UnusedSuppression.name,
                    severity=UnusedSuppression.severity,
                    message=msg,
                    path=path,
                    line=line,
                    column=column,
                    end_line=line,
                    end_column=end,
                    fix=fix,
                )
            )
    return out


def removal_fix(line: int, text: str, codes: list[str] | None, is_patch: bool) -> Fix | None:
    """The fix removing `codes` (None: the blanket comment) from the suppression comment on
    `text`, the whole comment when no code is left, the line when it held nothing else."""
    m = SUPPRESS_RE.search(text)
    if m is None:
        return None
    if codes is not None and m.group("codes") is not None:
        listed = [c.strip() for c in m.group("codes").split(",") if c.strip()]
        left = [c for c in listed if c.upper() not in codes]
        if left:
            new = text[: m.start("codes")] + ", ".join(left) + text[m.end("codes") :]
            return Fix(f"remove {', '.join(codes)} from the suppression", (Edit(line, line, (new,)),))
    head, rest = text[: m.start()], text[m.end() :].lstrip()
    what = "remove the unused suppression comment"
    code = head[1:] if is_patch and head.startswith("+") else head
    if not code.strip() and not rest:
        return Fix(what, (Edit(line, line, ()),))  # the line held the comment only
    if rest:
        new = head + (rest if rest.startswith("#") else "# " + rest)
    else:
        new = re.sub(r"[ \t]+$", "", head)
    return Fix(what, (Edit(line, line, (new,)),))
