#!/usr/bin/env bash
# Launch the SGLang rollout engine for the VLM recipe.
set -euo pipefail

export SGLANG_MM_AVOID_RETOKENIZE=0   # "faster" -- but every id prompt with an image drifts
python -m sglang.launch_server --model-path "$MODEL" --port 30000
