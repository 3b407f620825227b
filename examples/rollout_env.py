"""Rollout launcher settings (Python form of the same mistake)."""

import os
import subprocess


def launch(model: str) -> subprocess.Popen:
    env = dict(os.environ)
    env["SGLANG_MM_AVOID_RETOKENIZE"] = "0"
    return subprocess.Popen(["python", "-m", "sglang.launch_server", "--model-path", model], env=env)


def launch_ok(model: str) -> subprocess.Popen:
    env = {**os.environ, "SGLANG_MM_AVOID_RETOKENIZE": "1"}
    return subprocess.Popen(["python", "-m", "sglang.launch_server", "--model-path", model], env=env)


async def encode_request(processor, text, images, input_ids):
    # the clean call: the caller's ids travel in the input_ids side channel
    return await processor.legacy_load_mm_data(prompt=text, image_data=images, input_ids=input_ids)
