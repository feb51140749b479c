# Helpers of the tmux end-to-end scripts (e2e-tmux.sh, e2e-remote-tmux.sh, e2e-replay.sh), sourced
# after they set E2E_NAME (the name their messages start with), E2E_DIR (where screens and
# outputs are kept), SOCK (a private tmux server: never the user's sessions) and PANE. The
# script's EXIT trap calls tmux_cleanup. A pane's last capture is $E2E_DIR/pane.txt; a script
# that runs rosetop in the pane writes its exit code to $E2E_DIR/exit.

tm() { tmux -L "$SOCK" "$@"; }
capture() { tm capture-pane -p -t "$PANE" >"$E2E_DIR/pane.txt" 2>/dev/null || true; }
tmux_cleanup() { tm kill-server >/dev/null 2>&1 || true; }

# fail REASON: says why with the last screen, where the outputs are kept, and exits 1.
fail() {
	echo "$E2E_NAME: FAIL: $*" >&2
	if [ -s "$E2E_DIR/pane.txt" ]; then
		echo "--- last screen ---" >&2
		cat "$E2E_DIR/pane.txt" >&2
	fi
	echo "--- captures and output kept in $E2E_DIR ---" >&2
	exit 1
}
ok() { echo "$E2E_NAME: ok: $*" >&2; }

# wait_until WHAT SECONDS CMD...: polls the pane (5 Hz) until CMD succeeds on it; fails when
# rosetop exits first or the time is up.
wait_until() {
	local what=$1 limit=$2
	shift 2
	local deadline=$((SECONDS + limit))
	while :; do
		capture
		if "$@"; then return 0; fi
		[ -f "$E2E_DIR/exit" ] && fail "rosetop exited (code $(cat "$E2E_DIR/exit")) while waiting for $what"
		[ $SECONDS -lt $deadline ] || fail "timed out after ${limit}s waiting for $what"
		sleep 0.2
	done
}
pane_has() { grep -qF -- "$1" "$E2E_DIR/pane.txt"; }
pane_lacks() { ! grep -qF -- "$1" "$E2E_DIR/pane.txt"; }
pane_re() { grep -qE -- "$1" "$E2E_DIR/pane.txt"; } # capture-pane drops trailing blanks: match ( |$)
snap() { cp "$E2E_DIR/pane.txt" "$E2E_DIR/$1.txt"; }
key() { tm send-keys -t "$PANE" "$@"; }

# start NAME CMD: runs CMD (its pid in $E2E_DIR/NAME.pid) in a fresh tmux session of W x H
# (default 140x45), then a shell that records the exit code and the terminal's mode (stty -a)
# and stays, so the pane's state can be read after rosetop is gone.
start() {
	local name=$1 cmd=$2
	rm -f "$E2E_DIR/exit" "$E2E_DIR/stty.txt"
	tm kill-server >/dev/null 2>&1 || true
	local deadline=$((SECONDS + 10))
	while tm has-session >/dev/null 2>&1; do # the old server must be gone before a new one starts
		[ $SECONDS -lt $deadline ] || fail "the previous tmux server did not exit"
		sleep 0.1
	done
	printf '#!/bin/sh\necho $$ >"%s"\nTERM=xterm-256color exec %s\n' "$E2E_DIR/$name.pid" "$cmd" >"$E2E_DIR/run-$name.sh"
	tm new-session -d -s "$PANE" -x "${W:-140}" -y "${H:-45}" \
		"sh '$E2E_DIR/run-$name.sh'; echo \$? >'$E2E_DIR/exit'; stty -a >'$E2E_DIR/stty.txt' 2>&1; sleep 600" ||
		fail "tmux could not start the session for $name"
}

# wait_exit SECONDS: waits for rosetop (run by start) to exit and prints its exit code.
wait_exit() {
	local deadline=$((SECONDS + $1))
	until [ -f "$E2E_DIR/exit" ] && [ -f "$E2E_DIR/stty.txt" ]; do
		[ $SECONDS -lt $deadline ] || { capture; fail "rosetop did not exit within $1s"; }
		sleep 0.2
	done
	cat "$E2E_DIR/exit"
}
