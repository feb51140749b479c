#!/usr/bin/env python3
"""A third-party client for `rosetop serve` (or any OpenAI-compatible server, e.g. vLLM).

Drives decode-heavy-shaped load over HTTP: --requests concurrent streaming completions of
--max-tokens tokens each, all submitted at t0, with ignore_eos and unique prompts (token ids
[marker_i, " Hello"], two tokens as in rosetop's decode-heavy job), and measures as vLLM's
`bench serve` does: the clock starts before the POST, TTFT at the first chunk carrying choices,
ITL as the gaps between chunks, completion tokens from the usage chunk. Throughput is completion
tokens / (last finish - t0). The load is split over --procs processes so that parsing the
events does not limit it.

Prints one JSON object per measured run, then a summary line with the medians:
  {"run", "requests", "completion_tokens", "wall_s", "tokens_per_s", "ttft_ms": {p50, p95, p99},
   "itl_ms": {...}, "server_cpu_us_per_token"}   (the last with --server-pid: utime + stime of
   that process over the run, from /proc/PID/stat, per completion token)

Uses aiohttp when installed, else httpx (--http picks one).
  python3 bench/peers/serve_client.py --url http://127.0.0.1:8000 [--server-pid PID]
"""
import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import sys
import time
import urllib.request

HELLO = 18435  # GPT-2's " Hello"
MARKER0 = 1000  # request i's first prompt token is MARKER0 + i: unique prompts, no prefix shared


def pct(xs):
    """p50/p95/p99 with linear interpolation between closest ranks (numpy's default)."""
    if not xs:
        return None
    s = sorted(xs)

    def q(p):
        k = (len(s) - 1) * p / 100
        lo = int(k)
        hi = min(lo + 1, len(s) - 1)
        return s[lo] + (s[hi] - s[lo]) * (k - lo)

    return {"p50": q(50), "p95": q(95), "p99": q(99)}


def request_body(model, i, max_tokens):
    return {
        "model": model, "prompt": [MARKER0 + i, HELLO], "max_tokens": max_tokens, "temperature": 0,
        "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True},
    }


def on_event(data, rec):
    """Accounts one SSE data payload into rec (times in time.monotonic() seconds)."""
    if data == b"[DONE]":
        return
    now = time.monotonic()
    chunk = json.loads(data)
    if "error" in chunk:
        raise RuntimeError(chunk["error"].get("message"))
    if chunk.get("choices"):
        rec["chunks"].append(now)
    if chunk.get("usage"):
        rec["tokens"] = chunk["usage"]["completion_tokens"]


async def one_aiohttp(session, url, body, timeout):
    import aiohttp
    rec = {"start": time.monotonic(), "chunks": [], "tokens": 0}
    async with session.post(url, json=body, timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {await resp.text()}")
        async for line in resp.content:
            line = line.strip()
            if line.startswith(b"data: "):
                on_event(line[6:], rec)
    rec["end"] = time.monotonic()
    return rec


async def one_httpx(client, url, body, timeout):
    rec = {"start": time.monotonic(), "chunks": [], "tokens": 0}
    async with client.stream("POST", url, json=body, timeout=timeout) as resp:
        if resp.status_code != 200:
            raise RuntimeError(f"HTTP {resp.status_code}: {(await resp.aread()).decode()}")
        async for line in resp.aiter_lines():
            line = line.strip()  # older httpx keeps the line ending
            if line.startswith("data: "):
                on_event(line[6:].encode(), rec)
    rec["end"] = time.monotonic()
    return rec


async def run_share(lib, url, model, indices, max_tokens, t0, timeout):
    """Sends this process's requests at t0 (a shared monotonic time) and returns their records."""
    bodies = [request_body(model, i, max_tokens) for i in indices]
    if lib == "aiohttp":
        import aiohttp
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            await asyncio.sleep(max(0.0, t0 - time.monotonic()))
            return await asyncio.gather(*(one_aiohttp(session, url, b, timeout) for b in bodies))
    import httpx
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(limits=limits) as client:
        await asyncio.sleep(max(0.0, t0 - time.monotonic()))
        return await asyncio.gather(*(one_httpx(client, url, b, timeout) for b in bodies))


def worker(args):
    return asyncio.run(run_share(*args))


def http_library(choice):
    """aiohttp or httpx: the one asked for, else the first installed."""
    for lib in [choice] if choice != "auto" else ["aiohttp", "httpx"]:
        try:
            __import__(lib)
            return lib
        except ImportError:
            pass
    sys.exit(f"no HTTP library: install {'aiohttp or httpx' if choice == 'auto' else choice}")


def cpu_seconds(pid):
    """utime + stime of process pid, in seconds (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def served_model(base, timeout):
    with urllib.request.urlopen(base + "/v1/models", timeout=timeout) as r:
        return json.load(r)["data"][0]["id"]


def run_once(pool, a, model, run):
    shares = [list(range(p, a.requests, a.procs)) for p in range(a.procs)]
    t0 = time.monotonic() + 0.5  # every process has its session open by then
    cpu0 = cpu_seconds(a.server_pid) if a.server_pid else None
    results = pool.map(worker, [(a.http, a.url + "/v1/completions", model, s, a.max_tokens, t0, a.timeout) for s in shares if s])
    cpu1 = cpu_seconds(a.server_pid) if a.server_pid else None
    recs = [r for share in results for r in share]
    tokens = sum(r["tokens"] for r in recs)
    wall = max(r["end"] for r in recs) - t0
    out = {
        "run": run, "requests": len(recs), "completion_tokens": tokens, "wall_s": wall, "tokens_per_s": tokens / wall,
        "ttft_ms": pct([(r["chunks"][0] - r["start"]) * 1e3 for r in recs if r["chunks"]]),
        "itl_ms": pct([(b - a_) * 1e3 for r in recs for a_, b in zip(r["chunks"], r["chunks"][1:])]),
    }
    if cpu0 is not None:
        out["server_cpu_us_per_token"] = (cpu1 - cpu0) * 1e6 / max(tokens, 1)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--url", default="http://127.0.0.1:8000", help="the server's base URL")
    p.add_argument("--model", default="", help="model name to send (default: the server's first)")
    p.add_argument("--requests", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--procs", type=int, default=min(4, os.cpu_count() or 1), help="client processes")
    p.add_argument("--warmup-runs", type=int, default=1)
    p.add_argument("--repeat-runs", type=int, default=3)
    p.add_argument("--server-pid", type=int, default=0, help="report this process's CPU time per token")
    p.add_argument("--timeout", type=float, default=600, help="seconds a request may take")
    p.add_argument("--http", choices=["auto", "aiohttp", "httpx"], default="auto", help="HTTP library")
    a = p.parse_args()
    a.http = http_library(a.http)
    if a.requests < 1 or a.max_tokens < 1 or a.procs < 1 or a.repeat_runs < 1 or a.warmup_runs < 0:
        sys.exit("--requests, --max-tokens, --procs and --repeat-runs must be >= 1, --warmup-runs >= 0")
    a.url = a.url.rstrip("/")
    model = a.model or served_model(a.url, 30)
    runs = []
    with multiprocessing.get_context("spawn").Pool(a.procs) as pool:
        for run in range(a.warmup_runs + a.repeat_runs):
            r = run_once(pool, a, model, run + 1)
            r["warmup"] = run < a.warmup_runs
            print(json.dumps(r), flush=True)
            if not r["warmup"]:
                runs.append(r)
    summary = {"summary": True, "runs": len(runs), "tokens_per_s": statistics.median(r["tokens_per_s"] for r in runs)}
    if a.server_pid:
        summary["server_cpu_us_per_token"] = statistics.median(r["server_cpu_us_per_token"] for r in runs)
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
