# Sourced by quickstart.sh and test.sh: a venv in .venv holding the CPU build of torch, and
# `install ARGS...` for everything after it: uv where it is on PATH (grpo-lab's quick-start
# dependencies in 12 s instead of pip's 75 s from an empty cache, docs/install.md), else pip.
python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip >/dev/null
# torch through pip, pinned: a plain `torch` requirement resolves to the multi-GB CUDA build.
.venv/bin/pip install -q torch==2.13.0
if command -v uv >/dev/null; then
  # deepspeed's sdist imports torch while it builds: build it against the venv's CPU torch
  # (uv would otherwise fetch a second torch, the CUDA one, into an isolated build env).
  install() { uv pip install -q --python .venv/bin/python --no-build-isolation-package deepspeed "$@"; }
  install setuptools wheel
else
  install() { .venv/bin/pip install -q "$@"; }
fi
