#!/usr/bin/env python3
"""The peer: Hugging Face transformers `generate` on rosetop's job shapes, on the same GPU.

GPT-2-124M-shaped random weights (speed does not depend on the values), fp16, SDPA attention,
static batching: requests are served in batches of --max-batch-size in arrival order, all
submitted at t=0 (the jobs are bursts, or paced faster than a batch finishes). Each step is
timestamped by a StoppingCriteria after a device synchronize, so TTFT/TPOT/ITL are measured the
way rosetop measures them (TTFT from the common submit time t0 to the request's first token).

Prints one JSON object per measured run on stdout:
  {"job", "run", "requests", "completion_tokens", "wall_s", "tokens_per_s", "ttft_ms": {p50,p95,p99},
   "tpot_ms": {...}, "itl_ms": {...}}
"""
import argparse
import json
import time

import numpy as np
import torch
from transformers import GPT2Config, GPT2LMHeadModel, StoppingCriteria, StoppingCriteriaList

JOBS = {  # DESIGN.md: requests, prompt repeats, new tokens, max batch
    "decode-heavy": dict(requests=64, repeats=1, new_tokens=256, max_batch=64),
    "admission": dict(requests=256, repeats=1, new_tokens=64, max_batch=64),
    "prefill-heavy": dict(requests=256, repeats=256, new_tokens=1, max_batch=16),
    "paced": dict(requests=64, repeats=1, new_tokens=128, max_batch=64),
}


class StepClock(StoppingCriteria):
    """Records a timestamp each time generate produced a token for the batch."""

    def __init__(self):
        self.stamps = []

    def __call__(self, input_ids, scores, **kwargs):
        torch.cuda.synchronize()
        self.stamps.append(time.perf_counter())
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


def pct(xs):
    if not xs:
        return None
    a = np.asarray(xs, dtype=np.float64)
    return {"p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)), "p99": float(np.percentile(a, 99))}


def run_once(model, job, prompt_len, device):
    spec = JOBS[job]
    n, bs, new = spec["requests"], spec["max_batch"], spec["new_tokens"]
    g = torch.Generator().manual_seed(0)
    ttft, tpot, itl = [], [], []
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    done = 0
    while done < n:
        b = min(bs, n - done)
        ids = torch.randint(0, 50000, (b, prompt_len), generator=g).to(device)
        clock = StepClock()
        model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, min_new_tokens=new,
                       do_sample=False, stopping_criteria=StoppingCriteriaList([clock]), pad_token_id=50256)
        s = clock.stamps
        for _ in range(b):
            ttft.append((s[0] - t0) * 1e3)
            if len(s) > 1:
                tpot.append((s[-1] - s[0]) / (len(s) - 1) * 1e3)
                itl.extend((s[i + 1] - s[i]) * 1e3 for i in range(len(s) - 1))
        done += b
    wall = time.perf_counter() - t0
    return {"requests": n, "completion_tokens": n * new, "wall_s": wall, "tokens_per_s": n * new / wall,
            "ttft_ms": pct(ttft), "tpot_ms": pct(tpot), "itl_ms": pct(itl)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--job", choices=sorted(JOBS), required=True)
    ap.add_argument("--warmup-runs", type=int, default=1)
    ap.add_argument("--repeat-runs", type=int, default=3)
    ap.add_argument("--prompt-tokens", type=int, default=0, help="prompt length; 0: the job's (1, or 256+ for prefill-heavy)")
    args = ap.parse_args()
    device = "cuda"
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(attn_implementation="sdpa")).to(device=device, dtype=torch.float16).eval()
    plen = args.prompt_tokens or (259 if JOBS[args.job]["repeats"] > 1 else 2)
    with torch.inference_mode():
        for _ in range(args.warmup_runs):
            run_once(model, args.job, plen, device)
        for i in range(args.repeat_runs):
            r = run_once(model, args.job, plen, device)
            r.update(job=args.job, run=i + 1, peer="transformers %s generate fp16 sdpa" % __import__("transformers").__version__,
                     gpu=torch.cuda.get_device_name())
            print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
