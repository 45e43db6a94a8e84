#!/usr/bin/env bash
# Set up a venv in .venv (CPU torch) and run the test suite. Usage: bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip >/dev/null
.venv/bin/pip install -q torch==2.13.0
.venv/bin/pip install -q -e ".[dev]"
export GRPO_LAB_CACHE="${GRPO_LAB_CACHE:-$PWD/.cache}"
.venv/bin/python -m pytest -q "$@"
