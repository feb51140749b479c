#!/usr/bin/env python3
"""A hand-written PyTorch GPT-2 decoder: the strongest simple peer for rosetop's decode-heavy job.

GPT-2 124M with random weights (transformers' GPT2Config, torch.manual_seed), fp16, greedy. A
static KV cache [layers][batch, heads, max_len, head_dim]; each decode step (embed, 12 layers,
final norm, LM head, argmax) is one function over static buffers, captured as a CUDA graph per
context bucket of --bucket positions (attention reads the bucket's keys, masking those past the
position); the graph writes the sampled tokens and the next position into its own inputs, so the
host loop only replays. The prompt goes through the same step, a token at a time.

Workload as decode-heavy: --batch sequences of --new-tokens tokens after a 2-token prompt
[marker_i, " Hello"]; throughput = completion tokens / wall time of the whole run (prompt
steps included). Before timing, the first step's logits are checked against transformers'
forward pass on the same weights.

  python3 bench/peers/torch_decoder.py [--batch 64] [--new-tokens 256] [--runs 3] [--eager] [--compile [--compile-mode M]]

Prints one JSON object: tokens_per_s (median of the runs), step_ms, the runs, the check.
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn.functional as F

HELLO = 18435  # GPT-2's " Hello"
MARKER0 = 1000  # sequence i's first prompt token is MARKER0 + i


def build(seed):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    hf = GPT2LMHeadModel(GPT2Config()).half().cuda().eval()
    return hf


class Decoder:
    """The step over static buffers. Weights come from the transformers model (Conv1D: [in, out])."""

    def __init__(self, hf, batch, max_len, bucket):
        cfg = hf.config
        self.C, self.H, self.L = cfg.n_embd, cfg.n_head, cfg.n_layer
        self.D = self.C // self.H
        self.batch, self.max_len, self.bucket = batch, max_len, bucket
        t = hf.transformer
        self.wte, self.wpe = t.wte.weight, t.wpe.weight
        self.layers = [
            (b.ln_1.weight, b.ln_1.bias, b.attn.c_attn.weight, b.attn.c_attn.bias, b.attn.c_proj.weight,
             b.attn.c_proj.bias, b.ln_2.weight, b.ln_2.bias, b.mlp.c_fc.weight, b.mlp.c_fc.bias,
             b.mlp.c_proj.weight, b.mlp.c_proj.bias)
            for b in t.h
        ]
        self.lnf = (t.ln_f.weight, t.ln_f.bias)
        dev, f16 = "cuda", torch.float16
        shape = (batch, self.H, max_len, self.D)
        self.K = [torch.zeros(shape, device=dev, dtype=f16) for _ in range(self.L)]
        self.V = [torch.zeros(shape, device=dev, dtype=f16) for _ in range(self.L)]
        self.tokens = torch.zeros(batch, dtype=torch.long, device=dev)  # the step's input tokens
        self.pos = torch.zeros(1, dtype=torch.long, device=dev)  # the step's position
        self.logits = torch.zeros(batch, cfg.vocab_size, device=dev, dtype=f16)
        self.ar = torch.arange(max_len, device=dev)
        self.graphs = {}

    def step(self, ctx, advance=True):
        """One step at position self.pos over the first ctx cached positions; with advance the
        argmax becomes the next step's tokens and the position moves on."""
        B, C, H, D = self.batch, self.C, self.H, self.D
        x = self.wte[self.tokens] + self.wpe[self.pos]
        mask = (self.ar[:ctx] > self.pos).view(1, 1, ctx)
        for l, (g1, b1, wa, ba, wp, bp, g2, b2, wf, bf, wq, bq) in enumerate(self.layers):
            h = F.layer_norm(x, (C,), g1, b1)
            q, k, v = torch.addmm(ba, h, wa).split(C, dim=-1)
            self.K[l].index_copy_(2, self.pos, k.view(B, H, 1, D))
            self.V[l].index_copy_(2, self.pos, v.view(B, H, 1, D))
            att = torch.matmul(q.view(B, H, 1, D), self.K[l][:, :, :ctx].transpose(-1, -2)).view(B, H, ctx)
            att = (att.float() * (1.0 / math.sqrt(D))).masked_fill(mask, float("-inf")).softmax(-1).to(x.dtype)
            y = torch.matmul(att.view(B, H, 1, ctx), self.V[l][:, :, :ctx]).view(B, C)
            x = x + torch.addmm(bp, y, wp)
            h = F.layer_norm(x, (C,), g2, b2)
            x = x + torch.addmm(bq, F.gelu(torch.addmm(bf, h, wf), approximate="tanh"), wq)
        x = F.layer_norm(x, (C,), *self.lnf)
        torch.matmul(x, self.wte.t(), out=self.logits)
        if advance:
            self.tokens.copy_(self.logits.argmax(-1))
            self.pos.add_(1)

    def capture(self, step):
        """A CUDA graph per bucket, after a warm-up on a side stream as torch requires."""
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        saved = (self.tokens.clone(), self.pos.clone())
        with torch.cuda.stream(s):
            for ctx in range(self.bucket, self.max_len + 1, self.bucket):
                step(ctx)
                self.tokens.copy_(saved[0])
                self.pos.copy_(saved[1])
        torch.cuda.current_stream().wait_stream(s)
        for ctx in range(self.bucket, self.max_len + 1, self.bucket):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                step(ctx)
            self.graphs[ctx] = g
            self.tokens.copy_(saved[0])
            self.pos.copy_(saved[1])

    def run(self, prompts, new_tokens, graphs, step):
        """Greedy generation for the batch; returns the wall time and the generated ids."""
        out = []
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        self.pos.zero_()
        n_prompt = prompts.shape[1]
        for i in range(n_prompt + new_tokens - 1):
            ctx = (i // self.bucket + 1) * self.bucket
            if i < n_prompt:
                self.tokens.copy_(prompts[:, i])  # teacher forcing through the prompt
            if graphs:
                self.graphs[ctx].replay()
            else:
                step(ctx)
            if i >= n_prompt - 1:
                out.append(self.tokens.clone())
        torch.cuda.synchronize()
        return time.perf_counter() - t0, torch.stack(out, 1)


def check(hf, dec, prompts):
    """The first generated step's logits against transformers' forward pass on the same prompt."""
    with torch.no_grad():
        ref = hf(prompts).logits[:, -1].float()
        dec.pos.zero_()
        for i in range(prompts.shape[1]):
            dec.tokens.copy_(prompts[:, i])
            dec.step(dec.bucket, advance=i < prompts.shape[1] - 1)
        got = dec.logits.float()
    diff = (got - ref).abs().max().item()
    scale = ref.abs().max().item()
    same = (got.argmax(-1) == ref.argmax(-1)).float().mean().item()
    return {"max_abs_diff": diff, "max_abs_logit": scale, "argmax_agreement": same}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--new-tokens", type=int, default=256)
    p.add_argument("--bucket", type=int, default=32)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eager", action="store_true", help="no CUDA graphs: every step launched from Python")
    p.add_argument("--compile", action="store_true", help="torch.compile the step before capturing it")
    p.add_argument("--compile-mode", default="max-autotune-no-cudagraphs",
                   help="torch.compile's mode (default: max-autotune-no-cudagraphs, whose autotuning takes minutes per bucket; 'default' compiles in seconds)")
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = True
    hf = build(a.seed)
    max_len = math.ceil((2 + a.new_tokens) / a.bucket) * a.bucket
    dec = Decoder(hf, a.batch, max_len, a.bucket)
    prompts = torch.tensor([[MARKER0 + i, HELLO] for i in range(a.batch)], device="cuda")
    chk = check(hf, dec, prompts)
    if chk["max_abs_diff"] > 0.05 * max(1.0, chk["max_abs_logit"]):
        raise SystemExit(f"torch_decoder: logits differ from transformers: {chk}")
    step = dec.step
    mode = "eager" if a.eager else "cuda-graph"
    with torch.no_grad():
        if a.compile:
            step = torch.compile(dec.step, mode=a.compile_mode, dynamic=False)
            mode += "+compile(" + a.compile_mode + ")"
        if not a.eager:
            dec.capture(step)
        dec.run(prompts, a.new_tokens, not a.eager, step)  # warm-up run
        runs = []
        for _ in range(a.runs):
            wall, ids = dec.run(prompts, a.new_tokens, not a.eager, step)
            runs.append(a.batch * a.new_tokens / wall)
    tps = statistics.median(runs)
    steps = 2 + a.new_tokens - 1
    print(json.dumps({
        "peer": "torch_decoder", "mode": mode, "batch": a.batch, "new_tokens": a.new_tokens,
        "tokens_per_s": round(tps, 1), "step_ms": round(a.batch * a.new_tokens / tps / steps * 1e3, 4),
        "runs": [round(r, 1) for r in runs], "check": chk, "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(),
    }))


if __name__ == "__main__":
    main()
