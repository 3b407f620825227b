"""Write the example patch set of examples/bump/ from a real SGLang 0.5.12.post1 wheel.

    python examples/bump/make_patches.py sglang-0.5.12.post1-cp311-cp311-manylinux_2_34_x86_64.whl OUT_DIR

The patches are what an RL framework carries against the engine (in the
style of slime's docker/patch/*/sglang.patch): weight-sync endpoints and
request types, a bucketed update path, routed-expert capture, RL-friendly
streaming and, in qwen_vl.py, the seed-002 hunk that rewrites Qwen-VL's
`load_mm_data(` into `legacy_load_mm_data(`.  Each edit is anchored on text
of the 0.5.12.post1 files (an anchor that is not there exactly once stops the
script), and each patch is a git-style unified diff with 3 context lines and
git's Python function headers, paths as in the SGLang repository
(`python/sglang/...`).  `patchaudit bump` then audits the set from
0.5.12.post1 to 0.5.15.post1 (see docs/bump.md).
"""

from __future__ import annotations

import difflib
import re
import sys
import zipfile
from pathlib import Path

_FUNC = re.compile(r"^[ \t]*((class|(async[ \t]+)?def)[ \t].*)$")

QWEN_HELPER = '''
    def _log_mm_shapes(self, base_output, rid):
        """RL rollouts: record what the processor produced for this request."""
        n_images = len(base_output.images or [])
        n_videos = len(base_output.videos or [])
        if n_images or n_videos:
            logger.debug(
                "mm request %s: %d image(s), %d video(s), %d prompt chars",
                rid,
                n_images,
                n_videos,
                len(base_output.input_text or ""),
            )
'''

MIXIN_BUCKETED = '''
    def update_weights_from_tensor_bucketed(
        self: Scheduler, recv_req: UpdateWeightsFromTensorBucketedReqInput
    ):
        """Update weights bucket by bucket (RL weight sync): flush only after the last one."""
        tic = time.perf_counter()
        worker = self.tp_worker
        success, message = worker.update_weights_from_tensor(recv_req)
        if not success:
            logger.error(message)
            torch.distributed.barrier(group=self.tp_cpu_group)
            return UpdateWeightsFromTensorBucketedReqOutput(
                success, message, recv_req.bucket_id
            )
        if recv_req.is_last_bucket:
            if self.draft_worker is not None and not recv_req.disable_draft_model:
                success, message = self.draft_worker.update_weights_from_tensor(
                    recv_req
                )
            self.flush_cache_after_weight_update(recv_req)
        torch.distributed.barrier(group=self.tp_cpu_group)
        logger.info(
            "weight bucket %s/%s applied in %.3fs",
            recv_req.bucket_id,
            recv_req.num_buckets,
            time.perf_counter() - tic,
        )
        return UpdateWeightsFromTensorBucketedReqOutput(
            success, message, recv_req.bucket_id
        )

    def post_process_weights(self: Scheduler, recv_req: PostProcessWeightsReqInput):
        """Re-run the quantization post-processing after an RL weight update."""
        success, message = self.tp_worker.model_runner.post_process_weights(
            restore_weights_before_load=recv_req.restore_weights_before_load,
            post_process_quantization=recv_req.post_process_quantization,
        )
        if success and recv_req.flush_cache:
            self.flush_cache()
        torch.distributed.barrier(group=self.tp_cpu_group)
        return PostProcessWeightsReqOutput(success, message)
'''

IO_STRUCTS = '''

@dataclass
class UpdateWeightsFromTensorBucketedReqInput(BaseReq):
    """One bucket of an RL weight sync (serialized named tensors of one bucket)."""

    serialized_named_tensors: List[Union[str, bytes]]
    bucket_id: int = 0
    num_buckets: int = 1
    is_last_bucket: bool = True
    load_format: Optional[str] = None
    flush_cache: bool = True
    weight_version: Optional[str] = None
    disable_draft_model: Optional[bool] = None
    torch_empty_cache: bool = False


@dataclass
class UpdateWeightsFromTensorBucketedReqOutput(BaseReq):
    success: bool
    message: str
    bucket_id: int = 0


@dataclass
class PostProcessWeightsReqInput(BaseReq):
    # Restore the original (pre-quantization) weights before loading new ones
    restore_weights_before_load: bool = False
    # Run the quantization post-processing of the loaded weights
    post_process_quantization: bool = True
    flush_cache: bool = True


@dataclass
class PostProcessWeightsReqOutput(BaseReq):
    success: bool
    message: str


@dataclass
class GetRoutedExpertsReqInput(BaseReq):
    rids: List[str] = field(default_factory=list)
    clear_after_read: bool = True


@dataclass
class GetRoutedExpertsReqOutput(BaseReq):
    # rid -> [num_layers][num_tokens][top_k] expert ids
    routed_experts: Dict[str, List[List[List[int]]]] = field(default_factory=dict)
'''

SCHEDULER_METHODS = '''
    def get_routed_experts(self, recv_req: GetRoutedExpertsReqInput):
        """RL routing replay: the experts each token of the given requests was routed to."""
        out = {}
        capturer = getattr(self.tp_worker.model_runner, "routed_experts_capturer", None)
        if capturer is None:
            return GetRoutedExpertsReqOutput(out)
        for rid in recv_req.rids:
            experts = capturer.get(rid)
            if experts is not None:
                out[rid] = experts
                if recv_req.clear_after_read:
                    capturer.clear(rid)
        return GetRoutedExpertsReqOutput(out)

    def _rl_on_weights_updated(self, weight_version):
        """Drop everything computed with the previous policy."""
        if self.is_fully_idle():
            self.flush_cache(empty_cache=False)
        self.rl_weight_version = weight_version
        self.rl_num_weight_updates += 1
        logger.info(
            "RL weights updated to version %s (%d updates so far)",
            weight_version,
            self.rl_num_weight_updates,
        )
'''

TOKENIZER_METHODS = '''
    async def post_process_weights(
        self,
        obj: PostProcessWeightsReqInput,
        request: Optional[fastapi.Request] = None,
    ) -> Tuple[bool, str]:
        self.auto_create_handle_loop()
        async with self.model_update_lock.writer_lock:
            results = await self.post_process_weights_communicator(obj)
        return FanOutCommunicator.merge_results(results)

    async def get_routed_experts(
        self,
        obj: GetRoutedExpertsReqInput,
        request: Optional[fastapi.Request] = None,
    ) -> Dict[str, List[List[List[int]]]]:
        self.auto_create_handle_loop()
        results = await self.get_routed_experts_communicator(obj)
        merged: Dict[str, List[List[List[int]]]] = {}
        for r in results:
            merged.update(r.routed_experts)
        return merged

    def _rl_stream_chunk(self, state: ReqState, obj, out_list: list) -> dict:
        """RL rollouts stream token ids, never re-detokenized text."""
        if len(out_list) > 1:
            out = self._coalesce_streaming_chunks(out_list, obj.rid)
        else:
            out = out_list[-1]
        meta = out.setdefault("meta_info", {})
        meta["weight_version"] = self.server_args.weight_version
        meta["output_token_ids"] = list(state.output_ids)
        return out

    def _rl_start_rollout(self, obj, tokenized_obj) -> None:
        """Remember the prompt ids exactly as sent, for the trainer (token-in, token-out)."""
        from sglang.srt.rl.rollout_store import get_rollout_store

        if obj.input_ids is None or not isinstance(obj.rid, str):
            return
        get_rollout_store().start(
            obj.rid, obj.input_ids, self.server_args.weight_version
        )

    def abort_requests_by_prefix(self, prefix: str) -> int:
        """Abort every in-flight request whose rid starts with `prefix` (one rollout group)."""
        rids = [rid for rid in self.rid_to_state if rid.startswith(prefix)]
        for rid in rids:
            self.abort_request(rid=rid)
        logger.info("aborted %d request(s) with rid prefix %r", len(rids), prefix)
        return len(rids)
'''

HTTP_ENDPOINTS = '''

@app.post("/update_weights_from_tensor_bucketed")
@auth_level(AuthLevel.ADMIN_OPTIONAL)
async def update_weights_from_tensor_bucketed(
    obj: UpdateWeightsFromTensorBucketedReqInput, request: Request
):
    """RL weight sync, one bucket of serialized tensors at a time."""
    success, message = (
        await _global_state.tokenizer_manager.update_weights_from_tensor_bucketed(
            obj, request
        )
    )
    content = {"success": success, "message": message, "bucket_id": obj.bucket_id}
    return ORJSONResponse(
        content, status_code=200 if success else HTTPStatus.BAD_REQUEST
    )


@app.post("/post_process_weights")
@auth_level(AuthLevel.ADMIN_OPTIONAL)
async def post_process_weights(obj: PostProcessWeightsReqInput, request: Request):
    """Re-run weight post-processing (quantization) after an RL weight update."""
    success, message = await _global_state.tokenizer_manager.post_process_weights(
        obj, request
    )
    content = {"success": success, "message": message}
    return ORJSONResponse(
        content, status_code=200 if success else HTTPStatus.BAD_REQUEST
    )


@app.post("/get_routed_experts")
@auth_level(AuthLevel.ADMIN_OPTIONAL)
async def get_routed_experts(obj: GetRoutedExpertsReqInput, request: Request):
    """Routing replay for MoE RL: the experts each generated token was routed to."""
    experts = await _global_state.tokenizer_manager.get_routed_experts(obj, request)
    return ORJSONResponse({"routed_experts": experts}, status_code=200)


@app.post("/abort_requests_by_prefix")
@auth_level(AuthLevel.ADMIN_OPTIONAL)
async def abort_requests_by_prefix(request: Request):
    """Abort one rollout group (every request whose rid starts with the prefix)."""
    body = await request.json()
    prefix = body.get("prefix", "")
    if not prefix:
        return ORJSONResponse(
            {"success": False, "message": "empty prefix"},
            status_code=HTTPStatus.BAD_REQUEST,
        )
    n = _global_state.tokenizer_manager.abort_requests_by_prefix(prefix)
    return ORJSONResponse({"success": True, "aborted": n}, status_code=200)


@app.post("/get_rollouts")
@auth_level(AuthLevel.ADMIN_OPTIONAL)
async def get_rollouts(request: Request):
    """The finished rollouts of a group: prompt ids, output ids, logprobs, weight version."""
    from sglang.srt.rl.rollout_store import get_rollout_store

    body = await request.json()
    prefix = body.get("prefix", "")
    records = get_rollout_store().pop_finished(prefix)
    return ORJSONResponse(
        {"rollouts": [r.to_dict() for r in records], "count": len(records)},
        status_code=200,
    )
'''

MODEL_RUNNER_METHODS = '''
    def post_process_weights(
        self,
        restore_weights_before_load: bool = False,
        post_process_quantization: bool = True,
    ):
        """RL weight sync: undo / redo what the quantization loader did to the weights."""
        try:
            if restore_weights_before_load:
                self._restore_original_weights()
            if post_process_quantization:
                for module in self.model.modules():
                    quant_method = getattr(module, "quant_method", None)
                    if quant_method is not None and hasattr(
                        quant_method, "process_weights_after_loading"
                    ):
                        quant_method.process_weights_after_loading(module)
            self.check_weights("snapshot")
        except Exception as e:
            logger.exception("post_process_weights failed")
            return False, f"post_process_weights failed: {e}"
        return True, "Success"

    def _restore_original_weights(self):
        originals = getattr(self, "_rl_original_weights", None)
        if not originals:
            return
        params = dict(self.model.named_parameters())
        for name, tensor in originals.items():
            if name in params:
                params[name].data.copy_(tensor, non_blocking=True)
        torch.cuda.synchronize()
'''

WEIGHT_SYNC = '''"""Helpers for RL weight synchronisation (bucketing named tensors for transfer)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

import torch

from sglang.srt.utils import MultiprocessingSerializer

logger = logging.getLogger(__name__)

DEFAULT_BUCKET_BYTES = 512 * 1024 * 1024


@dataclass
class TensorBucket:
    bucket_id: int
    names: List[str] = field(default_factory=list)
    tensors: List[torch.Tensor] = field(default_factory=list)
    nbytes: int = 0

    def add(self, name: str, tensor: torch.Tensor) -> None:
        self.names.append(name)
        self.tensors.append(tensor)
        self.nbytes += tensor.numel() * tensor.element_size()

    def named_tensors(self) -> List[Tuple[str, torch.Tensor]]:
        return list(zip(self.names, self.tensors))


def bucket_named_tensors(
    named_tensors: Iterable[Tuple[str, torch.Tensor]],
    bucket_bytes: int = DEFAULT_BUCKET_BYTES,
) -> List[TensorBucket]:
    """Group tensors into buckets of at most `bucket_bytes` (a tensor never splits)."""
    buckets: List[TensorBucket] = []
    current = TensorBucket(0)
    for name, tensor in named_tensors:
        size = tensor.numel() * tensor.element_size()
        if current.names and current.nbytes + size > bucket_bytes:
            buckets.append(current)
            current = TensorBucket(len(buckets))
        current.add(name, tensor)
    if current.names:
        buckets.append(current)
    return buckets


def serialize_bucket(bucket: TensorBucket, tp_size: int) -> List[bytes]:
    """One serialized payload per TP rank (the same tensors, shared through IPC)."""
    payload = MultiprocessingSerializer.serialize(bucket.named_tensors(), output_str=True)
    return [payload] * tp_size


def iter_bucket_requests(
    named_tensors: Iterable[Tuple[str, torch.Tensor]],
    tp_size: int,
    weight_version: Optional[str] = None,
    bucket_bytes: int = DEFAULT_BUCKET_BYTES,
) -> Iterator[Dict]:
    """The JSON bodies of /update_weights_from_tensor_bucketed, in order."""
    buckets = bucket_named_tensors(named_tensors, bucket_bytes)
    for bucket in buckets:
        yield {
            "serialized_named_tensors": serialize_bucket(bucket, tp_size),
            "bucket_id": bucket.bucket_id,
            "num_buckets": len(buckets),
            "is_last_bucket": bucket.bucket_id == len(buckets) - 1,
            "weight_version": weight_version,
            "flush_cache": bucket.bucket_id == len(buckets) - 1,
        }


class WeightSyncStats:
    """Counters the RL trainer reads after each sync."""

    def __init__(self) -> None:
        self.buckets = 0
        self.bytes = 0
        self.seconds = 0.0

    def record(self, bucket: TensorBucket, seconds: float) -> None:
        self.buckets += 1
        self.bytes += bucket.nbytes
        self.seconds += seconds

    def summary(self) -> str:
        gb = self.bytes / 1024**3
        rate = gb / self.seconds if self.seconds else 0.0
        return f"{self.buckets} buckets, {gb:.2f} GiB in {self.seconds:.2f}s ({rate:.2f} GiB/s)"
'''

ENGINE_METHODS = '''
    def update_weights_from_tensor_bucketed(
        self,
        named_tensors: List[Tuple[str, torch.Tensor]],
        weight_version: Optional[str] = None,
        bucket_bytes: int = 512 * 1024 * 1024,
    ):
        """RL weight sync in buckets: the engine keeps serving between buckets."""
        from sglang.srt.rl.weight_sync import bucket_named_tensors, serialize_bucket

        buckets = bucket_named_tensors(named_tensors, bucket_bytes)
        results = []
        for bucket in buckets:
            obj = UpdateWeightsFromTensorBucketedReqInput(
                serialized_named_tensors=serialize_bucket(
                    bucket, self.server_args.tp_size
                ),
                bucket_id=bucket.bucket_id,
                num_buckets=len(buckets),
                is_last_bucket=bucket.bucket_id == len(buckets) - 1,
                weight_version=weight_version,
            )
            results.append(
                self.loop.run_until_complete(
                    self.tokenizer_manager.update_weights_from_tensor_bucketed(obj, None)
                )
            )
        return all(ok for ok, _ in results), "; ".join(m for _, m in results)

    def post_process_weights(
        self,
        restore_weights_before_load: bool = False,
        post_process_quantization: bool = True,
    ):
        obj = PostProcessWeightsReqInput(
            restore_weights_before_load=restore_weights_before_load,
            post_process_quantization=post_process_quantization,
        )
        return self.loop.run_until_complete(
            self.tokenizer_manager.post_process_weights(obj, None)
        )

    def rollout_generate(
        self,
        input_ids: List[int],
        sampling_params: Dict,
        image_data=None,
        rid: Optional[str] = None,
    ):
        """RL rollout: token ids in, token ids and logprobs out (no detokenize round trip)."""
        return self.generate(
            input_ids=input_ids,
            sampling_params={**sampling_params, "skip_special_tokens": False},
            image_data=image_data,
            return_logprob=True,
            rid=rid,
        )
'''

TP_WORKER_METHODS = '''
    def forward_for_rl_logprobs(self, batch: ModelWorkerBatch):
        """RL: recompute the logprobs of a finished rollout with the current weights."""
        batch.return_logprob = True
        batch.capture_hidden_mode = None
        output = self.forward_batch_generation(model_worker_batch=batch, is_verify=False)
        return output.logits_output.next_token_logprobs

'''

ROLLOUT_STORE = '''"""Per-request rollout records kept by the engine for the RL trainer.

The trainer must see exactly the token ids the engine generated (token-in,
token-out): the store keeps the prompt ids as sent, the generated ids, their
logprobs, the weight version that produced them and, for MoE models, the
experts each token was routed to.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Dict, List, Optional


@dataclass
class RolloutRecord:
    rid: str
    prompt_ids: List[int]
    output_ids: List[int] = field(default_factory=list)
    output_logprobs: List[float] = field(default_factory=list)
    weight_version: Optional[str] = None
    routed_experts: Optional[List[List[List[int]]]] = None
    created: float = field(default_factory=time.monotonic)
    finished: bool = False

    def extend(self, ids: List[int], logprobs: Optional[List[float]] = None) -> None:
        self.output_ids.extend(ids)
        if logprobs is not None:
            self.output_logprobs.extend(logprobs)

    def to_dict(self) -> Dict:
        return {
            "rid": self.rid,
            "prompt_ids": self.prompt_ids,
            "output_ids": self.output_ids,
            "output_logprobs": self.output_logprobs,
            "weight_version": self.weight_version,
            "routed_experts": self.routed_experts,
            "finished": self.finished,
        }


class RolloutStore:
    """A bounded, thread-safe map rid -> RolloutRecord (oldest evicted first)."""

    def __init__(self, capacity: int = 65536) -> None:
        self.capacity = capacity
        self._records: "OrderedDict[str, RolloutRecord]" = OrderedDict()
        self._lock = threading.Lock()

    def start(self, rid: str, prompt_ids: List[int], weight_version: Optional[str]) -> None:
        with self._lock:
            self._records[rid] = RolloutRecord(rid, list(prompt_ids), weight_version=weight_version)
            while len(self._records) > self.capacity:
                self._records.popitem(last=False)

    def append(self, rid: str, ids: List[int], logprobs: Optional[List[float]] = None) -> None:
        with self._lock:
            rec = self._records.get(rid)
            if rec is not None:
                rec.extend(ids, logprobs)

    def finish(self, rid: str, routed_experts=None) -> Optional[RolloutRecord]:
        with self._lock:
            rec = self._records.get(rid)
            if rec is not None:
                rec.finished = True
                rec.routed_experts = routed_experts
            return rec

    def pop(self, rid: str) -> Optional[RolloutRecord]:
        with self._lock:
            return self._records.pop(rid, None)

    def pop_finished(self, prefix: str = "") -> List[RolloutRecord]:
        with self._lock:
            done = [r for r in self._records.values() if r.finished and r.rid.startswith(prefix)]
            for r in done:
                del self._records[r.rid]
            return done

    def __len__(self) -> int:
        return len(self._records)


_STORE: Optional[RolloutStore] = None


def get_rollout_store() -> RolloutStore:
    global _STORE
    if _STORE is None:
        _STORE = RolloutStore()
    return _STORE
'''

LOGPROB_CHECK = '''"""Train/inference mismatch checks for RL: compare engine and trainer logprobs."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Sequence


@dataclass
class MismatchReport:
    n_tokens: int
    max_abs_diff: float
    mean_abs_diff: float
    k3_kl: float
    n_over_threshold: int

    def ok(self, max_mean_abs_diff: float = 0.05) -> bool:
        return self.mean_abs_diff <= max_mean_abs_diff


def compare_logprobs(
    engine: Sequence[float], trainer: Sequence[float], threshold: float = 0.5
) -> MismatchReport:
    if len(engine) != len(trainer):
        raise ValueError(
            f"token count mismatch: engine {len(engine)} vs trainer {len(trainer)} "
            "(the trainer did not get the engine's token ids)"
        )
    diffs: List[float] = [abs(a - b) for a, b in zip(engine, trainer)]
    n = len(diffs)
    k3 = 0.0
    for a, b in zip(engine, trainer):
        log_ratio = b - a
        k3 += math.exp(log_ratio) - 1 - log_ratio
    return MismatchReport(
        n_tokens=n,
        max_abs_diff=max(diffs) if diffs else 0.0,
        mean_abs_diff=sum(diffs) / n if n else 0.0,
        k3_kl=k3 / n if n else 0.0,
        n_over_threshold=sum(1 for d in diffs if d > threshold),
    )
'''

# file -> [(anchor, mode, text)]; mode: "after" inserts after the anchor's line,
# "before" before it, "replace" replaces the anchor text
EDITS: dict[str, list[tuple[str, str, str]]] = {
    "sglang/srt/multimodal/processors/qwen_vl.py": [
        ("        base_output = self.load_mm_data(\n", "replace",
         "        base_output = self.legacy_load_mm_data(\n"),
        ("        load_time = time.perf_counter()\n        rid = getattr(request_obj, \"rid\", \"anonymous_rid\")\n",
         "replace",
         "        load_time = time.perf_counter()\n        rid = getattr(request_obj, \"rid\", \"anonymous_rid\")\n"
         "        self._log_mm_shapes(base_output, rid)\n"),
        ("    async def process_mm_data_async(\n", "before", QWEN_HELPER.lstrip("\n") + "\n"),
    ],
    "sglang/srt/managers/scheduler_update_weights_mixin.py": [
        ("        success, message = worker.update_weights_from_tensor(recv_req)\n        if success:\n"
         "            self.flush_cache_after_weight_update(recv_req)\n",
         "replace",
         "        tic = time.perf_counter()\n"
         "        success, message = worker.update_weights_from_tensor(recv_req)\n"
         "        logger.info(\"update_weights_from_tensor took %.3fs\", time.perf_counter() - tic)\n"
         "        if success:\n"
         "            self.flush_cache_after_weight_update(recv_req)\n"
         "            self._rl_on_weights_updated(recv_req.weight_version)\n"),
        ("    def update_weights_from_ipc(\n", "before", MIXIN_BUCKETED.lstrip("\n") + "\n"),
    ],
    "sglang/srt/managers/io_struct.py": [
        ("    # Whether to return captured routed experts\n    return_routed_experts: bool = False\n"
         "    return_indexer_topk: bool = False\n", "after",
         "    # RL: stream token ids only and keep the rollout for /get_rollouts\n"
         "    rl_stream_token_ids: bool = False\n"
         "    rl_keep_rollout: bool = False\n"),
        ("    # Whether to call torch.cuda.empty_cache() during flush\n    torch_empty_cache: bool = False\n\n\n"
         "@dataclass\nclass UpdateWeightsFromTensorReqOutput(BaseReq):\n    success: bool\n    message: str\n",
         "after", IO_STRUCTS),
    ],
    "sglang/srt/managers/scheduler.py": [
        ("                (UpdateWeightsFromTensorReqInput, self.update_weights_from_tensor),\n", "after",
         "                (\n"
         "                    UpdateWeightsFromTensorBucketedReqInput,\n"
         "                    self.update_weights_from_tensor_bucketed,\n"
         "                ),\n"
         "                (PostProcessWeightsReqInput, self.post_process_weights),\n"
         "                (GetRoutedExpertsReqInput, self.get_routed_experts),\n"),
        ("    UpdateWeightsFromTensorReqInput,\n", "after",
         "    UpdateWeightsFromTensorBucketedReqInput,\n"
         "    PostProcessWeightsReqInput,\n"
         "    GetRoutedExpertsReqInput,\n"
         "    GetRoutedExpertsReqOutput,\n"),
        ("                model_worker_batch = worker_batch_or_batch\n"
         "                self.record_batch_in_overlap(model_worker_batch)\n\n", "replace",
         "                model_worker_batch = worker_batch_or_batch\n"
         "                self.record_batch_in_overlap(model_worker_batch=model_worker_batch)\n"
         "                if self.rl_capture_routed_experts:\n"
         "                    model_worker_batch.capture_routed_experts = True\n\n"),
        ("    def get_internal_state(self, recv_req: GetInternalStateReq):\n", "before",
         SCHEDULER_METHODS.lstrip("\n") + "\n"),
        ("        self.init_request_dispatcher()\n", "after",
         "\n        # RL state: weight version, pause-on-sync, routing replay\n"
         "        self.rl_weight_version = self.server_args.weight_version\n"
         "        self.rl_num_weight_updates = 0\n"
         "        self.rl_pause_generation = False\n"
         "        self.rl_held_reqs = []\n"
         "        self.rl_capture_routed_experts = (\n"
         "            self.server_args.enable_return_routed_experts\n"
         "        )\n"),
        ("    def process_input_requests(self, recv_reqs: List):\n        now = time.monotonic()\n", "after",
         "        if self.rl_pause_generation and recv_reqs:\n"
         "            # RL: hold new generation requests while weights are being synced\n"
         "            self.rl_held_reqs.extend(recv_reqs)\n"
         "            return\n"),
    ],
    "sglang/srt/managers/tokenizer_manager.py": [
        ("    def _coalesce_streaming_chunks(\n", "before", TOKENIZER_METHODS.lstrip("\n") + "\n"),
        ("            if incremental_stream and len(out_list) > 1:\n"
         "                out = self._coalesce_streaming_chunks(out_list, obj.rid)\n", "replace",
         "            if getattr(obj, \"rl_stream_token_ids\", False):\n"
         "                out = self._rl_stream_chunk(state, obj, out_list)\n"
         "            elif incremental_stream and len(out_list) > 1:\n"
         "                out = self._coalesce_streaming_chunks(out_list, obj.rid)\n"),
    ],
    "sglang/srt/managers/tokenizer_control_mixin.py": [
        ("    (\"update_weights_from_tensor\", UpdateWeightsFromTensorReqOutput),\n", "after",
         "    (\n        \"update_weights_from_tensor_bucketed\",\n"
         "        UpdateWeightsFromTensorBucketedReqOutput,\n    ),\n"
         "    (\"post_process_weights\", PostProcessWeightsReqOutput),\n"
         "    (\"get_routed_experts\", GetRoutedExpertsReqOutput),\n"),
        ("    UpdateWeightsFromTensorReqOutput,\n)\n", "replace",
         "    UpdateWeightsFromTensorReqOutput,\n"
         "    UpdateWeightsFromTensorBucketedReqInput,\n"
         "    UpdateWeightsFromTensorBucketedReqOutput,\n"
         "    PostProcessWeightsReqOutput,\n"
         "    GetRoutedExpertsReqOutput,\n)\n"),
        ("    async def update_weights_from_ipc(\n", "before",
         "    async def update_weights_from_tensor_bucketed(\n"
         "        self: TokenizerManager,\n"
         "        obj: UpdateWeightsFromTensorBucketedReqInput,\n"
         "        request: Optional[fastapi.Request] = None,\n"
         "    ) -> Tuple[bool, str]:\n"
         "        self.auto_create_handle_loop()\n"
         "        # buckets of one sync share the writer lock: generation waits for the last one\n"
         "        if obj.bucket_id == 0:\n"
         "            await self.model_update_lock.writer_lock.acquire()\n"
         "        try:\n"
         "            results = await self.update_weights_from_tensor_bucketed_communicator(obj)\n"
         "        finally:\n"
         "            if obj.is_last_bucket:\n"
         "                self.model_update_lock.writer_lock.release()\n"
         "        success, message = FanOutCommunicator.merge_results(results)\n"
         "        if success and obj.is_last_bucket and obj.weight_version is not None:\n"
         "            self._update_weight_version_if_provided(obj.weight_version)\n"
         "            message += f\" Weight version updated to {obj.weight_version}.\"\n"
         "        return success, message\n\n"),
    ],
    "sglang/srt/entrypoints/http_server.py": [
        ("@app.post(\"/update_weights_from_distributed\")\n", "before", HTTP_ENDPOINTS.lstrip("\n") + "\n\n"),
    ],
    "sglang/srt/model_executor/model_runner.py": [
        ("        elif load_format is None:\n            self.model.load_weights(named_tensors)\n", "replace",
         "        elif load_format is None:\n"
         "            if getattr(self, \"_rl_keep_original_weights\", False):\n"
         "                self._rl_original_weights = {\n"
         "                    name: param.detach().clone()\n"
         "                    for name, param in self.model.named_parameters()\n"
         "                }\n"
         "            self.model.load_weights(named_tensors)\n"),
        ("    def _update_weights_from_flattened_bucket(\n", "before", MODEL_RUNNER_METHODS.lstrip("\n") + "\n"),
        ("                num_fused_shared_experts=num_fused_shared_experts,\n"
         "                num_tokens=self.max_total_num_tokens + self.page_size,\n"
         "                max_running_requests=self.max_running_requests,\n                device=self.device,\n"
         "            )\n        )\n", "after",
         "        # RL routing replay: keep the routed experts per request until the trainer reads them\n"
         "        self.routed_experts_capturer = get_global_experts_capturer()\n"
         "        if self.server_args.enable_return_routed_experts:\n"
         "            logger.info(\n"
         "                \"RL routing replay enabled for %d layers\",\n"
         "                self.model_config.num_hidden_layers,\n"
         "            )\n"),
    ],
    "sglang/srt/sampling/sampling_params.py": [
        ("        sampling_seed: Optional[int] = None,\n    ) -> None:\n", "replace",
         "        sampling_seed: Optional[int] = None,\n"
         "        return_routed_experts: bool = False,\n"
         "        rl_stream_token_ids: bool = False,\n"
         "    ) -> None:\n"),
        ("        self.max_new_tokens = max_new_tokens\n", "before",
         "        # RL: capture the routed experts of every generated token (routing replay)\n"
         "        self.return_routed_experts = return_routed_experts\n"
         "        # RL: stream token ids, never re-detokenized text\n"
         "        self.rl_stream_token_ids = rl_stream_token_ids\n"),
    ],
    "sglang/srt/entrypoints/engine.py": [
        ("    def update_weights_from_disk(\n", "before", ENGINE_METHODS.lstrip("\n") + "\n"),
        ("        obj = UpdateWeightsFromTensorReqInput(\n            serialized_named_tensors=serialized_named_tensors,\n"
         "            load_format=load_format,\n            flush_cache=flush_cache,\n        )\n", "replace",
         "        obj = UpdateWeightsFromTensorReqInput(\n            serialized_named_tensors=serialized_named_tensors,\n"
         "            load_format=load_format,\n            flush_cache=flush_cache,\n"
         "            abort_all_requests=self.server_args.rl_abort_on_weight_update,\n        )\n"),
    ],
    "sglang/srt/server_args.py": [
        ("    weight_version: str = \"default\"\n", "after",
         "    # RL: pause generation while weights are synced, abort in-flight requests first\n"
         "    rl_pause_generation_on_weight_update: bool = False\n"
         "    rl_abort_on_weight_update: bool = False\n"
         "    rl_weight_sync_bucket_mb: int = 512\n"),
        ("            default=ServerArgs.weight_version,\n"
         "            help=\"Version identifier for the model weights. Defaults to 'default' if not specified.\",\n"
         "        )\n", "after",
         "        parser.add_argument(\n"
         "            \"--rl-pause-generation-on-weight-update\",\n"
         "            action=\"store_true\",\n"
         "            help=\"RL: hold new generation requests while weights are synced.\",\n"
         "        )\n"
         "        parser.add_argument(\n"
         "            \"--rl-abort-on-weight-update\",\n"
         "            action=\"store_true\",\n"
         "            help=\"RL: abort in-flight requests before a weight update.\",\n"
         "        )\n"
         "        parser.add_argument(\n"
         "            \"--rl-weight-sync-bucket-mb\",\n"
         "            type=int,\n"
         "            default=ServerArgs.rl_weight_sync_bucket_mb,\n"
         "            help=\"RL: size of one weight-sync bucket in MiB.\",\n"
         "        )\n"),
    ],
    "sglang/srt/multimodal/processors/base_processor.py": [
        ("        \"\"\"\n\n        multimodal_tokens_pattern = multimodal_tokens.get_combined_regex()\n"
         "        if isinstance(prompt, list) and return_text:\n"
         "            assert len(prompt) and isinstance(prompt[0], int)\n"
         "            prompt = self._tokenizer.decode(prompt)\n", "replace",
         "        \"\"\"\n\n        multimodal_tokens_pattern = multimodal_tokens.get_combined_regex()\n"
         "        if isinstance(prompt, list) and return_text:\n"
         "            assert len(prompt) and isinstance(prompt[0], int)\n"
         "            # RL: keep the caller's ids around for debugging token drift\n"
         "            self._last_prompt_ids = list(prompt)\n"
         "            prompt = self._tokenizer.decode(prompt)\n"),
    ],
    "sglang/srt/managers/tp_worker.py": [
        ("    def forward_batch_split_prefill(self, batch: ScheduleBatch):\n", "before",
         TP_WORKER_METHODS.lstrip("\n")),
    ],
    "sglang/srt/managers/detokenizer_manager.py": [
        ("    def handle_batch_token_id_out(self, recv_obj: BatchTokenIDOutput):\n"
         "        # If handling idle batch, set output_strs to [].\n"
         "        output_strs = (\n"
         "            self._decode_batch_token_id_output(recv_obj)\n"
         "            if len(recv_obj.rids) > 0\n"
         "            else []\n"
         "        )\n", "replace",
         "    def handle_batch_token_id_out(self, recv_obj: BatchTokenIDOutput):\n"
         "        # RL: token ids only, no detokenization (the trainer never reads the text)\n"
         "        if self.server_args.rl_skip_detokenize:\n"
         "            output_strs = [\"\"] * len(recv_obj.rids)\n"
         "        else:\n"
         "            # If handling idle batch, set output_strs to [].\n"
         "            output_strs = (\n"
         "                self._decode_batch_token_id_output(recv_obj)\n"
         "                if len(recv_obj.rids) > 0\n"
         "                else []\n"
         "            )\n"
         "        store = get_rollout_store()\n"
         "        for i, rid in enumerate(recv_obj.rids):\n"
         "            store.append(rid, recv_obj.output_ids[i] if recv_obj.output_ids else [])\n"),
    ],
    "sglang/srt/managers/schedule_batch.py": [
        ("        self.hidden_states: List[List[float]] = []\n", "before",
         "        # RL: the weight version that produced each output token (a request can\n"
         "        # straddle a weight update when generation is not paused)\n"
         "        self.rl_weight_versions: List[str] = []\n"
         "        # RL: prompt ids exactly as the caller sent them (before any expansion)\n"
         "        self.rl_caller_input_ids: Optional[List[int]] = None\n"),
    ],
}

NEW_FILES = {"sglang/srt/rl/weight_sync.py": WEIGHT_SYNC, "sglang/srt/rl/__init__.py": "",
             "sglang/srt/rl/rollout_store.py": ROLLOUT_STORE, "sglang/srt/rl/logprob_check.py": LOGPROB_CHECK}

# one patch file per topic, as RL frameworks keep them
PATCHES = {
    "0001-qwen-vl-use-legacy-loader.patch": ["sglang/srt/multimodal/processors/qwen_vl.py"],
    "0002-rl-weight-sync.patch": ["sglang/srt/managers/io_struct.py",
                                "sglang/srt/managers/scheduler_update_weights_mixin.py",
                                "sglang/srt/managers/tokenizer_control_mixin.py",
                                "sglang/srt/entrypoints/http_server.py",
                                "sglang/srt/model_executor/model_runner.py",
                                "sglang/srt/rl/__init__.py", "sglang/srt/rl/weight_sync.py"],
    "0003-rl-scheduler-hooks.patch": ["sglang/srt/managers/scheduler.py", "sglang/srt/managers/schedule_batch.py"],
    "0004-rl-streaming-and-routing-replay.patch": ["sglang/srt/managers/tokenizer_manager.py",
                                                 "sglang/srt/sampling/sampling_params.py",
                                                 "sglang/srt/multimodal/processors/base_processor.py",
                                                 "sglang/srt/managers/detokenizer_manager.py",
                                                 "sglang/srt/rl/rollout_store.py", "sglang/srt/rl/logprob_check.py"],
    "0005-rl-engine-api.patch": ["sglang/srt/entrypoints/engine.py", "sglang/srt/server_args.py",
                                 "sglang/srt/managers/tp_worker.py"],
}


def apply_edits(text: str, edits, where: str) -> str:
    for anchor, mode, new in edits:
        n = text.count(anchor)
        if n != 1:
            raise SystemExit(f"{where}: anchor found {n} times, expected once: {anchor[:70]!r}")
        if mode == "replace":
            text = text.replace(anchor, new)
        elif mode == "after":
            text = text.replace(anchor, anchor + new)
        else:
            text = text.replace(anchor, new + anchor)
    return text


def git_diff(path: str, old: str | None, new: str) -> str:
    """A git-style unified diff of one file, with git's Python function headers."""
    a = old.splitlines(keepends=True) if old is not None else []
    b = new.splitlines(keepends=True)
    repo_path = f"python/{path}"
    out = [f"diff --git a/{repo_path} b/{repo_path}\n"]
    if old is None:
        out += ["new file mode 100644\n", "--- /dev/null\n", f"+++ b/{repo_path}\n"]
    else:
        out += [f"--- a/{repo_path}\n", f"+++ b/{repo_path}\n"]
    for line in list(difflib.unified_diff(a, b, n=3))[2:]:
        if line.startswith("@@"):
            m = re.match(r"@@ -(\d+)", line)
            start = int(m.group(1)) if m else 0
            header = ""
            for k in range(start - 1, 0, -1):   # the nearest function line above the hunk
                fm = _FUNC.match(a[k - 1].rstrip("\n")) if k - 1 < len(a) else None
                if fm:
                    header = " " + fm.group(1)[:80]
                    break
            line = line.rstrip("\n") + header + "\n"
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def main(wheel: str, out_dir: str) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as zf:
        originals = {p: zf.read(p).decode("utf-8") for p in EDITS}
    total = 0
    for name, files in PATCHES.items():
        parts = [f"From: RL framework maintainers\nSubject: [PATCH] {name[5:-6].replace('-', ' ')}\n\n---\n"]
        for path in files:
            if path in NEW_FILES:
                parts.append(git_diff(path, None, NEW_FILES[path]) if NEW_FILES[path] else
                             f"diff --git a/python/{path} b/python/{path}\nnew file mode 100644\n")
            else:
                parts.append(git_diff(path, originals[path], apply_edits(originals[path], EDITS[path], path)))
        text = "".join(parts)
        (out / name).write_text(text, encoding="utf-8")
        total += text.count("\n")
        print(f"{out / name}: {text.count(chr(10))} lines")
    print(f"{total} lines in {len(PATCHES)} patch files")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2])
