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
    """The mapping node -> metadata of one provider, resolved on first use.

    For `PositionProvider`, a lookup first tries the top-level statement that
    holds the node (see `_StatementPositions`): libcst's own provider run on
    that statement alone, its lines shifted by the lines before it.  Only when
    that cannot answer (a node outside every statement, an unusual newline) is
    the provider run on the whole module."""

    def __init__(self, wrapper: Any, provider: Any, by_statement: bool = False):
        self._wrapper = wrapper
        self._provider = provider
        self._mapping: Any = None
        self._statements: _StatementPositions | None = None
        self._by_statement = by_statement

    def _resolved(self) -> Any:
        if self._mapping is None:
            self._mapping = self._wrapper._resolve_now(self._provider)
        return self._mapping

    def _fast(self, node: Any) -> Any:
        if self._mapping is not None or not self._by_statement:
            return _MISSING
        if self._statements is None:
            self._statements = _StatementPositions(self._wrapper.module, self._provider)
        return self._statements.lookup(node)

    def __getitem__(self, node: Any) -> Any:
        value = self._fast(node)
        if value is not _MISSING:
            return value
        return self._resolved()[node]

    def get(self, node: Any, default: Any = None) -> Any:
        value = self._fast(node)
        if value is not _MISSING:
            return value
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


_MISSING = object()
#: past this many statements resolved one by one, resolve the whole module instead
_MAX_STATEMENTS = 64
#: ... or past this many lines of statements positioned one by one: a rule that looks up
#: many nodes pays less for one pass over the whole module than for many passes over its
#: statements (on SGLang's 2,300-line mimo_v2.py: 0.64 s against 1.0 s, measured when
#: PA102+PA103 read libcst)
_MAX_LINES = 400
#: ... or past this many lookups by statement (finding a node's statement generates the
#: code of the statements before it): many lookups are a trace, not a few reports
_MAX_LOOKUPS = 8


class _StatementPositions:
    """Positions of the nodes of one statement at a time.

    libcst computes positions by generating the module's code again while
    tracking lines and columns, which costs about twice the parse; a rule that
    reports one node would pay it for the whole file.  Plain code generation is
    several times cheaper, and the number of lines a statement's code holds
    does not depend on where it stands.  So the statement that holds the node
    is found (descending through class bodies; a function is positioned whole:
    a dataflow trace looks up several nodes of one function, and the later
    lookups are then answered from the first), the module is
    pruned to that statement and its enclosing class/def headers (the same
    indentation, so the same columns), libcst's own provider runs on the pruned
    module, and lines are shifted by the lines of the statements pruned before
    it.  The node is looked for in the statements whose code holds its first
    line and found by identity in the provider's result, never guessed; when it
    is not found (a node outside every statement, an unusual newline), the
    caller computes the whole module's positions."""

    def __init__(self, module: Any, provider: Any):
        self.module = module
        self.provider = provider
        self.usable = module.default_newline == "\n"
        self.done: list[dict] = []  # positions of the pruned modules computed so far
        self.lines = 0  # ... and the lines of their statements
        self.lookups = 0  # lookups answered by statement
        self._codes: dict[int, list[str]] = {}

    def lookup(self, node: Any) -> Any:
        if not self.usable:
            return _MISSING
        for positions in self.done:
            if node in positions:
                return positions[node]
        if self._spent():
            return _MISSING
        self.lookups += 1
        m = self.module
        try:
            key = next((l.strip() for l in m.code_for_node(node).split("\n") if l.strip()), "")
        except Exception:
            return _MISSING
        if not key:
            return _MISSING
        header = sum(m.code_for_node(h).count("\n") for h in m.header)
        return self._search(node, key, m.body, header, lambda stmts: stmts, 0)

    def _spent(self) -> bool:
        return len(self.done) >= _MAX_STATEMENTS or self.lines >= _MAX_LINES or self.lookups >= _MAX_LOOKUPS

    def _stmt_code(self, stmts, i: int) -> str:
        """The code of one statement of a block (each generated once, and only
        up to the statement that holds the node: the later ones never)."""
        codes = self._codes.setdefault(id(stmts), [])
        while len(codes) <= i:
            codes.append(self.module.code_for_node(stmts[len(codes)]))
        return codes[i]

    def _search(self, node: Any, key: str, stmts, offset: int, wrap, depth: int) -> Any:
        import libcst as cst

        line = offset
        for i in range(len(stmts)):
            code = self._stmt_code(stmts, i)
            before = line
            line += code.count("\n")
            if key not in code:
                continue
            stmt = stmts[i]
            if (
                depth < 6
                and isinstance(stmt, cst.ClassDef)
                and isinstance(stmt.body, cst.IndentedBlock)
                and stmt.body.body
            ):
                inner_wrap = (lambda st, w: lambda inner: w([st.with_changes(body=st.body.with_changes(body=inner))]))(
                    stmt, wrap
                )
                found = self._search(node, key, stmt.body.body, before, inner_wrap, depth + 1)
                if found is not _MISSING:
                    return found
                if self._spent():
                    return _MISSING
            self.lines += code.count("\n")
            if self._spent() and self.done:
                return _MISSING  # a long statement after others: the whole module costs less
            positions = self._positions(wrap([stmt]), before, stmt)
            if node in positions:
                return positions[node]
            if self._spent():
                return _MISSING
        return _MISSING

    def _positions(self, body: list, shift: int, leaf: Any) -> dict:
        import libcst as cst
        from libcst.metadata import CodePosition, CodeRange, MetadataWrapper

        m = self.module
        sub = cst.Module(
            body=body,
            header=(),
            footer=(),
            encoding=m.encoding,
            default_indent=m.default_indent,
            default_newline=m.default_newline,
            has_trailing_newline=True,
        )
        raw = MetadataWrapper(sub, unsafe_skip_copy=True).resolve(self.provider)
        out = {}
        span = raw[leaf]
        lo, hi = (span.start.line, span.start.column), (span.end.line, span.end.column)
        for n, r in raw.items():
            # only the leaf statement's own nodes: the enclosing class/def headers kept
            # in the pruned module stand before it, with other lines pruned before them
            if lo <= (r.start.line, r.start.column) and (r.end.line, r.end.column) <= hi:
                out[n] = CodeRange(
                    CodePosition(r.start.line + shift, r.start.column), CodePosition(r.end.line + shift, r.end.column)
                )
        self.done.append(out)
        return out


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
                            self._lazy[p] = _LazyProvider(self, p, by_statement=p is PositionProvider)
                        out[p] = self._lazy[p]
                return out

            def _resolve_now(self, provider: Any) -> Any:  # noqa: D401
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

    The monkey-patch rules (PA206/PA207) analyse the module in
    `visit_Module`/`leave_Module` and walk it themselves; a batched
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
