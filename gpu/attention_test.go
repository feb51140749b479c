//go:build cgo

package gpu

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// attnCfg has GPT-2's head size (64: 8 lanes a position, 16 positions a step of the kernel's lane
// groups, rows of 32), so its contexts cross the attention kernel's rows of keys and values
// (gpt2.cu ATT_UNROLL, ATT_BUFS) the way GPT-2's do, and it runs the 64-dim copy of the kernel;
// smallCfg's heads of 16 make rows of 128 positions, longer than its tests' contexts.
var attnCfg = Config{NLayer: 1, NHead: 2, NEmbd: 128, NPositions: 512, VocabSize: 500, Inner: 512, Eps: 1e-5}

// TestAttentionRowsMatchReference: prompts whose prefill and decode contexts start, end and
// cross the attention kernel's rows and pairs of rows (multiples of 16 positions up to 255), in
// all four modes and with paged blocks of 1, 4 and 64 positions, teacher-forced against the CPU
// reference.
func TestAttentionRowsMatchReference(t *testing.T) {
	needGPU(t)
	cfg := attnCfg
	w := testModel(cfg, 12)
	const steps = 4
	lens := []int{1, 14, 30, 47, 63, 79, 95, 127, 150, 191, 252}
	ps := makePlans(cfg, w, lens, make([]int, len(lens)), steps, 6)
	type variant struct {
		m  mode
		bs int // paged block size; 0: the default
	}
	vs := []variant{{modes[0], 0}, {modes[1], 0}, {modes[2], 0}, {modes[3], 0}, {modes[3], 1}, {modes[3], 4}, {modes[3], 64}}
	for _, v := range vs {
		t.Run(fmt.Sprintf("%v,bs=%d", v.m, v.bs), func(t *testing.T) {
			r, err := Open(cfg, w, Options{MaxBatch: len(lens), MaxSeqLen: 256, MaxTokens: 1024, Paged: v.m.paged, Graphs: v.m.graphs,
				BlockSize: v.bs, MemoryFraction: 0.02})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			runPlans(t, r, cfg, ps, steps, 1e-2)
		})
	}
}

// TestProfileAttention logs the attention kernels' GPU time per decode step (a graph of only
// the step's 12 attention launches, replayed back to back) at batch 1 and 64 over contexts.
// Set ROSETOP_GPU_PROFILE=1; ROSETOP_PROFILE_CASE=BATCH:CONTEXT runs one case (its first step
// is an eager one, for a kernel profiler).
func TestProfileAttention(t *testing.T) {
	if os.Getenv("ROSETOP_GPU_PROFILE") == "" {
		t.Skip("ROSETOP_GPU_PROFILE is not set")
	}
	needGPU(t)
	w := testModel(gpt2Cfg, 1)
	r, err := Open(gpt2Cfg, w, Options{MaxBatch: 64, MaxSeqLen: 1024, Paged: true, MemoryFraction: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	batches, contexts := []int{1, 64}, []int{16, 32, 48, 64, 80, 96, 128, 160, 192, 256, 512}
	if c := os.Getenv("ROSETOP_PROFILE_CASE"); c != "" { // one case, e.g. 64:128 (for ncu)
		var B, ctx int
		if _, err := fmt.Sscanf(c, "%d:%d", &B, &ctx); err != nil || B < 1 || B > 64 || ctx < 1 || ctx > 1024 {
			t.Fatalf("ROSETOP_PROFILE_CASE=%q: want BATCH:CONTEXT, batch 1-64, context 1-1024", c)
		}
		batches, contexts = []int{B}, []int{ctx}
	}
	for _, B := range batches {
		var b strings.Builder
		for _, ctx := range contexts {
			st := decodeStep(B, int32(ctx-1), tablesFor(r, B))
			clear(st.Temperature)
			fmt.Fprintf(&b, " %d:%.1f", ctx, kindGraph(t, r, st, "attention"))
		}
		t.Logf("batch %d, attention us per step at context:%s", B, b.String())
	}
}

// kindGraph returns the GPU time (us per replay, back to back) of a graph of only op's launches
// of st's program (st run eagerly: its metadata upload and forward pass). The whole program runs
// once first, so that the device holds st's metadata: the graph has no upload of its own.
func kindGraph(t *testing.T, r *Runner, st *Step, op string) float64 {
	t.Helper()
	all := stepProgram(t, r, st)
	if err := onWorker(r, func(s *state) error {
		if err := s.run(all); err != nil {
			return err
		}
		return s.ctx.Sync()
	}); err != nil {
		t.Fatal(err)
	}
	prog := only(all, op)
	if len(prog.ops) == 0 {
		t.Fatalf("no %q op in the step", op)
	}
	us, err := timeProgram(r, 20, prog)
	if err != nil {
		t.Fatal(err)
	}
	return us
}
