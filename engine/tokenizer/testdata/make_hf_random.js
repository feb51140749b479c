#!/usr/bin/env node
// Writes hf_random.jsonl.gz: random strings and random id sequences with what Hugging Face's own
// tokenizer (the Rust `tokenizers` crate through its Node binding, npm `tokenizers@0.23.2`) makes
// of them, for TestHFRandom. It complements testdata/tokenizer/golden.jsonl (made with Python
// `tokenizers` on the GPU machine) with the corners a hand-made corpus misses: every kind of
// Unicode whitespace, combining marks, non-ASCII digits, astral planes, long words, and decoding
// of tokens that are only part of a UTF-8 character.
//
//   npm install --prefix /tmp/hf tokenizers@0.23.2
//   NODE_PATH=/tmp/hf/node_modules node engine/tokenizer/testdata/make_hf_random.js
//
// Deterministic: a seeded PRNG; no network. The tokenizer is GPT-2's vocab.json + merges.txt from
// engine/tokenizer/assets, ByteLevel pre-tokenizer without prefix space, ByteLevel decoder,
// <|endoftext|> special: the same definition as gpt2's tokenizer.json.
const fs = require('fs');
const os = require('os');
const path = require('path');
const zlib = require('zlib');
const { Tokenizer, BPE, byteLevelPreTokenizer } = require('tokenizers');

const here = __dirname;
const assets = path.join(here, '..', 'assets');
const N_TEXT = 3000, N_IDS = 3000;

// mulberry32: a small seeded PRNG, so the file is the same on every run.
let seed = 20261121;
function rand() {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1)); // inclusive
const pick = (a) => a[Math.floor(rand() * a.length)];

const blocks = [[0x20, 0x7e], [0x20, 0x7e], [0x20, 0x7e], [0xa0, 0x24f], [0x250, 0x36f], [0x370, 0x3ff],
  [0x400, 0x52f], [0x530, 0x6ff], [0x900, 0x97f], [0xe00, 0xe7f], [0x1100, 0x11ff], [0x1680, 0x16a0],
  [0x1800, 0x18af], [0x1e00, 0x1fff], [0x2000, 0x209f], [0x20a0, 0x23ff], [0x2460, 0x27bf],
  [0x3000, 0x30ff], [0x4e00, 0x9fff], [0xac00, 0xd7a3], [0xfb00, 0xfe6f], [0xff00, 0xfffd],
  [0x10000, 0x1007f], [0x11000, 0x1107f], [0x1d400, 0x1d7ff], [0x1f000, 0x1faff], [0x20000, 0x2a6df],
  [0xe0000, 0xe007f]];
const spaces = ['\u00a0', '\u2028', '\u2029', '\u3000', '\u0085', '\ufeff', '\u200b', '\u180e', '\u1680',
  '\u202f', '\u205f', '\u000b', '\u000c', '\r', '\r\n', '\n', '\t', ' '];
const words = ['the', 'The', ' of', "I'm", "'s", "'S", "'t", "'re", "'ve", "'m", "'ll", "'d", "'D", "don't",
  '<|endoftext|>', '<|endoftext', 'endoftext|>', '123', '4567', '١٢٣', 'Ⅻ', '½', '²', 'x²', 'é', 'e\u0301',
  'ñ', 'İ', 'ǅ', 'ﬁ', '😀', '👨\u200d👩\u200d👧', '🇯🇵', '…', '—', '...', 'http://a.b/c?d=1', '$$', '#!'];

function randomText() {
  if (rand() < 0.02) { // one long word: BPE over hundreds of bytes
    let s = '';
    for (let n = int(50, 400); n > 0; n--) s += String.fromCharCode(int(0x61, 0x7a));
    return s;
  }
  let s = '';
  for (let n = int(1, 30); n > 0; n--) {
    const r = rand();
    if (r < 0.3) s += pick(words);
    else if (r < 0.45) s += pick(spaces).repeat(int(1, 4));
    else {
      const [lo, hi] = pick(blocks);
      let c = int(lo, hi);
      if (c >= 0xd800 && c <= 0xdfff) c = 0x41; // no lone surrogates
      s += String.fromCodePoint(c);
    }
  }
  return s;
}

(async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-random-'));
  const vocab = path.join(tmp, 'vocab.json'), merges = path.join(tmp, 'merges.txt');
  fs.writeFileSync(vocab, zlib.gunzipSync(fs.readFileSync(path.join(assets, 'gpt2-vocab.json.gz'))));
  fs.writeFileSync(merges, zlib.gunzipSync(fs.readFileSync(path.join(assets, 'gpt2-merges.txt.gz'))));
  const base = new Tokenizer(await BPE.fromFile(vocab, merges));
  base.setPreTokenizer(byteLevelPreTokenizer(false));
  base.addSpecialTokens(['<|endoftext|>']);
  // The Node binding exports no ByteLevel decoder constructor: set it in the saved JSON.
  const file = path.join(tmp, 'tokenizer.json');
  base.save(file, false);
  const doc = JSON.parse(fs.readFileSync(file, 'utf8'));
  doc.decoder = { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true };
  fs.writeFileSync(file, JSON.stringify(doc));
  const tok = Tokenizer.fromFile(file);

  // Tokens that are not whole UTF-8 on their own, to split characters across ids when decoding.
  const partial = [];
  for (let id = 0; id < 50257; id++) {
    if ((await tok.decode([id], false)).includes('\ufffd')) partial.push(id);
  }
  const out = [];
  for (let i = 0; i < N_TEXT; i++) {
    const text = randomText();
    const ids = (await tok.encode(text)).getIds();
    out.push(JSON.stringify({ text, ids, decoded: await tok.decode(ids, false) }));
  }
  for (let i = 0; i < N_IDS; i++) {
    const ids = [];
    for (let n = int(1, 10); n > 0; n--) ids.push(rand() < 0.6 ? pick(partial) : int(0, 50256));
    out.push(JSON.stringify({ ids, decoded: await tok.decode(ids, false) }));
  }
  fs.writeFileSync(path.join(here, 'hf_random.jsonl.gz'), zlib.gzipSync(out.join('\n') + '\n', { level: 9 }));
  fs.rmSync(tmp, { recursive: true });
  console.log(`wrote ${out.length} cases (${partial.length} partial tokens)`);
})();
