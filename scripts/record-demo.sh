#!/usr/bin/env bash
# Records the demo session that `rosetop replay` shows without a GPU: the dashboard in a detached
# tmux session at 140x45, driven through a cold start with its ledger, the steady state, CUDA
# Graphs toggled off and on (g, g), paged attention toggled (p), a prefill-batch tuning sequence
# ([ [ [ [ ] ]), then q. Each toggle waits for the new engine's cold run to finish. Writes the
# recording to OUT, checks that rosetop exited 0 and that the recording replays, and prints its
# summary, its size and its bytes per minute.
#
#   scripts/record-demo.sh testdata/recordings/h200-gpt2.rec         # on the GPU machine (default args)
#   ROSETOP_ARGS="--num-requests 16 --max-new-tokens 64" STEADY=6 SETTLE=3 \
#     scripts/record-demo.sh testdata/recordings/cpu-tiny-v1.rec    # the small CPU one for CI
#
# ROSETOP_ARGS   the dashboard's flags (default: --model random:gpt2 --device cuda)
# STEADY         seconds of steady state at the start and at the end (default 30)
# SETTLE         seconds after each new engine's cold run and between tuning keys (default 10, 3)
# E2E_BIN        a prebuilt binary (default: go build -o bin/rosetop .)
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
SOCK="rosetop-record-$$"
PANE=rec

tm() { tmux -L "$SOCK" "$@"; }
capture() { tm capture-pane -p -t "$PANE" >"$DIR/pane.txt" 2>/dev/null || true; }
fail() {
	echo "record-demo: FAIL: $*" >&2
	[ -s "$DIR/pane.txt" ] && { echo "--- last screen ---" >&2; cat "$DIR/pane.txt" >&2; }
	echo "--- output kept in $DIR ---" >&2
	exit 1
}
trap 'tm kill-server >/dev/null 2>&1 || true' EXIT
wait_until() { # wait_until WHAT SECONDS CMD...: polls the pane (5 Hz) until CMD succeeds on it
	local what=$1 limit=$2
	shift 2
	local deadline=$((SECONDS + limit))
	until capture && "$@"; do
		[ -f "$DIR/exit" ] && fail "rosetop exited (code $(cat "$DIR/exit")) while waiting for $what"
		[ $SECONDS -lt $deadline ] || fail "timed out after ${limit}s waiting for $what"
		sleep 0.2
	done
}
pane_re() { grep -qE -- "$1" "$DIR/pane.txt"; }
key() { tm send-keys -t "$PANE" "$@"; }
hold() { echo "record-demo: $1 (${2}s)" >&2; sleep "$2"; }
cold_done() { # the events pane: engine 1's cold run is its first warmup run
	if [ "$1" = 1 ]; then pane_re "(warmup 1/[0-9]+|cold run \\(engine 1\\)) finished"; else pane_re "cold run \\(engine $1\\) finished"; fi
}
engine=1
new_engine() { # new_engine KEY: press KEY, wait for the next engine's cold run (a refusal: none)
	key "$1"
	wait_until "the answer to $1" 30 pane_re "(restarting engine|✗ )"
	if pane_re "restarting engine"; then
		engine=$((engine + 1))
		wait_until "the cold run of engine $engine after $1" "$TIMEOUT" cold_done "$engine"
	fi
	hold "after $1" "$SETTLE"
}

command -v tmux >/dev/null || fail "tmux is not installed"
BIN=${E2E_BIN:-}
if [ -z "$BIN" ]; then
	go build -o bin/rosetop . || fail "go build failed"
	BIN=./bin/rosetop
fi
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

printf '#!/bin/sh\ncd "%s" || exit 1\nTERM=xterm-256color exec %s\n' "$OUTDIR" "'$BIN' $ARGS --record '$(basename "$OUT")' >'$DIR/stdout' 2>'$DIR/stderr'" >"$DIR/run.sh"
tm new-session -d -s "$PANE" -x 140 -y 45 "sh '$DIR/run.sh'; echo \$? >'$DIR/exit'; sleep 600" ||
	fail "tmux could not start the session"
echo "record-demo: recording $ARGS to $OUT" >&2

wait_until "the dashboard" 300 pane_re "^rosetop "
wait_until "the cold run of engine 1" "$TIMEOUT" cold_done 1
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
[ "$code" = 0 ] || fail "rosetop exited with code $code (stderr: $(cat "$DIR/stderr"))"

"$BIN" replay --summary "$OUT" || fail "the recording does not replay"
bytes=$(stat -c %s "$OUT")
len=$("$BIN" replay --summary "$OUT" | sed -nE '1s/.*, ([0-9hms.]+) of .*/\1/p')
echo "record-demo: ok: $OUT, $bytes bytes for $len; rosetop replay $OUT plays it back" >&2
