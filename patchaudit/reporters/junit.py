"""`--output-format junit`: JUnit XML, as CI test-report viewers read it (GitLab, Jenkins,
Azure, GitHub test-reporter actions), in ruff's layout.

    <testsuites name="patchaudit" tests="3" failures="3" errors="0">
      <testsuite name="a.py" tests="1" failures="1" errors="0">
        <testcase name="org.patchaudit.PA101" classname="a.py" line="1" column="7">
          <failure message="`legacy_load_mm_data` called without ...">line 1, col 7, ...</failure>
        </testcase>
      </testsuite>
    </testsuites>

One test suite per reported file, one failed test case per finding (its message
whole in the failure's text, its headline as `message`, the trace after it); a run
without findings is one passing case, as ruff writes it.  Files that could not be
read are test cases with an `<error>`.  Every text is shown with `visible()`: XML
1.0 cannot hold control characters, and a file name's undecodable bytes are `\\xff`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from patchaudit.model.escape import visible
from patchaudit.model.message import split_message


def _case(suite: ET.Element, name: str, classname: str, **attrs: Any) -> ET.Element:
    return ET.SubElement(
        suite, "testcase", {"name": name, "classname": classname, **{k: str(v) for k, v in attrs.items()}}
    )


def render(result, *, color: bool = False, rules=None, **_: Any) -> str:
    by_file: dict[str, list] = {}
    for f in result.findings:
        by_file.setdefault(f.path, []).append(f)
    errors = list(result.errors)
    root = ET.Element(
        "testsuites",
        {
            "name": "patchaudit",
            "tests": str(max(1, len(result.findings)) + len(errors)),
            "failures": str(len(result.findings)),
            "errors": str(len(errors)),
        },
    )
    for path, findings in by_file.items():
        name = visible(path)
        n = str(len(findings))
        suite = ET.SubElement(root, "testsuite", {"name": name, "tests": n, "failures": n, "errors": "0"})
        for f in findings:
            case = _case(suite, f"org.patchaudit.{visible(f.code)}", name, line=f.line, column=f.column)
            body = [f"line {f.line}, col {f.column}, {visible(f.message)}"]
            body += [f"  {k}. {visible(s.path)}:{s.line}: {visible(s.note)}" for k, s in enumerate(f.trace, 1)]
            failure = ET.SubElement(
                case, "failure", {"message": visible(split_message(f.message).headline), "type": visible(f.code)}
            )
            failure.text = "\n".join(body)
    if errors:
        n = str(len(errors))
        suite = ET.SubElement(root, "testsuite", {"name": "patchaudit", "tests": n, "failures": "0", "errors": n})
        for e in errors:
            case = _case(suite, f"org.patchaudit.read {visible(e.path)}", visible(e.path))
            ET.SubElement(case, "error", {"message": visible(e.message)}).text = visible(str(e))
    if not result.findings:
        suite = ET.SubElement(root, "testsuite", {"name": "patchaudit", "tests": "1", "failures": "0", "errors": "0"})
        _case(suite, "No errors found", "patchaudit")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
