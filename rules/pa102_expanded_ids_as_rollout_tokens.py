from __future__ import annotations

import ast
from typing import Any, cast

from patchaudit.analysis.chat_literals import dict_literals, metadata_only, text_only_chat
from patchaudit.analysis.dataflow import (
    IDS,
    OBJECT,
    CallSite,
    FlowSpec,
    Positions,
    Value,
    analyse,
    exclusive,
    file_steps,
    first_each,
    literal_value,
    matches,
    receiver_name,
    repo_view,
    run_repo,
    summarise,
)
from patchaudit.analysis.gate import (
    called_names,
    facts,
    functions,
    literal_part,
    per_options,
    quick_text,
    string_lists,
)
from patchaudit.inputs import pyast
from patchaudit.lint.rule import PYTHON, Rule
from patchaudit.model.findings import Severity

from ._flow_report import hit_report
from ._pa102_examples import INVALID as INVALID_EXAMPLES
from ._pa102_examples import VALID as VALID_EXAMPLES

PROCESSOR = "processor"  # a multimodal processor object
PROCESSOR_OUTPUT = "processor-output"  # what calling it returns (BatchFeature)
EXPANDED = "expanded-ids"  # its input_ids: each image already expanded into its pad tokens

#: names of functions rather than of objects: a verb first, or a conversion
VERB_NAMES = [
    "get_*",
    "_get_*",
    "load_*",
    "_load_*",
    "build_*",
    "_build_*",
    "create_*",
    "_create_*",
    "make_*",
    "_make_*",
    "init_*",
    "_init_*",
    "set_*",
    "_set_*",
    "register_*",
    "_register_*",
    "is_*",
    "_is_*",
    "has_*",
    "_has_*",
    "*_from_*",
    "*_to_*",
    "wrap_*",
    "patch_*",
    "_patch_*",
    "run_*",
    "_run_*",
]
#: processors that are not multimodal input processors
OTHER_PROCESSORS = [
    "*logits_processor",
    "*logit_processor",
    "*output_processor",
    "*post_processor",
    "*reasoning_processor",
    "*sampling_processor",
    "*stream_processor",
    "*batch_processor",
    "*data_processor",
    "*request_processor",
    "*response_processor",
    "*image_processor",
    "*audio_processor",
    "*video_processor",
    "*feature_processor",
]

DEFAULTS: dict[str, list[str]] = {
    # a callee/receiver/parameter with one of these names is a multimodal processor ...
    "processor-names": ["processor", "*_processor"],
    # ... unless it also matches one of these: functions named for what they do
    # (`get_processor(...)` makes one, `get_tokenizer_from_processor(...)` takes one) and processors
    # of something else (`logits_processor`, `image_processor`: no input_ids)
    "not-processor-names": VERB_NAMES + OTHER_PROCESSORS,
    # ... and so is a parameter annotated with one of these
    "processor-annotations": ["AutoProcessor", "ProcessorMixin", "*Processor", "*.AutoProcessor", "*.ProcessorMixin"],
    # ... and whatever these calls return
    "processor-factories": [
        "AutoProcessor.from_pretrained",
        "*Processor.from_pretrained",
        "*.AutoProcessor.from_pretrained",
        "get_processor",
        "*.get_processor",
        "get_mm_processor",
        "*.get_mm_processor",
        "load_processor",
        "*.load_processor",
    ],
    # keyword arguments that pass media to a processor (a call with none of them, no positional
    # argument and no */** is text-only: its ids are not expanded)
    "media-arguments": ["images", "image", "videos", "video", "audio", "audios", "image_inputs", "video_inputs"],
    # the field of a processor's output that holds the ids
    "ids-fields": ["input_ids"],
    # rollout token fields: attribute names or dotted tails (`sample.tokens`); a value stored there
    # is seen by every read of that field in the repository (a carrier), and reported where it
    # reaches an engine request
    "token-fields": ["tokens"],
    # an SGLang request's ids key/keyword (a JSON payload, `GenerateReqInput`, `Engine.generate`,
    # a `ModelRequest(...)`-like object), and the keys that carry media beside them
    "request-ids-keys": ["input_ids"],
    "request-media-keys": ["image_data", "video_data", "audio_data"],
    # a vLLM prompt's ids key/keyword (`TokensPrompt(...)`, a dict prompt, `LLM.generate(...)`) and
    # its media key
    "vllm-ids-keys": ["prompt_token_ids"],
    "vllm-media-keys": ["multi_modal_data"],
    # a framework's generate helper (`server.generate(prompt_ids=..., image_data=...)`,
    # `server_manager.generate_for_partial(...)`): the callees (last name or dotted) and the
    # ids keywords they take beside a media keyword
    "request-calls": ["generate", "agenerate", "generate_*", "*_generate"],
    "request-call-ids-keys": ["prompt_ids", "input_ids", "prompt_token_ids"],
    # media tagged as already processed (SGLang's `{"format": "processor_output", ...}`): the
    # engine then expects expanded ids
    "preprocessed-formats": ["processor_output"],
    # keys of a media dict that describe an image without holding one (SGLang GLM-Image's target
    # grids, `image_data=[{"image_grid_thw": ...}]`): media written only as such dicts carry
    # nothing for the engine to expand
    "media-metadata-keys": ["image_grid_thw", "video_grid_thw"],
    # calls that collapse each image's repeated pad tokens back to one placeholder
    "collapse-functions": [
        "*dedup*image_token*",
        "*collapse*",
        "*unexpand*",
        "*dedup_image*",
        "*compress_image_tokens*",
    ],
}

#: the engine a request shape goes to, for the message
SGLANG, VLLM = "SGLang", "vLLM"


REQUEST_MESSAGE = (
    "ids from a multimodal processor (each image already expanded into its pad tokens) are sent to {engine} "
    "as `{key}` together with `{media}`: the engine expects one placeholder per image and expands it "
    "itself, so it re-expands or falls back to decode and re-tokenize (token drift); send the pre-expansion "
    "rollout ids and keep the processor output for training"
)


def engine_of(key: str, media: str, callee: str | None, o: dict[str, Any]) -> str:
    """The engine a request goes to, as the message names it."""
    last = (callee or "").rsplit(".", 1)[-1]
    if key in o["vllm-ids-keys"] or media in o["vllm-media-keys"] or last in ("TokensPrompt", "LLM"):
        return f"the {VLLM} engine"
    if key in o["request-ids-keys"] and media in o["request-media-keys"]:
        return f"the {SGLANG} engine"
    return f"the engine behind `{last or callee}()`"


class _Spec(FlowSpec):
    kinds = {PROCESSOR: OBJECT, PROCESSOR_OUTPUT: OBJECT, EXPANDED: IDS}
    summary_labels = frozenset({EXPANDED})

    def __init__(self, opts: dict[str, Any]):
        self.o = opts
        # a value stored in a rollout token field is seen wherever the field is read
        self.carriers = tuple(
            sorted({f.replace('["', ".").replace('"]', "").rsplit(".", 1)[-1] for f in opts["token-fields"]})
        )
        self.ids_keys = set(opts["request-ids-keys"]) | set(opts["vllm-ids-keys"])
        self.media_keys = set(opts["request-media-keys"]) | set(opts["vllm-media-keys"])
        self._text_chats: dict[int, tuple[ast.Call, bool]] = {}

    def _named_processor(self, name: str | None) -> bool:
        return matches(name, self.o["processor-names"]) and not matches(name, self.o["not-processor-names"])

    def _is_processor(self, name: str | None, value: Value | None) -> bool:
        return self._named_processor(name) or (value is not None and value.has(PROCESSOR))

    # ----- sources -------------------------------------------------------------
    def param(self, flow, function, name, annotation, node):
        if self._named_processor(name):
            return flow.marker(PROCESSOR, ("param", name))
        if annotation is not None:
            ann = flow.snippet(annotation, 200).strip("\"'")
            for part in ann.replace("|", " ").replace("[", " ").replace("]", " ").replace(",", " ").split():
                if matches(part, self.o["processor-annotations"]):
                    return flow.marker(PROCESSOR, ("param", name))
        return None

    def unknown(self, flow, name, node):
        if self._named_processor(name):
            return flow.marker(PROCESSOR, ("name", name))
        return None

    def _media_given(self, site: CallSite) -> bool:
        """A media keyword (`images=...`, not None) or `*args`/`**kwargs` that may hold one."""
        media = self.o["media-arguments"]
        return site.has_star() or any(
            matches(a.keyword, media) and site.literal(a.keyword) is not None for a in site.args
        )

    def _text_only(self, site: CallSite) -> bool:
        return not site.positional() and not self._media_given(site)

    def _text_chat(self, site: CallSite) -> bool:
        """`processor.apply_chat_template(messages, tokenize=True)` on a chat written in the code
        with text only (analysis/chat_literals.py): no media item, no placeholder to expand;
        media given beside it (`images=...`) are not in it.  Asked once per call site."""
        held = self._text_chats.get(id(site.node))
        if held is None:  # (the node is held with the answer: its id is not reused meanwhile)
            pos = site.positional()
            arg = pos[0] if pos else site.keyword("conversation") or site.keyword("messages")
            text = arg is not None and not self._media_given(site)
            held = (site.node, text and text_only_chat(site.scope, site.node, cast(Any, arg).node.value))
            self._text_chats[id(site.node)] = held
        return held[1]

    def _holds_media(self, flow, value: Value, node: ast.expr | None) -> bool:
        """A media argument that may carry an image: not tagged as preprocessed, not written as
        grid metadata alone (`[{"image_grid_thw": ...}]`: nothing for the engine to expand)."""
        if node is not None and metadata_only(node, self.o["media-metadata-keys"]):
            return False
        return not self._preprocessed(flow, value, node)

    def clean(self, flow, site: CallSite) -> bool:
        return matches(site.name, self.o["collapse-functions"])

    def call(self, flow, site: CallSite):
        out = None
        if site.resolved:
            return None
        if matches(site.callee, self.o["processor-factories"]):
            return flow.marker(PROCESSOR, ("factory", id(site.node)))
        if site.receiver is None or site.name != "apply_chat_template":
            if self._is_processor(site.name, site.func) and not self._text_only(site):
                out = flow.source(PROCESSOR_OUTPUT, site.node, f"multimodal processor output `{site.snippet()}`")
        elif (
            site.literal("tokenize") is True
            and self._is_processor(receiver_name(site.node), site.receiver)
            and not self._text_chat(site)
        ):
            if site.literal("return_dict") is True:
                out = flow.source(PROCESSOR_OUTPUT, site.node, f"multimodal processor output `{site.snippet()}`")
            else:
                out = flow.source(
                    EXPANDED, site.node, f"processor-expanded ids (images expanded) from `{site.snippet()}`"
                )
        self._call_sinks(flow, site)
        return out

    def field(self, flow, base, key, node):
        if key in self.o["ids-fields"] and base.has(PROCESSOR_OUTPUT):
            return flow.derive(
                base, [PROCESSOR_OUTPUT], EXPANDED, node, f"its `{key}` (image placeholders already expanded)"
            )
        return None

    # ----- sinks -----------------------------------------------------------------
    def _preprocessed(self, flow, value: Value, node: Any) -> bool:
        """Media tagged as processor output (`{"format": "processor_output", ...}`): SGLang's
        preprocessed path, which expects the expanded ids."""
        formats = self.o["preprocessed-formats"]
        for obj in flow.reachable(value):
            fe = obj.fields.get("format")
            if fe is not None and literal_value(getattr(fe.node, "value", fe.node)) in formats:
                return True
        if node is not None:  # a literal in the call itself: image_data=[{"format": "processor_output"}]
            for d in dict_literals(node):
                for key, v in zip(d.keys, d.values):
                    if key is not None and literal_value(key) == "format":
                        if literal_value(v) in formats:
                            return True
        return False

    def _call_sinks(self, flow, site: CallSite):
        o = self.o
        request_call = matches(site.name, o["request-calls"]) or matches(site.callee, o["request-calls"])
        media = [
            a
            for a in site.args
            if a.keyword in self.media_keys
            and site.literal(a.keyword) is not None
            and self._holds_media(flow, a.value, a.node.value)
        ]
        for a in site.args:
            if a.keyword is None or not self._sink_keyword(a.keyword, media, request_call):
                continue
            for _, origin, steps in first_each(a.value.find(EXPANDED)):
                self._call_sink(flow, site, a, media, request_call, origin, steps)

    def _sink_keyword(self, keyword: str, media: list, request_call: bool) -> bool:
        """Whether the argument `keyword=` of a call is one of `_call_sink`'s sinks."""
        return self._request_keyword(keyword, media, request_call) or matches(keyword, self.o["token-fields"])

    def _request_keyword(self, keyword: str, media: list, request_call: bool) -> bool:
        return bool(media) and (
            keyword in self.ids_keys or (request_call and keyword in self.o["request-call-ids-keys"])
        )

    def _call_sink(self, flow, site: CallSite, a: Any, media: list, request_call: bool, origin: Any, steps: Any):
        o = self.o
        if self._request_keyword(cast(str, a.keyword), media, request_call):
            m = media[0]
            engine = engine_of(a.keyword, cast(str, m.keyword), site.callee, o)
            if request_call and a.keyword not in self.ids_keys:
                engine = f"the engine behind `{site.callee or site.name}()`"
            flow.report(
                a.node,
                REQUEST_MESSAGE.format(engine=engine, key=a.keyword, media=m.keyword),
                steps,
                origin,
                f"sent as `{a.keyword}` with `{m.keyword}` (line {flow.line(m.node)})",
            )
        elif matches(a.keyword, o["token-fields"]):
            # `Sample(tokens=ids)`, `sample.append_response_tokens(tokens=ids)`: into the field
            flow.carrier_store(cast(str, a.keyword), a.value.with_step(site.at, f"stored in `{a.keyword}=`"))

    def finish(self, flow):
        for obj in flow.objects():
            media = [
                (k, fe)
                for k, fe in obj.fields.items()
                if k in self.media_keys
                and not fe.none
                and self._holds_media(flow, fe.value, getattr(fe.node, "value", fe.node))
            ]
            for key, fe in obj.fields.items():
                if key not in self.ids_keys:
                    continue
                together = [(mk, mfe) for mk, mfe in media if not exclusive(fe.branches, mfe.branches)]
                for _, origin, steps in first_each(fe.value.find(EXPANDED)) if together else ():
                    mk, mfe = together[0]
                    flow.report(
                        fe.node,
                        REQUEST_MESSAGE.format(engine=engine_of(key, mk, None, self.o), key=key, media=mk),
                        steps,
                        origin,
                        f"sent to the engine as `{key}` in a request that also carries `{mk}` (line {mfe.line})",
                    )


def check_options(opts: dict[str, Any], defaults: dict[str, Any]) -> None:
    """Raise ValueError naming the key when a configured option has the wrong shape."""
    for key, value in opts.items():
        if key not in defaults:
            raise ValueError(f"unknown option {key!r} (known: {', '.join(sorted(defaults))})")
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"option {key!r}: expected a list of strings, got {value!r}")


class ExpandedIdsAsRolloutTokens(Rule):
    """
    Flags multimodal-processor ids that reach rollout tokens or an engine request with images.

    ## What it does
    Follows, inside a module, the `input_ids` produced by a multimodal processor
    (`processor(...)["input_ids"]`, `processor(...).input_ids`,
    `processor.apply_chat_template(..., tokenize=True)`; the callee is a
    processor by name, parameter name, annotation or `AutoProcessor.from_pretrained`)
    through assignments, tuple unpacking, `list()`/slicing/`+`, attribute stores,
    returns and calls of functions of the same module, and reports where they
    end up in a rollout token field (`sample.tokens`) or as the `input_ids` of an
    engine request that also carries image data (a dict literal, a dict built by
    item assignment, or `input_ids=`/`image_data=` keywords).  The finding is at
    the sink and carries the whole trace from the processor call.  A text-only
    tokenizer's ids, a processor called with text only, or a processor's chat
    template applied to a chat written in the code with text only, are not a
    source; media written only as grid metadata (`image_data=[{"image_grid_thw":
    ...}]`, GLM-Image's target grids) hold no image to expand.

    Options (`[tool.patchaudit.rules.PA102]`, lists of names or fnmatch
    patterns): `processor-names`, `processor-annotations`,
    `not-processor-names`, `processor-factories`, `media-arguments`, `ids-fields`, `token-fields`,
    `request-ids-keys`, `request-media-keys`, `media-metadata-keys`.

    ## Why is this bad?
    A multimodal processor expands every image placeholder into as many pad
    tokens as the image has features.  Sent back to SGLang as `input_ids` next
    to the image itself, those ids no longer have one placeholder per image:
    the engine's token-id path cannot line the images up with the ids and falls
    back to decoding and re-tokenizing the prompt, so the ids the engine runs on
    drift from the ids the trainer sees (and router replay goes out of step).

    ## Example
    ```python
    def _prepare_initial_inputs(sample, processor):
        processor_output = processor(text=sample.prompt, images=sample.images)
        prompt_ids = processor_output["input_ids"][0]
        return prompt_ids, sample.images

    def _prepare_start_state(sample, state):
        prompt_ids, image_data = _prepare_initial_inputs(sample, state.processor)
        sample.tokens = list(prompt_ids)
        return image_data

    async def _run_inference_step(url, tokens, image_data):
        payload = {"input_ids": tokens, "image_data": image_data}
        return await post(url, payload)
    ```

    ## Use instead
    Keep the pre-expansion rollout ids (the tokenizer's ids of the prompt, one
    placeholder per image) in `sample.tokens` and send those; keep the
    processor's expanded output only as training inputs:
    ```python
    rollout_ids = tokenizer.encode(sample.prompt, add_special_tokens=False)
    sample.multimodal_train_inputs = dict(processor(text=sample.prompt, images=sample.images))
    sample.tokens = list(rollout_ids)
    ```

    ## Incident
    slime's `examples/geo3k_vlm_multi_turn/rollout.py` wrote processor output
    into `sample.tokens` (`_prepare_initial_inputs` -> `_prepare_start_state`)
    and sent that sequence as `input_ids` with `image_data`
    (`_run_inference_step`): THUDM/slime#2388, fixed by THUDM/slime#2389.
    """

    code = "PA102"
    roles = frozenset({"port-check"})
    name = "expanded-ids-as-rollout-tokens"
    severity = Severity.ERROR
    kinds = frozenset({PYTHON})
    # a source needs the ids field (or apply_chat_template) *and* a processor, which is always
    # recognised by a name, annotation or factory holding "processor"/"Processor" by default
    # (requires_for derives the same from configured names; a test keeps the two equal)
    requires = (
        ("input_ids", "Processor"),
        ("input_ids", "processor"),
        ("apply_chat_template", "Processor"),
        ("apply_chat_template", "processor"),
    )
    options = {k: list(v) for k, v in DEFAULTS.items()}
    reads_tree = False

    VALID = VALID_EXAMPLES
    INVALID = INVALID_EXAMPLES

    repository = True

    @classmethod
    def export_requires(cls, options: dict[str, Any] | None) -> tuple[tuple[str, ...], ...]:
        """The byte filter of the whole-repository pre-pass: a source (the pre-filter's groups)
        or an ids key beside a media key (a function that builds a request from its parameters)."""
        o = {**DEFAULTS, **(options or {})}
        groups = list(cls.requires_for(options))
        if not groups or not string_lists(o, ("request-ids-keys", "vllm-ids-keys", "request-call-ids-keys")):
            return ()
        media = list(o["request-media-keys"]) + list(o["vllm-media-keys"])
        ids = list(o["request-ids-keys"]) + list(o["vllm-ids-keys"]) + list(o["request-call-ids-keys"])
        groups += [(k, m) for k in ids for m in media]
        return tuple(groups)

    @classmethod
    def exports(cls, text: str, settings: Any = None) -> bool:
        """Whether the module can export a summary, read with `ast` (gate.py): a function that
        builds a request from its parameters (it names an ids key and a media key: its
        parameters may reach the sink), or one that calls a processor and returns or stores
        into a rollout token field (its return or the field carries a taint)."""
        o = {**DEFAULTS, **(settings.options_for(cls.code) if settings is not None else {})}
        if not string_lists(o, tuple(DEFAULTS)):
            return True
        if not cls._may_export(quick_text(text), o):
            return False
        fns = functions(text)
        if fns is None:
            return True
        return any(cls._seeded(ff, o) or cls._source_function(ff, o) for ff in fns)

    @staticmethod
    def _may_export(text: str, o: dict[str, Any]) -> bool:
        """The quick pass (gate.py) of `exports`, from the text alone: a function is `_seeded`
        only where the text names a request's keys, and a `_source_function` calls something
        named like a processor (or a method of it), or apply_chat_template."""
        media = list(o["request-media-keys"]) + list(o["vllm-media-keys"])
        ids = list(o["request-ids-keys"]) + list(o["vllm-ids-keys"]) + list(o["request-call-ids-keys"])
        if any(k in text for k in media) and any(k in text for k in ids):
            return True
        if "apply_chat_template" in text:
            return True
        if not any(f in text for f in o["ids-fields"]):
            return False
        names = o["processor-names"]
        frags = [literal_part(p) for p in names]
        if "" in frags:
            return True
        return any(
            matches(n, names) and not matches(n, o["not-processor-names"])
            for n in called_names(text, frags, receivers=True)
        )

    @staticmethod
    def _seeded(ff: Any, o: dict[str, Any]) -> bool:
        """A function worth following parameter by parameter: it names a request's keys."""
        media = set(o["request-media-keys"]) | set(o["vllm-media-keys"])
        ids = set(o["request-ids-keys"]) | set(o["vllm-ids-keys"]) | set(o["request-call-ids-keys"])
        return bool(ff.words & media) and bool(ff.words & ids)

    @staticmethod
    def _source_function(ff: Any, o: dict[str, Any]) -> bool:
        """A function that may hand processor ids to another module: it calls something named
        like a processor (or a factory, or apply_chat_template).  What it returns, what it
        stores into a rollout token field or into a parameter's field (`state.prompt_ids =
        ...`, directly or through a call it passes the parameter to) may then carry them."""
        if not any(f in ff.words for f in o["ids-fields"]) and "apply_chat_template" not in ff.words:
            return False  # no processor ids in it
        names = [n for n in ff.words if matches(n, o["processor-names"]) and not matches(n, o["not-processor-names"])]
        return bool(names) and (
            any(c.name == "apply_chat_template" or (c.name in names and args) for c, args in ff.calls)
            or any(c.receiver in names for c, _ in ff.calls)
        )

    @classmethod
    def has_source(cls, text: str, settings: Any = None) -> bool:
        """Whether the module hands processor ids on by itself (`_source_function`)."""
        o = {**DEFAULTS, **(settings.options_for(cls.code) if settings is not None else {})}
        fns = functions(text) if string_lists(o, tuple(DEFAULTS)) else None
        return fns is None or any(cls._source_function(ff, o) for ff in fns)

    @classmethod
    def seed(cls, text: str, settings: Any = None) -> set[str] | None:
        """The functions of the module to follow parameter by parameter (`_seeded`)."""
        o = {**DEFAULTS, **(settings.options_for(cls.code) if settings is not None else {})}
        fns = functions(text) if string_lists(o, tuple(DEFAULTS)) else None
        return None if fns is None else {ff.qualname for ff in fns if cls._seeded(ff, o)}

    @classmethod
    def summarise(
        cls, module: ast.Module, positions: Any, path: str, view: Any, settings: Any = None, seed: Any = None
    ) -> Any:
        options = settings.options_for(cls.code) if settings is not None else {}
        check_options(options, DEFAULTS)
        summary, hits = summarise(module, _Spec({**DEFAULTS, **options}), positions, path, view, seed)
        return summary, [hit_report(h, positions) for h in hits]

    @classmethod
    def can_match(cls, text: str, settings: Any = None) -> bool:
        """The pre-filter follows the configured source names (the class `requires` are the defaults'),
        and the words through which the module can see another module's summary (the pipeline
        widens `requires` by the same words)."""
        repo = run_repo(settings, cls.code)
        options = settings.options_for(cls.code) if settings is not None else None
        o = {**DEFAULTS, **(options or {})}
        sinks = repo.sinks_in(text) if repo is not None else []
        if repo is not None and repo.sources_in(text):
            # a taint from another module: then a request is what the module needs
            if not string_lists(o, tuple(DEFAULTS)):
                return True
            if not cls._may_have_sink(quick_text(text), o, sinks):
                return False
            f = facts(text)
            return f is None or cls._has_sink(f, o, sinks)
        groups = cls.requires_for(options)
        if groups and not any(all(s in text for s in g) for g in groups):
            return False
        return cls.can_fire(text, o, sinks)

    @classmethod
    def repo_requires(cls, options: dict[str, Any] | None, sources: list[str], sinks: list[str]) -> tuple:
        """The pre-filter groups a file without a source of its own passes when it can get a
        taint from another module (`sources`) and holds a request: a media key, or a call
        of a function whose parameters reach one (`sinks`)."""
        o = {**DEFAULTS, **(options or {})}
        media = list(o["request-media-keys"]) + list(o["vllm-media-keys"])
        return tuple((w, m) for w in sources for m in [*media, *sinks])

    @staticmethod
    def can_fire(text: str, o: dict[str, Any], sinks: list[str] | None = None) -> bool:
        """Whether the module has both ingredients of a finding (read with `ast`, see
        patchaudit/analysis/gate.py).  A processor: a name, attribute or parameter named like one
        (`param`, `unknown`, a call's or receiver's name), a parameter annotated like one,
        or a call of a processor factory; every expanded-ids value starts from one.  And a
        sink: a path component, keyword or key that could match `token-fields`, or a media
        key beside an ids key (`store`, `_call_sinks`, `finish`).
        On SGLang 0.5.15 this leaves 51 of the 254 files the text filter lets through."""
        keys = (
            "processor-names",
            "not-processor-names",
            "processor-annotations",
            "processor-factories",
            "token-fields",
            "request-ids-keys",
            "request-media-keys",
            "vllm-ids-keys",
            "vllm-media-keys",
            "request-call-ids-keys",
        )
        if not string_lists(o, keys):
            return True
        if not ExpandedIdsAsRolloutTokens._may_have_sink(quick_text(text), o, sinks):
            return False  # no request in it, seen without a parse
        f = facts(text)
        if f is None:
            return True
        if not ExpandedIdsAsRolloutTokens._has_source(f, o):
            return False
        return ExpandedIdsAsRolloutTokens._has_sink(f, o, sinks)

    @staticmethod
    def _has_sink(f: Any, o: dict[str, Any], sinks: list[str] | None) -> bool:
        """A request (`_call_sinks`, `finish`): an ids key beside a media key, or a call of
        another module's function whose parameters reach one."""
        if sinks and any(w in f.names for w in sinks):
            return True
        words = f.words()
        media = list(o["request-media-keys"]) + list(o["vllm-media-keys"])
        ids = list(o["request-ids-keys"]) + list(o["vllm-ids-keys"]) + list(o["request-call-ids-keys"])
        return any(k in words for k in media) and any(k in words for k in ids)

    @staticmethod
    def _may_have_sink(text: str, o: dict[str, Any], sinks: list[str] | None) -> bool:
        """The quick pass (gate.py) of `_has_sink`: every name, keyword and string key the
        `ast` facts hold is in the text, so a word the text lacks is in none of them."""
        if sinks and any(w in text for w in sinks):
            return True
        media = list(o["request-media-keys"]) + list(o["vllm-media-keys"])
        ids = list(o["request-ids-keys"]) + list(o["vllm-ids-keys"]) + list(o["request-call-ids-keys"])
        return any(k in text for k in media) and any(k in text for k in ids)

    @staticmethod
    def _has_source(f: Any, o: dict[str, Any]) -> bool:
        return (
            any(matches(n, o["processor-names"]) and not matches(n, o["not-processor-names"]) for n in f.names)
            or any(matches(c.dotted, o["processor-factories"]) for c in f.calls)
            or any(matches(p, o["processor-annotations"]) for p in f.annotation_parts())
        )

    @classmethod
    @per_options
    def requires_for(cls, options: dict[str, Any] | None):
        """The pre-filter for these options: an ids field (or apply_chat_template) and the
        literal part of some processor name, annotation or factory pattern."""
        o = {**DEFAULTS, **(options or {})}
        fields = o["ids-fields"]
        if not isinstance(fields, list) or not all(isinstance(f, str) and f for f in fields):
            return ()
        firsts = tuple(fields) + ("apply_chat_template",)
        frags: set[str] = set()
        for key in ("processor-names", "processor-annotations", "processor-factories"):
            patterns = o[key]
            if not isinstance(patterns, list):
                return ()
            for pattern in patterns:
                frag = literal_part(pattern) if isinstance(pattern, str) else ""
                if not frag:
                    return tuple((f,) for f in firsts)  # a pattern without a literal: cannot narrow
                frags.add(frag)
        # a text holding a longer fragment holds every fragment inside it: keep the shortest
        minimal = sorted(f for f in frags if not any(g != f and g in f for g in frags))
        return tuple((f, g) for f in firsts for g in minimal)

    def check_python(self) -> None:
        check_options(self.context.options, DEFAULTS)
        tree, positions = pyast.parse(self.unit_text), Positions(self.unit_text)
        repo = repo_view(self.context, self.unit, self.code)
        for h in analyse(tree, _Spec(self.opts), positions, repo) if tree is not None else ():
            self.report_at(*positions.range(h.node), h.message, trace=file_steps(h.steps), severity=h.severity)
