"""Traces are positioned late (flow_values.add_step / settle / Origin): the late fold must
give exactly the trace the eager one gave, and nothing unpositioned may leave the analysis."""

from __future__ import annotations

import pickle
import random

import pytest

from patchaudit.analysis.flow_values import (
    MAX_RAW_STEPS,
    MAX_STEPS,
    At,
    FileLine,
    Origin,
    Value,
    _merge,
    add_step,
    settle,
)


class _Lines:
    """Positions for fake nodes (ints standing for nodes): counts what is asked."""

    def __init__(self) -> None:
        self.asked = 0

    def line(self, node):
        self.asked += 1
        return node

    def start(self, node):
        self.asked += 1
        return (node, 4)


def _eager(first, steps):
    out = (first,)
    for line, note in steps:
        out = _merge(out, int(line) if type(line) is not FileLine else line, note)
    return out


@pytest.mark.parametrize("seed", range(40))
def test_the_late_fold_is_the_eager_fold(seed):
    rnd = random.Random(seed)
    flow = _Lines()
    n = rnd.choice([3, 10, MAX_STEPS + 5, MAX_RAW_STEPS + 7])
    plan = []
    for _ in range(n):
        line = rnd.randint(1, 6)  # few lines: many merges
        if rnd.random() < 0.2:
            line = FileLine(line, rnd.choice(["a.py", "b.py"]))
        plan.append((line, rnd.choice(["read", "stored", "read; stored", "sent"])))
    steps = ((1, "source"),)
    for line, note in plan:
        at = line if type(line) is FileLine or rnd.random() < 0.3 else At(flow, line)
        steps = add_step(steps, at, note)
    got = settle(steps)
    assert got == _eager((1, "source"), plan)
    assert all(type(l) is not At for l, _ in got)
    assert [getattr(l, "path", None) for l, _ in got] == [
        getattr(l, "path", None) for l, _ in _eager((1, "source"), plan)
    ]


def test_nothing_is_positioned_until_the_trace_is_read():
    flow = _Lines()
    v = Value({("L", Origin(flow, 7)): ((At(flow, 7), "source"),)})
    for node in (8, 9, 9, 12):
        v = v.with_step(At(flow, node), f"step {node}")
    assert flow.asked == 0
    assert v.key() == Value({("L", Origin(flow, 7)): ()}).key()  # an origin is its node
    ((_, origin, steps),) = v.find("L")
    assert flow.asked == 0  # one taint: given as it is
    assert settle(steps) == ((7, "source"), (8, "step 8"), (9, "step 9"), (12, "step 12"))
    assert repr(origin) == "(7, 4)"


def test_an_origin_leaves_as_its_position_and_a_raw_step_not_at_all():
    flow = _Lines()
    assert pickle.loads(pickle.dumps(Origin(flow, 3))) == (3, 4)
    with pytest.raises(TypeError, match="settle"):
        pickle.dumps(((At(flow, 3), "x"),))


def test_a_summary_holds_positions_not_nodes():
    from patchaudit.analysis.repo_summaries import taints_of

    flow = _Lines()
    v = Value({("L", Origin(flow, 7)): ((At(flow, 7), "source"),)}).with_step(At(flow, 9), "returned")
    ((label, origin, steps),) = taints_of(v, "/repo/m.py")
    assert (label, origin) == ("L", ("/repo/m.py", 7, 4)) and type(origin) is tuple
    assert [(int(l), l.path, n) for l, n in steps] == [(7, "/repo/m.py", "source"), (9, "/repo/m.py", "returned")]
