"""Hostile recipes and sed expressions, property-based: the recipe reader and the sed
translator never hang and never raise anything but their documented errors.

=================  ==========================================  =====================
target             entry point                                 allowed error
=================  ==========================================  =====================
recipe             `inputs.recipes.read_recipe` (shell,        none (problems are
                   Dockerfile, series)                         returned)
sed                `inputs.sedexpr.parse_substitution` and     `Unsupported`
                   `Substitution.apply_line`
=================  ==========================================  =====================

Texts are built from the shell fragments that reach deep into the reader (variables that
double, nested loops and branches, substitutions, here-documents, quotes, backticks) and
sed expressions from the regex fragments that backtrack in a backtracking engine.  Every
example runs under the wall-clock alarm of tests/test_hostile_readers.py (`no_hang`), a
safety net (`SAFETY_SECONDS`), and the work bounds of the reader are asserted.  The number of examples comes
from the hypothesis profile (tests/conftest.py): "ci" is bounded and derandomized;
`HYPOTHESIS_PROFILE=long python -m pytest -q -p no:cacheprovider tests/test_hostile_recipes.py`
runs 10,000 per target.
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st
from test_hostile_readers import no_hang  # (tests/ is on sys.path)

from patchaudit.inputs import recipes, shellcmd
from patchaudit.inputs.sedexpr import Unsupported, parse_substitution

#: the alarm of one example: a recipe may cost up to its bounds (1 MiB of expanded text
#: split into words: about a second), more on a loaded machine; a hang never ends
SAFETY_SECONDS = 20

SHELL_PIECES = [
    "A=$A$A", "A=x", "B=${A:-${B:-d}}", "${A}", "$A", "${A:=v}", "${A:+w}", "$(pwd)", '$(dirname "$0")',
    "$(", ")", "`", "'", '"', "\\\n", "\n", ";", "&&", "||", "|", "&", "#", " ", "\t",
    "for p in", "*.patch", "/*/*", "do", "done", "if", "then", "elif", "else", "fi", "while", "case", "esac",
    "{", "}", "<<EOF\n", "EOF\n", "<<-'PY'\n", "PY\n", "git apply", "git -C dir apply --3way", "patch -p1 <",
    "sed -i 's/a/b/'", "sed -E -i 's/(.+)+Q/R/' x.py", "cd sub", "export X=1", "pip install a==1",
    "FROM img:1\n", "ARG A=1\n", "ENV A=$A$A\n", "COPY a b/\n", "RUN ", "WORKDIR /w\n", "x",
]  # fmt: skip


@st.composite
def shell_texts(draw) -> str:
    pieces = draw(st.lists(st.sampled_from(SHELL_PIECES) | st.text(max_size=8), max_size=80))
    repeat = draw(st.integers(1, 30))
    return "".join(pieces) * (repeat if draw(st.booleans()) else 1)


@given(shell_texts(), st.sampled_from(["shell", "dockerfile", "series"]))
@example("A=xy\n" + "A=$A$A\n" * 24 + "git apply $A\n", "shell")
@example("if a; then\n" * 3000, "shell")
@example("echo " + "`a` " * 3000, "shell")
@example("FROM b\nENV A=xy\n" + "ENV A=$A$A\n" * 24, "dockerfile")
def test_recipe(text, kind):
    with no_hang(SAFETY_SECONDS):
        recipe = recipes.read_recipe("/r/build.sh", kind, text, folder="/r")
    assert recipe.budget.text <= recipes.MAX_RECIPE_TEXT + shellcmd.MAX_COMMAND
    assert len(recipe.steps) <= recipes.MAX_STEPS + 100
    for name, value in recipe.env.items():
        assert len(value) <= recipes.MAX_EXPANDED + shellcmd.MAX_COMMAND, name


REGEX_PIECES = [
    "(", ")", "\\(", "\\)", "(.+)+", "(a|aa)+", "(a*)*", ".*", ".+", "*", "+", "?", "\\+", "\\?", "|", "\\|",
    "{2,}", "\\{2,\\}", "{1000}", "[", "]", "[^a]", "[[:alpha:]]", "^", "$", "\\1", "\\n", "\\s", "\\w", "\\b",
    "\\<", "a", "b", "Q", "/", "\\/", "&", "\\",
]  # fmt: skip


@st.composite
def sed_scripts(draw) -> str:
    pattern = "".join(draw(st.lists(st.sampled_from(REGEX_PIECES) | st.text(max_size=3), max_size=20)))
    replacement = "".join(draw(st.lists(st.sampled_from(["&", "\\1", "\\n", "x", "\\U", "/"]), max_size=6)))
    flags = draw(st.sampled_from(["", "g", "2", "I", "gI", "w out", "e", ";s/a/b/"]))
    delim = draw(st.sampled_from(["/", "|", "#", ",", "a", "\\"]))
    return f"s{delim}{pattern}{delim}{replacement}{delim}{flags}"


LINES = st.sampled_from(["a" * 3000, "a" * 3000 + "!", "x" * 2000 + "Q", "ab" * 1500, "", "Q"]) | st.text(max_size=60)


@given(sed_scripts(), st.booleans(), LINES)
@example("s/(.+)+Q/R/", True, "x" * 3000)
@example("s/\\(a*\\)*b/R/g", False, "a" * 3000)
# found by this target: a replacement naming a group the pattern lacks raised IndexError
# when applied (GNU sed refuses the command: "invalid reference \\1 on `s' command's RHS")
@example("s//\\1/", False, "a")
def test_sed(script, extended, line):
    with no_hang(SAFETY_SECONDS):
        try:
            sub = parse_substitution(script, extended)
        except Unsupported:
            return
        assert isinstance(sub.apply_line(line), str)
