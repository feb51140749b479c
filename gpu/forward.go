//go:build cgo

package gpu

import (
	"fmt"
	"math"
	"math/bits"
	"time"
	"unsafe"
)

// check validates a step against the runner's limits; the message names the bad input.
func (s *state) check(in *Step, next []int32, logits []float32) error {
	B := len(in.SeqLens)
	V := s.cfg.VocabSize
	switch {
	case B < 1 || B > s.opt.MaxBatch:
		return fmt.Errorf("gpu: step has %d sequences, want 1..%d", B, s.opt.MaxBatch)
	case len(in.Start) != B || len(in.Temperature) != B || len(in.TopK) != B || len(in.TopP) != B || len(in.Seed) != B:
		return fmt.Errorf("gpu: step with %d sequences has %d starts, %d temperatures, %d top-k, %d top-p, %d seeds; want %d each",
			B, len(in.Start), len(in.Temperature), len(in.TopK), len(in.TopP), len(in.Seed), B)
	case len(in.Tables) != B*s.kv.width:
		return fmt.Errorf("gpu: step has %d block table entries, want %d sequences x width %d", len(in.Tables), B, s.kv.width)
	case len(next) < B:
		return fmt.Errorf("gpu: next has room for %d tokens, want %d", len(next), B)
	case logits != nil && len(logits) < B*V:
		return fmt.Errorf("gpu: logits has %d values, want %d x %d", len(logits), B, V)
	case in.Held != nil && len(in.Held) != B:
		return fmt.Errorf("gpu: step with %d sequences has %d held-block counts, want %d", B, len(in.Held), B)
	}
	n := 0
	for i, l := range in.SeqLens {
		st := int(in.Start[i])
		if l < 1 || st < 0 || st+int(l) > s.opt.MaxSeqLen {
			return fmt.Errorf("gpu: sequence %d runs positions [%d, %d), want 1+ tokens within [0, %d)", i, st, st+int(l), s.opt.MaxSeqLen)
		}
		row, used := in.Tables[i*s.kv.width:(i+1)*s.kv.width], (st+int(l)-1)/s.kv.bs+1
		if in.Held != nil && (int(in.Held[i]) < used || int(in.Held[i]) > s.kv.width) {
			return fmt.Errorf("gpu: sequence %d holds %d blocks, want %d..%d (its positions' blocks to the table's width)", i, in.Held[i], used, s.kv.width)
		}
		held := used
		if in.Held != nil {
			held = int(in.Held[i])
		}
		for j := range held {
			if row[j] < 0 || int(row[j]) >= s.kv.numBlocks {
				return fmt.Errorf("gpu: sequence %d block table entry %d is %d, want 0..%d", i, j, row[j], s.kv.numBlocks-1)
			}
		}
		n += int(l)
	}
	if n != len(in.Tokens) {
		return fmt.Errorf("gpu: step has %d tokens, its sequence lengths add up to %d", len(in.Tokens), n)
	}
	for i, t := range in.Tokens {
		if t < 0 || int(t) >= V {
			return fmt.Errorf("gpu: token %d is %d, want 0..%d", i, t, V-1)
		}
	}
	return nil
}

// step runs on the worker: a decode step (one token per sequence) replays its bucket's graph
// when graphs are on; a step with more tokens runs eagerly, in chunks of whole sequences when the
// step has more tokens than the activation buffers hold, or from a graph of its shape (multi.go).
func (s *state) step(in *Step, next []int32, logits []float32) error {
	if err := s.check(in, next, logits); err != nil {
		return fmt.Errorf("%w: %w", ErrBadStep, err)
	}
	if done, err := s.takeAhead(in, next, logits); done || err != nil {
		return err
	}
	B := len(in.SeqLens)
	s.greedy = greedyStep(in)
	if s.opt.Graphs && len(in.Tokens) == B {
		return s.decodeGraph(in, next, logits)
	}
	tok := 0
	for first := 0; first < B; {
		end, n := first, 0
		for end < B && n+int(in.SeqLens[end]) <= s.opt.MaxTokens {
			n += int(in.SeqLens[end])
			end++
		}
		nt := s.fill(in, first, end, tok, 0)
		if err := s.ensureWarm(nt, end-first); err != nil {
			return err
		}
		run := s.eager
		if first == 0 && end == B { // the whole step in one pass: it may run from a graph (multi.go)
			run = s.runMulti
		}
		if err := run(nt, end-first); err != nil {
			return err
		}
		if err := s.collect(end-first, next[first:end], rowsFrom(logits, first, s.cfg.VocabSize)); err != nil {
			return err
		}
		tok += n
		first = end
	}
	return nil
}

// greedyStep reports whether every row of in samples greedily (engine/sample.go's rule:
// temperature <= 0 or top-k 1).
func greedyStep(in *Step) bool {
	for i := range in.SeqLens {
		if in.Temperature[i] > 0 && in.TopK[i] != 1 {
			return false
		}
	}
	return true
}

// graphKey names a captured step graph: its batch bucket, whether its sampler is the greedy one
// (state.greedy), and, for a predicted step's graph, the pinned buffer its sampler writes
// (ahead.go; 0 for the others).
type graphKey struct {
	bucket, out int
	greedy      bool
}

func rowsFrom(logits []float32, first, V int) []float32 {
	if logits == nil {
		return nil
	}
	return logits[first*V:]
}

// decodeGraph pads the step to its bucket and replays (capturing first if needed) its graph,
// which holds the whole step: the metadata upload, the forward pass and the sampler, which writes
// the ids straight into pinned host memory. The host only fills the metadata, launches and waits.
func (s *state) decodeGraph(in *Step, next []int32, logits []float32) error {
	B := len(in.SeqLens)
	bucket := bucketFor(s.buckets, B)
	s.fill(in, 0, B, 0, bucket)
	g, err := s.graphFor(bucket)
	if err != nil {
		return err
	}
	if err = s.rt.replay(g); err != nil {
		return err
	}
	return s.collect(B, next, logits)
}

// graphFor returns the bucket's graph for s.greedy, capturing it on first use. Before capturing,
// the same step runs once eagerly so cuBLAS picks and loads its kernels outside the capture;
// both write the same values to the same KV slots, so the repeat is harmless.
func (s *state) graphFor(bucket int) (graphExec, error) {
	key := graphKey{bucket: bucket, greedy: s.greedy}
	if g, ok := s.graphs[key]; ok {
		return g, nil
	}
	if err := s.ensureWarm(bucket, bucket); err != nil { // cuBLAS's first call, outside the capture
		return graphExec{}, err
	}
	t0 := time.Now()
	body := func() error {
		if err := s.upload(); err != nil {
			return err
		}
		s.advance = true
		defer func() { s.advance = false }()
		return s.forward(bucket, bucket)
	}
	if err := body(); err != nil {
		return graphExec{}, err
	}
	if err := s.rt.sync(); err != nil {
		return graphExec{}, err
	}
	g, err := s.rt.capture(body)
	if err != nil {
		return graphExec{}, fmt.Errorf("gpu: capturing the batch-%d decode graph: %w", bucket, err)
	}
	s.graphs[key] = g
	s.record("graph capture", fmt.Sprintf("batch %d%s", bucket, samplerName(s.greedy)), time.Since(t0))
	return g, nil
}

// fill writes the metadata of sequences [first, end) of in (their tokens start at in.Tokens[tok])
// into the pinned host buffers, padded with scratch rows up to pad sequences (0: no padding).
// It returns the number of token rows. Padded rows run token 0 at position 0 of the scratch
// block and sample greedily; their results are dropped.
func (s *state) fill(in *Step, first, end, tok, pad int) int {
	m, w, bs := &s.meta, s.kv.width, int32(s.kv.bs)
	t := 0
	for i := first; i < end; i++ {
		b := i - first
		st, l := in.Start[i], in.SeqLens[i]
		row := in.Tables[i*w : (i+1)*w]
		copy(m.tables[b*w:(b+1)*w], row)
		for k := int32(0); k < l; k++ {
			p := st + k
			m.ids[t] = in.Tokens[tok]
			m.pos[t] = p
			m.slot[t] = row[p/bs]*bs + p%bs
			m.tokSeq[t] = int32(b)
			t++
			tok++
		}
		m.last[b] = int32(t - 1)
		m.outPos[b] = st + l
		m.temp[b], m.topk[b], m.topp[b], m.seed[b] = in.Temperature[i], in.TopK[i], in.TopP[i], in.Seed[i]
	}
	for b := end - first; b < pad; b++ {
		s.padRow(b, t)
		t++
	}
	return t
}

// captureAhead captures every bucket's graphs not captured yet, for both samplers (greedy
// and sampling), on scratch rows only (Options.CaptureAhead, Runner.Prewarm).
func (s *state) captureAhead() error {
	for _, b := range s.buckets {
		for _, greedy := range []bool{true, false} {
			if _, ok := s.graphs[graphKey{bucket: b, greedy: greedy}]; ok {
				continue
			}
			for i := 0; i < b; i++ {
				s.padRow(i, i)
			}
			s.greedy = greedy
			if _, err := s.graphFor(b); err != nil {
				return err
			}
		}
	}
	return s.rt.sync()
}

// padRow makes sequence b a one-token scratch row at token row t.
func (s *state) padRow(b, t int) {
	m, w := &s.meta, s.kv.width
	scratch := s.kv.scratchBlock()
	for j := b * w; j < (b+1)*w; j++ {
		m.tables[j] = scratch
	}
	m.ids[t], m.pos[t], m.slot[t], m.tokSeq[t] = 0, 0, scratch*int32(s.kv.bs), int32(b)
	m.last[b], m.outPos[b] = int32(t), 1
	m.temp[b], m.topk[b], m.topp[b], m.seed[b] = 0, 0, 0, 0
}

// upload enqueues meta_copy of the metadata to the device. The previous step ended with a stream
// synchronization, so no earlier copy from the pinned buffer is still in flight.
func (s *state) upload() error {
	n := int(s.meta.bytes / 16) // align keeps every array, so the whole, a multiple of 256 bytes
	return s.rt.launch(s.rt.fn.metaCopy, (n+255)/256, 1, 256, 0, pArg(s.meta.dev), pArg(s.meta.hostDev), iArg(n))
}

// collect waits for the stream, whose work ends with the sampler writing the ids into the mapped
// pinned meta.next, and hands them (and, for tests, the logits) to the caller.
func (s *state) collect(B int, next []int32, logits []float32) error {
	rt := s.rt
	if err := rt.sync(); err != nil {
		return err
	}
	copy(next[:B], s.meta.next[:B])
	if s.prof != nil {
		s.prof.end()
	}
	if logits != nil {
		// Tests only: download the padded rows, then drop the padding.
		V, vp := s.cfg.VocabSize, paddedVocab(s.cfg.VocabSize)
		if len(s.logitsHost) < B*vp {
			s.logitsHost = make([]float32, B*vp)
		}
		if err := rt.download(ptrOf(s.logitsHost), s.act.logits, int64(B*vp)*4); err != nil {
			return err
		}
		if err := rt.sync(); err != nil {
			return err
		}
		for b := range B {
			copy(logits[b*V:(b+1)*V], s.logitsHost[b*vp:b*vp+V])
		}
	}
	return nil
}

// forward enqueues the whole model for n token rows of nb sequences: embeddings, L blocks, the
// final norm of each sequence's last row, the logits and the sampler. Nothing here synchronizes
// or allocates, so it can be captured. A step of one token per sequence (n == nb: decode) runs
// the fused attention kernel that also adds the QKV bias and writes the KV cache.
func (s *state) forward(n, nb int) error {
	rt, c, a, m, w := s.rt, s.cfg, &s.act, &s.meta, s.wts
	if s.prof != nil {
		s.prof.begin()
	}
	first, chain := s.splitRows(n, nb), n // chain: the rows one chain of kernels runs
	if first > 0 {
		chain = first
	}
	s.pdlNow = s.pdl && s.useSmall(gemmRows(chain))
	var err error
	ids, pos := pArg(m.devAt(m.off.ids)), pArg(m.devAt(m.off.pos))
	switch {
	case s.embedded: // the step before's sampler embedded the rows (embedsNext)
	case rowWarp(c.NEmbd):
		var stats devPtr // folded norms: embed_ln_warp writes x in fp16 and its statistics instead of ln_1(x)
		if s.foldNow(chain) {
			stats = a.stats
		}
		err = rt.launch(rt.fn.embedLNW, (n+lnwRows-1)/lnwRows, 1, 32*lnwRows, 0, pArg(a.x), pArg(a.xln), ids, pos,
			pArg(w.wte), pArg(w.wpe), pArg(w.layers[0].ln1w), pArg(w.layers[0].ln1b), iArg(c.NEmbd), fArg(c.Eps), iArg(n),
			pArg(stats), iArg(statStride(c.NEmbd)))
		s.mark("embed+ln")
	default:
		err = rt.launch(rt.fn.embedLN, n, 1, lnThreads, 0, pArg(a.x), pArg(a.xln), ids, pos,
			pArg(w.wte), pArg(w.wpe), pArg(w.layers[0].ln1w), pArg(w.layers[0].ln1b), iArg(c.NEmbd), fArg(c.Eps))
		s.mark("embed+ln")
	}
	if err != nil {
		return err
	}
	if first > 0 {
		return s.forwardSplit(n, first)
	}
	r := s.rowsFrom(0, n)
	if err = s.layers(&r, nb, false); err != nil {
		return err
	}
	return s.head(nb, a.xlast)
}

// layers enqueues the transformer blocks for rows r of a step of nb sequences. lnfAll: r is a
// lane of a decode step (see mlpBlock); a step is a decode step when it has a row per sequence.
func (s *state) layers(r *rows, nb int, lnfAll bool) error {
	for l := range s.cfg.NLayer {
		if err := s.attentionBlock(l, r, r.n == nb || lnfAll); err != nil {
			return err
		}
		if err := s.mlpBlock(l, r, nb, lnfAll); err != nil {
			return err
		}
	}
	return nil
}

// launch enqueues one of gpt2.cu's kernels after the first (every one of them waits with
// griddepcontrol.wait before reading what an earlier kernel wrote): with programmatic dependent
// launch in small_gemm steps (s.pdlNow), so its launch and prologue overlap the previous kernel's
// end. Between cuBLAS GEMMs, which do not trigger their dependents early, PDL measured slower
// (bench/RESULTS.md), so those steps launch plainly.
func (s *state) launch(f kernel, gx, gy, bx, shmem int, args ...arg) error {
	if s.pdlNow {
		return s.rt.launchEx(f, gx, gy, bx, shmem, true, 1, args...)
	}
	return s.rt.launch(f, gx, gy, bx, shmem, args...)
}

const lnThreads = 256 // block of the row kernels (embed_ln, residual_ln, qkv_bias_kv_write)

// lnwRows is LNW_ROWS of gpt2.cu: rows per block of the warp-per-row kernels (*_warp), which
// need C % 128 == 0 and C <= 1024 (rowWarp); other widths run the block-per-row kernels.
const lnwRows = 2

func rowWarp(C int) bool { return C%128 == 0 && C <= 1024 }

// residualLN enqueues x(n,C) += y + bias for r's n rows, y the sum of splits partials of a GEMM
// of m rows (m*C floats apart), then out = LN(x) with lnw, lnb.
func (s *state) residualLN(r *rows, m, splits int, bias, lnw, lnb, out devPtr) error {
	rt, a, C, eps, n := s.rt, &r.a, s.cfg.NEmbd, fArg(s.cfg.Eps), r.n
	if rowWarp(C) {
		return s.launch(rt.fn.residualLNW, (n+lnwRows-1)/lnwRows, 1, 32*lnwRows, 0, pArg(a.x), pArg(a.y), iArg(splits),
			arg(m*C), pArg(bias), pArg(lnw), pArg(lnb), pArg(out), iArg(C), eps, iArg(n))
	}
	return s.launch(rt.fn.residualLN, n, 1, lnThreads, 0, pArg(a.x), pArg(a.y), iArg(splits), arg(m*C), pArg(bias),
		pArg(lnw), pArg(lnb), pArg(out), iArg(C), eps)
}

// residualLNLast is residualLN for the last row of each of nb sequences, not stored back to x:
// xlast(nb,C) = LN(x + y + bias), the partials of a GEMM of m rows.
func (s *state) residualLNLast(m, nb, splits int, bias, lnw, lnb devPtr) error {
	rt, a, C, eps := s.rt, &s.act, s.cfg.NEmbd, fArg(s.cfg.Eps)
	last := pArg(s.meta.devAt(s.meta.off.last))
	if rowWarp(C) {
		return s.launch(rt.fn.residualLNLastW, (nb+lnwRows-1)/lnwRows, 1, 32*lnwRows, 0, pArg(a.x), pArg(a.y), iArg(splits),
			arg(m*C), pArg(bias), pArg(lnw), pArg(lnb), pArg(a.xlast), last, iArg(C), eps, iArg(nb))
	}
	return s.launch(rt.fn.residualLNLast, nb, 1, lnThreads, 0, pArg(a.x), pArg(a.y), iArg(splits), arg(m*C), pArg(bias),
		pArg(lnw), pArg(lnb), pArg(a.xlast), last, iArg(C), eps)
}

// attentionBlock enqueues layer l's QKV GEMM, attention (with the KV write), output projection
// and the residual add + ln_2 into r's xln.
func (s *state) attentionBlock(l int, r *rows, decode bool) error {
	rt, c, a, m, L, n := s.rt, s.cfg, &r.a, &s.meta, &s.wts.layers[l], r.n
	C, NH := c.NEmbd, c.NHead
	kc, vc := pArg(s.kv.keys(l)), pArg(s.kv.values(l))
	slot, tokSeq, pos, tables := pArg(r.slot), pArg(r.tokSeq), pArg(r.pos), pArg(m.devAt(m.off.tables))
	scale := fArg(float32(1 / math.Sqrt(float64(C/NH))))
	gr := gemmRows(n) // the cuBLAS GEMMs' rows (shapes.go)
	small, fold := s.useSmall(gr), s.foldNow(n)
	var err error
	splits := 1 // K-slice partials of y the residual add sums
	switch {
	case fold: // ln_1 in the epilogue, from the statistics of the embedding or the last layer's MLP
		parts := C / foldParts
		if l > 0 {
			parts = C / (32 * s.small.fcProj.nt)
		}
		err = s.smallGEMM(a.y, a.xln, L.attnWp, n, C, 3*C, s.small.qkv,
			gemmEpi{kind: epiLN, bias: L.qkvD, colc: L.qkvC, stats: a.stats, parts: parts})
	case small:
		err = s.smallGEMM(a.y, a.xln, L.attnWp, n, C, 3*C, s.small.qkv, gemmEpi{})
	default:
		err = rt.gemm(a.y, a.xln, L.attnW, gr, C, 3*C, true)
	}
	if err != nil {
		return err
	}
	s.mark("gemm qkv")
	if decode {
		attn := rt.fn.attnDecodeContig
		if s.opt.Paged {
			attn = rt.fn.attnDecodePaged
		}
		err = s.launch(attn, n, NH, attnThreads, 4*s.kv.width, pArg(a.att), pArg(a.y), pArg(L.attnB), slot, kc, vc,
			tokSeq, pos, tables, iArg(s.kv.width), iArg(s.kv.bs), iArg(C), iArg(NH), scale)
	} else {
		if err = s.launch(rt.fn.qkvKV, n, 1, lnThreads, 0, pArg(a.qkv), pArg(a.y), pArg(L.attnB), kc, vc, slot, iArg(C)); err != nil {
			return err
		}
		s.mark("qkv bias + kv write")
		attn := rt.fn.attnContig
		if s.opt.Paged {
			attn = rt.fn.attnPaged
		}
		err = s.launch(attn, n, NH, attnThreads, 4*s.kv.width, pArg(a.att), pArg(a.qkv), kc, vc,
			tokSeq, pos, tables, iArg(s.kv.width), iArg(s.kv.bs), iArg(C), iArg(NH), scale)
	}
	if err != nil {
		return err
	}
	s.mark("attention")
	switch {
	case fold: // the residual add in the epilogue; ln_2 waits for the MLP's first GEMM
		err = s.smallGEMM(a.x, a.att, L.projWp, n, C, C, s.small.proj, gemmEpi{kind: epiRes, bias: L.projB, stats: a.stats, x16: a.xln})
	case small:
		err = s.smallGEMM(a.y, a.att, L.projWp, n, C, C, s.small.proj, gemmEpi{})
	case s.splitProj(gr):
		splits = projSplits
		err = rt.gemmSplitK(a.y, a.att, L.projW, gr, C, C, splits)
	default:
		err = rt.gemm(a.y, a.att, L.projW, gr, C, C, true)
	}
	if err != nil {
		return err
	}
	s.mark("gemm attn proj")
	if fold {
		return nil
	}
	if err = s.residualLN(r, gr, splits, L.projB, L.ln2w, L.ln2b, a.xln); err != nil {
		return err
	}
	s.mark("residual+ln")
	return nil
}

// mlpBlock enqueues layer l's MLP and the residual add + the next norm: the next layer's ln_1
// into xln, or after the last layer ln_f of each sequence's last row into act.xlast; with lnfAll
// (a decode lane: every row is its sequence's last) ln_f of every row into xln.
func (s *state) mlpBlock(l int, r *rows, nb int, lnfAll bool) error {
	c, w := s.cfg, s.wts
	L := &w.layers[l]
	m, splits := gemmRows(r.n), 1
	var err error
	if s.foldNow(r.n) {
		// The residual add is in the second GEMM, except in the last layer: there its plain
		// product (n rows in y) goes through the final norm's kernel below.
		var done bool
		if done, err = s.mlpFolded(l, r); done || err != nil {
			return err
		}
		m = r.n
	} else if splits, err = s.mlpGEMMs(L, r, m); err != nil {
		return err
	}
	switch {
	case l+1 < c.NLayer:
		nx := &w.layers[l+1]
		err = s.residualLN(r, m, splits, L.fcProjB, nx.ln1w, nx.ln1b, r.a.xln)
	case lnfAll:
		err = s.residualLN(r, m, splits, L.fcProjB, w.lnfw, w.lnfb, r.a.xln)
	default:
		// Only each sequence's last row goes through the final norm and the LM head.
		err = s.residualLNLast(m, nb, splits, L.fcProjB, w.lnfw, w.lnfb)
	}
	if err != nil {
		return err
	}
	s.mark("residual+ln")
	return nil
}

// foldNow reports whether a chain of n token rows folds its norms into its GEMMs (fold.go).
func (s *state) foldNow(n int) bool { return s.fold && s.useSmall(gemmRows(n)) }

// mlpFolded enqueues layer l's MLP with the folded norms: ln_2 in the first GEMM's epilogue,
// and in every layer but the last the residual add (and the statistics of the next ln_1) in the
// second's, done. In the last layer the second GEMM leaves its plain product in y.
func (s *state) mlpFolded(l int, r *rows) (done bool, err error) {
	a, L, C, F, n := &r.a, &s.wts.layers[l], s.cfg.NEmbd, s.cfg.Inner, r.n
	err = s.smallGEMM(a.h, a.xln, L.fcWp, n, C, F, s.small.fc,
		gemmEpi{kind: epiLNGELU, bias: L.fcD, colc: L.fcC, stats: a.stats, parts: C / (32 * s.small.proj.nt)})
	if err != nil {
		return false, err
	}
	s.mark("gemm fc")
	if l+1 < s.cfg.NLayer {
		err = s.smallGEMM(a.x, a.h, L.fcProjWp, n, F, C, s.small.fcProj, gemmEpi{kind: epiRes, bias: L.fcProjB, stats: a.stats, x16: a.xln})
		done = true
	} else {
		err = s.smallGEMM(a.y, a.h, L.fcProjWp, n, F, C, s.small.fcProj, gemmEpi{})
	}
	s.mark("gemm fc proj")
	return done, err
}

// mlpGEMMs enqueues h = gelu(xln fcW + fcB) and y = h fcProjW for n token rows (m GEMM rows) and
// returns how many K-slice partials of y the residual add must sum.
func (s *state) mlpGEMMs(L *devLayer, r *rows, m int) (int, error) {
	rt, c, a, n := s.rt, s.cfg, &r.a, r.n
	C, F := c.NEmbd, c.Inner
	if s.useSmall(m) {
		if err := s.smallGEMM(a.h, a.xln, L.fcWp, n, C, F, s.small.fc, gemmEpi{kind: epiGELU, bias: L.fcB}); err != nil {
			return 0, err
		}
		s.mark("gemm fc")
		if err := s.smallGEMM(a.y, a.h, L.fcProjWp, n, F, C, s.small.fcProj, gemmEpi{}); err != nil {
			return 0, err
		}
		s.mark("gemm fc proj")
		return 1, nil
	}
	if s.lt != nil {
		// cuBLASLt adds the bias, applies GELU and writes h itself.
		if err := s.fcGELU(m, L); err != nil {
			return 0, err
		}
		s.mark("gemm fc")
	} else {
		if err := rt.gemm(a.y, a.xln, L.fcW, m, C, F, true); err != nil {
			return 0, err
		}
		s.mark("gemm fc")
		if err := s.launch(rt.fn.biasGELU, (n*F/2+255)/256, 1, 256, 0, pArg(a.h), pArg(a.y), pArg(L.fcB), iArg(F), iArg(n*F)); err != nil {
			return 0, err
		}
		s.mark("bias+gelu")
	}
	splits := 1
	var err error
	if s.splitFCProj(m) {
		splits = fcProjSplits
		err = rt.gemmSplitK(a.y, a.h, L.fcProjW, m, F, C, splits)
	} else {
		err = rt.gemm(a.y, a.h, L.fcProjW, m, F, C, true)
	}
	if err != nil {
		return 0, err
	}
	s.mark("gemm fc proj")
	return splits, nil
}

// head enqueues the LM head on the nb final-normed last rows in xlast (fp16, (nb, C)) and the
// sampler.
func (s *state) head(nb int, xlast devPtr) error {
	rt, c, a := s.rt, s.cfg, &s.act
	vp := paddedVocab(c.VocabSize)
	if err := rt.gemm(a.logits, xlast, s.wts.wteT, gemmRows(nb), c.NEmbd, vp, true); err != nil {
		return err
	}
	s.mark("gemm lm head")
	return s.sampler(nb)
}

// sampler enqueues the sampler of nb rows of logits: argmax_next alone when every row is greedy
// (s.greedy), otherwise argmax_part's chunked argmax for the greedy rows, then sample.
func (s *state) sampler(nb int) error {
	rt, c, a, m := s.rt, s.cfg, &s.act, &s.meta
	vp, chunks := paddedVocab(c.VocabSize), argmaxChunks(nb)
	// The metadata the sampler moves on (gpt2.cu Meta): null ids for steps that are not a decode
	// graph's.
	meta := [8]arg{0, 0, 0, 0, 0, 0, 0, iArg(s.scratchSlot())}
	if s.advance {
		meta = [8]arg{pArg(m.devAt(m.off.ids)), pArg(m.devAt(m.off.pos)), pArg(m.devAt(m.off.slot)),
			pArg(m.devAt(m.off.outPos)), 0, iArg(s.kv.width), iArg(bits.TrailingZeros(uint(s.kv.bs))), iArg(s.scratchSlot())}
		if s.opt.Paged {
			meta[4] = pArg(m.devAt(m.off.tables))
		}
	}
	if s.greedy {
		var embed [8]arg // the next step's embedding, for a step queued ahead without its own
		if s.advance && s.embedsNext(nb) {
			w := s.wts
			embed = [8]arg{pArg(a.x), pArg(a.xln), pArg(w.wte), pArg(w.wpe), pArg(w.layers[0].ln1w), pArg(w.layers[0].ln1b),
				iArg(c.NEmbd), fArg(c.Eps)}
		}
		err := rt.launch(rt.fn.argmaxNext, nb, chunks, 256, 0, pArg(m.nextDev), pArg(a.logits), iArg(c.VocabSize),
			iArg(vp), pArg(a.amax), pArg(a.done), meta[0], meta[1], meta[2], meta[3], meta[4], meta[5], meta[6], meta[7],
			embed[0], embed[1], embed[2], embed[3], embed[4], embed[5], embed[6], embed[7])
		s.mark("sample")
		return err
	}
	if err := rt.launch(rt.fn.argmaxPart, nb, chunks, 256, 0, pArg(a.logits), iArg(c.VocabSize), iArg(vp), pArg(a.amax)); err != nil {
		return err
	}
	err := rt.launch(rt.fn.sample, nb, 1, 1024, 0, pArg(m.nextDev), pArg(a.logits), iArg(c.VocabSize), iArg(vp), pArg(m.devAt(m.off.temp)),
		pArg(m.devAt(m.off.topk)), pArg(m.devAt(m.off.topp)), pArg(m.devAt(m.off.seed)), pArg(m.devAt(m.off.outPos)), pArg(a.weights),
		pArg(a.amax), iArg(chunks), meta[0], meta[1], meta[2], meta[3], meta[4], meta[5], meta[6], meta[7])
	s.mark("sample")
	return err
}

// embedsNext reports whether a decode graph of n rows leaves the embedding of the step after it
// to its sampler (sample.cu argmax_next EMBED), so that a step queued ahead (ahead.go) starts at
// its first layer: one kernel less a step. Only the greedy sampler does it, for rows the warp
// kernels embed (rowWarp) in a chain whose norms are not folded (folded steps need the row
// statistics that embed_ln_warp writes instead) and not split into lanes.
func (s *state) embedsNext(n int) bool {
	return s.greedy && rowWarp(s.cfg.NEmbd) && !s.foldNow(n) && s.splitRows(n, n) == 0
}

// samplerName is how the ledger tells a step's graphs apart by sampler.
func samplerName(greedy bool) string {
	if greedy {
		return ""
	}
	return ", sampling"
}

// ptrOf is the address of a slice's first element.
func ptrOf[T any](s []T) unsafe.Pointer { return unsafe.Pointer(&s[0]) }
