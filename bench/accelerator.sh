#!/usr/bin/env bash
# The prepared accelerator run: on a GPU machine, one command gives every figure in one JSON file.
#
#   bench/accelerator.sh [--out FILE] [--quick] [--only NAME ...] [--budget-s S] [--install no]
#
# Installs the CUDA build of JAX where an NVIDIA GPU is visible (skip: --install no or
# DEDEBATE_ACCEL_INSTALL=0), prints the devices (dedebate doctor), then runs the stochastic
# debate's throughput, every benchmark at --full size and `dedebate reproduce --full --only NAME`
# for the experiments that fit, each step with its own timeout, within one budget (default 480 s).
# The JSON (default runs/accelerator-<UTC time>.json) is rewritten after every step.
# Environment: DEDEBATE_ACCEL_QUICK=1 (small sizes, what the tests use on a CPU),
# DEDEBATE_ACCEL_ONLY="machines ...", DEDEBATE_ACCEL_BUDGET_S, DEDEBATE_ACCEL_TIMEOUTS="bench=60",
# DEDEBATE_ACCEL_OUT, DEDEBATE_ACCEL_CUDA=cuda13; PYTHON (default .venv/bin/python, else python3).
# docs/accelerators.md describes the steps and the JSON.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ -z "${PYTHON:-}" ]; then
  if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
exec "$PYTHON" -m bench._accelerator "$@"
