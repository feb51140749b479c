#!/usr/bin/env bash
# Everything bench/RESULTS.md cites, in one go on the GPU machine (run from the repository root
# with bin/rosetop, bin/gpu.test, bin/engine.test and bin/sched.test built beforehand; see RESULTS.md):
# the correctness check, the decode step breakdown, process start -> first token, and the
# rosetop-vs-transformers table.
#   bench/peers/results.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: results.sh OUTDIR}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
scripts/gpu-check.sh "$out/check" >"$out/check.txt" 2>&1
grep -E "RESULT|FAIL|^Benchmark" "$out/check.txt"
# Per-op GPU times (CUDA events), per-kind graph replays, graph/Step timings, cuBLAS variants.
(cd gpu && ROSETOP_REQUIRE_GPU=1 ROSETOP_GPU_PROFILE=1 ROSETOP_GPU_PROFILE_SAMPLING=1 \
	../bin/gpu.test -test.run 'TestProfileDecodeGPT2' -test.v) >"$out/profile.txt" 2>&1
grep -E "graph \[|forward pass alone|sum of kinds" "$out/profile.txt"
# The attention kernels alone (a graph of a step's 12 launches), batch 1 and 64, over contexts.
(cd gpu && ROSETOP_REQUIRE_GPU=1 ROSETOP_GPU_PROFILE=1 ../bin/gpu.test -test.run 'TestProfileAttention$' -test.v) >"$out/attention.txt" 2>&1
grep -E "attention us" "$out/attention.txt"
# The LM head at 1-64 rows on cublasGemmEx and on each of cuBLASLt's candidates.
(cd gpu && ROSETOP_REQUIRE_GPU=1 ROSETOP_GPU_PROFILE=1 ../bin/gpu.test -test.run 'TestProfileLMHead$' -test.v) >"$out/lmhead.txt" 2>&1
grep -E "LM head" "$out/lmhead.txt"
# The greedy sampler alone (argmax_next) over a step's logits, batch 1 and 64.
(cd gpu && ROSETOP_REQUIRE_GPU=1 ROSETOP_GPU_PROFILE=1 ../bin/gpu.test -test.run 'TestProfileSampler$' -test.v) >"$out/sampler.txt" 2>&1
grep -E "sampler" "$out/sampler.txt"
# decode-heavy's decode phase as the job runs it (contexts 2-257), each variant on a fresh runner.
(cd gpu && ROSETOP_REQUIRE_GPU=1 ROSETOP_GPU_PROFILE=1 ../bin/gpu.test -test.run 'TestProfileDecodeRun$' -test.v) >"$out/run.txt" 2>&1
grep -E "round" "$out/run.txt"
# decode-heavy's shape through the scheduler, one step at a time and with the steps queued ahead
# (the outputs must be the same).
(cd sched && ROSETOP_REQUIRE_GPU=1 ROSETOP_GPU_PROFILE=1 ../bin/sched.test -test.run 'TestProfileCUDAStepsAheadGPT2$' -test.v) >"$out/sched.txt" 2>&1
grep -E "round|FAIL|differ" "$out/sched.txt"
# Process start -> first token: generate prints the token and exits; the clock stops when the
# line arrives on the pipe.
for i in 1 2 3; do
	s=$(date +%s%N)
	./bin/rosetop generate --device cuda --model random:gpt2 --max-new-tokens 1 --no-stop-on-eos 2>/dev/null |
		{ read -r line; e=$(date +%s%N); echo "run $i: first token ('$line') printed $(((e - s) / 1000000)) ms after process start"; cat >/dev/null; }
	f=$(date +%s%N)
	echo "run $i: process exited $(((f - s) / 1000000)) ms after start"
done | tee "$out/cold.txt"
bench/peers/run_all.sh "$out/cmp" >"$out/table.txt" 2>"$out/run_all.err"
cat "$out/table.txt"
