"""The whole-repository pre-pass costs work linear in the modules of an import cycle.

A checkout of a few thousand tiny modules importing each other in a ring made the
pre-pass quadratic (500 modules: 10 s; 10,000: killed after 20 minutes): each module's
pre-filter asked the view for every module's sinks, and the request-builder pass compared
every builder with every file.  The work is counted here, never timed.
"""

from __future__ import annotations

from patchaudit.analysis.repo_index import RepoIndex
from patchaudit.analysis.repo_summaries import FunctionSummary, ModuleSummary, RepoView, Signature
from patchaudit.pipeline import repo_index
from patchaudit.pipeline.repo_entries import Entry

N = 3000


class CountingDict(dict):
    """A dict that counts the values read through `values()` (a walk over the summaries)."""

    reads = 0

    def values(self):
        CountingDict.reads += len(self)
        return super().values()


def _ring_view() -> RepoView:
    sig = Signature(("x",), (), None, None, "function")
    summaries = CountingDict()
    for i in range(N):
        path = f"/r/pkg/m{i}.py"
        f = FunctionSummary(f"f{i}", path, sig, param_sinks={"x": (("ids", "sink", (), None),)})
        summaries[path] = ModuleSummary(path, {f"f{i}": f})
    return RepoView(RepoIndex(), summaries)


def test_the_view_walks_its_summaries_once_per_state_not_per_module():
    view = _ring_view()
    CountingDict.reads = 0
    for _ in range(N):  # PA102's pre-filter asks for every file of the scan
        assert len(view.sinks()) == N
        view.sources()
    assert CountingDict.reads <= 4 * N  # was N * N


class CountingBytes(bytes):
    """File content that counts the substring searches made in it."""

    searches = 0

    def __contains__(self, other) -> bool:
        CountingBytes.searches += 1
        return super().__contains__(other)


def test_request_builders_are_found_in_work_linear_in_the_ring():
    entries: dict[str, Entry] = {}
    fresh: dict[str, bytes] = {}
    for i in range(N):
        key = f"/r/pkg/m{i}.py"
        nxt = (i + 1) % N
        # half the ring holds a source, half are request builders the next module calls
        entries[key] = Entry(b"", True, source=i % 2 == 0, seed={f"build{i}"} if i % 2 else set())
        fresh[key] = CountingBytes(f"from pkg import m0, m{nxt}\n\ndef build{i}(x):\n    return m{nxt}.build{nxt}(x)\n".encode())
    CountingBytes.searches = 0
    repo_index._needed(entries, fresh, None)
    assert CountingBytes.searches <= 2 * N  # was (N / 2) * N
    # the answers are those of the quadratic comparison: a builder is needed when another
    # file that names a source module calls it by name
    assert all(entries[f"/r/pkg/m{i}.py"].needed for i in range(1, N, 2))
    lone = {"/r/a.py": Entry(b"", True, source=False, seed={"unused_builder"}), "/r/pkg/m0.py": entries["/r/pkg/m0.py"]}
    repo_index._needed(lone, {"/r/a.py": b"def unused_builder(x):\n    return x\n"}, None)
    assert not lone["/r/a.py"].needed  # named by no other file


class CountingIndex(RepoIndex):
    """An index where every module is linked to every other (all import the sample type's
    module), counting the questions."""

    asked = 0

    def linked(self, a: str, b: str) -> bool:
        CountingIndex.asked += 1
        return True


def test_dependency_keys_of_a_ring_of_carriers_cost_linear_work():
    taint = (("ids", ("/r/pkg/m0.py", 1, 0), ()),)
    summaries = {f"/r/pkg/m{i}.py": ModuleSummary(f"/r/pkg/m{i}.py", carriers={f"f{i % 7}": taint}) for i in range(N)}
    view = RepoView(CountingIndex(), summaries)
    CountingIndex.asked = 0
    keys = {path: view.dependency_key(path) for path in summaries}
    assert CountingIndex.asked <= 10 * N  # was N * N
    # a carrier that changes changes the keys that read it; one unchanged keeps them
    first = next(iter(summaries))
    original = summaries[first]
    view.put(ModuleSummary(first, carriers={"f0": (("ids", ("/r/pkg/m0.py", 2, 0), ()),)}))
    assert view.dependency_key("/r/pkg/m1.py") != keys["/r/pkg/m1.py"]
    view.put(original)
    assert view.dependency_key("/r/pkg/m1.py") == keys["/r/pkg/m1.py"]
