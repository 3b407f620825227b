"""Position metadata computed only when a rule asks for it.

Rules declare `PositionProvider` because `Rule.report` needs the position of
the node it reports.  libcst computes a provider for the whole module before
the traversal starts, and positions are its most expensive metadata: they are
found by generating the module's code again, which costs about three times
the parse.  Most files a rule is run on (they passed its pre-filter) produce
no report, so the positions would be computed for nothing.

`metadata_wrapper(module)` returns a libcst `MetadataWrapper` that resolves
every other provider as usual, once per module for all rules of the batch,
and hands position providers out as a mapping that runs the provider on the
first lookup (once, for all rules) and never otherwise.  The values are
libcst's own: the same provider on the same module object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_WRAPPER_CLASS: Any = None


class _LazyProvider(Mapping):
    """The mapping node -> metadata of one provider, resolved on first use."""

    def __init__(self, wrapper: Any, provider: Any):
        self._wrapper = wrapper
        self._provider = provider
        self._mapping: Any = None

    def _resolved(self) -> Any:
        if self._mapping is None:
            self._mapping = self._wrapper._resolve_now(self._provider)
        return self._mapping

    def __getitem__(self, node: Any) -> Any:
        return self._resolved()[node]

    def get(self, node: Any, default: Any = None) -> Any:
        return self._resolved().get(node, default)

    def __contains__(self, node: object) -> bool:
        return node in self._resolved()

    def __iter__(self):
        return iter(self._resolved())

    def __len__(self) -> int:
        return len(self._resolved())

    @property
    def computed(self) -> bool:
        return self._mapping is not None


def _wrapper_class() -> Any:
    global _WRAPPER_CLASS
    if _WRAPPER_CLASS is None:
        from libcst.metadata import MetadataWrapper, PositionProvider, WhitespaceInclusivePositionProvider

        lazy_providers = (PositionProvider, WhitespaceInclusivePositionProvider)

        class LazyPositionsWrapper(MetadataWrapper):
            def __init__(self, module: Any, unsafe_skip_copy: bool = False, cache: Any = None) -> None:
                if cache is None:
                    super().__init__(module, unsafe_skip_copy)
                else:
                    super().__init__(module, unsafe_skip_copy, cache)
                self._lazy: dict[Any, _LazyProvider] = {}

            def resolve_many(self, providers):  # type: ignore[override]
                eager = [p for p in providers if p not in lazy_providers]
                out = dict(super().resolve_many(eager)) if eager else {}
                for p in providers:
                    if p in lazy_providers:
                        if p not in self._lazy:
                            self._lazy[p] = _LazyProvider(self, p)
                        out[p] = self._lazy[p]
                return out

            def _resolve_now(self, provider: Any) -> Any:
                return MetadataWrapper.resolve_many(self, [provider])[provider]

            def positions_computed(self) -> bool:
                return any(l.computed for l in self._lazy.values())

        _WRAPPER_CLASS = LazyPositionsWrapper
    return _WRAPPER_CLASS


def metadata_wrapper(module: Any) -> Any:
    """A MetadataWrapper over `module` (not copied) with lazy position metadata."""
    return _wrapper_class()(module, unsafe_skip_copy=True)


#: visitor methods that need no traversal: called once, on the module itself
_MODULE_ONLY = frozenset({"visit_Module", "leave_Module"})


def visit_rules(wrapper: Any, instances: list) -> None:
    """libcst's `wrapper.visit_batched(instances)`, without the traversal when no
    rule visits anything below the module.

    The dataflow rules (PA102/PA103) and the monkey-patch rules analyse the
    module in `visit_Module`/`leave_Module` and walk it themselves; a batched
    traversal would call into every node of the file for nothing (it costs
    about as much as the parse).  The calls, their order (every visit_Module,
    then every leave_Module), the crash guard of `Rule.get_visitors` and the
    metadata each rule resolves are those of `visit_batched`."""
    tables = [inst.get_visitors() for inst in instances]
    if not all(set(t) <= _MODULE_ONLY for t in tables):
        wrapper.visit_batched(instances)
        return
    from contextlib import ExitStack

    module = wrapper.module
    with ExitStack() as stack:
        for inst in instances:
            stack.enter_context(inst.resolve(wrapper))
        for t in tables:
            fn = t.get("visit_Module")
            if fn is not None:
                fn(module)
        for t in tables:
            fn = t.get("leave_Module")
            if fn is not None:
                fn(module)
