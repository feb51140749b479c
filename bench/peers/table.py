#!/usr/bin/env python3
"""Prints the rosetop-vs-peer table from run_all.sh's output folder (stdlib only).

Per job and mode: the median over the measured runs of completion tokens/s, TPOT p50 and TTFT p99,
and rosetop/peer ratios (tokens/s: higher is better; latencies: peer/rosetop, so > 1 is better).
"""
import json
import os
import statistics
import sys

JOBS = ["decode-heavy", "admission", "prefill-heavy", "paced"]


def rosetop_runs(path):
    with open(path) as f:
        d = json.load(f)
    out = []
    for r in d["runs"]:
        if r.get("warmup") or r.get("partial"):
            continue
        s = r["summary"]
        out.append((s["throughput_completion_tok_s"], s["tpot_ms"]["p50"] if s["tpot_ms"]["n"] else None,
                    s["ttft_ms"]["p99"]))
    return out


def peer_runs(path):
    out = []
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            out.append((r["tokens_per_s"], (r["tpot_ms"] or {}).get("p50"), r["ttft_ms"]["p99"]))
    return out


def med(rows, i):
    vals = [r[i] for r in rows if r[i] is not None]
    return statistics.median(vals) if vals else None


def fmt(x, nd=2):
    return "n/a" if x is None else f"{x:,.{nd}f}"


def main(d):
    print(f"GPU: {open(os.path.join(d, 'gpu.txt')).read().strip() if os.path.exists(os.path.join(d, 'gpu.txt')) else '?'}")
    hdr = f"{'job':<14} {'mode':<22} {'tokens/s':>10} {'TPOT p50':>9} {'TTFT p99':>9} {'x tok/s':>8} {'x TPOT':>7} {'x TTFT':>7}"
    print(hdr)
    print("-" * len(hdr))
    for job in JOBS:
        peer_path = os.path.join(d, f"peer-{job}.jsonl")
        peer = peer_runs(peer_path) if os.path.exists(peer_path) and os.path.getsize(peer_path) else []
        p = [med(peer, i) for i in range(3)] if peer else [None] * 3
        rows = [(f"rosetop paged+graph", f"rosetop-{job}-on.json"), ("rosetop eager", f"rosetop-{job}-off.json")]
        for name, fn in rows:
            path = os.path.join(d, fn)
            if not os.path.exists(path):
                print(f"{job:<14} {name:<22} {'missing':>10}")
                continue
            r = [med(rosetop_runs(path), i) for i in range(3)]
            ratio = lambda a, b: None if a is None or b in (None, 0) else a / b
            print(f"{job:<14} {name:<22} {fmt(r[0], 0):>10} {fmt(r[1]):>9} {fmt(r[2]):>9} "
                  f"{fmt(ratio(r[0], p[0]), 1):>8} {fmt(ratio(p[1], r[1]), 1):>7} {fmt(ratio(p[2], r[2]), 1):>7}")
        print(f"{job:<14} {'transformers generate':<22} {fmt(p[0], 0):>10} {fmt(p[1]):>9} {fmt(p[2]):>9}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
