#!/usr/bin/env bash
# The clean counterpart: the guard stays on (it defaults to on anyway).
set -euo pipefail

export SGLANG_MM_AVOID_RETOKENIZE=1
python -m sglang.launch_server --model-path "$MODEL" --port 30000
