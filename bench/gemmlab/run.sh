#!/usr/bin/env bash
# run.sh: builds bench/gemmlab on the GPU machine (nvcc 12 or newer: wgmma needs sm_90a) and runs
# it at 64 rows, then at the rows given; GEMMLAB_SWEEP=1 times every wg_gemm plan at each.
# "run.sh chain [ROWS...]" builds and runs chain.cu instead (the persistent chain against PDL),
# "run.sh mlp [ROWS...]" mlp.cu (the MLP block as one kernel against the engine's two),
# "run.sh kvstream" kvstream.cu (a decode step's keys and values streamed by 96 to 768 blocks, and in
# clusters of the 12 heads with the cross-head sum of their partials),
# "run.sh hop" hop.cu (a link of the kernel chain before its products: PDL, clusters, X's copy).
# Usage: bench/gemmlab/run.sh [chain|mlp|kvstream|hop] [ROWS...]
set -euo pipefail
cd "$(dirname "$0")"
export PATH=/usr/local/cuda/bin:$PATH
out=${TMPDIR:-/tmp}/gemmlab
flags=(-O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -diag-suppress 177,1886)
if [[ ${1:-} == chain || ${1:-} == mlp || ${1:-} == kvstream || ${1:-} == hop ]]; then
	lab=$1
	shift
	nvcc "${flags[@]}" -o "$out-$lab" "$lab.cu"
	for m in 64 "$@"; do timeout 120 "$out-$lab" "$m"; done
	exit
fi
nvcc "${flags[@]}" -o "$out" gemmlab.cu -lcublas
for m in 64 "$@"; do "$out" "$m" ${GEMMLAB_SWEEP:+sweep}; done
