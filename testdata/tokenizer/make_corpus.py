#!/usr/bin/env python3
"""Writes corpus.jsonl: the strings the tokenizer is checked on (one JSON string a line).

Deterministic (seeded), stdlib only, so it runs anywhere. The reference ids for these strings
come from Hugging Face `tokenizers` on the GPU machine (testdata/golden/make_golden.py).
"""
import json
import random
import sys

rng = random.Random(20261121)
out = []

fixed = [
    "", " ", "  ", "\n", "\n\n", "\t", " \t \n ", "a", "Hello", " Hello", "Hello world",
    "Hello, world!", "hello   world", "hello\n\nworld", "The quick brown fox jumps over the lazy dog.",
    "I'm", "you're", "they've", "she'll", "we'd", "it's", "don't", "can't", "won't",
    "I'M SHOUTING", "You'RE", "'s", "'t", "'re 've 'm 'll 'd", "O'Neil's", "rock 'n' roll",
    "<|endoftext|>", "Hello<|endoftext|>", "<|endoftext|>Hello", "a<|endoftext|>b<|endoftext|>c",
    " <|endoftext|> ", "<|endoftext|><|endoftext|>", "<|endoftext", "|endoftext|>", "<|end of text|>",
    "1234567890", "3.14159", "1,000,000", "2026-11-21T05:52:00Z", "0x7fffffff", "-42", "+1e-5",
    "email@example.com", "https://example.com/path?q=1&r=2#frag", "C:\\Windows\\System32",
    "def f(x):\n    return x * 2\n", "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "    indented", "\t\ttabbed", "trailing   ", "   leading", "mixed \t\n whitespace \r\n end",
    "naïve café résumé", "Straße", "Ångström", "Ελληνικά", "Русский текст", "日本語のテキスト",
    "中文文本测试", "한국어 텍스트", "עברית", "العربية", "हिन्दी", "ไทย", "Tiếng Việt",
    "😀", "😀😃😄", "👍🏽", "👨‍👩‍👧‍👦", "🇩🇪🇯🇵", "❤️", "🤖 robots", "emoji 🎉 in the middle",
    "\u00a0non-breaking\u00a0space", "zero\u200bwidth", "\u2028line separator", "\ufeffBOM",
    "combining é", "Ω≈ç√∫˜µ≤≥÷", "∑∏∫∂", "™®©", "¡¿", "…", "—–-", "“quotes” ‘single’",
    "«guillemets»", "\u0000nul", "\x7fdel", "ctrl\x01\x02\x03",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "!!!!!!!!!!!!!!!!!!!!", "??", "...", "----------", "==========", "__init__", "snake_case_name",
    "camelCaseName", "PascalCaseName", "SCREAMING_CASE", "kebab-case-name",
]
out.extend(fixed)

words = ["the", "of", "and", "to", "in", "is", "you", "that", "it", "he", "was", "for", "on",
         "are", "as", "with", "his", "they", "I", "at", "be", "this", "have", "from", "GPU",
         "kernel", "token", "latency", "throughput", "batch", "cache", "attention", "prefill",
         "décodage", "über", "naïve", "日本", "数据", "🙂", "don't", "it's", "we'll", "I'd"]
seps = [" ", "  ", "\n", ", ", ". ", " - ", "\t", "   \n", "'s ", "! "]
for i in range(120):
    n = rng.randint(1, 24)
    s = "".join(rng.choice(words) + rng.choice(seps) for _ in range(n))
    if rng.random() < 0.3:
        s = s.capitalize()
    if rng.random() < 0.15:
        s += "<|endoftext|>" + rng.choice(words)
    out.append(s)

# random code points from several blocks, including astral planes and whitespace runs
blocks = [(0x20, 0x7e), (0xa0, 0x24f), (0x370, 0x3ff), (0x400, 0x4ff), (0x4e00, 0x4fff),
          (0x3040, 0x30ff), (0xac00, 0xac7f), (0x1f300, 0x1f64f), (0x2000, 0x206f), (0x0600, 0x06ff)]
for i in range(110):
    n = rng.randint(1, 40)
    chars = []
    for _ in range(n):
        r = rng.random()
        if r < 0.1:
            chars.append(" " * rng.randint(1, 6))
        elif r < 0.15:
            chars.append(rng.choice(["\n", "\t", "\r\n", "\n\n\n"]))
        else:
            lo, hi = rng.choice(blocks)
            chars.append(chr(rng.randint(lo, hi)))
    out.append("".join(chars))

seen = set()
uniq = []
for s in out:
    if s not in seen:
        seen.add(s)
        uniq.append(s)

path = sys.argv[1] if len(sys.argv) > 1 else "corpus.jsonl"
with open(path, "w", encoding="utf-8") as f:
    for s in uniq:
        f.write(json.dumps(s, ensure_ascii=True) + "\n")
print(f"wrote {len(uniq)} strings to {path}")
