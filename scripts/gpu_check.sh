#!/usr/bin/env bash
# Exercise the deepseek-ocr2 engine on a CUDA GPU and print its figures, in under 8 minutes:
# bf16/fp32, SDPA or flash-attn, batches of mixed page sizes vs single pages, `ocrbatch bench --arch full`
# (the pipeline at batch sizes 32, 8, 1 against a one-page-at-a-time loop), and a random model of roughly
# the real architecture's size. Random weights: speed, memory and consistency, never accuracy.
#
#   scripts/gpu_check.sh                      # on a machine with a CUDA GPU and `make test` done
#   scripts/gpu_check.sh --device cpu --quick  # check the script itself without a GPU
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec timeout --kill-after=10 470 "$PY" scripts/gpu_check.py "$@"
