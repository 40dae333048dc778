#!/usr/bin/env bash
# Runs on the GPU machine (device tool): `edgeinfer device` and the unit tests (GPU tests
# included) from a bundle built on the dev machine with CUDA (see docs/performance.md).
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cublas/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
source .bundle/env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
edgeinfer device
edgeinfer_unit_tests --gtest_brief=1 2>&1 | tail -n 30
