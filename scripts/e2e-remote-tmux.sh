#!/usr/bin/env bash
# End-to-end check of the dashboard against a remote server, in a real terminal. Builds
# bin/rosetop, starts `rosetop serve` on the embedded model on a free port, then runs
# `rosetop --endpoint URL` in a detached tmux session at 120x40 and checks on screen: the header
# names the model, the server's kind and the endpoint; the server pane shows the server's own
# queue and KV gauges and its TTFT histogram beside the client's, and its values move; p is
# refused with the reason; C and c change the concurrency; q exits 0 with the summary on stdout.
# Then `rosetop --endpoint URL --watch` beside a headless bench loading the server: the header says
# WATCH with the server's generation rate, the totals pane counts what the server finished, p is
# refused, and q exits 0 with a watch summary saying rosetop sent no request. Then a fleet: a
# second server, both watched at once (--endpoint twice): the header names the fleet, the servers
# table has a row each; the second server stopped, the header counts it not answering and its row
# says why; started again on its port, the events pane says it restarted (↻); q prints the fleet's summary
# with a block per server, the second counting one restart. Then SIGTERM stops the first
# server (exit 0). Exits non-zero with a one-line reason on failure
# (screens and outputs kept under $E2E_DIR).
#
#   scripts/e2e-remote-tmux.sh                  # what CI runs
#   E2E_BIN=/path/to/rosetop scripts/e2e-remote-tmux.sh
set -euo pipefail

cd "$(dirname "$0")/.."
W=120
H=40
TIMEOUT=${E2E_TIMEOUT:-120}        # seconds for the slow waits (server start, first figures)
KEY_TIMEOUT=${E2E_KEY_TIMEOUT:-20} # seconds for a key's effect to show
E2E_DIR=${E2E_DIR:-$(mktemp -d -t rosetop-e2e-remote.XXXXXX)}
mkdir -p "$E2E_DIR"
BIN=${E2E_BIN:-}
SOCK="rosetop-e2e-remote-$$" # a private tmux server: never touches the user's sessions
PANE="e2e"
server_pid=""
server2_pid=""

E2E_NAME=e2e-remote-tmux
. scripts/e2e-lib.sh
cleanup() {
	tmux_cleanup
	[ -z "$server_pid" ] || kill -9 "$server_pid" 2>/dev/null || true
	[ -z "$server2_pid" ] || kill -9 "$server2_pid" 2>/dev/null || true
}
trap cleanup EXIT
# server_row NAME: the server pane's row NAME (five number columns: srv50 cli50 srv99 cli99 Δ99;
# a server percentile in its histogram's first bucket reads ≤B, that bucket's bound).
# Both print nothing when the pane lacks it (never a failing status, which set -e would turn into
# a silent exit inside an assignment).
server_row() { grep -oE "│ $1 +(≤?-?[0-9.k]+|–)( +(≤?-?[0-9.k]+|–)){4} " "$E2E_DIR/pane.txt" | head -1 || true; }
gauges() { grep -oE 'waiting [0-9]+ +running [0-9]+ +KV [0-9.]+%' "$E2E_DIR/pane.txt" | head -1 || true; }
# quit_ok WHAT: presses q and fails unless the dashboard (WHAT) exits 0 within KEY_TIMEOUT.
quit_ok() {
	key q
	local deadline=$((SECONDS + KEY_TIMEOUT))
	until [ -f "$E2E_DIR/exit" ]; do
		[ $SECONDS -lt $deadline ] || { capture; fail "$1 did not exit within ${KEY_TIMEOUT}s of q"; }
		sleep 0.2
	done
	[ "$(cat "$E2E_DIR/exit")" = 0 ] || fail "$1 exited $(cat "$E2E_DIR/exit") after q"
}

# --- tools and the server ----------------------------------------------------------------------
command -v tmux >/dev/null 2>&1 || fail "tmux is not installed"
if [ -z "$BIN" ]; then
	echo "e2e-remote-tmux: building bin/rosetop" >&2
	go build -o bin/rosetop . || fail "go build failed"
	BIN=./bin/rosetop
fi
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

# serve_url PID NAME: waits for the server PID (logging to $E2E_DIR/NAME.stderr) to print its URL.
serve_url() {
	local u="" deadline=$((SECONDS + TIMEOUT))
	until [ -n "$u" ]; do
		# The background server may not have opened its stderr file yet: no file is no URL yet.
		[ -f "$E2E_DIR/$2.stderr" ] && u=$(sed -nE 's/.*serving [^ ]+ on (http:[^ ]+\/v1).*/\1/p' "$E2E_DIR/$2.stderr" | head -1)
		kill -0 "$1" 2>/dev/null || fail "rosetop serve exited before it served: $(tail -1 "$E2E_DIR/$2.stderr")"
		[ $SECONDS -lt $deadline ] || fail "rosetop serve did not print its URL within ${TIMEOUT}s"
		sleep 0.1
	done
	echo "$u"
}
"$BIN" serve --port 0 --device cpu --threads 1 >"$E2E_DIR/serve.stdout" 2>"$E2E_DIR/serve.stderr" &
server_pid=$!
url=$(serve_url "$server_pid" serve)
echo "e2e-remote-tmux: server at $url" >&2

# --- the dashboard against it ------------------------------------------------------------------
printf '#!/bin/sh\nTERM=xterm-256color exec "%s" --endpoint "%s" --num-requests 16 --max-new-tokens 64 >"%s"\n' \
	"$BIN" "$url" "$E2E_DIR/stdout" >"$E2E_DIR/run.sh"
tm new-session -d -s "$PANE" -x "$W" -y "$H" \
	"sh '$E2E_DIR/run.sh'; echo \$? >'$E2E_DIR/exit'; sleep 600" || fail "tmux could not start the session"

wait_until "the header naming the model and the server" "$TIMEOUT" pane_has "tiny-gpt2 on rosetop at $url"
wait_until "the server line of the header" "$KEY_TIMEOUT" pane_has "server rosetop · completions API"
first_ttft() { [ -n "$(server_row TTFT | grep -E '│ TTFT +≤?[0-9]')" ]; }
wait_until "the server's TTFT histogram in the server pane" "$TIMEOUT" first_ttft
pane_has "server rosetop · last" || fail "no server pane titled with the server's kind and window"
[ -n "$(gauges)" ] || fail "no waiting/running/KV gauges in the server pane"
snap 1-server-pane
before="$(gauges) | $(server_row TTFT) | $(server_row ITL)"
echo "e2e-remote-tmux: server pane: $before" >&2
moved() { [ "$(gauges) | $(server_row TTFT) | $(server_row ITL)" != "$before" ]; }
wait_until "the server pane's values to move (were: $before)" "$TIMEOUT" moved
running() { gauges | grep -qE 'running [1-9]'; }
wait_until "requests running on the server" "$TIMEOUT" running
snap 2-live
echo "e2e-remote-tmux: server pane now: $(gauges) | $(server_row TTFT)" >&2

# p: paged attention is the server's own: refused with the reason, no restart.
key p
wait_until "the refusal of p" "$KEY_TIMEOUT" pane_re "✗ the engine is the server's, not this process's"
snap 3-refused
# C and c: the steady state's requests in flight, in the header.
key C
wait_until "concurrency 32 after C" "$KEY_TIMEOUT" pane_re "concurrency 32( |$)"
key c
key c
wait_until "concurrency 8 after cc" "$KEY_TIMEOUT" pane_re "concurrency 8( |$)"
snap 4-concurrency

quit_ok "rosetop"
grep -qF '=== rosetop session:' "$E2E_DIR/stdout" || fail "no summary table on stdout (see $E2E_DIR/stdout)"

# --- watch mode: the same server loaded by a headless bench, watched without a request --------
"$BIN" bench --endpoint "$url" --num-requests 2000 --request-rate 50 --max-new-tokens 32 --warmup-runs 0 \
	>"$E2E_DIR/load.stdout" 2>"$E2E_DIR/load.stderr" &
load_pid=$!
rm -f "$E2E_DIR/exit"
tm kill-session -t "$PANE" >/dev/null 2>&1 || true
printf '#!/bin/sh\nTERM=xterm-256color exec "%s" --endpoint "%s" --watch >"%s"\n' "$BIN" "$url" "$E2E_DIR/watch.stdout" >"$E2E_DIR/watch.sh"
tm new-session -d -s "$PANE" -x "$W" -y "$H" \
	"sh '$E2E_DIR/watch.sh'; echo \$? >'$E2E_DIR/exit'; sleep 600" || fail "tmux could not start the watch session"
wait_until "the watch header" "$TIMEOUT" pane_has "WATCH rosetop"
generating() { pane_re 'generation +[0-9.]+k? tok/s'; }
wait_until "the server's generation rate in the header" "$TIMEOUT" generating
finished() { pane_re 'requests finished +[1-9]'; }
wait_until "the server's finished requests in the totals pane" "$TIMEOUT" finished
snap 5-watch
key p
wait_until "the refusal of p in watch mode" "$KEY_TIMEOUT" pane_re "✗ watch mode sends no requests"
quit_ok "rosetop --watch"
grep -qE '^Requests sent by rosetop: +0 \(watch mode\)' "$E2E_DIR/watch.stdout" ||
	fail "no watch summary on stdout (see $E2E_DIR/watch.stdout)"
ok "watch mode: $(grep -E '^Generated tokens' "$E2E_DIR/watch.stdout")"

# --- a fleet: the loaded server and an idle second one, watched at once -------------------------
"$BIN" serve --port 0 --device cpu --threads 1 >"$E2E_DIR/serve2.stdout" 2>"$E2E_DIR/serve2.stderr" &
server2_pid=$!
server2_started=$(date +%s%N)
url2=$(serve_url "$server2_pid" serve2)
host1=$(echo "$url" | sed -E 's|^http://([^/]+)/v1$|\1|')
host2=$(echo "$url2" | sed -E 's|^http://([^/]+)/v1$|\1|')
rm -f "$E2E_DIR/exit"
tm kill-session -t "$PANE" >/dev/null 2>&1 || true
printf '#!/bin/sh\nTERM=xterm-256color exec "%s" --watch --endpoint "%s" --endpoint "%s" >"%s"\n' "$BIN" "$url" "$url2" "$E2E_DIR/fleet.stdout" >"$E2E_DIR/fleet.sh"
tm new-session -d -s "$PANE" -x "$W" -y "$H" \
	"sh '$E2E_DIR/fleet.sh'; echo \$? >'$E2E_DIR/exit'; sleep 600" || fail "tmux could not start the fleet session"
wait_until "the fleet header" "$TIMEOUT" pane_has "WATCH 2 × rosetop"
wait_until "the servers table" "$KEY_TIMEOUT" pane_has "servers · 2 watched"
loaded_row() { pane_re "│ $host1 +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+k? +"; }
wait_until "the loaded server's row with its figures" "$TIMEOUT" loaded_row
pane_re "│ $host2 +0 +0 " || fail "no row for the idle server $host2"
wait_until "the fleet's generation rate in the header" "$TIMEOUT" generating
snap 6-fleet
kill -TERM "$server2_pid"
wait "$server2_pid" || fail "the second rosetop serve exited $? after SIGTERM"
server2_pid=""
wait_until "the stopped server counted as not answering" "$TIMEOUT" pane_has "WATCH 2 × rosetop · 1 not answering"
pane_re "│ $host2 +last scrape failed" || fail "the stopped server's row does not say why"
snap 7-fleet-one-down
# The second server started again on its port: a new process, told by its start time, which
# must differ from the first's by more than the watcher's slack for a process's start time
# (remote/totals.go startSlack, 1.5 s): on a fast run the steps above take less.
since_server2() { [ $(( ($(date +%s%N) - server2_started) / 1000000 )) -ge 2500 ]; }
wait_until "2.5 s since the second server started" "$TIMEOUT" since_server2
"$BIN" serve --port "${host2##*:}" --device cpu --threads 1 >"$E2E_DIR/serve3.stdout" 2>"$E2E_DIR/serve3.stderr" &
server2_pid=$!
serve_url "$server2_pid" serve3 >/dev/null
wait_until "the restarted server's event" "$TIMEOUT" pane_has "↻ $host2 restarted between the"
wait_until "the header with every server answering" "$TIMEOUT" pane_has "WATCH 2 × rosetop  "
snap 8-fleet-restarted
quit_ok "rosetop --watch (fleet)"
grep -qF "=== rosetop watch: 2 servers (rosetop)" "$E2E_DIR/fleet.stdout" &&
	grep -qxF "Server $url" "$E2E_DIR/fleet.stdout" && grep -qxF "Server $url2" "$E2E_DIR/fleet.stdout" ||
	fail "no fleet summary with a block per server on stdout (see $E2E_DIR/fleet.stdout)"
awk -v s="Server $url2" '$0 == s { f = 1 } f' "$E2E_DIR/fleet.stdout" | grep -qE '^  Restarts seen: +1$' ||
	fail "the restarted server's block does not count its restart (see $E2E_DIR/fleet.stdout)"
kill -TERM "$server2_pid"
wait "$server2_pid" || fail "the restarted rosetop serve exited $? after SIGTERM"
server2_pid=""
kill -INT "$load_pid" 2>/dev/null || true
wait "$load_pid" 2>/dev/null || true
ok "fleet: $(grep -E '^Generated tokens' "$E2E_DIR/fleet.stdout")"

kill -TERM "$server_pid"
status=0
wait "$server_pid" || status=$?
server_pid=""
[ "$status" = 0 ] || fail "rosetop serve exited $status after SIGTERM"
echo "e2e-remote-tmux: PASS (screens in $E2E_DIR)"
