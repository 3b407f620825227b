from __future__ import annotations

from patchaudit.analysis import monkeypatch
from patchaudit.lint.rule import Example
from patchaudit.model.findings import Severity

from ._monkeypatch import MonkeypatchRule, engine_tree


class MonkeypatchSignatureMismatch(MonkeypatchRule):
    """
    Flags runtime monkey-patches whose replacement cannot accept the calls the original accepts.

    ## What it does
    With an engine source (`--engine`), compares each runtime patch's
    replacement (a function or lambda of the file, a `functools.partial`, a
    `staticmethod(...)`, a local wrapper factory's inner function, another
    engine function) with the engine's definition of the target, as callers
    see both: the instance parameter is dropped when the engine binds a plain
    function set on a class, and a `functools.partial` is never bound.  It
    reports a parameter of the original that the replacement lacks (by name
    or by position), a required parameter the replacement adds, a default the
    replacement removes, `*args`/`**kwargs` the original accepts and the
    replacement does not, a `@staticmethod`/`@classmethod` replaced by a plain
    function, and an async original replaced by a sync function (or the
    reverse).  A `*args, **kwargs` pass-through accepts everything.  The
    message names the parameter and where the engine defines the original.

    ## Why is this bad?
    The engine keeps calling the patched method the way its current version
    does.  When upstream adds a parameter (`handle(self, req, priority=0)`) and
    the fork's replacement still has the old signature, every call that passes
    it raises `TypeError` deep inside the scheduler, or, for an async method
    replaced by a sync one, the caller `await`s a plain value.  The patch was
    right for the version it was written against, and nothing tells you when
    it stops being right.

    ## Example
    ```python
    from sglang.srt.managers.scheduler import Scheduler

    def handle(self, req):          # upstream now calls handle(req, priority=...)
        return req

    Scheduler.handle = handle
    ```

    ## Use instead
    ```python
    def handle(self, req, priority=0):
        return req

    # or keep whatever upstream passes:
    _orig_handle = Scheduler.handle

    def handle(self, *args, **kwargs):
        return _orig_handle(self, *args, **kwargs)
    ```

    ## Incident
    RL frameworks replace engine methods at run time (verl replaces
    `sglang.srt.entrypoints.engine._set_envs_and_config` and wraps vLLM's FP8
    `process_weights_after_loading`); an engine bump that adds a parameter
    breaks the replacement with a `TypeError` only when that code path runs.
    """

    code = "PA207"
    name = "monkeypatch-signature-mismatch"
    severity = Severity.ERROR
    issue_kind = monkeypatch.SIGNATURE_MISMATCH

    VALID = [
        Example(
            """\
            from sglang.srt.managers.scheduler import Scheduler

            def handle(self, req, priority=0):
                return req

            Scheduler.handle = handle
            """,
            engine=engine_tree(),
            title="same signature",
        ),
        Example(
            """\
            from sglang.srt.managers.scheduler import Scheduler

            _orig_handle = Scheduler.handle

            def handle(self, *args, **kwargs):
                return _orig_handle(self, *args, **kwargs)

            Scheduler.handle = handle
            """,
            engine=engine_tree(),
            title="a *args, **kwargs wrapper accepts everything",
        ),
        Example(
            """\
            import functools
            from sglang.srt.managers.scheduler import Scheduler

            async def generate_request(self, obj, request=None, *, trace=False):
                return obj

            Scheduler.generate_request = generate_request
            Scheduler.handle = functools.partial(lambda req, priority=0, log=None: req, log=print)
            """,
            engine=engine_tree(),
            count=0,
            title="async kept; a keyword-only addition; a partial is never bound",
        ),
        Example(
            """\
            from sglang.srt.managers.scheduler import Scheduler

            Scheduler.is_ready = staticmethod(lambda state: state == "ready")
            """,
            engine=engine_tree(),
            title="a staticmethod replaced by a staticmethod",
        ),
    ]
    INVALID = [
        Example(
            """\
            from sglang.srt.managers.scheduler import Scheduler

            def handle(self, req):
                return req

            Scheduler.handle = handle
            """,
            engine=engine_tree(),
            line=6,
            contains="parameter `priority` of the original is missing",
            title="the original gained a parameter the replacement lacks",
        ),
        Example(
            """\
            from sglang.srt.managers.scheduler import Scheduler

            def generate_request(self, obj, request=None):
                return obj

            Scheduler.generate_request = generate_request
            """,
            engine=engine_tree(),
            line=6,
            contains="the original is async",
            title="an async original replaced by a sync function",
        ),
        Example(
            """\
            import sglang.srt.entrypoints.engine as engine_mod

            def _set_envs_and_config(server_args, port):
                return server_args

            setattr(engine_mod, "_set_envs_and_config", _set_envs_and_config)
            """,
            engine=engine_tree(),
            line=6,
            contains="requires parameter `port`",
            title="a required parameter added",
        ),
        Example(
            """\
            from sglang.srt.managers.scheduler import Scheduler

            def is_ready(state):
                return state == "ready"

            Scheduler.is_ready = is_ready
            """,
            engine=engine_tree(),
            line=6,
            contains="@staticmethod",
            title="a staticmethod replaced by a plain function",
        ),
    ]
