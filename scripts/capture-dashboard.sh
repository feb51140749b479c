#!/usr/bin/env bash
# capture-dashboard.sh: screenshots (text) of the dashboard as a user sees it: runs rosetop in a
# detached tmux session at 140x45 for SECONDS, captures the steady state, the help overlay and the
# whole-session time window, quits with q and keeps what it printed. For the GPU machine, where no
# one watches the screen.
#   scripts/capture-dashboard.sh BIN OUTDIR SECONDS [ROSETOP FLAGS...]
set -uo pipefail
bin=${1:?usage: capture-dashboard.sh BIN OUTDIR SECONDS [FLAGS...]}
out=${2:?usage: capture-dashboard.sh BIN OUTDIR SECONDS [FLAGS...]}
secs=${3:?usage: capture-dashboard.sh BIN OUTDIR SECONDS [FLAGS...]}
shift 3
mkdir -p "$out"
sock="rosetop-capture-$$"
tm() { tmux -L "$sock" "$@"; }
trap 'tm kill-server >/dev/null 2>&1' EXIT
tm new-session -d -s dash -x 140 -y 45 "$(printf '%q ' "$bin" "$@") >$out/summary.txt 2>$out/stderr.txt; echo \$? >$out/exit"
sleep "$secs"
tm capture-pane -p -t dash >"$out/steady.txt"
tm send-keys -t dash '?'
sleep 1
tm capture-pane -p -t dash >"$out/help.txt"
tm send-keys -t dash Escape w w w
sleep 2
tm capture-pane -p -t dash >"$out/whole.txt"
tm send-keys -t dash q
for _ in $(seq 1 100); do [ -f "$out/exit" ] && break; sleep 0.1; done
echo "exit $(cat "$out/exit" 2>/dev/null || echo '?'); stdout $(wc -l <"$out/summary.txt") lines"
