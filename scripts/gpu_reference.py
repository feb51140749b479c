#!/usr/bin/env python3
"""Teacher-forcing references from Hugging Face transformers (fp32) for rosetop's GPU tests.

  gpu_reference.py OUTDIR

writes, for each of two models,
  OUTDIR/tiny/   engine/assets/tiny-gpt2 copied (the embedded tiny model)
  OUTDIR/big/    a GPT-2-124M-shaped model, torch.manual_seed(124) + GPT2Config(), saved fp32
and next to each model ref.json (the 4 prompts' ids and the reference's 32 greedy tokens) and
ref_logits.f32: (4 prompts, 33 steps, V) little-endian float32, the fp32 logits at the prompt's
last position and after each of the 32 greedy tokens, from one full forward over prompt+greedy.
Runs on the GPU when there is one, with TF32 off so the reference is true fp32.
"""
import json
import os
import shutil
import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
STEPS = 32


def prompts():
    # The tiny golden's four prompts (1, 5, 12 and 22-ish tokens), tokenized by HF tokenizers.
    with open(os.path.join(ROOT, "testdata", "golden", "tiny_golden.json")) as f:
        return [p["ids"] for p in json.load(f)["prompts"]]


@torch.no_grad()
def reference(model, mdir, dev):
    model = model.float().to(dev).eval()
    out = {"prompts": [], "greedy": []}
    with open(os.path.join(mdir, "ref_logits.f32"), "wb") as f:
        for ids in prompts():
            x = torch.tensor([ids], device=dev)
            gen = model.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=STEPS,
                                 min_new_tokens=STEPS, pad_token_id=50256)
            greedy = gen[0, len(ids):].tolist()
            logits = model(gen).logits[0, len(ids) - 1:]  # (33, V)
            assert logits.shape[0] == STEPS + 1, logits.shape
            f.write(logits.float().cpu().numpy().astype("<f4").tobytes())
            out["prompts"].append(ids)
            out["greedy"].append(greedy)
    with open(os.path.join(mdir, "ref.json"), "w") as f:
        json.dump(out, f)
    print(f"{mdir}: {len(out['prompts'])} prompts x {STEPS + 1} steps of fp32 logits on {dev}")


def main(outdir):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    tiny = os.path.join(outdir, "tiny")
    shutil.copytree(os.path.join(ROOT, "engine", "assets", "tiny-gpt2"), tiny, dirs_exist_ok=True)
    reference(GPT2LMHeadModel.from_pretrained(tiny, attn_implementation="eager"), tiny, dev)
    big = os.path.join(outdir, "big")
    torch.manual_seed(124)
    model = GPT2LMHeadModel(GPT2Config(bos_token_id=50256, eos_token_id=50256)).eval()
    model.save_pretrained(big, safe_serialization=True)
    reference(model, big, dev)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: gpu_reference.py OUTDIR")
    os.makedirs(sys.argv[1], exist_ok=True)
    main(sys.argv[1])
