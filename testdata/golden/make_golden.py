#!/usr/bin/env python3
"""Reference outputs from Hugging Face transformers/tokenizers for rosetop's golden tests.

Runs on the GPU machine (python3 with torch, transformers, tokenizers; no network, no hub).

  make_golden.py tiny OUTDIR      builds the tiny GPT-2 (seeded, saved fp16 with save_pretrained),
                                  float64 logits of every position for 4 prompts, 24-token greedy
                                  continuations, and tokenizer ids for testdata/tokenizer/corpus.jsonl
  make_golden.py big OUTDIR       builds a GPT-2-124M-shaped random model (fp32) in OUTDIR and the
                                  float64 last-position logits for 3 prompts (too big to commit;
                                  testdata/golden/check_124m.sh runs rosetop's CPU engine against it)

The reference computes in float64 on the CPU: rosetop's float32 engine is compared with the true values,
not with another float32 summation order.
"""
import gzip
import json
import os
import shutil
import struct
import sys
import tempfile

import torch
from tokenizers import Tokenizer
from tokenizers.decoders import ByteLevel as ByteLevelDecoder
from tokenizers.models import BPE
from tokenizers.pre_tokenizers import ByteLevel
from transformers import GPT2Config, GPT2LMHeadModel

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ASSETS = os.path.join(ROOT, "engine", "tokenizer", "assets")

TINY = dict(vocab_size=50257, n_positions=1024, n_embd=32, n_layer=4, n_head=4,
            initializer_range=0.1, bos_token_id=50256, eos_token_id=50256)
TINY_SEED = 1234
TINY_PROMPTS = [
    "Hello",
    "The quick brown fox jumps",
    "In a hole in the ground there lived a hobbit.",
    "Grüße aus München! 🍺 日本語も少し, and emoji 🤖.",
]
GREEDY_STEPS = 24
BIG_SEED = 124
BIG_PROMPTS = ["Hello", "The capital of France is", "Once upon a time, in a land far, far away, there lived"]


def hf_tokenizer():
    tmp = tempfile.mkdtemp()
    paths = {}
    for name, out in (("gpt2-vocab.json.gz", "vocab.json"), ("gpt2-merges.txt.gz", "merges.txt")):
        with gzip.open(os.path.join(ASSETS, name), "rb") as src, open(os.path.join(tmp, out), "wb") as dst:
            shutil.copyfileobj(src, dst)
        paths[out] = os.path.join(tmp, out)
    tok = Tokenizer(BPE.from_file(paths["vocab.json"], paths["merges.txt"]))
    tok.pre_tokenizer = ByteLevel(add_prefix_space=False)
    tok.decoder = ByteLevelDecoder()
    tok.add_special_tokens(["<|endoftext|>"])
    return tok


def encode(tok, s):
    return tok.encode(s, add_special_tokens=False).ids


@torch.no_grad()
def logits64(model, ids):
    return model(torch.tensor([ids], dtype=torch.long)).logits[0]  # (T, V) float64


@torch.no_grad()
def greedy64(model, ids, steps):
    ids = list(ids)
    out, margins = [], []
    for _ in range(steps):
        last = logits64(model, ids)[-1]
        top = torch.topk(last, 2)
        out.append(int(top.indices[0]))
        margins.append(float(top.values[0] - top.values[1]))
        ids.append(out[-1])
    return out, margins


def tiny(outdir):
    tok = hf_tokenizer()
    torch.manual_seed(TINY_SEED)
    cfg = GPT2Config(**TINY)
    model = GPT2LMHeadModel(cfg).eval()
    mdir = os.path.join(outdir, "tiny")
    model.half().save_pretrained(mdir, safe_serialization=True)
    # Reload what was saved (fp16 values) and compute in float64: the golden is the saved model's truth.
    ref = GPT2LMHeadModel.from_pretrained(mdir, attn_implementation="eager").double().eval()
    golden = {"model": TINY, "seed": TINY_SEED, "reference": "transformers %s float64 eager CPU" % __import__("transformers").__version__,
              "prompts": []}
    with open(os.path.join(outdir, "tiny_logits.f32"), "wb") as f:
        for p in TINY_PROMPTS:
            ids = encode(tok, p)
            lg = logits64(ref, ids)
            f.write(lg.to(torch.float32).numpy().astype("<f4").tobytes())
            cont, margins = greedy64(ref, ids, GREEDY_STEPS)
            golden["prompts"].append({"text": p, "ids": ids, "positions": len(ids),
                                      "max_abs_logit": float(lg.abs().max()),
                                      "greedy": cont, "greedy_margin_min": min(margins)})
            print(f"tiny prompt {len(ids):3d} tokens  greedy {cont[:8]}...  min top1-top2 margin {min(margins):.3e}")
    with open(os.path.join(outdir, "tiny_golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
    # tokenizer ids for the corpus
    n = 0
    with open(os.path.join(ROOT, "testdata", "tokenizer", "corpus.jsonl")) as src, \
            open(os.path.join(outdir, "tokenizer_golden.jsonl"), "w") as dst:
        for line in src:
            s = json.loads(line)
            ids = encode(tok, s)
            dec = tok.decode(ids, skip_special_tokens=False)
            dst.write(json.dumps({"text": s, "ids": ids, "decoded": dec}, ensure_ascii=True) + "\n")
            n += 1
    print(f"tokenizer golden: {n} strings")


def big(outdir):
    tok = hf_tokenizer()
    torch.manual_seed(BIG_SEED)
    model = GPT2LMHeadModel(GPT2Config(bos_token_id=50256, eos_token_id=50256)).eval()  # 124M shape
    model.save_pretrained(outdir, safe_serialization=True)
    ref = model.double()
    golden = {"prompts": []}
    with open(os.path.join(outdir, "last_logits.f32"), "wb") as f:
        for p in BIG_PROMPTS:
            ids = encode(tok, p)
            last = logits64(ref, ids)[-1]
            f.write(last.to(torch.float32).numpy().astype("<f4").tobytes())
            golden["prompts"].append({"text": p, "ids": ids, "max_abs_logit": float(last.abs().max())})
    with open(os.path.join(outdir, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
    print(f"big model and last-position logits for {len(BIG_PROMPTS)} prompts in {outdir}")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("tiny", "big"):
        sys.exit("usage: make_golden.py tiny|big OUTDIR")
    os.makedirs(sys.argv[2], exist_ok=True)
    torch.set_num_threads(os.cpu_count() or 1)
    {"tiny": tiny, "big": big}[sys.argv[1]](sys.argv[2])
