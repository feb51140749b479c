#!/usr/bin/env bash
# End-to-end check of `rosetop serve` with curl, as a user would run it: builds bin/rosetop, starts
# the server on the embedded model on a free port, streams a completion and a chat completion,
# scrapes /metrics, stops the server with SIGTERM and checks it exits 0 with its summary on
# stdout. Exits non-zero with a one-line reason on failure.
#
#   scripts/e2e-serve.sh                       # what CI runs
#   E2E_BIN=/path/to/rosetop scripts/e2e-serve.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v curl >/dev/null || { echo "e2e-serve: curl is missing" >&2; exit 1; }
BIN=${E2E_BIN:-}
if [ -z "$BIN" ]; then
	echo "e2e-serve: building bin/rosetop"
	go build -o bin/rosetop .
	BIN=bin/rosetop
fi
dir=$(mktemp -d -t rosetop-serve.XXXXXX)
fail() {
	echo "e2e-serve: FAIL: $*" >&2
	echo "--- server stderr ---" >&2
	cat "$dir/stderr" >&2 || true
	exit 1
}
"$BIN" serve --port 0 --device cpu >"$dir/stdout" 2>"$dir/stderr" &
pid=$!
trap 'kill -9 $pid 2>/dev/null || true' EXIT
url=""
for _ in $(seq 1 300); do # the start-up line names the URL (up to 30 s)
	[ -f "$dir/stderr" ] && url=$(sed -nE 's/.*serving [^ ]+ on (http:[^ ]+\/v1).*/\1/p' "$dir/stderr" | head -1) # not opened yet: no URL yet
	[ -n "$url" ] && break
	kill -0 $pid 2>/dev/null || fail "the server exited before it served"
	sleep 0.1
done
[ -n "$url" ] || fail "no start-up line with the URL"
echo "e2e-serve: server at $url"

curl -sfN --max-time 60 "$url/completions" -H 'Content-Type: application/json' \
	-d '{"model":"tiny-gpt2","prompt":"Hello","max_tokens":8,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}' >"$dir/stream.txt" ||
	fail "streamed completion: curl exit $?"
chunks=$(grep -c '^data: {' "$dir/stream.txt" || true)
grep -q '^data: \[DONE\]' "$dir/stream.txt" || fail "no [DONE] in the stream"
grep -q '"completion_tokens":8' "$dir/stream.txt" || fail "no usage chunk with 8 completion tokens"
[ "$chunks" -ge 9 ] || fail "$chunks data chunks, want 8 token chunks and a usage chunk"

curl -sf --max-time 60 "$url/chat/completions" -H 'Content-Type: application/json' \
	-d '{"model":"tiny-gpt2","messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"ignore_eos":true}' >"$dir/chat.json" ||
	fail "chat completion: curl exit $?"
grep -q '"completion_tokens":4' "$dir/chat.json" || fail "chat reply without usage of 4 tokens: $(cat "$dir/chat.json")"

code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$url/completions" -d '{not json')
[ "$code" = 400 ] || fail "malformed JSON answered $code, want 400"

curl -sf --max-time 10 "${url%/v1}/metrics" >"$dir/metrics.txt" || fail "metrics: curl exit $?"
grep -qE '^rosetop_generation_tokens_total\{[^}]*\} 12$' "$dir/metrics.txt" || fail "rosetop_generation_tokens_total is not 12: $(grep generation_tokens_total "$dir/metrics.txt")"
grep -qE '^rosetop_time_to_first_token_seconds_count\{[^}]*\} 2$' "$dir/metrics.txt" || fail "TTFT histogram count is not 2"

kill -TERM $pid
status=0
wait $pid || status=$?
trap - EXIT
[ "$status" = 0 ] || fail "exit $status after SIGTERM, want 0"
grep -q '=== rosetop session' "$dir/stdout" || fail "no summary on stdout"
echo "e2e-serve: ok: streamed $chunks chunks, chat, 400 on bad JSON, metrics, SIGTERM exit 0 ($dir)"
