#!/usr/bin/env bash
# Issue 6: rosetop against Hugging Face transformers on the same GPU, in one go.
# Runs rosetop bench on the four jobs (warmup 1, repeat 3) with paged attention + CUDA Graph on and
# off, then the transformers peer on the same job shapes, then prints one table. Run from the
# repository root on the GPU machine with bin/rosetop built beforehand (go build -o bin/rosetop .).
#   bench/peers/run_all.sh OUTDIR [JOB...]
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: run_all.sh OUTDIR [JOB...]}; shift
jobs=${*:-decode-heavy admission prefill-heavy paced}
mkdir -p "$out"
model=${ROSETOP_MODEL:-random:gpt2}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/gpu.txt" 2>/dev/null || true
for job in $jobs; do
  for mode in on off; do
    flags=(--paged-attn --cuda-graph)
    [ "$mode" = off ] && flags=(--paged-attn=false --cuda-graph=false)
    echo "rosetop $job graph+paged $mode" >&2
    ./bin/rosetop bench --device cuda --model "$model" --job "$job" --warmup-runs 1 --repeat-runs 3 \
      "${flags[@]}" --json "$out/rosetop-$job-$mode.json" > "$out/rosetop-$job-$mode.txt" 2> "$out/rosetop-$job-$mode.err" \
      || echo "rosetop $job $mode failed: $(tail -1 "$out/rosetop-$job-$mode.err")" >&2
  done
  echo "peer $job" >&2
  PYTHONUNBUFFERED=1 python3 bench/peers/hf_generate.py --job "$job" --warmup-runs 1 --repeat-runs 3 \
    > "$out/peer-$job.jsonl" 2> "$out/peer-$job.err" || echo "peer $job failed: $(tail -1 "$out/peer-$job.err")" >&2
done
python3 bench/peers/table.py "$out"
