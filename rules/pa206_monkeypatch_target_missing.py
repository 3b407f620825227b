from __future__ import annotations

from patchaudit.analysis import monkeypatch
from patchaudit.lint.rule import Example
from patchaudit.model.findings import Severity

from ._monkeypatch import SCHEDULER, MonkeypatchRule, engine_tree

FORK = """\
from sglang.srt.managers.scheduler import Scheduler


def process_input_requests(self, recv_reqs):
    return [self.handle(r) for r in recv_reqs if r is not None]


Scheduler.process_input_requests = process_input_requests
"""


class MonkeypatchTargetMissing(MonkeypatchRule):
    """
    Flags runtime monkey-patches whose target does not exist in the engine version.

    ## What it does
    With an engine source (`--engine`), finds every runtime patch of an engine
    package in Python code: `EngineClass.method = ours`, `module.fn = ...`,
    `setattr(EngineClass, "method", ...)`, `unittest.mock.patch("dotted.target",
    ...)`, `patch.object(...)` and `patch.multiple(...)` outside tests, through
    imports and aliases (`import vllm.model_executor.models.qwen2 as q`) and
    local names bound to an engine object.  It looks the target up in the
    engine's source (classes, base classes, module attributes, re-exports) and
    reports a target that is not there, with the closest names as a hint when
    it was probably renamed.

    A patch that only runs on some engine versions (inside
    `if version.parse(sglang.__version__) >= version.parse("0.5.10"):`) is
    checked only against engines where the condition holds.  A backport shim
    (set inside `except ImportError:` or `if not hasattr(X, "f"):`) adds the
    attribute on purpose and is not reported.  A module of a per-version patch
    package (a path component like `v0_5_9` or `sglang_0_5_9`) is checked only
    against the engine of that version.  Targets that cannot be known
    statically (attributes of instances, classes with bases outside the engine
    that could define them, modules with `__getattr__` or star imports from
    outside the engine) are never reported.

    ## Why is this bad?
    Assigning to an attribute that does not exist does not fail: Python adds a
    new attribute that the engine never calls, and the patch silently does
    nothing after an engine bump that renamed or moved the method.  A
    `mock.patch` of a missing target raises only when it starts, in the middle
    of a training job's start-up.

    ## Example
    ```python
    from sglang.srt.managers.scheduler import Scheduler

    Scheduler.process_input_requests = process_input_requests  # renamed upstream
    ```

    ## Use instead
    Point the patch at the engine's current name (and check that the
    replacement still fits its signature), or gate it by engine version.  When
    the patch adds a new attribute on purpose, write it as a shim
    (`if not hasattr(Scheduler, "x"):`) or add `# patchaudit: ignore[PA206]`.

    ## Incident
    RL frameworks patch the engine at run time rather than with `.patch` files
    (verl's `sglang.srt.entrypoints.engine._set_envs_and_config = ...`, its
    vLLM FP8 `patch("vllm.model_executor.layers.quantization.fp8...")`); every
    engine bump that renames a patched method turns such a patch into a no-op.
    """

    code = "PA206"
    roles = frozenset({"monkeypatch-target"})
    name = "monkeypatch-target-missing"
    severity = Severity.ERROR
    issue_kind = monkeypatch.TARGET_MISSING

    VALID = [
        Example(FORK, engine=engine_tree(), title="the target exists"),
        Example(
            """\
            import sglang.srt.managers.scheduler as sched

            def handle(self, req, priority=0):
                return req

            setattr(sched.Scheduler, "handle", handle)
            """,
            engine=engine_tree(),
            title="setattr through a module alias",
        ),
        Example(
            """\
            from sglang.srt.managers.scheduler import Scheduler

            if not hasattr(Scheduler, "drain"):
                def drain(self):
                    return []
                Scheduler.drain = drain
            """,
            engine=engine_tree(),
            title="a backport shim adds the attribute on purpose",
        ),
        Example(
            """\
            import sglang
            from packaging import version
            from sglang.srt.managers.scheduler import Scheduler

            def process_batch(self, batch):
                return batch

            if version.parse(sglang.__version__) >= version.parse("0.6.0"):
                Scheduler.process_batch = process_batch
            """,
            engine={**engine_tree(), "python/sglang/version.py": '__version__ = "0.5.9"\n'},
            title="gated off for this engine version",
        ),
        Example(
            """\
            from sglang.srt.managers.scheduler import Scheduler

            scheduler = Scheduler(None)
            scheduler.custom_flag = True
            """,
            engine=engine_tree(),
            title="an attribute of an instance is not a patch of the engine",
        ),
    ]
    INVALID = [
        Example(
            FORK,
            engine=engine_tree(SCHEDULER.replace("def process_input_requests", "def process_requests")),
            line=8,
            contains="renamed to `process_requests`?",
            title="the patched method was renamed",
        ),
        Example(
            """\
            from unittest import mock

            patcher = mock.patch("sglang.srt.entrypoints.engine._set_envs_and_configs", lambda args: None)
            """,
            engine=engine_tree(),
            line=3,
            contains="patch() raises AttributeError",
            title="mock.patch of a misspelled target",
        ),
        Example(
            """\
            import sglang.srt.managers.policy as policy

            policy.schedule = lambda reqs: reqs
            """,
            engine=engine_tree(),
            line=3,
            contains="module `sglang.srt.managers.policy` does not exist",
            title="the module is gone",
        ),
    ]
