#!/usr/bin/env bash
# serve_vs_inprocess.sh: decode-heavy through `rosetop serve` driven by a third-party Python
# client (serve_client.py: 64 concurrent streams of 256 tokens, ignore_eos, unique prompts)
# beside the same job in-process (`rosetop bench --job decode-heavy`), on the GPU machine, in one
# call. Prints each side's median throughput, their ratio, and the server's CPU time per
# streamed token.
#   bench/peers/serve_vs_inprocess.sh BIN OUTDIR [ROUNDS]   (ROUNDS: 3; each round runs both)
set -uo pipefail
bin=${1:?usage: serve_vs_inprocess.sh BIN OUTDIR [ROUNDS]}
out=${2:?usage: serve_vs_inprocess.sh BIN OUTDIR [ROUNDS]}
rounds=${3:-3}
mkdir -p "$out"
here=$(dirname "$0")
model=(--device cuda --model random:gpt2)
port=18000
"$bin" serve "${model[@]}" --port $port --max-batch-size 64 --capture-ahead >"$out/serve.out" 2>"$out/serve.err" &
pid=$!
trap 'kill $pid 2>/dev/null' EXIT
for _ in $(seq 1 600); do # the start-up line (up to 60 s: the model and the graph captures)
	grep -q "serving" "$out/serve.err" && break
	kill -0 $pid 2>/dev/null || { echo "serve exited: $(tail -2 "$out/serve.err")" >&2; exit 1; }
	sleep 0.1
done
for ((i = 0; i < rounds; i++)); do
	"$bin" bench "${model[@]}" --job decode-heavy --warmup-runs 1 --repeat-runs 3 --json "$out/inproc-$i.json" >"$out/inproc-$i.txt" 2>>"$out/inproc.err"
	python3 "$here/serve_client.py" --url "http://127.0.0.1:$port" --procs 8 --warmup-runs 1 --repeat-runs 3 --server-pid $pid >"$out/client-$i.txt" 2>>"$out/client.err"
done
kill -TERM $pid
wait $pid
trap - EXIT
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
inproc, client, cpu = [], [], []
for i in range(rounds):
    runs = [r for r in json.load(open(f"{out}/inproc-{i}.json"))["runs"] if not r["warmup"]]
    inproc.append(statistics.median(r["summary"]["throughput_completion_tok_s"] for r in runs))
    for line in open(f"{out}/client-{i}.txt"):
        d = json.loads(line)
        if d.get("summary"):
            client.append(d["tokens_per_s"])
            if "server_cpu_us_per_token" in d:
                cpu.append(d["server_cpu_us_per_token"])
mi, mc = statistics.median(inproc), statistics.median(client)
print("in-process decode-heavy, median of rounds:", " / ".join(f"{v:,.0f}" for v in inproc), f"-> {mi:,.0f} tokens/s")
print("rosetop serve + Python client (serve_client.py), median of rounds:", " / ".join(f"{v:,.0f}" for v in client), f"-> {mc:,.0f} tokens/s")
print(f"HTTP / in-process = {mc / mi:.1%}")
if cpu:
    print("server CPU per streamed token (us):", " / ".join(f"{v:.1f}" for v in cpu))
PY
