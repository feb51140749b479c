package engine

import (
	"fmt"
	"math"
	"slices"
	"sync"
)

// MaxTopLogprobs is the most alternatives a sequence may ask for a token (vLLM's default
// max_logprobs, OpenAI's top_logprobs limit).
const MaxTopLogprobs = 20

// Logprob is a token and its log-probability under the model's next-token distribution: the
// log-softmax of the raw logits, before temperature, top-k or top-p (vLLM's default logprobs
// mode, "raw_logprobs"). A token whose probability underflows has -Inf.
type Logprob struct {
	Token   int32
	Logprob float32
}

// TokenLogprobs is what a step reports of one sampled token when its sequence asks
// (SeqStep.Logprobs), or of one prompt token (SeqStep.PromptLogprobs): the token's own
// log-probability and the TopLogprobs most likely tokens', most likely first (ties: the lower id
// first). The sampled token may be among Top or not.
type TokenLogprobs struct {
	Sampled Logprob
	Top     []Logprob
	// Rank is Sampled's rank in the row: how many tokens have a logit at least its own (itself
	// included; non-finite logits count as -Inf), so 1 for the most likely (vLLM's rank).
	Rank int
}

// FillLogprobs writes into out the log-probabilities of sampled and of the top most likely
// tokens of one row of logits (V wide), reusing out.Top's memory, and sampled's Rank. Non-finite
// logits count as -Inf (a NaN logit never ranks ahead of a finite one; a sampled token outside
// the row ranks V, as a -Inf one). top is clamped to [0, min(MaxTopLogprobs, V)]. The top tokens
// are ranked by logit (ties: the lower id first), which orders them as their logprobs.
func FillLogprobs(out *TokenLogprobs, logits []float32, sampled int32, top int) {
	k := goKernels() // the reference's row scans: the same results as any set's
	fillLogprobs(out, &k, logits, sampled, top, func(m float32, _ bool) float64 {
		var sum float64
		for _, x := range logits {
			if finite32(x) {
				sum += math.Exp(float64(x) - float64(m))
			}
		}
		return sum
	})
}

// logprobs is FillLogprobs with k's row scans and vector exponential over a float32 copy of the
// row in s.lp: the exponentials within float32 rounding, summed in float64 (logprobs within
// ~1e-6 of FillLogprobs'), a fraction of its time. s belongs to the calling goroutine.
func (s *SampleScratch) logprobs(k *kernels, out *TokenLogprobs, logits []float32, sampled int32, top int) {
	fillLogprobs(out, k, logits, sampled, top, func(m float32, clean bool) float64 {
		if len(s.lp) < len(logits) {
			s.lp = make([]float32, len(logits))
		}
		buf := s.lp[:len(logits)]
		if clean { // every logit finite: the row as it is, summed in four float64 lanes
			copy(buf, logits)
			k.exp(buf, m)
			return sum4(buf)
		}
		for i, x := range logits {
			if !finite32(x) {
				x = m // a number for the kernel; left out of the sum below
			}
			buf[i] = x
		}
		k.exp(buf, m)
		var sum float64
		for i, e := range buf {
			if finite32(logits[i]) {
				sum += float64(e)
			}
		}
		return sum
	})
}

// sum4 is the sum of xs in float64, four running sums (a chain a lane, not one long chain).
func sum4(xs []float32) float64 {
	var a, b, c, d float64
	i := 0
	for ; i+4 <= len(xs); i += 4 {
		a += float64(xs[i])
		b += float64(xs[i+1])
		c += float64(xs[i+2])
		d += float64(xs[i+3])
	}
	for ; i < len(xs); i++ {
		a += float64(xs[i])
	}
	return (a + b) + (c + d)
}

// fillLogprobs is FillLogprobs with k's row scans and sumExp(m, clean), the sum of exp(x - m)
// over the row's finite logits x, given their largest m; clean: every logit is finite.
func fillLogprobs(out *TokenLogprobs, k *kernels, logits []float32, sampled int32, top int, sumExp func(m float32, clean bool) float64) {
	// Sampled's rank is counted in the pass that finds m: the logits >= its own less the +Inf ones
	// (which count as -Inf). A non-finite (or absent) sampled logit is NaN here, which nothing
	// passes: as -Inf it ranks last, every token at least its own.
	s := float32(math.NaN())
	if sampled >= 0 && int(sampled) < len(logits) && finite32(logits[sampled]) {
		s = logits[sampled]
	}
	// log-softmax: x - (m + log sum exp(x - m)).
	m, ge, posInf, notLow := k.scan(logits, s) // notLow: the logits neither NaN nor -Inf
	bad := len(logits) - notLow + posInf       // NaN or infinite
	out.Rank = ge - posInf
	if !finite32(s) {
		out.Rank = len(logits)
	}
	lse := math.Inf(-1) // no finite logit: every logprob is -Inf
	if finite32(m) {
		lse = float64(m) + math.Log(sumExp(m, bad == 0))
	}
	lp := func(id int32) float32 {
		x := logits[id]
		if !finite32(x) || math.IsInf(lse, 0) || math.IsNaN(lse) {
			return float32(math.Inf(-1))
		}
		return float32(float64(x) - lse)
	}
	out.Sampled = Logprob{Token: sampled, Logprob: float32(math.Inf(-1))}
	if sampled >= 0 && int(sampled) < len(logits) {
		out.Sampled.Logprob = lp(sampled)
	}
	out.Top = topLogits(out.Top[:0], k, logits, max(0, min(top, MaxTopLogprobs, len(logits))))
	for i := range out.Top {
		out.Top[i].Logprob = lp(out.Top[i].Token)
	}
}

// topLogits appends to list (empty) the top best tokens of logits by raw logit, non-finite ones
// as -Inf, ties the lower id first: a running insertion into a list of at most top entries.
func topLogits(list []Logprob, k *kernels, logits []float32, top int) []Logprob {
	if top == 0 {
		return list
	}
	key := func(x float32) float32 {
		if finite32(x) {
			return x
		}
		return float32(math.Inf(-1))
	}
	better := func(a, b Logprob) bool { return a.Logprob > b.Logprob || a.Logprob == b.Logprob && a.Token < b.Token }
	// Once the list is full, thr is its last logit: ids come in ascending order, so a logit not
	// above it (or NaN) cannot enter, nor +Inf (as -Inf), which the full check below turns away.
	// k.above jumps to the next logit above thr: most of the row is not (~top ln(V/top) are).
	full, thr := false, float32(0)
	for id := 0; id < len(logits); id++ {
		if full {
			if id = k.above(logits, id, thr); id == len(logits) {
				break
			}
		}
		c := Logprob{Token: int32(id), Logprob: key(logits[id])}
		if len(list) == top && !better(c, list[top-1]) {
			continue
		}
		i, _ := slices.BinarySearchFunc(list, c, func(e, t Logprob) int {
			if better(e, t) {
				return -1
			}
			return 1 // e after t: t goes before e
		})
		if len(list) < top {
			list = append(list, Logprob{})
		}
		copy(list[i+1:], list[i:len(list)-1])
		list[i] = c
		if len(list) == top {
			full, thr = true, list[top-1].Logprob
		}
	}
	return list
}

// finite32 reports whether x is neither NaN nor infinite.
func finite32(x float32) bool { return x >= -math.MaxFloat32 && x <= math.MaxFloat32 }

// asks checks b's requests for logprobs (wantsLogprobs) and prompt logprobs (wantsPromptLogprobs)
// and reports whether any sequence makes each.
func (b *Batch) asks() (lp, plp bool, err error) {
	if lp, err = b.wantsLogprobs(); err != nil {
		return false, false, err
	}
	if plp, err = b.wantsPromptLogprobs(); err != nil {
		return false, false, err
	}
	return lp, plp, nil
}

// wantsLogprobs reports whether any sequence of b asks for logprobs, after checking that those
// that do ask for 0..MaxTopLogprobs alternatives and that b.Logprobs has an entry for each
// sequence (ErrBadBatch otherwise).
func (b *Batch) wantsLogprobs() (bool, error) {
	want := false
	for i := range b.Seqs {
		s := &b.Seqs[i]
		if !s.Logprobs {
			continue
		}
		if s.TopLogprobs < 0 || s.TopLogprobs > MaxTopLogprobs {
			return false, fmt.Errorf("%w: sequence %d (id %d) asks for %d top logprobs, want 0..%d", ErrBadBatch, i, s.ID, s.TopLogprobs, MaxTopLogprobs)
		}
		want = true
	}
	if want && len(b.Logprobs) < len(b.Seqs) {
		return false, fmt.Errorf("%w: logprobs has %d entries, the batch has %d sequences", ErrBadBatch, len(b.Logprobs), len(b.Seqs))
	}
	return want, nil
}

// wantsPromptLogprobs reports whether any sequence of b with more than one token asks for prompt
// logprobs, after checking that every sequence that asks wants 0..MaxTopLogprobs alternatives
// and that b.PromptLogprobs has an entry per sequence with room for the len(Tokens)-1 logprobs
// of each that asks (ErrBadBatch otherwise). A sequence of one token has no prompt logprobs: when
// no other asks, b.PromptLogprobs may be nil.
func (b *Batch) wantsPromptLogprobs() (bool, error) {
	want := false
	for i := range b.Seqs {
		s := &b.Seqs[i]
		if !s.PromptLogprobs {
			continue
		}
		if s.PromptTopLogprobs < 0 || s.PromptTopLogprobs > MaxTopLogprobs {
			return false, fmt.Errorf("%w: sequence %d (id %d) asks for %d prompt top logprobs, want 0..%d", ErrBadBatch, i, s.ID, s.PromptTopLogprobs, MaxTopLogprobs)
		}
		n := len(s.Tokens) - 1
		if n < 1 {
			continue
		}
		switch {
		case len(b.PromptLogprobs) < len(b.Seqs):
			return false, fmt.Errorf("%w: sequence %d (id %d) asks for prompt logprobs, but prompt logprobs has %d entries for %d sequences", ErrBadBatch, i, s.ID, len(b.PromptLogprobs), len(b.Seqs))
		case len(b.PromptLogprobs[i]) < n:
			return false, fmt.Errorf("%w: sequence %d (id %d) has %d tokens, but room for %d prompt logprobs, want %d", ErrBadBatch, i, s.ID, len(s.Tokens), len(b.PromptLogprobs[i]), n)
		}
		want = true
	}
	return want, nil
}

// fillBatchLogprobs fills b.Logprobs[i] for every sequence of b that asks, from row i of logits
// (B rows of V) and the token next[i] it sampled, with k's vector exponential. Rows are spread
// over up to len(scratch) goroutines, worker w using scratch[w]: a row is a few passes over V.
func fillBatchLogprobs(b *Batch, logits []float32, next []int32, V int, k *kernels, scratch []SampleScratch) {
	rows := 0
	for i := range b.Seqs {
		if b.Seqs[i].Logprobs {
			rows++
		}
	}
	workers := min(rows, len(scratch))
	fill := func(w int) {
		rank := 0 // of row i among those that ask: worker w takes ranks w, w+workers, ...
		for i := range b.Seqs {
			if q := &b.Seqs[i]; q.Logprobs {
				if rank%workers == w {
					scratch[w].logprobs(k, &b.Logprobs[i], logits[i*V:(i+1)*V], next[i], q.TopLogprobs)
				}
				rank++
			}
		}
	}
	if workers <= 1 {
		if workers == 1 {
			fill(0)
		}
		return
	}
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Go(func() { fill(w) })
	}
	fill(0)
	wg.Wait()
}
