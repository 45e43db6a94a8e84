#!/usr/bin/env bash
# Set up a venv in .venv (CPU torch) and run the main job on the embedded default (tiny model, CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip >/dev/null
.venv/bin/pip install -q torch==2.13.0
.venv/bin/pip install -q -e .
.venv/bin/grpo-lab run experiments/configs/tiny-math.yaml "$@"
