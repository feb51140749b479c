#!/usr/bin/env python3
"""Packs tiny_logits.f32 (float32 logits, positions x vocab, prompts in order) into tiny_logits.q16.

Per position: a float32 scale s = max|logit|/32767, then vocab int16 values round(logit/s).
Dequantized error <= s/2 = max|logit|/65534 (1.53e-5 relative to max|logit|); the Go golden test
subtracts that from its 1e-4 budget so a pass still proves the 1e-4 bound against the float32 values.
Stdlib only: python3 quantize_logits.py tiny_logits.f32 tiny_golden.json tiny_logits.q16
"""
import array
import json
import struct
import sys

src, meta, dst = sys.argv[1:4]
vocab = json.load(open(meta))["model"]["vocab_size"]
data = array.array("f")
with open(src, "rb") as f:
    data.frombytes(f.read())
assert sys.byteorder == "little"
rows = len(data) // vocab
assert rows * vocab == len(data)
with open(dst, "wb") as out:
    for r in range(rows):
        row = data[r * vocab:(r + 1) * vocab]
        m = max(abs(x) for x in row)
        s = m / 32767.0 if m > 0 else 1.0
        out.write(struct.pack("<f", s))
        q = array.array("h", (max(-32767, min(32767, round(x / s))) for x in row))
        out.write(q.tobytes())
print(f"{rows} positions x {vocab} -> {dst}")
