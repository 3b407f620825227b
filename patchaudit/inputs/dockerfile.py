"""Dockerfile instructions, with the line each one (and each of its lines) starts on.

`instructions(text)` returns `Instruction(keyword, args, line)` for every instruction:
comment lines and blank lines are skipped, a line ending in the escape character
(`\\`, or the one a `# escape=` parser directive names) continues on the next line
(comment lines inside a continued instruction are dropped, as BuildKit does), and a
`RUN` here-document (`RUN <<EOF ... EOF`) becomes the script it holds.  The shell form of
`RUN` keeps its text for the shell reader (patchaudit/inputs/shellcmd.py), the JSON
(exec) form is turned into one command line.

Written here rather than with `dockerfile-parse` (PyPI): that library gives an
instruction's first and last line only, and a finding on a `sed -i` inside a ten-line
`RUN` must name the sed's own line; the continuation rule is all it would do for us.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass

_DIRECTIVE = re.compile(r"#\s*escape\s*=\s*(\S)", re.I)
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


@dataclass
class Instruction:
    keyword: str  # upper case: FROM, ARG, ENV, RUN, COPY, ADD, WORKDIR, ...
    args: str  # the text after the keyword, continuations joined with a newline kept
    line: int  # the line the instruction starts on


def instructions(text: str) -> list[Instruction]:
    lines = text.splitlines()
    escape = "\\"
    for raw in lines[:5]:  # parser directives come first
        m = _DIRECTIVE.match(raw.strip())
        if m:
            escape = m.group(1)
            break
        if raw.strip() and not raw.lstrip().startswith("#"):
            break
    out: list[Instruction] = []
    i = 0
    while i < len(lines):
        raw = lines[i]
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            i += 1
            continue
        start = i + 1
        parts = [raw]
        while parts[-1].rstrip().endswith(escape) and i + 1 < len(lines):
            i += 1
            nxt = lines[i]
            if nxt.strip().startswith("#"):
                parts.append(escape)  # a comment inside a continuation is dropped
                continue
            parts.append(nxt)
        i += 1
        # keep one line per source line so the shell reader counts lines right
        joined = "\n".join(parts)
        keyword, _, args = joined.strip().partition(" ")
        if "\t" in keyword:
            keyword, _, more = keyword.partition("\t")
            args = more + " " + args
        keyword = keyword.upper()
        m = _HEREDOC.search(args) if keyword == "RUN" else None
        if m and "\n" not in args.strip():
            body = []
            while i < len(lines) and lines[i].strip() != m.group(2):
                body.append(lines[i])
                i += 1
            i += 1
            out.append(Instruction(keyword, "\n" + "\n".join(body), start))
            continue
        if escape != "\\":
            args = args.replace(escape + "\n", "\\\n")
        out.append(Instruction(keyword, args, start))
    return out


def run_script(inst: Instruction) -> str:
    """The shell text of a RUN instruction (the exec form `["sh", "-c", "..."]` or
    `["git", "apply", "x"]` as one command line)."""
    args = inst.args.strip()
    if args.startswith("["):
        try:
            argv = json.loads(args.replace("\\\n", ""))
        except ValueError:
            return inst.args
        if isinstance(argv, list) and all(isinstance(a, str) for a in argv):
            if len(argv) >= 3 and argv[0].endswith("sh") and argv[1] == "-c":
                return argv[2]
            return " ".join(shlex.quote(a) for a in argv)
    # drop RUN flags (--mount=..., --network=...)
    return re.sub(r"^(\s*--[a-z-]+=\S+\s+)+", "", inst.args)


def copy_args(inst: Instruction) -> list[str] | None:
    """The sources and destination of COPY/ADD (flags such as `--from=` dropped), or None
    for a copy from another stage or image (`--from=`): not from the build context."""
    args = inst.args.replace("\\\n", " ").strip()
    if args.startswith("["):
        try:
            got = json.loads(args)
        except ValueError:
            return None
        return [a for a in got if isinstance(a, str)] if isinstance(got, list) else None
    words = args.split()
    out = []
    for w in words:
        if w.startswith("--"):
            if w.startswith("--from="):
                return None
            continue
        out.append(w)
    return out if len(out) >= 2 else None
