#!/usr/bin/env bash
# End-to-end check of rosetop replay. Builds bin/rosetop, then:
#   1. bad input: a missing file, an empty one, a file that is not a recording and one from a
#      newer rosetop each get one line on stderr and exit 2; so does no terminal at all;
#   2. replay --summary of each committed recording, whole and cut short (it says where it stops);
#   3. in a detached tmux session at 140x45, replays each committed recording: REPLAY in the
#      header, pauses (the position holds), seeks 5 s forward and back, changes the speed, jumps
#      to the next event, an engine key is refused with the reason, end and home, q exits 0 with
#      the terminal restored;
#   4. rosetop bench --record: the headless runs replay with their summaries;
#   5. a dashboard recording killed with SIGKILL replays up to its last whole view and says so.
# Exits non-zero with a one-line reason on failure (screens and outputs kept under $E2E_DIR).
#
#   scripts/e2e-replay.sh                              # what CI runs
#   E2E_REC=testdata/recordings/h200-gpt2-v1.rec scripts/e2e-replay.sh   # one recording (default: all of testdata/recordings)
#   E2E_BIN=/path/to/rosetop scripts/e2e-replay.sh    # skip the build
set -euo pipefail

cd "$(dirname "$0")/.."
RECS=${E2E_REC:-$(ls testdata/recordings/*.rec)}
KEY_TIMEOUT=${E2E_KEY_TIMEOUT:-20}
TIMEOUT=${E2E_TIMEOUT:-240}
E2E_DIR=${E2E_DIR:-$(mktemp -d -t rosetop-e2e-replay.XXXXXX)}
mkdir -p "$E2E_DIR"
SOCK="rosetop-e2e-replay-$$"
PANE=replay

E2E_NAME=e2e-replay
. scripts/e2e-lib.sh
trap tmux_cleanup EXIT
# position: the replay's position in seconds, from the status line ("⏸ paused · 0:12 of 0:38").
position() {
	local p
	p=$(grep -oE '(▶ [0-9.]+x|⏸ paused|■ end) · [0-9]+:[0-9]{2} of' "$E2E_DIR/pane.txt" | head -1 | grep -oE '[0-9]+:[0-9]{2}') || return 1
	echo $((10#${p%%:*} * 60 + 10#${p##*:}))
}
at() { [ "$(position)" = "$1" ]; }

if ! command -v tmux >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux) >/dev/null ||
			fail "could not install tmux with apt-get"
	else
		fail "tmux is not installed (and not root with apt-get to install it)"
	fi
fi
BIN=${E2E_BIN:-}
if [ -z "$BIN" ]; then
	echo "e2e-replay: building bin/rosetop" >&2
	go build -o bin/rosetop . || fail "go build failed"
	BIN=./bin/rosetop
fi
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
REC=
for r in $RECS; do
	[ -s "$r" ] || fail "no recording at $r"
	REC=${REC:-$r} # the first one for the checks that need one
done

# --- 1. bad input --------------------------------------------------------------------------------
: >"$E2E_DIR/empty.rec"
printf 'rosetop recording\n\x02' >"$E2E_DIR/newer.rec"
for bad in "missing:$E2E_DIR/missing.rec:no such file" "empty:$E2E_DIR/empty.rec:empty file" \
	"not a recording:README.md:not a rosetop recording" "newer:$E2E_DIR/newer.rec:newer rosetop"; do
	IFS=: read -r what file want <<<"$bad"
	set +e
	"$BIN" replay "$file" </dev/null >"$E2E_DIR/bad.out" 2>"$E2E_DIR/bad.err"
	code=$?
	set -e
	[ "$code" = 2 ] || fail "$what: exit $code, want 2 ($(cat "$E2E_DIR/bad.err"))"
	[ "$(grep -c '' "$E2E_DIR/bad.err")" = 1 ] || fail "$what: want one line on stderr, got: $(cat "$E2E_DIR/bad.err")"
	grep -qF -- "$want" "$E2E_DIR/bad.err" && grep -qF -- "$file" "$E2E_DIR/bad.err" ||
		fail "$what: the error does not name the file and say '$want': $(cat "$E2E_DIR/bad.err")"
	ok "$what: $(cat "$E2E_DIR/bad.err")"
done
set +e
setsid "$BIN" replay "$REC" </dev/null >"$E2E_DIR/notty.out" 2>"$E2E_DIR/notty.err"
code=$?
set -e
[ "$code" = 2 ] && [ "$(grep -c '' "$E2E_DIR/notty.err")" = 1 ] && grep -qF -- "--summary" "$E2E_DIR/notty.err" ||
	fail "no terminal: exit $code, want 2 and one line suggesting --summary: $(cat "$E2E_DIR/notty.err")"
ok "no terminal: $(cat "$E2E_DIR/notty.err")"

# --- 2 and 3. each recording: --summary, whole and cut short; the replay in tmux ----------------------
for REC in $RECS; do
	echo "e2e-replay: $REC" >&2
	"$BIN" replay --summary "$REC" >"$E2E_DIR/summary.txt" || fail "replay --summary $REC failed"
	grep -qF '=== rosetop recording:' "$E2E_DIR/summary.txt" && grep -qE '^engine 1: ' "$E2E_DIR/summary.txt" &&
		grep -qF 'engine ledger' "$E2E_DIR/summary.txt" || fail "the summary lacks its header, an engine or a ledger (see $E2E_DIR/summary.txt)"
	size=$(stat -c %s "$REC")
	head -c $((size * 2 / 3)) "$REC" >"$E2E_DIR/cut.rec"
	"$BIN" replay --summary "$E2E_DIR/cut.rec" >"$E2E_DIR/summary-cut.txt" || fail "replay --summary of a cut recording failed"
	grep -qE 'the recording (stops at [0-9]+:[0-9]{2}, after view [0-9]+: at byte [0-9]+: cut off mid-frame|has no end mark)' "$E2E_DIR/summary-cut.txt" ||
		fail "the cut recording's summary does not say where it stops (see $E2E_DIR/summary-cut.txt)"
	ok "--summary: $(head -1 "$E2E_DIR/summary.txt"); cut at 2/3: $(tail -1 "$E2E_DIR/summary-cut.txt")"

	start replay "'$BIN' replay '$(cd "$(dirname "$REC")" && pwd)/$(basename "$REC")'"
	wait_until "REPLAY in the header" 30 pane_re '^rosetop REPLAY of [0-9]{4}-[0-9]{2}-[0-9]{2} '
	wait_until "playback at 1x" "$KEY_TIMEOUT" pane_has "▶ 1x"
	key Space
	wait_until "paused" "$KEY_TIMEOUT" pane_has "⏸ paused"
	p0=$(position) || fail "no position in the status line"
	sleep 1.5
	capture
	[ "$(position)" = "$p0" ] || fail "the position moved while paused: $p0 -> $(position)"
	key Right
	wait_until "$((p0 + 5)) s after →" "$KEY_TIMEOUT" at $((p0 + 5))
	key Left
	wait_until "$p0 s after ←" "$KEY_TIMEOUT" at "$p0"
	ok "space paused at ${p0}s and held; → +5 s, ← back"
	key '>'
	wait_until "speed 2x" "$KEY_TIMEOUT" pane_has "replay speed 2x"
	key '>'
	wait_until "speed 4x" "$KEY_TIMEOUT" pane_has "replay speed 4x"
	key Space
	wait_until "playing at 4x" "$KEY_TIMEOUT" pane_has "▶ 4x"
	p1=$(position)
	moved() { [ "$(position)" -ge $((p1 + 4)) ]; }
	wait_until "4 s of recording in about a second at 4x" 5 moved
	key '<'
	wait_until "speed 2x" "$KEY_TIMEOUT" pane_has "replay speed 2x"
	ok "> > space: playing at 4x; < back to 2x"
	key n
	wait_until "the next event" "$KEY_TIMEOUT" pane_has "next event: at"
	key p
	wait_until "the engine key refused" "$KEY_TIMEOUT" pane_has "engine keys do nothing"
	key End
	wait_until "the end" "$KEY_TIMEOUT" pane_has "■ end"
	key Home
	wait_until "the start" "$KEY_TIMEOUT" pane_re "(▶ 2x|⏸ paused) · 0:0[0-9] of"
	ok "n: next event; p refused with the reason; end; home"
	key q
	code=$(wait_exit 20)
	[ "$code" = 0 ] || fail "replay exited $code after q"
	state=$(tm display -p -t "$PANE" '#{alternate_on} #{cursor_flag}')
	[ "$state" = "0 1" ] || fail "the terminal was left with alternate_on/cursor_flag = $state"
	grep -qE '(^| )icanon( |$)' "$E2E_DIR/stty.txt" || fail "the terminal was left raw"
	ok "q: exit 0, terminal restored"
done

# --- 4. rosetop bench --record ------------------------------------------------------------------------
"$BIN" bench --num-requests 8 --max-new-tokens 8 --repeat-runs 2 --record "$E2E_DIR/bench.rec" \
	>"$E2E_DIR/bench.out" 2>"$E2E_DIR/bench.err" || fail "bench --record failed: $(tail -1 "$E2E_DIR/bench.err")"
grep -qF "wrote $E2E_DIR/bench.rec" "$E2E_DIR/bench.err" || fail "bench --record did not say where it wrote"
"$BIN" replay --summary "$E2E_DIR/bench.rec" >"$E2E_DIR/bench-summary.txt" || fail "the bench recording does not replay"
grep -qF '=== rosetop recording: bench,' "$E2E_DIR/bench-summary.txt" && grep -qE '^  (warmup 1/1|steady \(median of 2\))' "$E2E_DIR/bench-summary.txt" ||
	fail "the bench recording's summary lacks its runs (see $E2E_DIR/bench-summary.txt)"
ok "bench --record: $(head -1 "$E2E_DIR/bench-summary.txt")"

# --- 5. a recording killed with SIGKILL -------------------------------------------------------------
start killed "'$BIN' --num-requests 8 --max-new-tokens 16 --record '$E2E_DIR/killed.rec'"
wait_until "a finished run" "$TIMEOUT" pane_re '▸ .*finished'
kill -KILL "$(cat "$E2E_DIR/killed.pid")"
wait_exit 20 >/dev/null
"$BIN" replay --summary "$E2E_DIR/killed.rec" >"$E2E_DIR/killed-summary.txt" || fail "the killed session's recording does not replay"
grep -qF 'no end mark' "$E2E_DIR/killed-summary.txt" || fail "the killed recording's summary does not say it has no end mark"
ok "SIGKILL: $(tail -1 "$E2E_DIR/killed-summary.txt")"
ok "all ($E2E_DIR)"
