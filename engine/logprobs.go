package engine

import (
	"fmt"
	"math"
	"runtime"
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
// (SeqStep.Logprobs): the token's own log-probability and the TopLogprobs most likely tokens',
// most likely first (ties: the lower id first). The sampled token may be among Top or not.
type TokenLogprobs struct {
	Sampled Logprob
	Top     []Logprob
}

// FillLogprobs writes into out the log-probabilities of sampled and of the top most likely
// tokens of one row of logits (V wide), reusing out.Top's memory. Non-finite logits count as
// -Inf (a NaN logit never ranks). top is clamped to [0, min(MaxTopLogprobs, V)].
func FillLogprobs(out *TokenLogprobs, logits []float32, sampled int32, top int) {
	top = max(0, min(top, MaxTopLogprobs, len(logits)))
	// log-softmax: x - (m + log sum exp(x - m)), in float64 for the sum over 50k terms.
	m := math.Inf(-1)
	for _, x := range logits {
		if v := float64(x); v > m && !math.IsInf(v, 1) && !math.IsNaN(v) {
			m = v
		}
	}
	var sum float64
	for _, x := range logits {
		if v := float64(x); !math.IsNaN(v) && !math.IsInf(v, 0) {
			sum += math.Exp(v - m)
		}
	}
	lse := m + math.Log(sum)
	lp := func(id int32) float32 {
		v := float64(logits[id])
		if math.IsNaN(v) || math.IsInf(v, 0) || math.IsInf(lse, 0) || math.IsNaN(lse) {
			return float32(math.Inf(-1))
		}
		return float32(v - lse)
	}
	out.Sampled = Logprob{Token: sampled, Logprob: float32(math.Inf(-1))}
	if sampled >= 0 && int(sampled) < len(logits) {
		out.Sampled.Logprob = lp(sampled)
	}
	out.Top = out.Top[:0]
	if top == 0 {
		return
	}
	// The top few by a running insertion into a list of at most top entries: V x top compares
	// in the worst case, ~V in practice (most logits fall below the list's last entry).
	better := func(a, b Logprob) bool { return a.Logprob > b.Logprob || a.Logprob == b.Logprob && a.Token < b.Token }
	for id := range logits {
		c := Logprob{Token: int32(id), Logprob: lp(int32(id))}
		if len(out.Top) == top && !better(c, out.Top[top-1]) {
			continue
		}
		i, _ := slices.BinarySearchFunc(out.Top, c, func(e, t Logprob) int {
			if better(e, t) {
				return -1
			}
			return 1 // e after t: t goes before e
		})
		if len(out.Top) < top {
			out.Top = append(out.Top, Logprob{})
		}
		copy(out.Top[i+1:], out.Top[i:len(out.Top)-1])
		out.Top[i] = c
	}
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

// fillBatchLogprobs fills b.Logprobs[i] for every sequence of b that asks, from row i of logits
// (B rows of V) and the token next[i] it sampled. Rows are spread over up to GOMAXPROCS
// goroutines: one row is two passes over V exponentials (about a millisecond at V = 50257).
func fillBatchLogprobs(b *Batch, logits []float32, next []int32, V int) {
	rows := 0
	for i := range b.Seqs {
		if b.Seqs[i].Logprobs {
			rows++
		}
	}
	workers := min(rows, runtime.GOMAXPROCS(0))
	fill := func(w int) {
		k := 0 // rank of row i among those that ask: worker w takes ranks w, w+workers, ...
		for i := range b.Seqs {
			if q := &b.Seqs[i]; q.Logprobs {
				if k%workers == w {
					FillLogprobs(&b.Logprobs[i], logits[i*V:(i+1)*V], next[i], q.TopLogprobs)
				}
				k++
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
