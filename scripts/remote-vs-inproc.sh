#!/usr/bin/env bash
# The HTTP path against the in-process one, in one call: `rosetop bench` on a job in-process, then
# `rosetop serve` on the same model and device and `rosetop bench --endpoint` on the same job
# against it. Prints both reports, the median completion throughput of each one's measured runs,
# their ratio, and checks the remote report's numbers against its --json. Outputs stay in $OUT.
#
#   scripts/remote-vs-inproc.sh                                  # cuda, random:gpt2, decode-heavy
#   DEVICE=cpu MODEL= JOB=decode-heavy scripts/remote-vs-inproc.sh  # the embedded model on a CPU
#   E2E_BIN=bin/rosetop BENCH_TEST=bin/bench.test scripts/remote-vs-inproc.sh
#       # a machine without Go: binaries built elsewhere (go build -o bin/rosetop . &&
#       # go test -c -o bin/bench.test ./bench/); without BENCH_TEST or go, no recomputation
set -euo pipefail
cd "$(dirname "$0")/.."
DEVICE=${DEVICE-cuda}
MODEL=${MODEL-random:gpt2}
JOB=${JOB:-decode-heavy}
OUT=${OUT:-$(mktemp -d -t rosetop-remote-vs-inproc.XXXXXX)}
mkdir -p "$OUT"
BIN=${E2E_BIN:-}
if [ -z "$BIN" ]; then
	go build -o bin/rosetop .
	BIN=bin/rosetop
fi
model_flag=()
[ -z "$MODEL" ] || model_flag=(--model "$MODEL")
server_pid=""
trap '[ -z "$server_pid" ] || kill -9 "$server_pid" 2>/dev/null || true' EXIT
fail() {
	echo "remote-vs-inproc: FAIL: $*" >&2
	exit 1
}
# median_throughput FILE: the median completion tokens/s over the report blocks of FILE.
median_throughput() {
	sed -nE 's/^Throughput \(completion,total\): ([0-9.]+),.*/\1/p' "$1" | sort -n |
		awk '{v[NR]=$1} END {if (NR == 0) exit 1; if (NR % 2) print v[(NR+1)/2]; else printf "%.2f\n", (v[NR/2]+v[NR/2+1])/2}'
}

echo "== in-process: rosetop bench --device $DEVICE ${model_flag[*]} --job $JOB"
"$BIN" bench --device "$DEVICE" "${model_flag[@]}" --job "$JOB" --json "$OUT/inproc.json" >"$OUT/inproc.txt" 2>"$OUT/inproc.err" ||
	fail "in-process bench: $(tail -1 "$OUT/inproc.err")"
cat "$OUT/inproc.txt"

echo "== rosetop serve --device $DEVICE ${model_flag[*]}"
"$BIN" serve --device "$DEVICE" "${model_flag[@]}" --port 0 >"$OUT/serve.out" 2>"$OUT/serve.err" &
server_pid=$!
url=""
for _ in $(seq 1 1200); do # the start-up line names the URL (a model load may take a while)
	[ -f "$OUT/serve.err" ] && url=$(sed -nE 's/.*serving [^ ]+ on (http:[^ ]+\/v1).*/\1/p' "$OUT/serve.err" | head -1) # not opened yet: no URL yet
	[ -n "$url" ] && break
	kill -0 "$server_pid" 2>/dev/null || fail "rosetop serve exited: $(tail -1 "$OUT/serve.err")"
	sleep 0.1
done
[ -n "$url" ] || fail "rosetop serve printed no URL within 120 s"

echo "== over HTTP: rosetop bench --endpoint $url --job $JOB"
"$BIN" bench --endpoint "$url" --job "$JOB" --json "$OUT/remote.json" >"$OUT/remote.txt" 2>"$OUT/remote.err" ||
	fail "bench --endpoint: $(tail -1 "$OUT/remote.err")"
cat "$OUT/remote.txt"
kill -TERM "$server_pid"
wait "$server_pid" || fail "rosetop serve exited $? after SIGTERM"
server_pid=""

inproc=$(median_throughput "$OUT/inproc.txt") || fail "no throughput in the in-process report"
remote=$(median_throughput "$OUT/remote.txt") || fail "no throughput in the remote report"
echo "== completion throughput, median of the measured runs: in-process $inproc tokens/s, over HTTP $remote tokens/s, ratio $(awk -v r="$remote" -v i="$inproc" 'BEGIN {printf "%.3f", r/i}')"
for what in "Prompt tokens (total)" "Completion tokens (total)"; do
	a=$(grep -F "$what" "$OUT/inproc.txt" | tr '\n' ' ')
	b=$(grep -F "$what" "$OUT/remote.txt" | tr '\n' ' ')
	[ "$a" = "$b" ] || fail "$what differ: in-process '$a', over HTTP '$b'"
done
echo "== token counts equal"
recompute=()
if [ -n "${BENCH_TEST:-}" ]; then
	recompute=("$BENCH_TEST" -test.count=1 -test.v -test.run TestRecomputeFiles)
elif command -v go >/dev/null; then
	recompute=(go test -count=1 -v -run TestRecomputeFiles ./bench/)
fi
if [ ${#recompute[@]} -gt 0 ]; then
	ROSETOP_REPORT="$OUT/remote.txt" ROSETOP_JSON="$OUT/remote.json" "${recompute[@]}" >"$OUT/recompute.txt" 2>&1 ||
		fail "the remote report does not match its JSON (see $OUT/recompute.txt)"
	grep -q "printed numbers match" "$OUT/recompute.txt" || fail "the recomputation did not run (see $OUT/recompute.txt)"
	echo "== $(grep -oE '[0-9]+ printed numbers match the recomputation' "$OUT/recompute.txt") (the remote report against its JSON)"
fi
echo "== outputs in $OUT"
