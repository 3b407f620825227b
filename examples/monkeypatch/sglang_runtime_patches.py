"""Runtime patches of SGLang, in the style of an RL framework's engine glue.

Written against sglang 0.5.12.post1.  Nothing here is imported by patchaudit:
it reads this file.  Try (wheels from `pip download sglang==... --no-deps`):

    patchaudit inventory examples/monkeypatch \
        --engine sglang=sglang-0.5.15.post1-cp311-cp311-manylinux_2_34_x86_64.whl
    patchaudit check --select PA206,PA207 examples/monkeypatch \
        --engine sglang=sglang-0.5.15.post1-cp311-cp311-manylinux_2_34_x86_64.whl
    patchaudit bump examples/monkeypatch --engine sglang \
        --from sglang-0.5.12.post1-cp311-cp311-manylinux_2_34_x86_64.whl \
        --to sglang-0.5.15.post1-cp311-cp311-manylinux_2_34_x86_64.whl

Against 0.5.15.post1, `legacy_load_mm_data` became async and gained the
`input_ids` side channel that keeps the caller's token ids (sgl-project/sglang
#26555): the replacement below, right for 0.5.12, now drops them (PA207), and
`record_batch_in_overlap`'s parameter was renamed (PA207),
`init_cache_with_memory_pool` was renamed (PA206; the `recv_requests` patch,
gated to engines before 0.5.13, is not checked there), and the bump from
0.5.12 reports the definitions that changed under the patches (PA203).  See
docs/monkeypatch.md.
"""

from __future__ import annotations

import logging
import os
from unittest import mock

import sglang
from packaging import version
import sglang.srt.entrypoints.engine
from sglang.srt.managers.scheduler import Scheduler
from sglang.srt.multimodal.processors import base_processor as bp

logger = logging.getLogger(__name__)


# 1. replaced: a module function (verl does exactly this)
def _set_envs_and_config(server_args):
    """Set the engine's environment without installing signal handlers (we run in a Ray actor)."""
    os.environ.setdefault("NCCL_CUMEM_ENABLE", "0")
    os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "8"


sglang.srt.entrypoints.engine._set_envs_and_config = _set_envs_and_config

# 2. wrapped: keep the original and pass everything through (*args, **kwargs)
_orig_process_input_requests = Scheduler.process_input_requests


def process_input_requests(self, *args, **kwargs):
    logger.debug("scheduler: %d new request batch(es)", len(args[0]) if args else 0)
    return _orig_process_input_requests(self, *args, **kwargs)


Scheduler.process_input_requests = process_input_requests


# 3. replaced, with the signature of 0.5.12.post1: sync, and no `input_ids`
def legacy_load_mm_data(
    self,
    prompt,
    multimodal_tokens,
    image_data=None,
    video_data=None,
    audio_data=None,
    return_text=True,
    discard_alpha_channel=True,
    audio_sample_rate=None,
):
    """Load images for RL rollouts without the video decoder (we never send video)."""
    if video_data:
        raise ValueError("this deployment does not serve video")
    return _orig_legacy_load_mm_data(
        self, prompt, multimodal_tokens, image_data, None, audio_data, return_text,
        discard_alpha_channel, audio_sample_rate,
    )


_orig_legacy_load_mm_data = bp.BaseMultimodalProcessor.legacy_load_mm_data
bp.BaseMultimodalProcessor.legacy_load_mm_data = legacy_load_mm_data

# 4. a patch for old engines only: `recv_requests` is gone in 0.5.15
if version.parse(sglang.__version__) < version.parse("0.5.13"):
    _orig_recv_requests = Scheduler.recv_requests

    def recv_requests(self):
        reqs = _orig_recv_requests(self)
        logger.debug("received %d request(s)", len(reqs))
        return reqs

    Scheduler.recv_requests = recv_requests


# 5. replaced with the 0.5.12 parameter name (0.5.15 calls it `batch`)
def record_batch_in_overlap(self, model_worker_batch):
    self.batch_record_buf[self.batch_record_ct] = model_worker_batch
    self.batch_record_ct = (self.batch_record_ct + 1) % 2


Scheduler.record_batch_in_overlap = record_batch_in_overlap


# 6. wrapped: renamed to `init_memory_pools` in 0.5.15
_orig_init_cache = Scheduler.init_cache_with_memory_pool


def init_cache_with_memory_pool(self):
    _orig_init_cache(self)
    logger.info("KV cache ready: %s", type(self.token_to_kv_pool_allocator).__name__)


Scheduler.init_cache_with_memory_pool = init_cache_with_memory_pool

# 7. mock.patch outside tests: keep the Ray actor alive when the engine gives up
_keep_ray_alive = mock.patch(
    "sglang.srt.utils.kill_process_tree",
    lambda parent_pid, include_parent=True, skip_pid=None, wait_timeout=None: None,
)
