//go:build cgo

package gpu

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// rowSeq is a sequence of a token-rows test: hist is its whole history; the step runs
// hist[start:], the positions before start written by an earlier step.
type rowSeq struct {
	hist  []int32
	start int
}

// rowSeqs makes sequences of random tokens (rng): lens[i] tokens each, of which the step runs
// those from starts[i] on.
func rowSeqs(rng *rand.Rand, V int, lens, starts []int) []rowSeq {
	out := make([]rowSeq, len(lens))
	for i, n := range lens {
		out[i].start = starts[i]
		for range n {
			out[i].hist = append(out[i].hist, int32(rng.IntN(V)))
		}
	}
	return out
}

// rowsStep is the greedy step of seqs on tables: each sequence's tokens from its start on.
func rowsStep(seqs []rowSeq, tables [][]int32) *Step {
	st := &Step{}
	for i, q := range seqs {
		addSeq(st, q.hist[q.start:], int32(q.start), tables[i], 0, 0, 0, uint64(i))
	}
	return st
}

// nonLastRows lists st's token rows that are not their sequence's last, those keep reports true for.
func nonLastRows(st *Step, keep func(t int32) bool) []int32 {
	var rows []int32
	t := int32(0)
	for _, l := range st.SeqLens {
		for k := int32(0); k < l-1; k++ {
			if keep(t + k) {
				rows = append(rows, t+k)
			}
		}
		t += l
	}
	return rows
}

// prefillEarlier writes into r's cache, on tables, the positions before each sequence's start.
func prefillEarlier(t *testing.T, r *Runner, seqs []rowSeq, tables [][]int32) {
	t.Helper()
	st := &Step{}
	for i, q := range seqs {
		if q.start > 0 {
			addSeq(st, q.hist[:q.start], 0, tables[i], 0, 0, 0, 0)
		}
	}
	if len(st.SeqLens) == 0 {
		return
	}
	if err := r.Step(st, make([]int32, len(st.SeqLens))); err != nil {
		t.Fatalf("prefill of the earlier positions: %v", err)
	}
}

// tokenRowsRun runs st on r through StepTokenLogits with TokenRows rows, checking that the chunks
// come in order, each of 1..64 rows, with (rows, V) logits; it returns each
// row's logits, in rows' order, and the step's last-row logits.
func tokenRowsRun(t *testing.T, r *Runner, st *Step, rows []int32, V int) (got [][]float32, last []float32) {
	t.Helper()
	st.TokenRows = rows
	B, chunk := len(st.SeqLens), rowChunkMax
	next, last := make([]int32, B), make([]float32, B*V)
	err := r.StepTokenLogits(st, next, last, func(c []int32, l []float32) error {
		n := len(got)
		switch {
		case len(c) < 1 || len(c) > chunk:
			return fmt.Errorf("a chunk of %d rows, want 1..%d", len(c), chunk)
		case len(l) != len(c)*V:
			return fmt.Errorf("a chunk of %d rows has %d logits, want %d", len(c), len(l), len(c)*V)
		case n+len(c) > len(rows) || !slices.Equal(c, rows[n:n+len(c)]):
			return fmt.Errorf("chunk rows %v after %d rows handed over, want the next of %v", c, n, rows)
		}
		for i := range c {
			got = append(got, slices.Clone(l[i*V:(i+1)*V]))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("StepTokenLogits: %v", err)
	}
	if len(got) != len(rows) {
		t.Fatalf("%d rows handed over, want %d", len(got), len(rows))
	}
	return got, last
}

// prefixes returns, for each token row of st (seqs' step) in rows, the history up to and
// including that row's token.
func prefixes(st *Step, seqs []rowSeq, rows []int32) [][]int32 {
	var out [][]int32
	for _, t := range rows {
		first := int32(0) // sequence i's first token row
		for i, l := range st.SeqLens {
			if t < first+l {
				out = append(out, seqs[i].hist[:seqs[i].start+int(t-first)+1])
				break
			}
			first += l
		}
	}
	return out
}

// prefixLogits runs each prefix on ref as its own sequence from position 0, MaxBatch at a time,
// and returns its last row's logits.
func prefixLogits(t *testing.T, ref *Runner, ps [][]int32, V int) [][]float32 {
	t.Helper()
	maxB := ref.s.opt.MaxBatch
	tables := tablesFor(ref, maxB)
	var out [][]float32
	for lo := 0; lo < len(ps); lo += maxB {
		st := &Step{}
		for i, p := range ps[lo:min(lo+maxB, len(ps))] {
			addSeq(st, p, 0, tables[i], 0, 0, 0, 0)
		}
		B := len(st.SeqLens)
		logits := make([]float32, B*V)
		if err := ref.StepLogits(st, make([]int32, B), logits); err != nil {
			t.Fatalf("reference step: %v", err)
		}
		for b := range B {
			out = append(out, logits[b*V:(b+1)*V])
		}
	}
	return out
}

// checkRows compares each row's logits with the reference's (relative error within tol) and
// returns the largest error.
func checkRows(t *testing.T, rows []int32, got, want [][]float32, tol float64) float64 {
	t.Helper()
	worst := 0.0
	for k, t0 := range rows {
		w := make([]float64, len(want[k]))
		for i, x := range want[k] {
			w[i] = float64(x)
		}
		e := relErr(got[k], w)
		worst = max(worst, e)
		if e > tol || math.IsNaN(e) {
			t.Errorf("token row %d: relative error %.3g from its prefix's last row, want <= %g", t0, e, tol)
		}
	}
	return worst
}

// tokenRowsTol bounds the relative error between a token row's logits and its prefix's last
// row's: the two run in steps of different shapes, so their fp16 roundings differ.
const tokenRowsTol = 5e-3

// TestTokenLogitsMatchLastRows: StepTokenLogits's logits of a token row equal, within rounding,
// those of the same prefix run as its own sequence (its last row) on a runner of the same path,
// for steps of under 64 rows (wg_gemm or small_gemm on Hopper, cuBLAS with split-K partials)
// and of over 64 (cuBLAS), with a sequence that continues from earlier positions, a one-token
// sequence, every row or some, in chunks of MaxBatch rows; the step's own last rows are
// unchanged by the token rows.
func TestTokenLogitsMatchLastRows(t *testing.T) {
	needGPU(t)
	cfg, V := foldCfg, foldCfg.VocabSize
	w := testModel(cfg, 31)
	narrowings := []struct {
		name string
		fs   []func(*caps)
	}{{"device", nil}, {"small_gemm", []func(*caps){smallTo64}}, {"small_gemm not folded", []func(*caps){smallTo64, noFold}},
		{"cublas", []func(*caps){cublasOnly}}}
	cases := []struct {
		name         string
		lens, starts []int
		keep         func(int32) bool
	}{
		{"under 64 rows", []int{5, 17, 1, 9, 12}, []int{0, 0, 0, 0, 8}, func(int32) bool { return true }},
		{"over 64 rows", []int{30, 41, 3, 20}, []int{0, 0, 0, 0}, func(t int32) bool { return t%3 != 1 }},
	}
	for _, nw := range narrowings {
		t.Run(nw.name, func(t *testing.T) {
			opt := Options{MaxBatch: 8, MaxSeqLen: 64, Paged: true, MemoryFraction: 0.02}
			r, ref := openNarrow(t, cfg, w, opt, nw.fs...), openNarrow(t, cfg, w, opt, nw.fs...)
			defer r.Close()
			defer ref.Close()
			tables := tablesFor(r, 8)
			rng := rand.New(rand.NewPCG(31, 2))
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					seqs := rowSeqs(rng, V, tc.lens, tc.starts)
					prefillEarlier(t, r, seqs, tables)
					st := rowsStep(seqs, tables)
					rows := nonLastRows(st, tc.keep)
					got, last := tokenRowsRun(t, r, st, rows, V)
					worst := checkRows(t, rows, got, prefixLogits(t, ref, prefixes(st, seqs, rows), V), tokenRowsTol)
					st.TokenRows = nil
					plain := make([]float32, len(last))
					if err := r.StepLogits(st, make([]int32, len(st.SeqLens)), plain); err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(last, plain) {
						t.Errorf("the last rows' logits differ with token rows and without")
					}
					t.Logf("%d token rows, worst relative error %.3g", len(rows), worst)
				})
			}
		})
	}
}

// TestTokenLogitsInPasses: a step of more tokens than MaxTokens runs in passes of whole
// sequences; each pass's token rows are computed before the next pass overwrites the
// activations, and match their prefixes' last rows.
func TestTokenLogitsInPasses(t *testing.T) {
	needGPU(t)
	cfg, V := foldCfg, foldCfg.VocabSize
	w := testModel(cfg, 32)
	for _, cublas := range []bool{false, true} {
		t.Run(fmt.Sprintf("cublas=%v", cublas), func(t *testing.T) {
			var fs []func(*caps)
			if cublas {
				fs = append(fs, cublasOnly)
			}
			r := openNarrow(t, cfg, w, Options{MaxBatch: 8, MaxSeqLen: 32, MaxTokens: 32, Paged: true, MemoryFraction: 0.02}, fs...)
			defer r.Close()
			ref := openNarrow(t, cfg, w, Options{MaxBatch: 8, MaxSeqLen: 32, Paged: true, MemoryFraction: 0.02}, fs...)
			defer ref.Close()
			seqs := rowSeqs(rand.New(rand.NewPCG(32, 2)), V, []int{20, 15, 25, 8, 2}, []int{0, 0, 0, 0, 0}) // passes of 20, 15, 25, 10 tokens
			st := rowsStep(seqs, tablesFor(r, len(seqs)))
			rows := nonLastRows(st, func(int32) bool { return true })
			got, _ := tokenRowsRun(t, r, st, rows, V)
			worst := checkRows(t, rows, got, prefixLogits(t, ref, prefixes(st, seqs, rows), V), tokenRowsTol)
			t.Logf("%d token rows over 4 passes, worst relative error %.3g", len(rows), worst)
		})
	}
}

// TestTokenLogitsFromStepGraphs: the token rows of a step replayed from its graph (a shape met a
// second time is captured, then replayed) are bit-identical to those of its first, eager run.
func TestTokenLogitsFromStepGraphs(t *testing.T) {
	needGPU(t)
	cfg, V := foldCfg, foldCfg.VocabSize
	w := testModel(cfg, 33)
	for _, size := range []struct {
		name string
		lens []int
	}{{"under 64 rows", []int{9, 14, 1, 6}}, {"over 64 rows", []int{40, 33}}} {
		t.Run(size.name, func(t *testing.T) {
			rec := &recorder{}
			r := openNarrow(t, cfg, w, Options{MaxBatch: 8, MaxSeqLen: 64, Paged: true, Graphs: true, MemoryFraction: 0.02, Record: rec.record})
			defer r.Close()
			seqs := rowSeqs(rand.New(rand.NewPCG(33, 2)), V, size.lens, make([]int, len(size.lens)))
			st := rowsStep(seqs, tablesFor(r, len(seqs)))
			rows := nonLastRows(st, func(int32) bool { return true })
			first, firstLast := tokenRowsRun(t, r, st, rows, V)
			for run := 2; run <= 3; run++ { // captured, then replayed
				got, last := tokenRowsRun(t, r, st, rows, V)
				for k := range rows {
					if !slices.EqualFunc(got[k], first[k], func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
						t.Fatalf("run %d: token row %d's logits differ from the eager run's", run, rows[k])
					}
				}
				if !slices.Equal(last, firstLast) {
					t.Fatalf("run %d: the last rows' logits differ from the eager run's", run)
				}
			}
			captured := 0
			for _, l := range rec.entries() {
				if strings.Contains(l, "prefill or mixed step") {
					captured++
				}
			}
			if captured != 1 {
				t.Errorf("%d step graphs captured, want 1", captured)
			}
		})
	}
}

// TestBadTokenRows: malformed TokenRows fail with ErrBadStep naming the bad row, before the step
// runs; a callback's error ends the call as it is; the runner runs steps afterwards.
func TestBadTokenRows(t *testing.T) {
	needGPU(t)
	cfg := foldCfg
	r := openNarrow(t, cfg, testModel(cfg, 34), Options{MaxBatch: 2, MaxSeqLen: 32, Paged: true, MemoryFraction: 0.01})
	defer r.Close()
	tables := tablesFor(r, 2)
	step := func(rows ...int32) *Step { // sequences of 3 and 4 tokens: last rows 2 and 6
		st := &Step{TokenRows: rows}
		addSeq(st, []int32{1, 2, 3}, 0, tables[0], 0, 0, 0, 0)
		addSeq(st, []int32{4, 5, 6, 7}, 0, tables[1], 0, 0, 0, 0)
		return st
	}
	ok := func([]int32, []float32) error { return nil }
	for _, tc := range []struct {
		name string
		rows []int32
		want string
	}{
		{"out of range", []int32{0, 7}, "token row 1 is 7, want 0..6"},
		{"negative", []int32{-1}, "token row 0 is -1"},
		{"not ascending", []int32{3, 1}, "token row 1 is 1, want more than the row before it (3)"},
		{"repeated", []int32{1, 1}, "token row 1 is 1, want more than"},
		{"a last row", []int32{0, 1, 2}, "token row 2 is 2, the last row of sequence 0"},
		{"the step's last row", []int32{6}, "token row 0 is 6, the last row of sequence 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := r.StepTokenLogits(step(tc.rows...), make([]int32, 2), nil, ok)
			if !errors.Is(err, ErrBadStep) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want ErrBadStep mentioning %q", err, tc.want)
			}
		})
	}
	if err := r.StepLogits(step(0, 1), make([]int32, 2), nil); !errors.Is(err, ErrBadStep) || !strings.Contains(err.Error(), "no callback takes their logits") {
		t.Errorf("token rows through StepLogits: %v, want ErrBadStep", err)
	}
	stop := errors.New("enough")
	calls := 0
	err := r.StepTokenLogits(step(0, 1, 3, 4, 5), make([]int32, 2), nil, func([]int32, []float32) error { calls++; return stop })
	if err != stop || calls != 1 {
		t.Errorf("a callback's error: got %v after %d calls, want %v after 1", err, calls, stop)
	}
	if err := r.StepTokenLogits(step(0, 3), make([]int32, 2), nil, ok); err != nil {
		t.Errorf("a good step after bad ones: %v", err)
	}
}
