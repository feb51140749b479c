//go:build cgo

package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"rosetop/gpu/cu"
)

// TestPackMMA multiplies through the packed layout the way mma.m16n8k16 consumes it, written
// from the PTX ISA's fragment tables (B of a k16 step: lane l holds rows 2*(l%4) + {0, 1} in its
// first register and + {8, 9} in its second, column l/4; the C fragment adds over k), and checks
// the product against a plain one. A wrong lane, row or register order breaks the sum.
func TestPackMMA(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	const K, N = 96, 40
	w := make([]float32, K*N)
	for i := range w {
		w[i] = halfToFloat(halfBits(float32(rng.NormFloat64())))
	}
	x := make([]float32, K)
	for i := range x {
		x[i] = float32(rng.IntN(9) - 4)
	}
	packed := make([]uint16, K*N)
	packMMA(packed, w, nil, K, N, 0, 2)   // two goroutines' worth of tiles,
	packMMA(packed, w, nil, K, N, 2, N/8) // packed separately
	for nb := range N / 8 {
		for col := range 8 {
			got, want := 0.0, 0.0
			for k := range K {
				want += float64(x[k]) * float64(w[k*N+nb*8+col])
			}
			for kp := range K / 32 {
				for l := range 32 {
					if l/4 != col {
						continue
					}
					h := packed[((nb*(K/32)+kp)*32+l)*8:][:8]
					for half := range 2 { // the step's two k16 halves: registers .x.y, then .z.w
						k16 := kp*32 + 16*half
						for reg := range 2 {
							for e := range 2 {
								k := k16 + 2*(l%4) + 8*reg + e
								got += float64(x[k]) * float64(halfToFloat(h[4*half+2*reg+e]))
							}
						}
					}
				}
			}
			if math.Abs(got-want) > 1e-9*max(1, math.Abs(want)) {
				t.Fatalf("column %d: %g through the packed fragments, %g plainly", nb*8+col, got, want)
			}
		}
	}
}

// TestPlanSmall checks the plans of GPT-2 124M's four GEMMs on a 132-multiprocessor H200 (the
// shapes and block counts the kernel was measured with) and the invariants of every plan.
func TestPlanSmall(t *testing.T) {
	for _, c := range []struct {
		N, K int
		want smallPlan
	}{
		{2304, 768, smallPlan{nt: 2, splits: 4, kp: 6}},  // qkv: 36 x 4 = 144 blocks
		{768, 768, smallPlan{nt: 2, splits: 12, kp: 2}},  // attn proj: 12 x 12
		{3072, 768, smallPlan{nt: 2, splits: 3, kp: 8}},  // fc: 48 x 3
		{768, 3072, smallPlan{nt: 2, splits: 12, kp: 8}}, // fc proj: 12 x 12
	} {
		if p, ok := planSmall(c.N, c.K, 132); !ok || p != c.want {
			t.Errorf("planSmall(%d, %d) = %+v, %v; want %+v", c.N, c.K, p, ok, c.want)
		}
	}
	for _, sh := range [][2]int{{64, 64}, {192, 64}, {256, 64}, {64, 256}, {3072, 1024}, {1024, 4096}, {4800, 1600}, {1600, 6400}, {50, 64}} {
		p, ok := planSmall(sh[0], sh[1], 132)
		if !ok {
			continue
		}
		if sh[0]%(32*p.nt) != 0 || p.splits < 1 || p.splits > smallMaxCluster || 32*p.kp*p.splits != sh[1] || p.kp*p.nt*4 > smallWeightRegs {
			t.Errorf("planSmall(%d, %d) = %+v breaks the kernel's limits", sh[0], sh[1], p)
		}
	}
	if _, ok := planSmall(50, 64, 132); ok {
		t.Errorf("planSmall accepted N = 50 (not a multiple of 32)")
	}
	if _, ok := planSmall(1600, 6400, 132); ok {
		t.Errorf("planSmall accepted K = 6400, whose slices need more than %d registers at 16 slices", smallWeightRegs)
	}
}

// TestSmallGEMMMatchesCuBLAS runs small_gemm against cuBLAS on GPT-2 124M's four GEMM shapes at
// several row counts, on random inputs, with the output poisoned (NaN) before each run so an
// unwritten element fails. Both accumulate the same fp16 products in fp32; only the order of the
// sums differs.
func TestSmallGEMMMatchesCuBLAS(t *testing.T) {
	needGPU(t)
	w := testModel(gpt2Cfg, 3)
	// Norms not folded: the packed matrices are the plain ones (folded, two hold gamma W; fold_test.go).
	r := openNarrow(t, gpt2Cfg, w, Options{MaxBatch: 64, MaxSeqLen: 256, Paged: true, MemoryFraction: 0.01}, noFold, smallTo64)
	defer r.Close()
	s := r.s
	if !s.caps.small.on {
		t.Skipf("small_gemm is not used on this GPU (compute capability %d)", s.ctx.Info().CC)
	}
	sg := &s.caps.small
	C, F := gpt2Cfg.NEmbd, gpt2Cfg.Inner
	L := &s.wts.layers[1]
	input, nan := gemmInputs(9, smallMaxRows, F)
	ref, got := make([]float32, smallMaxRows*F), make([]float32, smallMaxRows*F)
	gotH := make([]uint16, smallMaxRows*F)
	for _, g := range []struct {
		name      string
		x, w, wp  cu.Ptr
		in, out   int
		p         smallPlan
		gelu      bool
		bias      cu.Ptr
		biasSlice []float32
	}{
		{"qkv", s.act.xln, L.attnW, L.attnWp, C, 3 * C, sg.qkv, false, 0, nil},
		{"attn proj", s.act.att, L.projW, L.projWp, C, C, sg.proj, false, 0, nil},
		{"fc+gelu", s.act.xln, L.fcW, L.fcWp, C, F, sg.fc, true, L.fcB, w.Layers[1].FCB},
		{"fc proj", s.act.h, L.fcProjW, L.fcProjWp, F, C, sg.fcProj, false, 0, nil},
	} {
		for _, m := range []int{1, 3, 16, 37, 64} {
			n := m * g.out
			e, dst, bytes, out := gemmEpi{}, s.act.y, int64(n*4), unsafe.Pointer(&got[0])
			if g.gelu { // g.x is not h: the fc input is xln
				e, dst, bytes, out = gemmEpi{kind: epiGELU, bias: g.bias}, s.act.h, int64(n*2), unsafe.Pointer(&gotH[0])
			}
			err := (&againstCuBLAS{x: g.x, w: g.w, dst: dst, input: input, m: m, in: g.in, out: g.out, bytes: bytes, ref: ref, got: out,
				nan: nan, build: func(p *program) {
					p.smallGEMM(g.name, s.caps.pdl, dst, g.x, g.wp, m, g.in, g.out, g.p, e, C, gpt2Cfg.Eps)
				}}).run(r)
			if err != nil {
				t.Fatalf("%s, %d rows: %v", g.name, m, err)
			}
			gotAt, want, tol := func(i int) float64 { return float64(got[i]) }, func(i int) float64 { return float64(ref[i]) }, 1e-5
			if g.gelu { // fp16 output
				gotAt, tol = func(i int) float64 { return float64(halfToFloat(gotH[i])) }, 1e-3
				want = func(i int) float64 {
					u := float64(ref[i]) + float64(g.biasSlice[i%g.out])
					return 0.5 * u * (1 + math.Tanh(0.7978845608028654*(u+0.044715*u*u*u)))
				}
			}
			rel, bad := relErrWritten(n, gotAt, want)
			if bad >= 0 {
				t.Fatalf("%s, %d rows: element %d (row %d) not written", g.name, m, bad, bad/g.out)
			}
			checkRelErr(t, fmt.Sprintf("%s, %d rows (plan %+v)", g.name, m, g.p), rel, tol)
		}
	}
}

// TestProfileSmallGEMM times small_gemm for every plan of GPT-2 124M's four layer GEMMs (the
// plans planSmall could pick from), at 1 and 64 rows, 24 calls back to back with PDL as in a step.
func TestProfileSmallGEMM(t *testing.T) {
	r := openProfileGPT2(t)
	defer r.Close()
	s, L := r.s, &r.s.wts.layers[0]
	if !s.caps.small.on {
		t.Skip("small_gemm is not used on this GPU")
	}
	C, F := gpt2Cfg.NEmbd, gpt2Cfg.Inner
	const reps = 24
	for _, g := range []struct {
		name    string
		x, wp   cu.Ptr
		in, out int
	}{{"qkv", s.act.xln, L.attnWp, C, 3 * C}, {"attn proj", s.act.att, L.projWp, C, C}, {"fc", s.act.xln, L.fcWp, C, F}, {"fc proj", s.act.h, L.fcProjWp, F, C}} {
		for _, nt := range []int{2, 1} {
			for sp := 1; sp <= smallMaxCluster; sp++ {
				if g.out%(32*nt) != 0 || g.in%(32*sp) != 0 || g.in/(32*sp)*nt*4 > smallWeightRegs || g.out/(32*nt)*sp < 36 {
					continue
				}
				p := smallPlan{nt: nt, splits: sp, kp: g.in / (32 * sp)}
				err := onWorker(r, func(s *state) error {
					k := s.k[smallGEMMKernel(nt, epiPlain)]
					if err := s.ctx.SetMaxShared(k, smallShared(smallMaxRows, p)); err != nil {
						return err
					}
					return s.ctx.AllowBigClusters(k)
				})
				if err != nil {
					t.Fatal(err)
				}
				line := fmt.Sprintf("small_gemm %-9s plan %+v, %3d blocks:", g.name, p, g.out/(32*nt)*sp)
				for _, m := range []int{1, 64} {
					var prog program
					for range reps {
						prog.smallGEMM(g.name, s.caps.pdl, s.act.y, g.x, g.wp, m, g.in, g.out, p, gemmEpi{}, C, gpt2Cfg.Eps)
					}
					us, err := timeProgram(r, 20, &prog)
					if err != nil {
						t.Fatalf("%s: %v", line, err)
					}
					line += fmt.Sprintf("  %d rows %.2f us", m, us/reps)
				}
				t.Log(line)
			}
		}
	}
}
