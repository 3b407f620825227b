"""`--format github`: GitHub Actions workflow commands, one line per finding.

    ::error file=patches/sglang.patch,line=10,col=9,endColumn=44,title=PA101 legacy-loader-drops-input-ids::message

GitHub shows each as an annotation on the file and line of the pull request.
Severity maps to `error`, `warning` and `notice`.  The message carries the
engine location and the trace (as escaped newlines, so the command stays on
one line).  Files that could not be read follow as `::error` lines.  Paths are
as reported, relative to the working directory: run from the repository root.

Escaping (patchaudit/model/escape.py): property values and the message
follow the runner's rules (`%` `\r` `\n` as `%25` `%0D` `%0A`; in properties
also `:` `,` as `%3A` `%2C`), so `file=` names the real file even when its
name holds a newline; every other control character is a visible escape
(`\x1b`), and a path, symbol or note quoted inside the message is escaped
whole (its newline shows as `\n`), so every line of the output is one of
these annotations.
"""

from __future__ import annotations

from patchaudit.model.escape import command_data, command_property, visible

_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}

escape_data = command_data
escape_property = command_property


def _path(p: str) -> str:
    p = p.replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    return p


def format_finding(f) -> str:
    line, column, end_line, end_column = f.region()
    props = [f"file={escape_property(_path(f.path))}", f"line={line}", f"col={column}"]
    if end_line != line:
        props.append(f"endLine={end_line}")
    else:
        props.append(f"endColumn={end_column}")
    props.append(f"title={escape_property(f'{f.code} {f.name}')}")
    message = f.message
    if f.target is not None:
        where = visible(f.target.path) + (f":{f.target.line}" if f.target.line else "")
        message += f"\nengine: {where}" + (f" in {visible(f.target.symbol)}" if f.target.symbol else "")
    if f.trace:
        message += "\ntrace:" + "".join(
            f"\n  {k}. {visible(s.path)}:{s.line}: {visible(s.note)}" for k, s in enumerate(f.trace, 1)
        )
    return f"::{_LEVEL[f.severity.value]} {','.join(props)}::{escape_data(message)}"


def format_error(e) -> str:
    props = [f"file={escape_property(_path(e.path))}"]
    if e.line:
        props.append(f"line={e.line}")
    props.append("title=patchaudit")
    return f"::error {','.join(props)}::{escape_data(e.message)}"


def render(result, *, color: bool = False, rules=None) -> str:
    lines = [format_finding(f) for f in result.findings]
    lines += [format_error(e) for e in getattr(result, "errors", []) or []]
    return "".join(line + "\n" for line in lines)
