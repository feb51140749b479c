#!/usr/bin/env bash
# run.sh: builds bench/gemmlab on the GPU machine (nvcc 12 or newer: wgmma needs sm_90a) and runs
# it at 64 rows, then at the rows given; GEMMLAB_SWEEP=1 times every wg_gemm plan at each.
# Usage: bench/gemmlab/run.sh [ROWS...]
set -euo pipefail
cd "$(dirname "$0")"
export PATH=/usr/local/cuda/bin:$PATH
out=${TMPDIR:-/tmp}/gemmlab
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -diag-suppress 177,1886 -o "$out" gemmlab.cu -lcublas
for m in 64 "$@"; do "$out" "$m" ${GEMMLAB_SWEEP:+sweep}; done
