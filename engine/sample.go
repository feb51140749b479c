package engine

import (
	"math"
	"slices"

	"rosetop/internal/gpt2ref"
)

// Sampling. Every backend picks tokens with exactly these rules, so a request samples the same
// tokens on the CPU and the GPU (up to float rounding of the logits) and whatever it is batched with:
//
//  1. Greedy (Temperature <= 0, or TopK == 1): the argmax, the lowest id on ties, NaN counting as
//     the largest logit (torch.argmax's order).
//  2. z_i = logit_i / Temperature; weights w_i = exp(z_i - max z), in float64.
//  3. Top-k (0 < TopK < V): keep the K best tokens, ordered by logit descending then id ascending
//     (so exactly K tokens, the lower ids winning ties).
//  4. Top-p (0 < TopP < 1): over the kept tokens in that same order, keep the shortest prefix
//     whose weight reaches TopP * (sum of kept weights).
//  5. Inverse CDF: u = Uniform(Seed, pos), where pos is the position of the token being generated;
//     walk the kept tokens in ascending id order accumulating weights and return the first whose
//     running sum exceeds u * (sum of kept weights). Where the weights do not sum to a positive
//     number (a NaN or +Inf logit, or every logit -Inf), the token is the argmax.

// Uniform returns a draw in [0, 1) that depends only on (seed, pos). The GPU sampler replicates
// it bit for bit; the exact arithmetic, all on uint64 modulo 2^64:
//
//	x = seed ^ (uint64(pos) * 0x9E3779B97F4A7C15)
//	z = x + 0x9E3779B97F4A7C15                    // splitmix64 (Steele, Lea, Flood 2014)
//	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
//	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
//	z =  z ^ (z >> 31)
//	u = float64(z >> 11) * 2^-53                  // exact: a 53-bit integer scaled by a power of two
func Uniform(seed uint64, pos int) float64 {
	z := seed ^ (uint64(pos) * 0x9E3779B97F4A7C15)
	z += 0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	z ^= z >> 31
	return float64(z>>11) * (1.0 / (1 << 53))
}

// SampleScratch is the reusable memory of SampleToken; one per goroutine that samples.
// The zero value is ready; it grows to the vocabulary size on first use.
type SampleScratch struct {
	w    []float64   // (V) weight of each kept token, 0 for dropped ones
	cand []candidate // top-k heap, then the top-p candidates sorted best first
	kw   []float64   // weights of the top-p set while w is cleared
	lp   []float32   // (V) a row's exponentials for its logprobs (logprobs.go)
}

type candidate struct {
	id    int32
	logit float32
}

// better orders candidates best first: higher logit, then lower id.
func better(a, b candidate) bool {
	return a.logit > b.logit || (a.logit == b.logit && a.id < b.id)
}

func cmpCandidates(a, b candidate) int {
	switch {
	case better(a, b):
		return -1
	case better(b, a):
		return 1
	}
	return 0
}

// SampleToken picks the next token from logits with p's rules (see the top of this file); pos is
// the position the new token will occupy. scratch may be nil (then it allocates).
func SampleToken(logits []float32, p SamplingParams, pos int, scratch *SampleScratch) int32 {
	V := len(logits)
	if p.Greedy() || p.TopK == 1 || V <= 1 {
		return gpt2ref.Argmax(logits)
	}
	if scratch == nil {
		scratch = new(SampleScratch)
	}
	if len(scratch.w) < V {
		scratch.w = make([]float64, V)
		scratch.cand = make([]candidate, 0, V)
		scratch.kw = make([]float64, 0, V)
	}
	w := scratch.w[:V]
	invT := 1 / float64(p.Temperature)
	zmax := float64(logits[gpt2ref.Argmax(logits)]) * invT

	// cand: the top-k set (a heap, worst at the root), or nil meaning every token.
	var cand []candidate
	if p.TopK > 0 && p.TopK < V {
		cand = topK(scratch.cand[:0], logits, p.TopK)
		clear(w)
		for _, c := range cand {
			w[c.id] = math.Exp(float64(c.logit)*invT - zmax)
		}
	} else {
		for i, l := range logits {
			w[i] = math.Exp(float64(l)*invT - zmax)
		}
	}
	total := 0.0
	for _, x := range w {
		total += x
	}
	if !(total > 0) { // a NaN or +Inf logit (NaN weights), or every logit -Inf: the argmax
		return gpt2ref.Argmax(logits)
	}
	if p.TopP > 0 && p.TopP < 1 {
		total = nucleus(scratch, w, logits, cand, total, float64(p.TopP))
	}
	target := Uniform(p.Seed, pos) * total
	last, run := int32(-1), 0.0
	for i, x := range w {
		if x == 0 {
			continue
		}
		run += x
		last = int32(i)
		if run > target {
			return last
		}
	}
	return last // rounding left target at the very end of the mass
}

// topK returns the k best candidates of logits (as a heap, worst at index 0) in buf.
func topK(buf []candidate, logits []float32, k int) []candidate {
	h := buf[:0]
	for i, l := range logits {
		c := candidate{id: int32(i), logit: l}
		if len(h) < k {
			h = append(h, c)
			siftUp(h, len(h)-1)
		} else if better(c, h[0]) {
			h[0] = c
			siftDown(h, 0)
		}
	}
	return h
}

// The heap keeps the worst candidate at the root: parent is worse than (not better than) children.
func siftUp(h []candidate, i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !better(h[parent], h[i]) {
			return
		}
		h[parent], h[i] = h[i], h[parent]
		i = parent
	}
}

func siftDown(h []candidate, i int) {
	for {
		worst, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && better(h[worst], h[l]) {
			worst = l
		}
		if r < len(h) && better(h[worst], h[r]) {
			worst = r
		}
		if worst == i {
			return
		}
		h[i], h[worst] = h[worst], h[i]
		i = worst
	}
}

// nucleus zeroes in w the tokens outside the top-p set and returns the weight left. cand is the
// top-k set, or nil for every token.
//
// Only tokens with weight >= (1-P)*total/V can be in the set (were a lighter token in it, every
// token after it would be lighter still, and the set's mass before it plus theirs would fall short
// of the total), so the sort sees only those: a few tokens for a peaked distribution.
func nucleus(s *SampleScratch, w []float64, logits []float32, cand []candidate, total, P float64) float64 {
	floor := 0.5 * (1 - P) * total / float64(len(w)) // halved: margin for rounding
	if cand == nil {
		cand = s.cand[:0]
		for i, x := range w {
			if x >= floor && x > 0 {
				cand = append(cand, candidate{id: int32(i), logit: logits[i]})
			}
		}
	}
	slices.SortFunc(cand, cmpCandidates)
	need, run, keep := P*total, 0.0, len(cand)
	for i, c := range cand {
		run += w[c.id]
		if run >= need {
			keep = i + 1
			break
		}
	}
	kw := s.kw[:0]
	for _, c := range cand[:keep] {
		kw = append(kw, w[c.id])
	}
	clear(w)
	kept := 0.0
	for i, c := range cand[:keep] {
		w[c.id] = kw[i]
		kept += kw[i]
	}
	return kept
}
