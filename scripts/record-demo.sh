#!/usr/bin/env bash
# Records the demo session that `rosetop replay` shows without a GPU: the dashboard on a 140x45
# pseudo-terminal (script(1), so no tmux is needed), driven through a cold start with its ledger,
# the steady state, CUDA Graphs toggled off and on (g, g), paged attention toggled (p), a
# prefill-batch tuning sequence ([ [ [ [ ] ]), then q. Each step waits on the recording itself:
# `rosetop replay --summary` reads the file as it grows (up to its last whole frame) and lists the
# engines whose cold run finished and the keys answered. Checks that rosetop exited 0 and prints
# the recording's summary, its size and its bytes per minute.
#
#   scripts/record-demo.sh testdata/recordings/h200-gpt2-v1.rec          # on the GPU machine (default args)
#   E2E_BIN=bin/rosetop scripts/record-demo.sh out.rec                 # a prebuilt binary (no Go needed)
#   ROSETOP_ARGS="--device cpu" STEADY=6 SETTLE=3 TUNE=2 \
#     scripts/record-demo.sh testdata/recordings/cpu-tiny-v1.rec     # the small CPU one for CI
#
# ROSETOP_ARGS   the dashboard's flags (default: --model random:gpt2 --device cuda)
# STEADY         seconds of steady state at the start and at the end (default 30)
# SETTLE         seconds after each new engine's cold run (default 10)
# TUNE           seconds between the tuning keys (default 3)
# On a CPU the g presses are refused with the reason (recorded as such): the rest is the same.
set -euo pipefail

OUT=${1:?usage: scripts/record-demo.sh OUT.rec}
OUTDIR=$(cd "$(dirname "$OUT")" && pwd) # rosetop runs there: the recording names itself, not a path
OUT=$OUTDIR/$(basename "$OUT")
cd "$(dirname "$0")/.."
ARGS=${ROSETOP_ARGS:---model random:gpt2 --device cuda}
STEADY=${STEADY:-30}
SETTLE=${SETTLE:-10}
TUNE=${TUNE:-3}
TIMEOUT=${E2E_TIMEOUT:-600}
DIR=$(mktemp -d -t rosetop-record.XXXXXX)

fail() {
	echo "record-demo: FAIL: $*" >&2
	echo "--- the terminal's output and the summary so far are in $DIR ---" >&2
	exit 1
}
command -v script >/dev/null || fail "script(1) (util-linux) is not installed"
BIN=${E2E_BIN:-}
if [ -z "$BIN" ]; then
	go build -o bin/rosetop . || fail "go build failed"
	BIN=./bin/rosetop
fi
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

# The dashboard reads its keys from a FIFO through script's pseudo-terminal; NO_COLOR spares it
# the terminal colour query no terminal emulator is there to answer (views are theme-free).
mkfifo "$DIR/keys"
(
	cd "$OUTDIR"
	NO_COLOR=1 TERM=xterm-256color script -qfec "stty rows 45 cols 140; exec '$BIN' $ARGS --record '$(basename "$OUT")'" /dev/null \
		<"$DIR/keys" >"$DIR/terminal.txt" 2>&1
	echo $? >"$DIR/exit"
) &
exec 3>"$DIR/keys"
trap 'exec 3>&-' EXIT
echo "record-demo: recording $ARGS to $OUT" >&2

summary() { "$BIN" replay --summary "$OUT" >"$DIR/summary.txt" 2>/dev/null || true; }
engines() { grep -cE '^engine [0-9]+:' "$DIR/summary.txt" || true; }
keys() { sed -nE 's/^[0-9]+ views, ([0-9]+) key presses$/\1/p' "$DIR/summary.txt"; }
last_key() { grep -E '^ +[0-9]+:[0-9]+ [✓✗] ' "$DIR/summary.txt" | tail -1; } # the latest key's answer
wait_for() { # wait_for WHAT SECONDS CMD...: polls the recording's summary (2 Hz) until CMD succeeds
	local what=$1 limit=$2
	shift 2
	local deadline=$((SECONDS + limit))
	until summary && "$@"; do
		[ -f "$DIR/exit" ] && fail "rosetop exited (code $(cat "$DIR/exit")) while waiting for $what"
		[ $SECONDS -lt $deadline ] || fail "timed out after ${limit}s waiting for $what"
		sleep 0.5
	done
}
at_least() { [ "$("$1")" -ge "$2" ] 2>/dev/null; }
key() { printf '%s' "$1" >&3; }
hold() { echo "record-demo: $1 (${2}s)" >&2; sleep "$2"; }
# new_engine KEY: press KEY; when it restarts the engine, wait for the new engine's cold run.
new_engine() {
	local n k
	n=$(engines) k=$(keys)
	key "$1"
	wait_for "the answer to $1" 60 at_least keys $((k + 1))
	if last_key | grep -qF "restarting engine"; then
		wait_for "the new engine's cold run after $1" "$TIMEOUT" at_least engines $((n + 1))
	else
		echo "record-demo: $1 refused: $(last_key | sed -E 's/^ +[0-9:]+ . //')" >&2
	fi
	hold "after $1" "$SETTLE"
}

wait_for "the first engine's cold run" "$TIMEOUT" at_least engines 1
hold "steady state" "$STEADY"
new_engine g # CUDA Graphs off
new_engine g # and on again
new_engine p # paged attention toggled
for k in '[' '[' '[' '[' ']' ']'; do
	key "$k"
	hold "prefill batch $k" "$TUNE"
done
hold "steady state" "$STEADY"
key q
deadline=$((SECONDS + 60))
until [ -f "$DIR/exit" ]; do
	[ $SECONDS -lt $deadline ] || fail "rosetop did not exit within 60s of q"
	sleep 0.2
done
code=$(cat "$DIR/exit")
[ "$code" = 0 ] || fail "rosetop exited with code $code (see $DIR/terminal.txt)"
"$BIN" replay --summary "$OUT" || fail "the recording does not replay"
"$BIN" replay --summary "$OUT" | grep -qF 'no end mark' && fail "the recording has no end mark after q"
bytes=$(stat -c %s "$OUT")
views=$("$BIN" replay --summary "$OUT" | sed -nE 's/^([0-9]+) views, .*/\1/p')
echo "record-demo: ok: $OUT: $bytes bytes, $views views ($((bytes * 600 / (views > 0 ? views : 1) / 1024)) KB a minute at 10 views a second); rosetop replay $OUT plays it back" >&2
