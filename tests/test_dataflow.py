"""The dataflow layer (patchaudit/analysis/dataflow.py) on its own, with a tiny test spec,
and the PA102/PA103 rules through the real pipeline beyond their examples.

The test spec: `src()` makes ids, `text_src()` text, `obj_src()` an object whose
`.ids`/`["ids"]` field is ids; `sink(x)` (not defined in the module) reports
whatever taint reaches it; a store into an attribute named `sink` reports too.
"""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

import pytest

from patchaudit.analysis.dataflow import IDS, OBJECT, TEXT, Flow, FlowSpec, Positions, analyse, path_matches
from patchaudit.config.registry import all_rules
from patchaudit.config.settings import Settings
from patchaudit.inputs.discover import SourceFile
from patchaudit.pipeline.analyse import analyse_file
from patchaudit.pipeline.runner import run_check

LABELS = ("ids", "txt", "obj")


class Spec(FlowSpec):
    kinds = {"ids": IDS, "txt": TEXT, "obj": OBJECT}

    def call(self, flow, site):
        if site.resolved:
            return None
        if site.name == "src":
            return flow.source("ids", site.node, "src")
        if site.name == "text_src":
            return flow.source("txt", site.node, "text")
        if site.name == "obj_src":
            return flow.source("obj", site.node, "obj")
        if site.name == "sink":
            for a in site.args:
                for _, origin, steps in flow.deep(a.value).find(LABELS)[:1]:
                    flow.report(a.node, "hit", steps, origin, "sink")
        return None

    def field(self, flow, base, key, node):
        if key == "ids" and base.has("obj"):
            return flow.derive(base, ["obj"], "ids", node, "field")
        return None

    def store(self, flow, site):
        if site.attr == "sink":
            for _, origin, steps in flow.deep(site.value).find(LABELS)[:1]:
                flow.report(site.node, "stored", steps, origin, "store sink")


class CountedPositions(Positions):
    """The columns asked for (lines are free on `ast`; a column may need the line's byte map)."""

    def __init__(self, text: str, asked: list | None):
        super().__init__(text)
        self.asked = asked

    def start(self, node):
        if self.asked is not None:
            self.asked.append(node)
        return super().start(node)


def run(code: str, spec: FlowSpec | None = None, count_positions: list | None = None):
    text = textwrap.dedent(code)
    return analyse(ast.parse(text), spec or Spec(), CountedPositions(text, count_positions))


def lines(code: str) -> list[int]:
    return [h.line for h in run(code)]


# --------------------------------------------------------------------------
# what the layer follows


@pytest.mark.parametrize("code", [
    "x = src()\nsink(x)\n",
    "x = src()\ny = x\nz = y\nsink(z)\n",
    "x = []\nx += src()\nsink(x)\n",
    "x = []\nx.extend(src())\nsink(x)\n",
    "x = []\nx.append(src())\nsink(x)\n",
    "x = [1]\nx.insert(0, src())\nsink(x)\n",
    "x = src()\nsink(x[0])\n",
    "x = src()\nsink(x[1:])\n",
    "x = src()\nsink(x[i])\n",
    "x = src()\nsink(list(x))\n",
    "x = src()\nsink(tuple(x))\n",
    "x = src()\nsink(torch.tensor(x, dtype=torch.long))\n",
    "x = src()\nsink(np.asarray(x))\n",
    "x = src()\nsink(x.tolist())\n",
    "x = src()\nsink(x.to(device).squeeze(0))\n",
    "x = src()\nsink([1, 2] + x)\n",
    "x = src()\nsink(x or [])\n",
    "x = src()\nsink(x if c else [])\n",
    "x = src()\nsink([t for t in x])\n",
    "x = src()\nfor t in x:\n    sink(t)\n",
    "if (x := src()):\n    sink(x)\n",
    "x = obj_src()\nsink(x['ids'])\n",
    "x = obj_src()\nsink(x.ids)\n",
    "x = obj_src()\nsink(x.get('ids'))\n",
    "x = obj_src().to('cuda')\nsink(x.ids)\n",
    "d = {'a': src()}\nsink(d['a'])\n",
    "d = {}\nd['a'] = src()\nsink(d['a'])\n",
    "d = {}\nd['a'] = src()\ne = {**d}\nsink(e['a'])\n",
    "d = dict(a=src())\nsink(d.get('a'))\n",
    "d = {}\nd.update(a=src())\nsink(d['a'])\n",
    "o = Output(ids=src(), n=1)\nsink(o.ids)\n",
    "t = text_src()\nsink(f'<s>{t}</s>')\n",
    "t = text_src()\nsink(str(t))\n",
    "t = text_src()\nsink('x' + t.strip())\n",
    "t = text_src()\nsink('{} {}'.format(a, t))\n",
    "t = text_src()\nsink(' '.join([t, u]))\n",
    "t = text_src()\nsink('%s!' % t)\n",
    "msgs = [{'role': 'user', 'content': text_src()}]\nsink(msgs)\n",
    "sample.tokens = src()\nsink(sample.tokens)\n",
    "sample.tokens = src()\nsink(sample.tokens[:5])\n",
    "state.sample.tokens = src()\nsink(state.sample.tokens)\n",
])
def test_flows_reach_the_sink(code):
    assert len(run(code)) == 1, code


@pytest.mark.parametrize("code", [
    "x = src()\nsink(len(x))\n",
    "x = src()\nsink(x == [1])\n",
    "x = src()\nsink(f'{x}')\n",                        # an f-string ends an id flow
    "x = src()\nsink(str(x))\n",                        # so does str()
    "x = src()\nx = [1, 2]\nsink(x)\n",                 # reassigned before use
    "x = src()\ndel x\nsink(x)\n",
    "x = src()\nsink(unknown_function(x))\n",           # what the layer does not know is clean
    "x = obj_src()\nsink(x['pixel_values'])\n",
    "x = obj_src()\nsink(list(x))\n",                   # objects do not pass through sequence wrappers
    "d = {'a': src(), 'b': 1}\nsink(d['b'])\n",
    "t = text_src()\nsink(t.encode('utf-8') if False else len(t))\n",
    "sample.tokens = src()\nsample = Sample()\nsink(sample.tokens)\n",  # a new object
    "a, b = src(), [1]\nsink(b)\n",
    "a, *rest = [src(), 1, 2]\nsink(rest)\n",
    "*rest, last = [1, 2, src()]\nsink(rest)\n",
    "x = src()\nlambda: sink(x)\n",
])
def test_clean_values_do_not(code):
    assert run(code) == [], code


def test_tuple_unpacking_is_element_precise_across_a_return():
    code = """\
        def build():
            images = [load(p) for p in paths]
            return src(), images

        ids, images = build()
        sink(images)
        sink(ids)
        """
    assert lines(code) == [7]


def test_starred_unpacking_gets_the_middle_elements():
    assert lines("first, *middle, last = [1, src(), 2]\nsink(first)\nsink(middle)\nsink(last)\n") == [3]


def test_branches_join_and_loops_carry_values_around():
    assert lines("x = []\nif c:\n    x = src()\nsink(x)\n") == [4]
    # y only becomes tainted in the second iteration of the loop
    code = """\
        x = []
        y = []
        for i in range(3):
            y = x
            x = src()
        sink(y)
        """
    assert lines(code) == [6]
    code = """\
        x = []
        while cond():
            x = x + src()
        sink(x)
        """
    assert lines(code) == [4]


def test_try_with_and_match_blocks_are_followed():
    code = """\
        try:
            x = src()
        except ValueError as e:
            x = []
        finally:
            pass
        sink(x)
        with open(p) as fh:
            y = src()
        sink(y)
        match cmd:
            case "a":
                z = src()
            case _:
                z = None
        sink(z)
        """
    assert lines(code) == [7, 10, 16]


def test_returns_and_arguments_of_same_module_functions():
    code = """\
        def get():
            return src()

        def wrap(a, *, k=None):
            return list(a) + (k or [])

        def use(x, y):
            sink(y)

        use(1, get())
        use(y=wrap([], k=get()), x=1)
        sink(wrap(get()))
        """
    assert lines(code) == [8, 12]


def test_context_sensitive_summaries_keep_clean_calls_clean():
    code = """\
        def ident(x):
            return x

        a = ident(src())
        b = ident([1, 2])
        sink(b)
        sink(a)
        """
    assert lines(code) == [7]


def test_stores_into_parameters_are_seen_by_the_caller():
    code = """\
        def fill(sample, ids):
            sample.tokens = list(ids)

        def run(sample):
            fill(sample, src())
            sink(sample.tokens)
        """
    hits = run(code)
    assert [h.line for h in hits] == [6]
    notes = [n for _, n in hits[0].steps]
    assert any("set by `fill()`" in n for n in notes)


def test_attribute_state_is_passed_into_callees():
    code = """\
        def send(state):
            sink(state.sample.tokens)

        def run(state):
            state.sample.tokens = src()
            send(state)
        """
    assert lines(code) == [2]


def test_self_fields_cross_methods_and_base_classes():
    code = """\
        class Base:
            def prepare(self):
                self.ids = src()

        class Rollout(Base):
            def send(self):
                sink(self.ids)

            def other(self):
                self.helper()

            def helper(self):
                sink(self.unrelated)
        """
    assert lines(code) == [7]


def test_methods_resolve_through_self_and_static_methods_bind_no_self():
    code = """\
        class R:
            def ids(self, n):
                return src()[:n]

            @staticmethod
            def pick(a, b):
                return b

            def run(self):
                sink(self.ids(3))
                sink(R.pick(src(), [1]))
                sink(self.pick([1], src()))
        """
    assert lines(code) == [10, 12]


def test_star_args_and_kwargs_reach_parameters():
    code = """\
        def f(a, b, **kw):
            sink(b)
            sink(kw)

        args = [1, src()]
        f(*args)
        opts = {"b": src()}
        f(1, **opts)
        f(1, 2, extra=src())
        """
    assert sorted(set(lines(code))) == [2, 3]


def test_recursion_terminates_and_reaches_a_fixed_point():
    code = """\
        def walk(n, acc):
            if n == 0:
                return acc
            return walk(n - 1, acc + [n])

        def a(x):
            return b(x)

        def b(x):
            return a(x) if x else src()

        sink(walk(3, src()))
        sink(a(0))
        """
    assert lines(code) == [12, 13]


def test_module_globals_are_read_in_functions():
    code = """\
        TABLE = src()

        def f():
            sink(TABLE)
        """
    assert lines(code) == [4]


def test_nested_functions_are_analysed_and_called():
    code = """\
        def outer():
            def inner(x):
                return x[1:]
            sink(inner(src()))
        """
    assert lines(code) == [4]


def test_a_local_shadowing_a_module_function_is_not_resolved():
    code = """\
        def helper():
            return src()

        def f(helper):
            sink(helper())
        """
    assert lines(code) == []


def test_trace_goes_from_source_to_sink_in_order():
    code = """\
        def make(p):
            out = obj_src()
            ids = out["ids"]
            return ids, p

        def store(sample, ids):
            sample.tokens = list(ids)

        def main(sample):
            ids, p = make(1)
            store(sample, ids)
            sink(sample.tokens)
        """
    hits = run(code)
    assert len(hits) == 1
    steps = hits[0].steps
    assert [l for l, _ in steps] == [2, 3, 4, 10, 11, 7, 11, 12]
    assert steps[0][1].startswith("obj")
    assert "field" in steps[1][1] and "`ids`" in steps[1][1]
    assert "returned by `make()`" in steps[2][1]
    assert "unpacked into `ids`" in steps[3][1]
    assert "passed as `ids` to `store()`" in steps[4][1]
    assert "`list(...)`" in steps[5][1] and "stored in `sample.tokens`" in steps[5][1]
    assert "set by `store()`" in steps[6][1]
    assert steps[-1] == (12, "sink")


def test_a_sink_whose_flow_goes_on_to_a_later_sink_is_reported_there_only():
    code = """\
        x = src()
        holder.sink = x
        y = holder.sink
        sink(y)
        """
    hits = run(code)
    assert [h.line for h in hits] == [4]
    assert 2 in [l for l, _ in hits[0].steps]
    # two independent sinks of one source are both reported
    assert lines("x = src()\nsink(x)\nsink(x[1:])\n") == [2, 3]


def test_columns_are_computed_only_when_a_flow_reaches_a_sink():
    asked: list = []
    code = """\
        def f(a, b):
            d = {"x": a, "y": [b for b in range(3)]}
            for k in d:
                d[k] = g(k)
            return d

        class C:
            def m(self):
                self.v = f(1, 2)
                return self.v
        """
    assert run(code, count_positions=asked) == []
    assert asked == []
    # a taint that reaches no sink: its source and steps are never positioned
    assert run("x = src()\ny = x\nz = [y]\n", count_positions=asked) == []
    assert asked == []
    hits = run("x = src()\ny = x\nsink(y)\n", count_positions=asked)
    assert asked
    assert [l for l, _ in hits[0].steps] == [1, 2, 3]


def test_deep_and_odd_code_does_not_break_the_layer():
    code = """\
        async def f(*a, **k):
            async with lock as (x, y):
                async for z in stream():
                    yield z
            await g(lambda q: q, *[1], **{})
            print(f"{x!r:>{w}}", *a)
            global G
            G = [i async for i in h()]
            del a[0], k["x"]
            assert x, "m"
            raise E from None
        x: int
        y = z = src()
        (a, b), c = [src(), 1], 2
        a.b[c].d = src()
        sink(y[::-1])
        sink(a)
        """
    assert lines(code) == [16, 17]


STDLIB = ["argparse.py", "asyncio/base_events.py", "email/message.py", "json/decoder.py",
          "dataclasses.py", "typing.py", "tokenize.py", "inspect.py"]


class TaintEverything(Spec):
    """Every unknown call returns a fresh taint of every kind: a stress test of propagation."""

    def call(self, flow, site):
        super().call(flow, site)
        if site.resolved:
            return None
        return flow.source("ids", site.node, "any")


@pytest.mark.parametrize("name", STDLIB)
def test_real_modules_analyse_without_errors(name):
    import sysconfig

    path = Path(sysconfig.get_paths()["stdlib"]) / name
    if not path.exists():
        pytest.skip(f"{name} not in this Python's stdlib")
    text = path.read_text(encoding="utf-8")
    flow = Flow(ast.parse(text), TaintEverything(), Positions(text))
    flow.run()
    assert flow.passes >= 1
    assert flow.functions


def test_path_matching_of_configured_fields():
    assert path_matches("sample.tokens", ["tokens"])
    assert path_matches("self.sample.tokens", ["sample.tokens"])
    assert path_matches('batch["tokens"]', ["tokens"])
    assert not path_matches("sample.tokens_len", ["tokens"])
    assert not path_matches("tokens", ["sample.tokens"])


# --------------------------------------------------------------------------
# the rules through the real pipeline


def check(tmp_path: Path, files: dict[str, str], select: str, options: dict | None = None,
          fmt_json: bool = False):
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    settings = Settings(select=[select], cache=False, jobs=1)
    if options:
        settings.rule_options = {select: options}
    return run_check([str(tmp_path)], settings)


def test_seed_shape_gives_one_pa102_with_the_whole_trace(tmp_path):
    from patchaudit.rules._pa102_examples import SEED_SHAPE

    res = check(tmp_path, {"rollout.py": SEED_SHAPE}, "PA102")
    assert not res.errors
    assert len(res.findings) == 1
    f = res.findings[0]
    text = SEED_SHAPE.splitlines()
    assert '"input_ids": tokens' in text[f.line - 1]
    notes = [s.note for s in f.trace]
    lines_ = [s.line for s in f.trace]
    assert lines_[0] == next(i for i, l in enumerate(text, 1) if "processor(text=" in l)
    assert lines_[-1] == f.line
    for needle in ("multimodal processor output", "its `input_ids`", "returned by `_prepare_initial_inputs()`",
                   "unpacked into `prompt_ids`", "`list(...)`", "stored in `sample.tokens`",
                   "set by `_prepare_start_state()`", "passed as `tokens` to `_run_inference_step()`",
                   "`image_data`"):
        assert any(needle in n for n in notes), (needle, notes)
    assert all(s.path == f.path for s in f.trace)


def test_bundled_rollout_examples(tmp_path):
    repo = Path(__file__).resolve().parents[1]
    settings = Settings(select=["PA102", "PA103"], cache=False, jobs=1)
    res = run_check([str(repo / "examples" / "rollout")], settings)
    assert not res.errors
    pa102 = [f for f in res.findings if f.code == "PA102"]   # PA103's findings: tests of PA103
    assert [Path(f.path).name for f in pa102] == ["geo3k_vlm_multi_turn.py"]
    assert len(pa102[0].trace) >= 7


def test_trace_in_json_and_text_output(tmp_path):
    from click.testing import CliRunner

    from patchaudit.cli import main

    (tmp_path / "r.py").write_text(textwrap.dedent("""\
        def f(sample, tokenizer):
            text = tokenizer.decode(sample.tokens)
            sample.tokens = tokenizer.encode(text + "!")
        """))
    runner = CliRunner()
    res = runner.invoke(main, ["check", "--no-cache", "--select", "PA103", "--format", "json", str(tmp_path)])
    data = json.loads(res.output)
    findings = data if isinstance(data, list) else data["findings"]
    assert len(findings) == 1
    trace = findings[0]["trace"]
    assert [t["line"] for t in trace] == [2, 3]
    assert set(trace[0]) == {"path", "line", "note"}
    assert "decoded" in trace[0]["note"] and "encoded again" in trace[1]["note"]
    res = runner.invoke(main, ["check", "--no-cache", "--select", "PA103", str(tmp_path)])
    assert "trace:" in res.output and "1. " in res.output and "2. " in res.output


# each pair: a clean look-alike and the one-line change that makes it a finding, so the VALID
# examples are near misses and not code the rule would never look at
NEAR_MISSES = [
    ("PA102", """\
        def start(sample, processor, tokenizer):
            ids = processor(text=sample.prompt, images=sample.images)["input_ids"]
            n = len(ids)
            ids = tokenizer.encode(sample.prompt)
            sample.tokens = ids
            return {"input_ids": sample.tokens, "image_data": sample.images}
        """, "    ids = tokenizer.encode(sample.prompt)\n", "    ids = list(ids)\n"),
    ("PA102", """\
        def start(sample, processor):
            ids = processor(text=sample.prompt)["input_ids"][0]
            sample.tokens = list(ids)
            return {"input_ids": sample.tokens, "image_data": sample.images}
        """, "text=sample.prompt)", "text=sample.prompt, images=sample.images)"),
    ("PA102", """\
        def request(sample, processor, tokenizer):
            out = processor(text=sample.prompt, images=sample.images)
            ids = tokenizer.encode(sample.prompt)
            return {"input_ids": ids, "image_data": out["pixel_values"]}
        """, '"input_ids": ids', '"input_ids": out["input_ids"]'),
    ("PA102", """\
        def send(url, processor, sample):
            ids = processor(text=sample.prompt, images=sample.images).input_ids[0].tolist()
            return post(url, {"input_ids": ids, "sampling_params": {}})
        """, '"sampling_params": {}', '"image_data": sample.images'),
    ("PA102", """\
        def log_ids(sample, processor):
            ids = processor(text=sample.prompt, images=sample.images)["input_ids"][0]
            record = {"input_ids": str(ids), "image_data": sample.images}
            return record
        """, "str(ids)", "ids"),
    ("PA102", """\
        def start(sample, get_processor):
            ids = get_processor(text=sample.prompt, images=sample.images)["input_ids"][0]
            sample.tokens = ids
            return {"input_ids": sample.tokens, "image_data": sample.images}
        """, "= get_processor(", "= hf_processor("),
    ("PA103", """\
        def f(sample, tokenizer):
            text = tokenizer.decode(sample.response_ids)
            n = len(tokenizer.encode(text))
            sample.tokens = sample.tokens
        """, "sample.tokens = sample.tokens", "sample.tokens = tokenizer.encode(text)"),
    ("PA103", """\
        def f(raw, tokenizer, sample):
            text = raw.decode("utf-8")
            sample.tokens = tokenizer.encode(text)
        """, 'raw.decode("utf-8")', "tokenizer.decode(raw)"),
    ("PA103", """\
        import hashlib

        def key(ids, tokenizer):
            text = tokenizer.decode(ids)
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
        """, 'hashlib.sha256(text.encode("utf-8")).hexdigest()', "tokenizer.encode(text)"),
    ("PA103", """\
        async def score(sample, tokenizer, rm_tokenizer, reward_model):
            text = tokenizer.decode(sample.tokens)
            rm_inputs = rm_tokenizer(text, return_tensors="pt")
            return await reward_model_score(reward_model, input_ids=rm_inputs["input_ids"])
        """, "reward_model_score(", "engine_generate("),
]


@pytest.mark.parametrize("code,clean,before,after", NEAR_MISSES,
                         ids=[f"{c}-{i}" for i, (c, *_) in enumerate(NEAR_MISSES)])
def test_clean_look_alikes_are_near_misses(tmp_path, code, clean, before, after):
    clean_src = textwrap.dedent(clean)
    assert before in clean_src
    res = check(tmp_path / "clean", {"m.py": clean_src}, code)
    assert not res.errors and res.findings == []
    res = check(tmp_path / "dirty", {"m.py": clean_src.replace(before, after, 1)}, code)
    assert not res.errors and len(res.findings) == 1, clean_src.replace(before, after, 1)


def test_configured_options_change_the_pre_filter(tmp_path):
    """A configured decode method the default pre-filter would not see still gets the file analysed."""
    code = textwrap.dedent("""\
        def f(sample, detok):
            text = detok.untokenize(sample.tokens)
            sample.tokens = detok.tokenize(text)
        """)
    rule = all_rules()["PA103"]
    opts = {"decode-methods": ["untokenize"], "encode-methods": ["tokenize"]}
    settings = Settings(select=["PA103"], cache=False, jobs=1, rule_options={"PA103": opts})
    assert not rule.can_match(code)
    assert rule.can_match(code, settings)
    (tmp_path / "m.py").write_text(code)
    res = analyse_file(SourceFile(str(tmp_path / "m.py"), "python"), settings, [rule])
    assert not res.errors
    assert [f.line for f in res.findings] == [3]
    run = run_check([str(tmp_path)], settings)     # the whole run: triage, pre-filter, rules
    assert not run.errors and [f.line for f in run.findings] == [3]
    rule102 = all_rules()["PA102"]
    req = "req = {'prompt_token_ids': processor(t, images=i)['ids'], 'multi_modal_data': d}"
    assert rule102.can_match(req, Settings(rule_options={"PA102": {"ids-fields": ["ids"]}}))
    assert not rule102.can_match(req)


def test_badly_shaped_options_name_the_option(tmp_path):
    res = check(tmp_path, {"m.py": "x = processor(text=t, images=i)['input_ids']\n"}, "PA102",
                options={"token-fields": ["tokens", 3]})
    assert res.errors and "token-fields" in str(res.errors[0]) and "list of strings" in str(res.errors[0])


def test_patch_finding_kept_only_when_a_trace_step_is_added(tmp_path):
    def patch(changed_line: str) -> str:
        return textwrap.dedent(f"""\
            --- a/rollout.py
            +++ b/rollout.py
            @@ -1,5 +1,6 @@
             def start(sample, processor):
                 out = processor(text=sample.prompt, images=sample.images)
                 ids = out["input_ids"][0]
            +{changed_line}
                 sample.tokens = list(ids)
                 return {{"input_ids": sample.tokens, "image_data": sample.images}}
            """)

    res = check(tmp_path / "a", {"p.patch": patch("    logger.info('start')")}, "PA102")
    assert not res.errors and res.findings == []
    res = check(tmp_path / "b", {"p.patch": patch("    ids = ids[1:]")}, "PA102")
    assert not res.errors and len(res.findings) == 1
    f = res.findings[0]
    assert f.target is not None and f.target.path == "rollout.py"
    assert [s.line for s in f.trace] == [5, 6, 7, 8, 9]     # patch-file lines


def test_exact_mode_trace_steps_outside_the_patch_point_at_the_engine_file(tmp_path):
    from patchaudit.config.settings import EngineSpec
    from patchaudit.rules._pa102_examples import EXACT_ENGINE, EXACT_PATCH
    from patchaudit.testing import write_tree

    write_tree(tmp_path / "engine", EXACT_ENGINE)
    (tmp_path / "p.patch").write_text(EXACT_PATCH)
    settings = Settings(select=["PA102"], cache=False, jobs=1,
                        engines=[EngineSpec("sglang", str(tmp_path / "engine"))])
    res = run_check([str(tmp_path / "p.patch")], settings)
    assert not res.errors and len(res.findings) == 1
    f = res.findings[0]
    steps = [(Path(s.path).name, s.line) for s in f.trace]
    # processor call and return in prepare() (engine lines 2-3), then the hunk's lines in the patch,
    # then the request that reads `sample.tokens` (engine line 17)
    assert steps == [("rollout.py", 2), ("rollout.py", 3), ("p.patch", 5), ("p.patch", 7), ("rollout.py", 17)]
    assert f.target.path == "python/sglang/srt/rollout.py" and f.target.symbol == "start"


def test_call_chains_deeper_than_the_stack_limit_are_followed():
    from patchaudit.analysis.dataflow import MAX_CALL_DEPTH, MAX_STEPS

    n = MAX_CALL_DEPTH * 2 + 5
    code = "".join(f"def f{i}(x):\n    return f{i + 1}(x[1:])\n\n" for i in range(n))
    code += f"def f{n}(x):\n    return x\n\nsink(f0(src()))\n"
    hits = run(code)
    assert len(hits) == 1
    steps = hits[0].steps
    assert len(steps) == MAX_STEPS     # the beginning of a very long trace, then its sink
    assert steps[0][0] == n * 3 + 4 and steps[0][1].startswith("src; passed as `x` to `f0()`")
    assert steps[-1] == (n * 3 + 4, "sink")
    assert "passed as `x` to `f1()`" in steps[1][1]


def test_pa102_prefilter_is_a_conjunction_that_follows_the_configured_names():
    from patchaudit.rules.pa102_expanded_ids_as_rollout_tokens import ExpandedIdsAsRolloutTokens as R

    # the class attribute (read without importing the rule) is what requires_for derives
    assert R.requires == R.requires_for(None)
    assert not R.can_match("ids = tokenizer(text)['input_ids']\n")      # no processor: cannot fire
    # a store into a token field is a carrier, not a sink: a request must be there
    assert not R.can_match("sample.tokens = processor(text=t, images=i)['input_ids']\n")
    assert R.can_match("r = {'input_ids': processor(text=t, images=i)['input_ids'], 'image_data': i}\n")
    # the ast gate: a processor without a sink, a sink without a processor, cannot fire
    assert not R.can_match("ids = processor(text=t, images=i)['input_ids']\n")
    assert not R.can_match("sample.tokens = logits_processor(text=t, images=i)['input_ids']\n")
    assert R.can_match("def f(p: 'AutoProcessor', x):\n    x.tokens = p(text=t, images=i)['input_ids']\n"
                       "    return {'input_ids': x.tokens, 'image_data': i}\n")
    assert R.can_match("p = AutoProcessor.from_pretrained(m)\nreq = {'input_ids': p(t, images=i)['input_ids'], "
                       "'image_data': d}\n")
    assert not R.can_match("p = AutoProcessor.from_pretrained(m)\nreq = {'input_ids': p(t)['input_ids']}\n")
    # ast cannot read it: let through when its words hold a request (the quick pass, read
    # without a parse, judges a broken text on its words as the byte filter does)
    assert R.can_match("x = {'image_data': i, 'input_ids': processor(text=t, images=i)['input_ids']\n")
    assert not R.can_match("x = processor(text=t, images=i)['input_ids'\n")
    # a configured name widens the filter, a pattern without a literal part disables narrowing
    assert ("input_ids", "vlm") in R.requires_for({"processor-names": ["vlm"]})
    assert R.requires_for({"processor-names": ["*"]}) == (("input_ids",), ("apply_chat_template",))


def test_pa103_prefilter_needs_a_call_of_a_decode_method():
    from patchaudit.rules.pa103_decode_retokenize import DecodeRetokenize as R

    assert not R.can_match("# prefill and decode phases\nmode = 'decode'\n")
    assert not R.can_match("self.forward_decode(batch)\n")
    enc = "ids = tok.encode(text)\n"
    assert R.can_match("text = tok.decode(ids)\n" + enc)
    assert R.can_match("text = f(tok.decode  # why\n    (ids))\n" + enc)
    assert R.can_match("text = tok.decode \\\n(ids)\n" + enc)
    # the ast gate: a decode without an encode, or on a receiver that is no tokenizer, cannot fire
    assert not R.can_match("text = tok.decode(ids)\n")
    assert not R.can_match("text = raw.decode(ids)\n" + enc)
    assert R.can_match("text = self.tokenizer.batch_decode(ids)\nout = self.processor(text=text)\n")
    assert R.can_match("text = tok.decode(ids)\nids = get_tokenizer().apply_chat_template(m)\n")
    assert not R.can_match("text = tok.decode(ids)\nt = get_tokenizer(name)\n")
