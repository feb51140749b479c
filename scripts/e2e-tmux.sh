#!/usr/bin/env bash
# End-to-end check of the live dashboard in a real terminal: builds bin/rosetop, runs it with no
# flags (embedded model) in a detached tmux session at 140x45, waits until two runs have completed,
# presses s, ], p and checks each change is visible on screen, quits with q, then checks the exit
# code and the run summaries printed on stdout. Exits non-zero with a one-line reason on failure
# (the last screen and the captures are kept under $E2E_DIR).
#
#   scripts/e2e-tmux.sh                  # what CI runs
#   E2E_TIMEOUT=300 scripts/e2e-tmux.sh  # a slower machine
#   ROSETOP_ARGS="--num-requests 8" scripts/e2e-tmux.sh
#   E2E_BIN=/path/to/rosetop scripts/e2e-tmux.sh   # skip the build
set -euo pipefail

cd "$(dirname "$0")/.."
W=140
H=45
TIMEOUT=${E2E_TIMEOUT:-240}          # seconds for the slow waits (runs completing, engine rebuild)
KEY_TIMEOUT=${E2E_KEY_TIMEOUT:-20}   # seconds for a key's effect to show
E2E_DIR=${E2E_DIR:-$(mktemp -d -t rosetop-e2e.XXXXXX)}
mkdir -p "$E2E_DIR"
BIN=${E2E_BIN:-}                     # a prebuilt binary; default: go build -o bin/rosetop .
SOCK="rosetop-e2e-$$"                # a private tmux server: never touches the user's sessions
PANE="e2e"

tm() { tmux -L "$SOCK" "$@"; }
capture() { tm capture-pane -p -t "$PANE" >"$E2E_DIR/pane.txt" 2>/dev/null || true; }
fail() {
	echo "e2e-tmux: FAIL: $*" >&2
	if [ -s "$E2E_DIR/pane.txt" ]; then
		echo "--- last screen ---" >&2
		cat "$E2E_DIR/pane.txt" >&2
	fi
	echo "--- captures and output kept in $E2E_DIR ---" >&2
	exit 1
}
cleanup() { tm kill-server >/dev/null 2>&1 || true; }
trap cleanup EXIT

# wait_until DESCRIPTION TIMEOUT CMD...: polls the pane (5 Hz) until CMD succeeds on it.
wait_until() {
	local what=$1 limit=$2
	shift 2
	local deadline=$((SECONDS + limit))
	while :; do
		capture
		if "$@"; then return 0; fi
		if [ -f "$E2E_DIR/exit" ]; then fail "rosetop exited (code $(cat "$E2E_DIR/exit")) while waiting for $what"; fi
		if [ $SECONDS -ge $deadline ]; then fail "timed out after ${limit}s waiting for $what"; fi
		sleep 0.2
	done
}
pane_has() { grep -qF -- "$1" "$E2E_DIR/pane.txt"; }
pane_re() { grep -qE -- "$1" "$E2E_DIR/pane.txt"; } # capture-pane drops trailing blanks: match ( |$)
completed_runs() { grep -cE '▸ .*(finished|done)' "$E2E_DIR/pane.txt" || true; }
two_runs_done() { [ "$(completed_runs)" -ge 2 ]; }
header_field() { # header_field REGEX: the first match's group 1 in the pane's header line 2
	sed -n '2p' "$E2E_DIR/pane.txt" | sed -nE "s/.*$1.*/\\1/p"
}
snap() { cp "$E2E_DIR/pane.txt" "$E2E_DIR/$1.txt"; }

# --- tools -------------------------------------------------------------------------------------
if ! command -v tmux >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "e2e-tmux: installing tmux" >&2
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux) >/dev/null ||
			fail "could not install tmux with apt-get"
	else
		fail "tmux is not installed (and not root with apt-get to install it)"
	fi
fi

if [ -z "$BIN" ]; then
	echo "e2e-tmux: building bin/rosetop" >&2
	go build -o bin/rosetop . || fail "go build failed"
	BIN=./bin/rosetop
fi

# --- run ---------------------------------------------------------------------------------------
# stdout (the summaries printed on quit) goes to a file; the dashboard draws on the terminal.
tm new-session -d -s "$PANE" -x "$W" -y "$H" \
	"TERM=xterm-256color '$BIN' ${ROSETOP_ARGS:-} >'$E2E_DIR/stdout'; echo \$? >'$E2E_DIR/exit'"
tm set-option -t "$PANE" remain-on-exit on >/dev/null

echo "e2e-tmux: waiting for two completed runs (up to ${TIMEOUT}s)" >&2
wait_until "the dashboard header" 60 pane_has "rosetop "
wait_until "two completed runs in the events pane" "$TIMEOUT" two_runs_done
snap 1-steady

# s: the submit schedule flips relative <-> absolute in the header.
sched_before=$(header_field 'submit ([a-z]+)')
[ -n "$sched_before" ] || fail "no 'submit <schedule>' in the header"
case "$sched_before" in relative) sched_want=absolute ;; *) sched_want=relative ;; esac
tm send-keys -t "$PANE" s
wait_until "schedule $sched_want after s" "$KEY_TIMEOUT" pane_has "submit $sched_want"
snap 2-after-s

# ]: prefill max batch + 1 -- or, at its limit (prefill max batch == max batch), a visible refusal,
# and then [ must lower it by one.
pb_before=$(header_field 'prefill batch ([0-9]+)')
[ -n "$pb_before" ] || fail "no 'prefill batch <n>' in the header"
tm send-keys -t "$PANE" ']'
pb_up() { pane_re "prefill batch $((pb_before + 1))( |\$)" || pane_re '✗ .*prefill.max.batch'; }
wait_until "prefill batch $((pb_before + 1)) or a refusal after ]" "$KEY_TIMEOUT" pb_up
snap 3-after-bracket
if ! pane_re "prefill batch $((pb_before + 1))( |\$)"; then
	echo "e2e-tmux: ] refused at the limit ($(grep -oE '✗ [^│]*' "$E2E_DIR/pane.txt" | head -1 | sed 's/ *$//')); checking [" >&2
	tm send-keys -t "$PANE" '['
	wait_until "prefill batch $((pb_before - 1)) after [" "$KEY_TIMEOUT" pane_re "prefill batch $((pb_before - 1))( |\$)"
	snap 3b-after-open-bracket
fi

# p: paged attention needs a new engine: "restarting engine", then the header shows paged on/off.
paged_before=$(header_field 'paged (on|off)')
[ -n "$paged_before" ] || fail "no 'paged on|off' in the header"
case "$paged_before" in on) paged_want=off ;; *) paged_want=on ;; esac
tm send-keys -t "$PANE" p
wait_until "'restarting engine' after p" "$KEY_TIMEOUT" pane_has "restarting engine"
snap 4-after-p
wait_until "paged $paged_want in the header" "$TIMEOUT" pane_has "paged $paged_want"
snap 5-new-engine

# q: quit; the summaries so far go to stdout and the exit code is 0.
tm send-keys -t "$PANE" q
deadline=$((SECONDS + 30))
until [ -f "$E2E_DIR/exit" ]; do
	[ $SECONDS -lt $deadline ] || { capture; fail "rosetop did not exit within 30s of q"; }
	sleep 0.2
done
code=$(cat "$E2E_DIR/exit")
[ "$code" = 0 ] || fail "rosetop exited with code $code"
blocks=$(grep -c '^=== streaming benchmark ===' "$E2E_DIR/stdout" || true)
[ "$blocks" -ge 2 ] || fail "stdout has $blocks '=== streaming benchmark ===' summaries, want >= 2 (see $E2E_DIR/stdout)"
for line in 'TTFT p50/p95/p99:' 'Queue wait (post-tok) p50/p95/p99:' 'Throughput (completion,total):'; do
	grep -qF -- "$line" "$E2E_DIR/stdout" || fail "stdout lacks '$line'"
done
echo "e2e-tmux: ok: runs completed, s/]/p visible, q exited 0 with $blocks summaries ($E2E_DIR)" >&2
