#!/usr/bin/env bash
# ab-throughput.sh: the completion throughput of two rosetop binaries on bench jobs, the binaries
# alternated in one call so that both meet the same GPU state. For each job, N rounds of both
# binaries (B first in every other round), each an invocation of
#   rosetop bench --device cuda --model random:gpt2 --job JOB --warmup-runs 1 --repeat-runs 3
# (the jobs' presets: paged attention, CUDA graphs); prints each invocation's median steady-run
# throughput, then per job each binary's median over its invocations and B/A - 1.
# Run from the repository root on the GPU machine, binaries built beforehand (go build -o ...).
#   scripts/ab-throughput.sh A_BINARY B_BINARY OUTDIR [N [JOB...]]   (N: 5; jobs: decode-heavy admission)
set -uo pipefail
a=${1:?usage: ab-throughput.sh A_BINARY B_BINARY OUTDIR [N [JOB...]]}
b=${2:?usage: ab-throughput.sh A_BINARY B_BINARY OUTDIR [N [JOB...]]}
out=${3:?usage: ab-throughput.sh A_BINARY B_BINARY OUTDIR [N [JOB...]]}
n=${4:-5}
shift $(($# < 4 ? $# : 4))
jobs=${*:-decode-heavy admission}
mkdir -p "$out"
for bin in "$a" "$b"; do
	[ -x "$bin" ] || { echo "ab-throughput.sh: $bin is not an executable" >&2; exit 2; }
done
run() { # run LABEL BINARY JOB ROUND
	local f="$out/$3-$1-$4"
	"$2" bench --device cuda --model random:gpt2 --job "$3" --warmup-runs 1 --repeat-runs 3 --json "$f.json" >"$f.txt" 2>"$f.err" ||
		echo "$1 $3 round $4 failed: $(tail -1 "$f.err")" >&2
}
for job in $jobs; do
	for ((i = 0; i < n; i++)); do
		if ((i % 2 == 0)); then
			run A "$a" "$job" "$i"
			run B "$b" "$job" "$i"
		else
			run B "$b" "$job" "$i"
			run A "$a" "$job" "$i"
		fi
	done
done
python3 - "$out" $jobs <<'PY'
import json, statistics, sys, glob, os
out, jobs = sys.argv[1], sys.argv[2:]
for job in jobs:
    med = {}
    for label in "AB":
        vals = []
        for f in sorted(glob.glob(os.path.join(out, f"{job}-{label}-*.json")), key=lambda p: int(p.rsplit("-", 1)[1][:-5])):
            runs = [r for r in json.load(open(f))["runs"] if not r["warmup"] and not r["partial"]]
            v = statistics.median(r["summary"]["throughput_completion_tok_s"] for r in runs)
            vals.append(v)
            print(f"{job} {label} {os.path.basename(f)}: median of {len(runs)} steady runs {v:,.0f} tokens/s")
        med[label] = statistics.median(vals) if vals else float("nan")
    print(f"{job}: A median {med['A']:,.0f}, B median {med['B']:,.0f} tokens/s over the invocations; B/A - 1 = {med['B'] / med['A'] - 1:+.2%}")
PY
