//go:build cgo

package gpu

import (
	"fmt"
	"slices"
	"testing"
)

// TestQueuedStepsMatchSteps runs the same 40 decode steps of 8 sequences without and with the
// hint Step.Repeats = 2, sampling at temperature 0.8 (so each draw depends on its seed and position) and
// greedily (the steps' sampler is then argmax_next alone, a graph of its own; on cuBLAS it also
// embeds the rows of the step queued after it, which then has no embedding kernel).
// Three sequences end after step 24, so the steps queued there are not the ones asked for; paged
// positions cross block boundaries, where nothing is queued unless the step says the sequences
// hold the next block (Step.Held, given as the scheduler does: each table holds the blocks of two
// positions past the step's, so the device's tables must be refreshed as the steps queued ahead
// move into new blocks; then more queued steps must be used than without); the runner closes
// with two steps queued. The sampled tokens must be the same, and on graphs the queued steps
// must have been used.
func TestQueuedStepsMatchSteps(t *testing.T) {
	needGPU(t)
	cfg, wideCfg := smallCfg, smallCfg
	wideCfg.NEmbd, wideCfg.NHead, wideCfg.Inner = 128, 2, 512
	w, wide := testModel(cfg, 31), testModel(wideCfg, 31)
	type variant struct {
		m      mode
		temp   float32
		held   bool
		cublas bool // the layer GEMMs on cuBLAS, not small_gemm: greedy steps queued ahead are embedded by the sampler before them
		wide   bool // wideCfg on the device's paths: on Hopper wg_gemm with the norms folded (steps embed their own rows)
	}
	var vs []variant
	for _, m := range modes {
		vs = append(vs, variant{m, 0.8, false, false, false})
		if m.graphs {
			vs = append(vs, variant{m, 0, false, false, false}, variant{m, 0, false, true, false}, variant{m, 0, false, false, true})
		}
		if m.graphs && m.paged {
			vs = append(vs, variant{m, 0.8, true, false, false}, variant{m, 0, true, false, false}, variant{m, 0, true, true, false},
				variant{m, 0, true, false, true})
		}
	}
	for _, c := range vs {
		m := c.m
		t.Run(fmt.Sprintf("%v,temperature=%v,held=%v,cublas=%v,wide=%v", m, c.temp, c.held, c.cublas, c.wide), func(t *testing.T) {
			run := func(ahead, held bool) (out []int32, hits int) {
				opt := Options{MaxBatch: 8, MaxSeqLen: 64, Paged: m.paged, Graphs: m.graphs, MemoryFraction: 0.02}
				cfg, w, narrow := cfg, w, []func(*caps){}
				if c.cublas { // and rows the warp kernels embed (rowWarp)
					cfg, w, narrow = wideCfg, wide, append(narrow, cublasOnly)
				}
				if c.wide {
					cfg, w = wideCfg, wide
				}
				r := openNarrow(t, cfg, w, opt, narrow...)
				defer r.Close()
				tables := tablesFor(r, 8)
				bs, _, width := r.Layout()
				tok := []int32{1, 2, 3, 4, 5, 6, 7, 8}
				for k := range 40 {
					B := 8
					if k > 24 {
						B = 5
					}
					st := decodeStep(B, int32(k), tables)
					copy(st.Tokens, tok[:B])
					for i := range st.Temperature {
						st.Temperature[i] = c.temp
						if held { // room for two positions more; the entries past it unset
							h := min(width, (k+2)/bs+1)
							st.Held = append(st.Held, int32(h))
							clear(st.Tables[i*width+h : (i+1)*width])
						}
					}
					next := make([]int32, B)
					if ahead {
						st.Repeats = 2
					}
					if err := r.Step(st, next); err != nil {
						t.Fatalf("step %d: %v", k, err)
					}
					out = append(out, next...)
					tok = next
				}
				var embeds, folded bool
				err := onWorker(r, func(s *state) error {
					p, err := s.newPlan(8, 8, c.temp == 0, graphStep, false)
					embeds, folded = p.embedNext, p.gemms.folded()
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				if c.cublas && embeds != (c.temp == 0) {
					t.Fatalf("greedy %v on cuBLAS: the sampler embeds the next step: %v", c.temp == 0, embeds)
				}
				if folded && embeds {
					t.Fatal("a folded step's sampler embeds the next step's rows (it writes no statistics)")
				}
				return out, r.Stats().Queued
			}
			want, _ := run(false, c.held)
			got, hits := run(true, c.held)
			if !slices.Equal(got, want) {
				t.Fatalf("with Repeats sampled\n%v\nwithout\n%v", got, want)
			}
			if m.graphs != (hits > 0) {
				t.Fatalf("graphs %v: %d predicted steps used", m.graphs, hits)
			}
			if c.held {
				if _, within := run(true, false); hits <= within {
					t.Fatalf("%d predicted steps used with the next blocks held, %d without", hits, within)
				}
			}
		})
	}
}

// TestSteadyQueuedStepsAllocateNothing: once a bucket's graphs exist (the plain one and the two
// predicted-step ones), decode steps with Repeats = 2, each asked for exactly as predicted
// except where a position starts a new block, make no Go heap, device or pinned allocation and
// no graph.
func TestSteadyQueuedStepsAllocateNothing(t *testing.T) {
	needGPU(t)
	w := testModel(smallCfg, 32)
	r, err := Open(smallCfg, w, Options{MaxBatch: 8, MaxSeqLen: 64, Paged: true, Graphs: true, MemoryFraction: 0.02})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const B = 5
	st := decodeStep(B, 0, tablesFor(r, B))
	st.Repeats = 2
	next := make([]int32, B)
	step := func() {
		if err := r.Step(st, next); err != nil {
			t.Fatal(err)
		}
		copy(st.Tokens, next)
		for i := range st.Start {
			st.Start[i]++
		}
	}
	step() // the plain graph, then the two predicted-step graphs
	step()
	before := r.Stats()
	allocs := testing.AllocsPerRun(20, step)
	after := r.Stats()
	hits := after.Queued - before.Queued
	if allocs != 0 {
		t.Errorf("a decode step ahead made %v Go heap allocations, want 0", allocs)
	}
	if after.Stats != before.Stats {
		t.Errorf("decode steps ahead changed the runner's allocations: before %+v, after %+v", before, after)
	}
	if hits == 0 {
		t.Error("no predicted step was asked for")
	}
}
