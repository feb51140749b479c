#!/usr/bin/env bash
# gpu-check.sh: on a machine with an NVIDIA GPU, python3, torch and transformers, builds the
# reference models (scripts/gpu_reference.py), runs rosetop's GPU tests (package gpu, the CUDA
# tests of packages engine and sched, with ROSETOP_REQUIRE_GPU=1 so nothing skips), the decode benchmark,
# and prints a pass/fail table. Test binaries come from `go test -c` when Go is installed, else
# from bin/gpu.test, bin/engine.test and bin/sched.test (build them elsewhere:
#   go test -c -o bin/gpu.test ./gpu/ && go test -c -o bin/engine.test ./engine/ && go test -c -o bin/sched.test ./sched/).
# Usage: scripts/gpu-check.sh [LOGDIR]   (LOGDIR defaults to a temporary directory)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
logs=${1:-$(mktemp -d)}
mkdir -p "$logs"
ref="$logs/hf-ref"
results=()
record() { results+=("$(printf '%-58s %s' "$1" "$2")"); }

if command -v go >/dev/null 2>&1; then
	mkdir -p bin
	go test -c -o bin/gpu.test ./gpu/ && go test -c -o bin/engine.test ./engine/ && go test -c -o bin/sched.test ./sched/ ||
		{ echo "build failed"; exit 1; }
fi
for b in bin/gpu.test bin/engine.test bin/sched.test; do
	[ -x "$b" ] || { echo "missing $b: build it with go test -c (see the header of this script)"; exit 1; }
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$logs/gpu.txt"

if PYTHONUNBUFFERED=1 python3 scripts/gpu_reference.py "$ref" >"$logs/reference.log" 2>&1; then
	record "reference models (transformers fp32)" PASS
else
	record "reference models (transformers fp32)" "FAIL (see $logs/reference.log)"
fi
tail -3 "$logs/reference.log"

# runtests NAME BINARY PKGDIR RUN: runs the tests and records one row per top-level test. The
# profile (a diagnostic that prints per-op times when ROSETOP_GPU_PROFILE=1) is left out.
runtests() {
	local name=$1 bin=$2 dir=$3 run=$4
	(cd "$dir" && ROSETOP_REQUIRE_GPU=1 ROSETOP_HF_REF="$ref" "$root/$bin" -test.v -test.count=1 -test.timeout=20m -test.run "$run" -test.skip Profile) \
		>"$logs/$name.log" 2>&1
	local rc=$?
	while read -r test status; do
		record "$name $test" "$status"
	done < <(sed -nE 's/^--- (PASS|FAIL|SKIP): ([^ ]+).*/\2 \1/p' "$logs/$name.log")
	[ $rc -eq 0 ] || record "$name (exit status)" "FAIL rc=$rc, see $logs/$name.log"
}
runtests gpu bin/gpu.test gpu .
runtests engine bin/engine.test engine '^TestCUDA'
runtests sched bin/sched.test sched '^(TestRealEngineCUDA|TestLogprobsCUDA|TestPromptLogprobsCUDA)'

if (cd gpu && ROSETOP_REQUIRE_GPU=1 "$root/bin/gpu.test" -test.run '^$' -test.bench . -test.benchtime 300x) >"$logs/bench.log" 2>&1; then
	record "benchmark (decode step, GPT-2 124M shape)" PASS
else
	record "benchmark (decode step, GPT-2 124M shape)" "FAIL (see $logs/bench.log)"
fi
grep -E '^Benchmark' "$logs/bench.log"

echo
echo "rosetop GPU check ($(cat "$logs/gpu.txt")); logs in $logs"
printf '%s\n' "${results[@]}"
if printf '%s\n' "${results[@]}" | grep -qE ' (FAIL|SKIP)'; then
	echo "RESULT: FAIL"
	exit 1
fi
echo "RESULT: PASS"
