package engine

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// Batching and KV layout must not change what a sequence computes: these tests run the same
// sequences alone and together, in both layouts, on the embedded tiny model.

// batchPrompts are three prompts of different lengths (ids of the golden prompts).
var batchPrompts = [][]int32{
	{15496},
	{464, 2068, 7586, 21831, 18045},
	{818, 257, 7604, 287, 262, 2323, 612, 5615, 257, 32724, 2545, 13},
}

var batchSampling = []SamplingParams{
	{},
	{Temperature: 0.9, Seed: 7},
	{Temperature: 1.1, TopK: 20, TopP: 0.9, Seed: 11},
}

// run drives sequences idx of batchPrompts together on c: one prefill step for all, then steps
// decode steps. It returns each sequence's tokens and, with Logits, each step's last logits.
// useStep samples with Step instead of Logits + SampleToken (logits are then nil).
func run(t *testing.T, c *CPUBackend, idx []int, steps int, useStep bool) ([][]int32, [][][]float32) {
	t.Helper()
	tables := blockTables(c.layout, len(idx), 64, 3)
	var b Batch
	for j, i := range idx {
		b.Seqs = append(b.Seqs, SeqStep{ID: SeqID(i), Tokens: batchPrompts[i], Blocks: tables[j], Sample: batchSampling[i]})
	}
	toks := make([][]int32, len(idx))
	logits := make([][][]float32, len(idx))
	next := make([]int32, len(idx))
	var scratch SampleScratch
	for step := 0; step <= steps; step++ {
		if useStep {
			if err := c.Step(&b, next); err != nil {
				t.Fatal(err)
			}
		} else {
			rows, err := c.Logits(&b, false)
			if err != nil {
				t.Fatal(err)
			}
			for j, s := range b.Seqs {
				if v := firstNonFinite(rows[j]); v >= 0 {
					t.Fatalf("step %d seq %d: logit %d is %g", step, s.ID, v, rows[j][v])
				}
				logits[j] = append(logits[j], rows[j])
				next[j] = SampleToken(rows[j], s.Sample, s.Start+len(s.Tokens), &scratch)
			}
		}
		for j := range b.Seqs {
			s := &b.Seqs[j]
			toks[j] = append(toks[j], next[j])
			s.Start += len(s.Tokens)
			s.Tokens = []int32{next[j]}
		}
	}
	return toks, logits
}

func TestPagedMatchesContiguous(t *testing.T) {
	m := tinyModel(t)
	idx := []int{0, 1, 2}
	var got [2][][]int32
	for i, paged := range []bool{false, true} {
		c := newTestBackend(t, m, paged, 3, 64, 0)
		got[i], _ = run(t, c, idx, 32, true)
	}
	for j := range idx {
		if !slices.Equal(got[0][j], got[1][j]) {
			t.Errorf("sequence %d: contiguous %v\npaged %v", j, got[0][j], got[1][j])
		}
	}
}

func TestBatchMatchesAlone(t *testing.T) {
	m := tinyModel(t)
	const steps = 16
	for _, paged := range []bool{false, true} {
		t.Run(fmt.Sprintf("paged=%v", paged), func(t *testing.T) {
			idx := []int{2, 0, 1} // batch order differs from the prompts' order
			c := newTestBackend(t, m, paged, 3, 64, 0)
			toks, logits := run(t, c, idx, steps, false)
			stepToks, _ := run(t, newTestBackend(t, m, paged, 3, 64, 0), idx, steps, true)
			for j, i := range idx {
				if !slices.Equal(stepToks[j], toks[j]) {
					t.Errorf("prompt %d: Step sampled %v, Logits+SampleToken %v", i, stepToks[j], toks[j])
				}
				aloneToks, aloneLogits := run(t, newTestBackend(t, m, paged, 1, 64, 0), []int{i}, steps, false)
				if !slices.Equal(toks[j], aloneToks[0]) {
					t.Errorf("prompt %d: batched %v\nalone %v", i, toks[j], aloneToks[0])
				}
				// Every kernel computes a row with the same operations whatever rows surround it,
				// so the logits are not just close but bit for bit those of the sequence alone.
				for s := range logits[j] {
					if !slices.Equal(logits[j][s], aloneLogits[0][s]) {
						t.Errorf("prompt %d step %d: batched logits differ from alone by %.2e relative, want identical", i, s, relDiff(logits[j][s], aloneLogits[0][s]))
					}
				}
			}
		})
	}
}

// relDiff is max|a-b| / max|b|, +Inf when either holds a NaN or an infinity.
func relDiff(a, b []float32) float64 {
	if firstNonFinite(a) >= 0 || firstNonFinite(b) >= 0 {
		return math.Inf(1)
	}
	d, m := 0.0, 0.0
	for i := range b {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
		m = math.Max(m, math.Abs(float64(b[i])))
	}
	return d / m
}

// TestComparisonsSeeNonFinite: the helpers that compare logits with a reference fail on NaN and
// infinities instead of letting them through (NaN > bound is false).
func TestComparisonsSeeNonFinite(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, c := range []struct {
		name string
		got  []float32
		bad  bool
	}{
		{"finite", []float32{1, 2, 3}, false},
		{"NaN", []float32{1, nan, 3}, true},
		{"+Inf", []float32{inf, 2, 3}, true},
		{"-Inf", []float32{1, 2, -inf}, true},
	} {
		want := []float32{1, 2, 3}
		if d := maxDiffRatio(c.got, []float64{1, 2, 3}); (d > 1e-5) != c.bad {
			t.Errorf("%s: maxDiffRatio = %g", c.name, d)
		}
		if d := relDiff(c.got, want); (d > 1e-5) != c.bad {
			t.Errorf("%s: relDiff = %g", c.name, d)
		}
	}
}

// TestStepBoundsScratch: a batch whose scratch would pass the backend's bound runs as several
// forward passes over runs of its sequences; each sequence samples exactly what it samples in one
// pass, and the scratch never holds more than a pass's tokens and rows.
func TestStepBoundsScratch(t *testing.T) {
	m := tinyModel(t)
	idx := []int{2, 0, 1} // 12, 1 and 5 prompt tokens
	const steps = 16
	want, _ := run(t, newTestBackend(t, m, true, 3, 64, 0), idx, steps, true)
	c := newTestBackend(t, m, true, 3, 64, 0)
	perTok := 4 * (6*c.cfg.NEmbd + innerDim(c.cfg) + 2)
	perRow := 4 * (c.cfg.NEmbd + c.cfg.VocabSize + 1)
	for _, bound := range []struct {
		name           string
		bytes          int
		maxTok, maxRow int
	}{
		{"a sequence per pass", 1, 12, 1},
		{"two sequences per pass", 13*perTok + 2*perRow, 13, 2},
	} {
		t.Run(bound.name, func(t *testing.T) {
			c := newTestBackend(t, m, true, 3, 64, 0)
			c.stepBytes = bound.bytes
			got, _ := run(t, c, idx, steps, true)
			for j := range idx {
				if !slices.Equal(got[j], want[j]) {
					t.Errorf("sequence %d: %v in bounded passes, %v in one", j, got[j], want[j])
				}
			}
			if c.capTok > bound.maxTok || c.capRow > bound.maxRow {
				t.Errorf("scratch for %d tokens and %d rows, want at most %d and %d", c.capTok, c.capRow, bound.maxTok, bound.maxRow)
			}
		})
	}
}

// TestStepBoundedBadBatch: a bad sequence in a batch run as several passes fails the step,
// named by its index in the batch, before any pass writes a KV entry.
func TestStepBoundedBadBatch(t *testing.T) {
	c := newTestBackend(t, tinyModel(t), true, 2, 64, 0)
	c.stepBytes = 1
	tables := blockTables(c.layout, 2, 64, 3)
	b := Batch{Seqs: []SeqStep{
		{ID: 1, Tokens: batchPrompts[2], Blocks: tables[0]},
		{ID: 2, Tokens: []int32{int32(c.cfg.VocabSize)}, Blocks: tables[1]},
	}}
	err := c.Step(&b, make([]int32, 2))
	if !errors.Is(err, ErrBadBatch) || !strings.Contains(err.Error(), "sequence 1 ") {
		t.Fatalf("Step: %v, want ErrBadBatch naming sequence 1", err)
	}
	if i := slices.IndexFunc(c.kv, func(v float32) bool { return v != 0 }); i >= 0 {
		t.Fatalf("KV pool written at %d by a failed step", i)
	}
}

// TestStepStops: a Step whose Batch.Stop is set returns ErrStopped before writing any KV entry,
// in one pass and split into passes (each pass sees the caller's Stop); a Stop left unset
// changes nothing the batch computes.
func TestStepStops(t *testing.T) {
	m := tinyModel(t)
	idx := []int{2, 0, 1}
	want, _ := run(t, newTestBackend(t, m, true, 3, 64, 0), idx, 2, true)
	for _, passBytes := range []int{0, 1} {
		c := newTestBackend(t, m, true, 3, 64, 0)
		if passBytes > 0 {
			c.stepBytes = passBytes
		}
		tables := blockTables(c.layout, len(idx), 64, 3)
		var stop atomic.Bool
		stop.Store(true)
		b := Batch{Stop: &stop}
		for j, i := range idx {
			b.Seqs = append(b.Seqs, SeqStep{ID: SeqID(i), Tokens: batchPrompts[i], Blocks: tables[j], Sample: batchSampling[i]})
		}
		if err := c.Step(&b, make([]int32, len(idx))); !errors.Is(err, ErrStopped) {
			t.Fatalf("pass bound %d: Step with Stop set: %v, want ErrStopped", passBytes, err)
		}
		if i := slices.IndexFunc(c.kv, func(v float32) bool { return v != 0 }); i >= 0 {
			t.Fatalf("pass bound %d: KV pool written at %d by a stopped step", passBytes, i)
		}
		if c.part.Stop != nil {
			t.Fatalf("pass bound %d: the backend kept the caller's Stop", passBytes)
		}
		stop.Store(false)
		next := make([]int32, len(idx))
		if err := c.Step(&b, next); err != nil {
			t.Fatalf("pass bound %d: Step with Stop clear: %v", passBytes, err)
		}
		for j := range idx {
			if next[j] != want[j][0] {
				t.Errorf("pass bound %d: sequence %d sampled %d, want %d", passBytes, j, next[j], want[j][0])
			}
		}
	}
}
