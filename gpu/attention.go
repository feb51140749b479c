//go:build cgo

package gpu

import "rosetop/gpu/cu"

// The attention kernels of gpt2.cu: causal self-attention of each token row over its sequence's
// cached keys and values, found through the block tables (tables (B, width), bs positions a
// block; a contiguous cache is one block per sequence). A block of attnThreads per (row, head),
// with 4 bytes of shared memory per table entry.

const attnThreads = 128 // ATT_THREADS in gpt2.cu

// attentionDecode appends the attention of a step of one token per sequence (n rows): it adds
// the QKV bias to y (n, 3C), writes each row's key and value into the caches kc, vc at slot,
// and writes out (n, C) (attention_decode_paged or _contig).
func (p *program) attentionDecode(pdl, paged bool, out, y, bias, slot, kc, vc, tokSeq, pos, tables cu.Ptr, width, bs, C, NH int,
	scale float32, n int) {
	k := kAttnDecodeContig
	if paged {
		k = kAttnDecodePaged
	}
	p.launch("attention", k, n, NH, attnThreads, 4*width, pdl, cu.P(out), cu.P(y), cu.P(bias), cu.P(slot), cu.P(kc), cu.P(vc),
		cu.P(tokSeq), cu.P(pos), cu.P(tables), cu.I(width), cu.I(bs), cu.I(C), cu.I(NH), cu.F(scale))
}

// qkvBiasKV appends qkv(n, 3C) = y + bias in fp16 and each row's key and value written into the
// caches kc, vc at slot (qkv_bias_kv_write), for attention below.
func (p *program) qkvBiasKV(pdl bool, qkv, y, bias, kc, vc, slot cu.Ptr, C, n int) {
	p.launch("qkv bias + kv write", kQKVKV, n, 1, lnThreads, 0, pdl, cu.P(qkv), cu.P(y), cu.P(bias), cu.P(kc), cu.P(vc),
		cu.P(slot), cu.I(C))
}

// attention appends out(n, C), the attention of the n rows of qkv (n, 3C) over the cached keys
// and values (attention_paged or _contig).
func (p *program) attention(pdl, paged bool, out, qkv, kc, vc, tokSeq, pos, tables cu.Ptr, width, bs, C, NH int, scale float32,
	n int) {
	k := kAttnContig
	if paged {
		k = kAttnPaged
	}
	p.launch("attention", k, n, NH, attnThreads, 4*width, pdl, cu.P(out), cu.P(qkv), cu.P(kc), cu.P(vc), cu.P(tokSeq),
		cu.P(pos), cu.P(tables), cu.I(width), cu.I(bs), cu.I(C), cu.I(NH), cu.F(scale))
}
