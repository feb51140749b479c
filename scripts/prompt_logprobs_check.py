#!/usr/bin/env python3
"""Checks a server's prompt logprobs (completions echo + logprobs, as lm-evaluation-harness asks
for them) against Hugging Face transformers in fp32, and times the requests.

  prompt_logprobs_check.py URL MODEL_DIR [MODEL_NAME]

URL is the server's base (http://127.0.0.1:8000/v1), MODEL_DIR a transformers GPT-2 directory
the server runs (scripts/gpu_reference.py writes one), MODEL_NAME the id clients send (default:
the first of /v1/models). Prompts are sent as token ids, so no tokenizer is needed here. For each
prompt length it sends `echo: true, logprobs: 5, max_tokens: 0` and compares token_logprobs[1:]
with the reference's log-softmax, and the top 5 where their gaps exceed the tolerance; then 8
such requests at once, twice, timed. Exit status 1 when a logprob is off by more than TOL.
"""
import concurrent.futures
import json
import sys
import time

import httpx
import torch
from transformers import GPT2LMHeadModel

TOL = 2e-2  # fp16 weights and activations against fp32: the teacher-forced logits' tolerance
LENGTHS = (2, 17, 128, 500)
TOP = 5


def prompt(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 50257, (n,), generator=g).tolist()


@torch.no_grad()
def reference(model, ids, dev):
    logits = model(torch.tensor([ids], device=dev)).logits[0, :-1].float()
    lp = torch.log_softmax(logits, -1)
    want = lp.gather(1, torch.tensor(ids[1:], device=dev)[:, None])[:, 0]
    return want.cpu().tolist(), lp.topk(TOP + 1, -1)


def ask(client, url, name, ids):
    t = time.perf_counter()
    r = client.post(url + "/completions", json={"model": name, "prompt": ids, "echo": True, "logprobs": TOP,
                                                "max_tokens": 0, "temperature": 0})
    took = time.perf_counter() - t
    if r.status_code != 200:
        sys.exit(f"{len(ids)} tokens: HTTP {r.status_code}: {r.text[:300]}")
    return r.json()["choices"][0]["logprobs"], took


def check(n, got, want, top):
    lps = got["token_logprobs"]
    if len(lps) != n or lps[0] is not None or got["top_logprobs"][0] is not None:
        return f"{n} tokens: {len(lps)} logprobs, first {lps[0]!r} (want {n}, null first)", None
    worst = max(abs(a - b) for a, b in zip(lps[1:], want))
    bad = 0
    for j in range(1, n):  # top entries: the server's keys are texts; compare their logprobs
        ref = top.values[j - 1].cpu().tolist()
        gap = min(ref[k] - ref[k + 1] for k in range(TOP))
        # a dict keyed by text: tokens that decode alike (partial UTF-8: U+FFFD) collapse into one
        mine = sorted(got["top_logprobs"][j].values(), reverse=True)[:TOP]
        if gap > TOL and len(mine) == TOP and any(abs(a - b) > TOL for a, b in zip(mine, ref)):
            bad += 1
    return None, (worst, bad)


def main(url, mdir, name=None):
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model = GPT2LMHeadModel.from_pretrained(mdir, attn_implementation="eager").float().to(dev).eval()
    client = httpx.Client(timeout=120)
    if name is None:
        name = client.get(url + "/models").json()["data"][0]["id"]
    failed = False
    for n in LENGTHS:
        ids = prompt(n, n)
        ask(client, url, name, ids)  # the shape's first use (graphs, first calls) is not timed
        got, took = ask(client, url, name, ids)
        want, top = reference(model, ids, dev)
        err, res = check(n, got, want, top)
        if err:
            print("FAIL", err)
            failed = True
            continue
        worst, bad = res
        eight = []  # the first batch of 8 meets a step shape's one-time costs; the second does not
        for base in (1000, 2000):
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                t = time.perf_counter()
                list(pool.map(lambda s: ask(client, url, name, prompt(n, base + s)), range(8)))
                eight.append(time.perf_counter() - t)
        ok = worst <= TOL and bad == 0
        failed |= not ok
        print(f"{'PASS' if ok else 'FAIL'} prompt {n:4d} tokens: worst |logprob - transformers| {worst:.2e}, "
              f"top-{TOP} mismatches {bad}; one request {took * 1e3:.1f} ms, 8 at once {eight[0] * 1e3:.1f} ms "
              f"(first), {eight[1] * 1e3:.1f} ms (again)")
    print(json.dumps({"url": url, "model": mdir, "tolerance": TOL}))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    main(*sys.argv[1:])
