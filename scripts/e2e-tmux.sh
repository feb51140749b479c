#!/usr/bin/env bash
# End-to-end check of the live dashboard in a real terminal. Builds bin/rosetop, then, each in a
# detached tmux session at 140x45:
#   1. rosetop --json --csv (embedded model): waits for two completed runs, presses s, ], pp, p, w, ?,
#      Esc, space (twice), {{{{ and }}}} in one write each, and checks each change on screen; q
#      exits 0 with the summary table on stdout and both files written;
#   2. the ways out: SIGHUP (129), SIGTERM (143) and Ctrl-C (0) each leave the terminal restored
#      (main screen, cursor shown, not raw) with the summary table on stdout and --json written;
#   3. stdin from /dev/null and stderr to a file: the dashboard still draws and reads keys on the
#      terminal;
# and, without tmux, that rosetop with no terminal at all says so in one line and exits 2.
# Exits non-zero with a one-line reason on failure (screens and outputs kept under $E2E_DIR).
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
SMALL="--num-requests 8 --max-new-tokens 16" # the exit-path sessions: runs of a second or less

E2E_NAME=e2e-tmux
. scripts/e2e-lib.sh
trap tmux_cleanup EXIT
completed_runs() { grep -cE '▸ .*(finished|done)' "$E2E_DIR/pane.txt" || true; }
two_runs_done() { [ "$(completed_runs)" -ge 2 ]; }
one_run_done() { [ "$(completed_runs)" -ge 1 ]; }
header_field() { # header_field REGEX: the first match's group 1 in the pane's header line 2
	sed -n '2p' "$E2E_DIR/pane.txt" | sed -nE "s/.*$1.*/\\1/p"
}
elapsed() { sed -n '1p' "$E2E_DIR/pane.txt" | grep -oE '[0-9]+:[0-9]{2} ' | head -1 | tr -d ' '; }


# check_restored WHAT: the pane is back on the main screen with the cursor shown, and the terminal
# is not raw (canonical mode and echo on).
check_restored() {
	local state
	state=$(tm display -p -t "$PANE" '#{alternate_on} #{cursor_flag}')
	[ "$state" = "0 1" ] || fail "$1: the terminal was left with alternate_on/cursor_flag = $state (want 0 1)"
	grep -qE '(^| )icanon( |$)' "$E2E_DIR/stty.txt" && grep -qE '(^| )echo( |$)' "$E2E_DIR/stty.txt" ||
		fail "$1: the terminal was left raw: $(grep -oE -- '-?icanon|-?echo ' "$E2E_DIR/stty.txt" | tr '\n' ' ')"
}

# check_summary FILE WHAT: FILE holds the session's summary table.
check_summary() {
	grep -qF '=== rosetop session:' "$1" || fail "$2: no summary table on stdout (see $1)"
	grep -qE '^  (cold|cut short)' "$1" || fail "$2: the summary table has no run (see $1)"
}

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
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

# --- 1. the keys -------------------------------------------------------------------------------
# stdout (the summary printed on quit) goes to a file; the dashboard draws on the terminal.
start main "'$BIN' ${ROSETOP_ARGS:-} --json '$E2E_DIR/out.json' --csv '$E2E_DIR/out.csv' >'$E2E_DIR/stdout'"

echo "e2e-tmux: waiting for two completed runs (up to ${TIMEOUT}s)" >&2
wait_until "the dashboard header" 60 pane_has "rosetop "
wait_until "two completed runs in the events pane" "$TIMEOUT" two_runs_done
snap 1-steady

# s: the submit schedule flips relative <-> absolute in the header.
sched_before=$(header_field 'submit ([a-z]+)')
[ -n "$sched_before" ] || fail "no 'submit <schedule>' in the header"
case "$sched_before" in relative) sched_want=absolute ;; *) sched_want=relative ;; esac
key s
wait_until "schedule $sched_want after s" "$KEY_TIMEOUT" pane_has "submit $sched_want"
snap 2-after-s

# ]: prefill max batch + 1 -- or, at its limit (prefill max batch == max batch), a visible refusal,
# and then [ must lower it by one.
pb_before=$(header_field 'prefill batch ([0-9]+)')
[ -n "$pb_before" ] || fail "no 'prefill batch <n>' in the header"
key ']'
pb_up() { pane_re "prefill batch $((pb_before + 1))( |\$)" || pane_re '✗ .*prefill.max.batch'; }
wait_until "prefill batch $((pb_before + 1)) or a refusal after ]" "$KEY_TIMEOUT" pb_up
snap 3-after-bracket
if ! pane_re "prefill batch $((pb_before + 1))( |\$)"; then
	echo "e2e-tmux: ] refused at the limit ($(grep -oE '✗ [^│]*' "$E2E_DIR/pane.txt" | head -1 | sed 's/ *$//')); checking [" >&2
	key '['
	wait_until "prefill batch $((pb_before - 1)) after [" "$KEY_TIMEOUT" pane_re "prefill batch $((pb_before - 1))( |\$)"
	snap 3b-after-open-bracket
fi

# {{{{ in one write: four steps down by powers of two (keys typed together all act), then
# }}}} back up; the prefill max batch follows the max batch down and stays at most it.
mb_before=$(header_field 'max batch ([0-9]+)')
[ -n "$mb_before" ] || fail "no 'max batch <n>' in the header"
key '{{{{'
mb_down=$((mb_before / 16))
wait_until "max batch $mb_down after {{{{" "$KEY_TIMEOUT" pane_re "max batch $mb_down +prefill batch $mb_down( |\$)"
snap 4-after-braces
key '}}}}'
wait_until "max batch $mb_before after }}}}" "$KEY_TIMEOUT" pane_re "max batch $mb_before +prefill batch $mb_before( |\$)"

# w: the time charts' window; ?: the help overlay with its glossary, closed by Esc.
key w
wait_until "the 2 minute window after w" "$KEY_TIMEOUT" pane_has "queue depth · last 2m"
key '?'
wait_until "the help overlay after ?" "$KEY_TIMEOUT" pane_has "glossary"
snap 5-help
key Escape
wait_until "the help overlay closed by Esc" "$KEY_TIMEOUT" pane_lacks "glossary"

# space: arrivals pause; the header says PAUSED, keeps the job and its clock keeps running.
key Space
wait_until "PAUSED in the header" "$KEY_TIMEOUT" pane_has "PAUSED"
pane_has "job decode-heavy" || fail "the job left the header when paused"
t0=$(elapsed)
clock_moved() { [ "$(elapsed)" != "$t0" ]; }
wait_until "the clock running while paused (was $t0)" "$KEY_TIMEOUT" clock_moved
snap 6-paused
key Space
wait_until "arrivals resumed" "$KEY_TIMEOUT" pane_lacks "PAUSED"

# pp in one write: the second p undoes the first before the engine is rebuilt, so none is.
paged_before=$(header_field 'paged (on|off)')
[ -n "$paged_before" ] || fail "no 'paged on|off' in the header"
key pp
wait_until "'no rebuild' after pp" "$KEY_TIMEOUT" pane_has "as engine 1 runs: no rebuild"
pane_lacks "engine 2" || fail "pp built a second engine"

# p: paged attention needs a new engine: "restarting engine", then the header shows paged on/off.
case "$paged_before" in on) paged_want=off ;; *) paged_want=on ;; esac
key p
wait_until "'restarting engine' after p" "$KEY_TIMEOUT" pane_has "restarting engine"
snap 7-after-p
wait_until "paged $paged_want in the header" "$TIMEOUT" pane_has "paged $paged_want"
snap 8-new-engine

# q: quit; the summary table goes to stdout, both files are written, the exit code is 0.
key q
code=$(wait_exit 30)
[ "$code" = 0 ] || fail "rosetop exited with code $code after q"
check_restored "q"
check_summary "$E2E_DIR/stdout" "q"
grep -qE '^  steady \(median of [0-9]+\)' "$E2E_DIR/stdout" || fail "q: the summary table has no steady row"
grep -qF '"label": "warmup 1/1"' "$E2E_DIR/out.json" || fail "q: --json lacks the cold run (see $E2E_DIR/out.json)"
[ "$(grep -c '' "$E2E_DIR/out.csv")" -gt 64 ] || fail "q: --csv has no rows (see $E2E_DIR/out.csv)"
echo "e2e-tmux: ok: keys s ] [ {{{{ }}}} w ? Esc space pp p, q exited 0 with the summary and both files" >&2

# --- 2. the ways out ---------------------------------------------------------------------------
for way in HUP:129 TERM:143 C-c:0; do
	sig=${way%%:*} want=${way##*:}
	rm -f "$E2E_DIR/out.json"
	start "$sig" "'$BIN' $SMALL --json '$E2E_DIR/out.json' >'$E2E_DIR/stdout-$sig'"
	wait_until "the dashboard ($sig)" 60 pane_has "rosetop "
	wait_until "a completed run ($sig)" "$TIMEOUT" one_run_done
	if [ "$sig" = C-c ]; then
		key C-c
	else
		kill -s "$sig" "$(cat "$E2E_DIR/$sig.pid")"
	fi
	code=$(wait_exit 30)
	[ "$code" = "$want" ] || fail "$sig: rosetop exited with code $code, want $want"
	check_restored "$sig"
	check_summary "$E2E_DIR/stdout-$sig" "$sig"
	grep -qF '"label": "warmup 1/1"' "$E2E_DIR/out.json" 2>/dev/null || fail "$sig: --json was not written with what was measured"
	echo "e2e-tmux: ok: $sig exited $code, terminal restored, summary and --json kept" >&2
done

# --- 3. redirected stdin and stderr --------------------------------------------------------------
for redir in "</dev/null" "2>'$E2E_DIR/stderr'"; do
	start redir "'$BIN' $SMALL $redir >'$E2E_DIR/stdout-redir'"
	wait_until "the dashboard with $redir" 60 pane_has "rosetop "
	wait_until "a completed run with $redir" "$TIMEOUT" one_run_done
	key q
	code=$(wait_exit 30)
	[ "$code" = 0 ] || fail "$redir: rosetop exited with code $code after q"
	check_restored "$redir"
	check_summary "$E2E_DIR/stdout-redir" "$redir"
	echo "e2e-tmux: ok: $redir: drawn on the terminal, q read from it, exit 0" >&2
done

# --- 4. no terminal at all -----------------------------------------------------------------------
set +e
setsid "$BIN" $SMALL </dev/null >"$E2E_DIR/stdout-notty" 2>"$E2E_DIR/stderr-notty"
code=$?
set -e
[ "$code" = 2 ] || fail "no terminal: exit $code, want 2 (stderr: $(cat "$E2E_DIR/stderr-notty"))"
[ "$(grep -c '' "$E2E_DIR/stderr-notty")" = 1 ] && grep -qF "rosetop bench" "$E2E_DIR/stderr-notty" ||
	fail "no terminal: want one line suggesting rosetop bench, got: $(cat "$E2E_DIR/stderr-notty")"
echo "e2e-tmux: ok: no terminal: one line, exit 2" >&2
echo "e2e-tmux: ok: all ($E2E_DIR)" >&2
