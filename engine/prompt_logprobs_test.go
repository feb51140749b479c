package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The CPU backend's prompt logprobs (SeqStep.PromptLogprobs, Batch.PromptLogprobs); cuda_test.go
// compares the CUDA backend's with these.

// promptSentinel is an entry a backend must leave as it is: of a sequence that does not ask, or
// past the len(Tokens)-1 entries of one that does.
func promptSentinel() TokenLogprobs {
	return TokenLogprobs{Sampled: lpSentinel.Sampled, Top: slices.Clone(lpSentinel.Top), Rank: 99}
}

// promptEntries sizes b.PromptLogprobs: len(Tokens)-1 entries and one sentinel past them for a
// sequence that asks, one sentinel for one that does not. Each asking entry starts with room for
// MaxTopLogprobs alternatives, so a backend that reuses Top's memory allocates nothing.
func promptEntries(b *Batch) {
	b.PromptLogprobs = make([][]TokenLogprobs, len(b.Seqs))
	for i := range b.Seqs {
		s := &b.Seqs[i]
		if !s.PromptLogprobs {
			b.PromptLogprobs[i] = []TokenLogprobs{promptSentinel()}
			continue
		}
		e := make([]TokenLogprobs, max(0, len(s.Tokens)-1), len(s.Tokens))
		for j := range e {
			e[j].Top = make([]Logprob, 0, MaxTopLogprobs)
		}
		b.PromptLogprobs[i] = append(e, promptSentinel())
	}
}

// cloneEntries deep-copies entries (a backend reuses an entry's Top).
func cloneEntries(e []TokenLogprobs) []TokenLogprobs {
	out := make([]TokenLogprobs, len(e))
	for j, l := range e {
		out[j] = TokenLogprobs{Sampled: l.Sampled, Top: slices.Clone(l.Top), Rank: l.Rank}
	}
	return out
}

// checkPromptEntries checks b.PromptLogprobs after a step against rows, the logits of every token
// of b in batch order (Logits(b, true) on a twin backend): each entry of a sequence that asks is
// the vector fill of its token's row with the next token sampled, bit for bit, and within 1e-6 of
// FillLogprobs with the same top ids and rank; sentinels are untouched.
func checkPromptEntries(t *testing.T, k *kernels, b *Batch, rows [][]float32) {
	t.Helper()
	row := 0
	for i := range b.Seqs {
		s, got := &b.Seqs[i], b.PromptLogprobs[i]
		first := row
		row += len(s.Tokens)
		n := 0
		if s.PromptLogprobs {
			n = len(s.Tokens) - 1
		}
		for j := n; j < len(got); j++ {
			if !lpEqual(got[j], promptSentinel()) {
				t.Fatalf("seq %d (asks: %v, %d tokens): entry %d became %+v", i, s.PromptLogprobs, len(s.Tokens), j, got[j])
			}
		}
		for j := range n {
			var own, want TokenLogprobs
			new(SampleScratch).logprobs(k, &own, rows[first+j], s.Tokens[j+1], s.PromptTopLogprobs)
			FillLogprobs(&want, rows[first+j], s.Tokens[j+1], s.PromptTopLogprobs)
			g := got[j]
			if g.Sampled.Token != s.Tokens[j+1] || !lpEqual(g, own) {
				t.Fatalf("seq %d entry %d: %+v, want %+v (the fill of its row, token %d)", i, j, g, own, s.Tokens[j+1])
			}
			if err := lpClose(g, want, 1e-6); err != nil || !slices.Equal(lpIDs(g.Top), lpIDs(want.Top)) || g.Rank != want.Rank {
				t.Fatalf("seq %d entry %d: against FillLogprobs: %v; top %v rank %d, want %v rank %d", i, j, err, lpIDs(g.Top), g.Rank, lpIDs(want.Top), want.Rank)
			}
		}
	}
}

// promptSchedule is TestCPUPromptLogprobs' batches: a prefill of four sequences (two ask, one
// of them also for the sampled token's logprobs; one asks with a single token), then a step where
// sequence 2 runs two tokens asking again (a later chunk of a prompt) beside decode rows, then
// decode steps that do not ask. tokens[i] are fed after the first step (sequence 2's second
// token in step 1); the sampled tokens the rest.
var promptSchedule = []SeqStep{
	{ID: 1, Tokens: batchPrompts[2], Sample: batchSampling[0], PromptLogprobs: true, PromptTopLogprobs: 5, Logprobs: true, TopLogprobs: 3},
	{ID: 2, Tokens: batchPrompts[1], Sample: batchSampling[1]},
	{ID: 3, Tokens: batchPrompts[1], Sample: batchSampling[2], PromptLogprobs: true, PromptTopLogprobs: MaxTopLogprobs},
	{ID: 4, Tokens: batchPrompts[0], Sample: batchSampling[1], PromptLogprobs: true, PromptTopLogprobs: 2, Logprobs: true},
}

// TestCPUPromptLogprobs: prompt logprobs are the fill of each token's row of Logits(b, true) (see
// checkPromptEntries), also for a later chunk of a prompt; the sampled tokens and the sampled
// tokens' logprobs are exactly those of the same steps without prompt logprobs asked (on a twin
// backend), then and in the decode steps after; and every entry is the same bits whatever the
// batch: in one pass, a pass per sequence, passes of a few sequences (the scratch bound), and
// each asking sequence's prefill alone.
func TestCPUPromptLogprobs(t *testing.T) {
	m := tinyModel(t)
	alone := aloneEntries(t, m)
	for _, bound := range []string{"none", "a pass per sequence", "passes of one asker"} {
		t.Run(bound, func(t *testing.T) {
			c := newTestBackend(t, m, true, 4, 64, 3)
			switch bound {
			case "a pass per sequence":
				c.stepBytes = 1
			case "passes of one asker":
				c.stepBytes = alone.scratch * 3 / 2
			}
			ref := newTestBackend(t, m, true, 4, 64, 0)   // Logits(b, true) of the same batches
			plain := newTestBackend(t, m, true, 4, 64, 3) // the same steps without prompt logprobs
			tables := blockTables(c.layout, len(promptSchedule), 64, 5)
			b, p := Batch{Logprobs: make([]TokenLogprobs, 4)}, Batch{Logprobs: make([]TokenLogprobs, 4)}
			for j, s := range promptSchedule {
				s.Blocks = tables[j]
				b.Seqs = append(b.Seqs, s)
				s.PromptLogprobs, s.PromptTopLogprobs = false, 0
				p.Seqs = append(p.Seqs, s)
			}
			next, pnext := make([]int32, 4), make([]int32, 4)
			for step := range 5 {
				promptEntries(&b)
				rows, err := ref.Logits(&b, true)
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Step(&b, next); err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				if err := plain.Step(&p, pnext); err != nil {
					t.Fatal(err)
				}
				t.Run(fmt.Sprintf("step %d", step), func(t *testing.T) { checkPromptEntries(t, &c.k, &b, rows) })
				if !slices.Equal(next, pnext) {
					t.Fatalf("step %d: sampled %v, %v without prompt logprobs", step, next, pnext)
				}
				for j := range b.Seqs {
					if b.Seqs[j].Logprobs && !lpEqual(b.Logprobs[j], p.Logprobs[j]) {
						t.Fatalf("step %d seq %d: logprobs %+v, %+v without prompt logprobs", step, j, b.Logprobs[j], p.Logprobs[j])
					}
				}
				if step == 0 {
					for j, e := range alone.entries {
						if got := b.PromptLogprobs[j]; e != nil && !slices.EqualFunc(got, e, lpEqual) {
							t.Fatalf("seq %d: prompt logprobs %+v in this batch, %+v alone", j, got, e)
						}
					}
				}
				for j := range b.Seqs {
					s, q := &b.Seqs[j], &p.Seqs[j]
					s.Start += len(s.Tokens)
					s.Tokens = []int32{next[j]}
					if step == 0 && j == 2 {
						s.Tokens = []int32{next[j], 13} // a prompt's second chunk
					}
					s.PromptLogprobs = s.PromptLogprobs && step == 0
					q.Start, q.Tokens = s.Start, s.Tokens
				}
			}
		})
	}
}

// aloneRun is each asking sequence's prompt logprobs of promptSchedule's prefill run alone on
// a fresh backend (nil for those that do not ask), and the scratch the largest such run took.
type aloneRun struct {
	entries [][]TokenLogprobs
	scratch int
}

func aloneEntries(t *testing.T, m *Model) aloneRun {
	t.Helper()
	var out aloneRun
	out.entries = make([][]TokenLogprobs, len(promptSchedule))
	for j, s := range promptSchedule {
		if !s.PromptLogprobs {
			continue
		}
		c := newTestBackend(t, m, true, 1, 64, 2)
		s.Blocks = blockTables(c.layout, 1, 64, 1)[0]
		b := Batch{Seqs: []SeqStep{s}, Logprobs: make([]TokenLogprobs, 1)}
		promptEntries(&b)
		if err := c.Step(&b, make([]int32, 1)); err != nil {
			t.Fatal(err)
		}
		out.entries[j] = cloneEntries(b.PromptLogprobs[0])
		out.scratch = max(out.scratch, scratchBytes(c))
	}
	return out
}

// scratchBytes is the per-token and per-row scratch c has grown to (passEnd's bound).
func scratchBytes(c *CPUBackend) int {
	floats := len(c.x) + len(c.xn) + len(c.qkv) + len(c.att) + len(c.fc) + len(c.xf) + len(c.logits)
	ints := len(c.tokSeq) + len(c.tokPos) + len(c.rowTok)
	return 4 * (floats + ints)
}

// TestCPUPromptLogprobsScratchBound: a sequence that asks for prompt logprobs needs a row of
// logits per token, and a pass holds no more of them than the scratch bound allows: four
// sequences of 12 tokens, three asking, under a bound of one and a half such sequences alone,
// leave the scratch within the bound (and their prompt logprobs those of one pass).
func TestCPUPromptLogprobsScratchBound(t *testing.T) {
	m := tinyModel(t)
	batch := func(c *CPUBackend, n int) *Batch {
		tables := blockTables(c.layout, n, 64, 2)
		b := &Batch{}
		for j := range n {
			b.Seqs = append(b.Seqs, SeqStep{ID: SeqID(j), Tokens: batchPrompts[2], Blocks: tables[j], PromptLogprobs: j != 1, PromptTopLogprobs: j})
		}
		promptEntries(b)
		return b
	}
	one := newTestBackend(t, m, true, 1, 64, 0)
	if err := one.Step(batch(one, 1), make([]int32, 1)); err != nil {
		t.Fatal(err)
	}
	whole := newTestBackend(t, m, true, 4, 64, 0)
	want := batch(whole, 4)
	if err := whole.Step(want, make([]int32, 4)); err != nil {
		t.Fatal(err)
	}
	c := newTestBackend(t, m, true, 4, 64, 0)
	c.stepBytes = scratchBytes(one) * 3 / 2
	got := batch(c, 4)
	if err := c.Step(got, make([]int32, 4)); err != nil {
		t.Fatal(err)
	}
	if s := scratchBytes(c); s > c.stepBytes {
		t.Errorf("scratch grew to %d bytes, bound %d (one asking sequence alone takes %d)", s, c.stepBytes, scratchBytes(one))
	}
	for j := range got.Seqs {
		if !slices.EqualFunc(got.PromptLogprobs[j], want.PromptLogprobs[j], lpEqual) {
			t.Errorf("seq %d: prompt logprobs under the bound differ from one pass's", j)
		}
	}
}

// TestStepPromptLogprobsBadBatch: a sequence asking for prompt logprobs with PromptTopLogprobs
// outside 0..MaxTopLogprobs, a Batch.PromptLogprobs shorter than the batch or an entry shorter
// than the sequence's tokens less one fails with ErrBadBatch naming the sequence, before any KV
// entry is written; a sequence of one token asking needs no entry, nor does one that does not ask.
func TestStepPromptLogprobsBadBatch(t *testing.T) {
	m := tinyModel(t)
	for _, c := range []struct {
		name    string
		entries int // len(Batch.PromptLogprobs); -1: nil
		room    int // len(PromptLogprobs[1])
		tokens  int // of sequence 1, which asks
		top     int
		ask     bool
		bad     bool
	}{
		{"no entries", -1, 0, 5, 0, true, true},
		{"one entry of two", 1, 4, 5, 0, true, true},
		{"entry too short", 2, 3, 5, 0, true, true},
		{"top -1", 2, 4, 5, -1, true, true},
		{"top too many", 2, 4, 5, MaxTopLogprobs + 1, true, true},
		{"one token, top too many", -1, 0, 1, MaxTopLogprobs + 1, true, true},
		{"one token, no entries", -1, 0, 1, 3, true, false},
		{"none asks, no entries", -1, 0, 5, MaxTopLogprobs + 1, false, false},
		{"exact room, top max", 2, 4, 5, MaxTopLogprobs, true, false},
		{"more room, top 0", 2, 9, 5, 0, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			be := newTestBackend(t, m, true, 2, 64, 0)
			tables := blockTables(be.layout, 2, 64, 3)
			b := Batch{Seqs: []SeqStep{
				{ID: 7, Tokens: batchPrompts[2], Blocks: tables[0]},
				{ID: 8, Tokens: batchPrompts[1][:c.tokens], Blocks: tables[1], PromptLogprobs: c.ask, PromptTopLogprobs: c.top},
			}}
			if c.entries >= 0 {
				b.PromptLogprobs = make([][]TokenLogprobs, c.entries)
				if c.entries > 1 {
					b.PromptLogprobs[1] = make([]TokenLogprobs, c.room)
				}
			}
			err := be.Step(&b, make([]int32, 2))
			if c.bad != errors.Is(err, ErrBadBatch) || !c.bad && err != nil {
				t.Fatalf("Step: %v, want ErrBadBatch: %v", err, c.bad)
			}
			if c.bad && (!strings.Contains(err.Error(), "sequence 1 (id 8)") || strings.Contains(err.Error(), "\n")) {
				t.Errorf("error %q: want one line naming sequence 1 (id 8)", err)
			}
			if c.bad && slices.ContainsFunc(be.kv, func(v float32) bool { return v != 0 }) {
				t.Fatal("KV pool written by a failed step")
			}
		})
	}
}

// TestPromptLogprobsStepAllocs: a step whose sequences ask for prompt logprobs allocates nothing
// once the scratch has grown and the entries have room for their alternatives.
func TestPromptLogprobsStepAllocs(t *testing.T) {
	m := tinyModel(t)
	c := newTestBackend(t, m, true, 3, 64, 2)
	tables := blockTables(c.layout, 3, 64, 4)
	b := Batch{Logprobs: make([]TokenLogprobs, 3)}
	for j := range 3 {
		b.Seqs = append(b.Seqs, SeqStep{ID: SeqID(j), Tokens: batchPrompts[j], Blocks: tables[j], Sample: batchSampling[j],
			PromptLogprobs: j != 1, PromptTopLogprobs: 4 * j, Logprobs: true, TopLogprobs: 2})
		b.Logprobs[j].Top = make([]Logprob, 0, MaxTopLogprobs)
	}
	promptEntries(&b)
	next := make([]int32, 3)
	if err := c.Step(&b, next); err != nil {
		t.Fatal(err)
	}
	var err error
	allocs := testing.AllocsPerRun(10, func() {
		err = c.Step(&b, next) // the same step again: it rewrites the same KV slots
	})
	if err != nil {
		t.Fatal(err)
	}
	if allocs != 0 {
		t.Errorf("a step asking for prompt logprobs allocates %.1f times, want 0", allocs)
	}
}

// TestCPUPromptLogprobsLongPrompts: prompts of several promptChunk rows (two askers of 150 and
// 200 tokens beside a plain one) get every entry of their rows of Logits(b, true), while the
// backend holds the logits of at most the sequences' rows and one chunk.
func TestCPUPromptLogprobsLongPrompts(t *testing.T) {
	m := tinyModel(t)
	c := newTestBackend(t, m, true, 3, 256, 3)
	ref := newTestBackend(t, m, true, 3, 256, 0)
	tables := blockTables(c.layout, 3, 256, 7)
	b := &Batch{}
	for i, n := range []int{150, 40, 200} {
		toks := make([]int32, n)
		for j := range toks {
			toks[j] = int32((j*7919 + i*104729) % m.Config.VocabSize)
		}
		b.Seqs = append(b.Seqs, SeqStep{ID: SeqID(i), Tokens: toks, Blocks: tables[i], PromptLogprobs: i != 1, PromptTopLogprobs: 3 * i})
	}
	promptEntries(b)
	rows, err := ref.Logits(b, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Step(b, make([]int32, 3)); err != nil {
		t.Fatal(err)
	}
	checkPromptEntries(t, &c.k, b, rows)
	if held, most := len(c.logits)/m.Config.VocabSize, len(b.Seqs)+promptChunk; held > most {
		t.Errorf("the backend holds %d rows of logits, want at most %d (the sequences' and a chunk)", held, most)
	}
}
