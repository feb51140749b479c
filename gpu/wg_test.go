//go:build cgo

package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"testing"
	"unsafe"

	"rosetop/gpu/cu"
)

// TestPackWG multiplies through the packed layout the way wgmma reads B from shared memory, from
// the PTX ISA's matrix descriptor for no swizzle and K-major B: core matrices of 8 columns x 8
// k (16 bytes a column), the leading byte offset between core matrices adjacent in K, the stride
// byte offset between those adjacent in N (the values wg_desc sets: 128 and 256), 16 k a wgmma
// starting 2 KB after the last. It also reads each block's K slices as one slab, as the kernel's
// bulk copy does. A wrong offset or order breaks the sum.
func TestPackWG(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	const K, N, lbo, sbo = 96, 192, 128, 256
	w := make([]float32, K*N)
	for i := range w {
		w[i] = halfToFloat(halfBits(float32(rng.NormFloat64())))
	}
	x := make([]float32, K)
	for i := range x {
		x[i] = float32(rng.IntN(9) - 4)
	}
	packed := make([]uint16, K*N)
	packWG(packed, w, nil, K, N, 0, 1)      // two goroutines' worth of blocks,
	packWG(packed, w, nil, K, N, 1, N/wgBN) // packed separately
	for _, splits := range []int{1, 2, 3, 6} {
		ks := K / splits
		for nb := range N / wgBN {
			for col := range wgBN {
				got, want := 0.0, 0.0
				for k := range K {
					want += float64(x[k]) * float64(w[k*N+nb*wgBN+col])
				}
				for s := range splits {
					slab := packed[(nb*K+s*ks)*wgBN:][:ks*wgBN] // the block's one bulk copy
					for kk := range ks / 16 {
						for k := range 16 {
							byteOff := kk*2048 + (col/8)*sbo + (k/8)*lbo + (col%8)*16 + (k%8)*2
							got += float64(x[s*ks+kk*16+k]) * float64(halfToFloat(slab[byteOff/2]))
						}
					}
				}
				if math.Abs(got-want) > 1e-9*max(1, math.Abs(want)) {
					t.Fatalf("%d slices, column %d: %g through the packed slabs, %g plainly", splits, nb*wgBN+col, got, want)
				}
			}
		}
	}
	// scale multiplies row k before the conversion, as packMMA does for the folded norms.
	scale := make([]float32, K)
	for k := range scale {
		scale[k] = float32(k%5) - 1.5
	}
	packWG(packed, w, scale, K, N, 0, N/wgBN)
	k, n := 37, 70 // block 1, k16 step 2
	off := (1*K+32)*wgBN + ((n%wgBN)/8)*128 + (k%16/8)*64 + (n%8)*8 + k%8
	if got, want := packed[off], halfBits(w[k*N+n]*scale[k]); got != want {
		t.Errorf("scaled element (%d, %d) = %#04x, want %#04x", k, n, got, want)
	}
}

// sliced and whole are wg_gemm plans: blocks of wgBN columns over K slices, and blocks of
// wgWholeBN columns that keep K whole over their warpgroups.
func sliced(cn, splits int) wgPlan { return wgPlan{cn: cn, splits: splits, bn: wgBN} }
func whole(cn int) wgPlan          { return wgPlan{cn: cn, splits: 1, bn: wgWholeBN} }

// TestPlanWG checks the plans of GPT-2 124M's four GEMMs (the fastest or nearly the fastest of
// every plan measured at 64 rows, bench/RESULTS.md) and the invariants of every plan.
func TestPlanWG(t *testing.T) {
	for _, c := range []struct {
		N, K, cluster int
		whole         bool
		want          wgPlan
	}{
		{2304, 768, 16, false, sliced(4, 2)}, // qkv: 36 x 2 blocks
		{768, 768, 16, false, sliced(4, 2)},  // attn proj: 12 x 2
		{3072, 768, 16, false, sliced(4, 2)}, // fc: 48 x 2
		{768, 3072, 16, false, sliced(2, 8)}, // fc proj: 12 x 8
		{2304, 768, 8, true, whole(8)},       // the wide plans: qkv, 72 blocks of two warpgroups
		{768, 768, 8, true, whole(8)},        // attn proj: 24
		{3072, 768, 8, true, whole(8)},       // fc: 96
		{768, 3072, 8, true, sliced(1, 8)},   // fc proj in clusters of 8: K too long to keep whole
		{768, 4096, 8, false, sliced(1, 16)}, // 16 slices: a cluster of 16 all the same
		{768, 256, 16, true, whole(8)},       // two warpgroups of 128
		{768, 3072, 16, true, sliced(2, 8)},  // K too long to keep whole
		{1024, 1024, 16, true, sliced(4, 4)}, // GPT-2 medium: K too long for two warpgroups
		{192, 768, 16, true, whole(2)},       // 6 blocks of 32: a cluster row of 2
		{96, 768, 16, true, wgPlan{}},        // no plan: N not a multiple of 64
	} {
		p, ok := planWG(c.N, c.K, c.cluster, c.whole)
		if want := c.want.bn > 0; ok != want || p != c.want {
			t.Errorf("planWG(%d, %d, %d, %v) = %+v, %v; want %+v", c.N, c.K, c.cluster, c.whole, p, ok, c.want)
		}
	}
	for _, sh := range [][2]int{{64, 64}, {192, 128}, {384, 128}, {128, 512}, {3072, 1024}, {1024, 4096}, {4800, 1600}, {1600, 6400}} {
		for _, cluster := range []int{wgWideCluster, smallMaxCluster} {
			for _, wh := range []bool{false, true} {
				p, ok := planWG(sh[0], sh[1], cluster, wh)
				if !ok {
					continue
				}
				blocks := sh[0] / p.bn
				if sh[0]%p.bn != 0 || blocks%p.cn != 0 || p.cn*p.splits > max(cluster, p.splits) || p.splits > smallMaxCluster ||
					(p.bn != wgBN && (p.bn != wgWholeBN || p.splits != 1)) || sh[1]%(16*p.splits*p.groups()) != 0 ||
					sh[1]/p.splits/p.groups() > wgMaxSlice || (p.bn == wgWholeBN && sh[1]/p.groups() < wgMinWhole) ||
					wgShared(wgMaxRows, sh[1], p, epiRes) > 227*1024 {
					t.Errorf("planWG(%d, %d, %d, %v) = %+v breaks the kernel's limits", sh[0], sh[1], cluster, wh, p)
				}
			}
		}
	}
	for _, sh := range [][2]int{{80, 768}, {0, 768}, {768, 6400}, {768, 40}} {
		if p, ok := planWG(sh[0], sh[1], smallMaxCluster, true); ok {
			t.Errorf("planWG(%d, %d) = %+v: want no plan", sh[0], sh[1], p)
		}
	}
	if g := planWGLayer(768, 3072); !g.on {
		t.Error("GPT-2 124M has no wg_gemm plans")
	} else if g.at(wgWideRows) != &g.wgLayerPlans || g.at(wgWideRows+1) != &g.wide || g.wide.fcProj != sliced(1, 8) ||
		g.qkv != sliced(4, 2) || g.wide.qkv != sliced(1, 2) || g.proj != sliced(4, 2) || g.wide.proj != sliced(4, 2) ||
		g.fc != sliced(4, 2) || g.wide.fc != whole(8) {
		t.Errorf("GPT-2 124M's plans by rows: %+v", g)
	}
	if g := planWGLayer(1280, 5120); g.on {
		t.Error("a width of 1280 runs wg_gemm; its embedding's 20 parts a row are more than the epilogues combine")
	}
	// The shared memory kept for the partials: none where they fit in the weights' slab; X's room
	// for 64 rows of K + 8 halves, or for whole 64 x 64 boxes (K 40 in one).
	if a, b := wgShared(64, 768, whole(4), epiLN), wgShared(64, 768, sliced(4, 2), epiLN); a != 768*32*2+64*776*2+64*8+24 ||
		b != 384*64*2+64*392*2+2*32*64*4+64*8+24 {
		t.Errorf("wgShared: %d bytes whole, %d sliced", a, b)
	}
	if n := wgShared(64, 80, sliced(1, 2), epiLN); n != 40*64*2+64*64*2+2*32*64*4+64*8+24 {
		t.Errorf("wgShared: %d bytes for slices of 40", n)
	}
}

// TestWGGEMMMatchesCuBLAS runs wg_gemm's plain epilogue against cuBLAS on GPT-2 124M's four GEMM
// shapes at several row counts, on random inputs, with the output poisoned (NaN) before each run
// so an unwritten element fails; rows past m must stay untouched. The layer's norm weights are 1,
// so the packed copies (gamma W for the QKV and fc GEMMs) equal the plain matrices.
func TestWGGEMMMatchesCuBLAS(t *testing.T) {
	needGPU(t)
	w := testModel(gpt2Cfg, 3)
	for i := range w.Layers[1].LN1W {
		w.Layers[1].LN1W[i], w.Layers[1].LN2W[i] = 1, 1
	}
	r := openNarrow(t, gpt2Cfg, w, Options{MaxBatch: 64, MaxSeqLen: 256, Paged: true, MemoryFraction: 0.01})
	defer r.Close()
	s := r.s
	if !s.caps.wg.on {
		t.Skipf("wg_gemm is not used on this GPU (compute capability %d)", s.ctx.Info().CC)
	}
	wg := &s.caps.wg
	C, F := gpt2Cfg.NEmbd, gpt2Cfg.Inner
	L := &s.wts.layers[1]
	input, nan := gemmInputs(9, wgMaxRows, F)
	ref, got := make([]float32, wgMaxRows*F), make([]float32, (wgMaxRows+1)*F)
	for _, g := range []struct {
		name    string
		x, w    cu.Ptr
		gemm    layerGEMM
		in, out int
		p       wgPlan
	}{
		{"qkv", s.act.xln, L.attnW, gemmQKV, C, 3 * C, wg.qkv},
		{"attn proj", s.act.att, L.projW, gemmProj, C, C, wg.proj},
		{"fc", s.act.xln, L.fcW, gemmFC, C, F, wg.fc},
		{"fc proj", s.act.h, L.fcProjW, gemmFCProj, F, C, wg.fcProj},
	} {
		for _, m := range []int{1, 3, 16, 33, 37, 48, 64} {
			if _, ok := wgKernel(epiPlain, wg.at(m).fc.bn, xBoxes(m)); g.gemm == gemmFC && !ok {
				continue // blocks that keep K whole: TestWGWholeMatchesSliced
			}
			n := m * g.out
			pl := stepPlan{rows: m, gemms: viaWG, pdl: s.caps.pdl}
			err := (&againstCuBLAS{x: g.x, w: g.w, dst: s.act.y, input: input, m: m, in: g.in, out: g.out, bytes: int64((n + g.out) * 4),
				ref: ref, got: unsafe.Pointer(&got[0]), nan: nan, build: func(p *program) {
					s.layerGEMM(&pl, p, L, g.gemm, s.act.y, gemmEpi{})
				}}).run(r)
			if err != nil {
				t.Fatalf("%s, %d rows: %v", g.name, m, err)
			}
			rel, bad := relErrWritten(n, func(i int) float64 { return float64(got[i]) }, func(i int) float64 { return float64(ref[i]) })
			if bad >= 0 {
				t.Fatalf("%s, %d rows: element %d (row %d) not written", g.name, m, bad, bad/g.out)
			}
			for i := n; i < n+g.out; i++ {
				if !math.IsNaN(float64(got[i])) {
					t.Fatalf("%s, %d rows: row %d (past the rows) written", g.name, m, m)
				}
			}
			checkRelErr(t, fmt.Sprintf("%s, %d rows (plan %+v)", g.name, m, g.p), rel, 1e-5)
		}
	}
}

// TestWGWholeMatchesSliced runs the MLP's first GEMM, folded norm and GELU included, on GPT-2
// 124M's shape with blocks that keep K whole (its plan past 48 rows) and with the K-sliced plan
// that TestWGGEMMMatchesCuBLAS checks against cuBLAS, on the same random rows and statistics: the
// fp16 outputs must agree to rounding, and every element must be written.
func TestWGWholeMatchesSliced(t *testing.T) {
	needGPU(t)
	r := openNarrow(t, gpt2Cfg, testModel(gpt2Cfg, 5), Options{MaxBatch: 64, MaxSeqLen: 256, Paged: true, MemoryFraction: 0.01})
	defer r.Close()
	s := r.s
	if !s.caps.wg.on {
		t.Skipf("wg_gemm is not used on this GPU (compute capability %d)", s.ctx.Info().CC)
	}
	C, F, eps := gpt2Cfg.NEmbd, gpt2Cfg.Inner, gpt2Cfg.Eps
	whole, sliced := s.caps.wg.wide.fc, s.caps.wg.fc
	if whole.bn != wgWholeBN || sliced.bn != wgBN {
		t.Fatalf("plans %+v and %+v: not one whole and one sliced", whole, sliced)
	}
	L, a := &s.wts.layers[0], &s.act
	rng := rand.New(rand.NewPCG(8, 8))
	input, _ := gemmInputs(11, wgMaxRows, C)
	parts, stride := C/wgBN, statStride(C)
	stats := make([]float32, 2*wgMaxRows*stride)
	for i := range wgMaxRows * parts { // each part's mean and M2 over its 64 channels
		row, p := i/parts, i%parts
		stats[2*(row*stride+p)], stats[2*(row*stride+p)+1] = float32(rng.NormFloat64()*0.1), float32(64*(0.5+rng.Float64()))
	}
	poison := make([]uint16, wgMaxRows*F)
	for i := range poison {
		poison[i] = 0x7e00 // fp16 NaN
	}
	for _, m := range []int{40, 49, 64} { // 40: X by tensor copies (the _box kernels)
		var out [2][]uint16
		for i, pl := range []wgPlan{whole, sliced} {
			out[i] = make([]uint16, m*F)
			err := onWorker(r, func(s *state) error {
				for _, u := range []struct {
					dst cu.Ptr
					src unsafe.Pointer
					n   int
				}{{a.xln, unsafe.Pointer(&input[0]), m * C * 2}, {a.stats, unsafe.Pointer(&stats[0]), len(stats) * 4},
					{a.h, unsafe.Pointer(&poison[0]), m * F * 2}} {
					if err := s.ctx.Upload(u.dst, u.src, int64(u.n)); err != nil {
						return err
					}
				}
				var p program
				p.wgGEMM("gemm fc", s.caps.pdl, a.h, a.xln, xLN, L.fcWg, m, C, F, pl,
					gemmEpi{kind: epiLNGELU, bias: L.fcD, colc: L.fcC, stats: a.stats, parts: parts}, C, eps)
				if err := s.run(&p); err != nil {
					return err
				}
				if err := s.ctx.Download(unsafe.Pointer(&out[i][0]), a.h, int64(m*F*2)); err != nil {
					return err
				}
				return s.ctx.Sync()
			})
			if err != nil {
				t.Fatalf("%d rows, plan %+v: %v", m, pl, err)
			}
		}
		var rel float64
		for i, o := range out { // each against the other: both written
			e, bad := relErrWritten(m*F, func(j int) float64 { return float64(halfToFloat(o[j])) },
				func(j int) float64 { return float64(halfToFloat(out[1-i][j])) })
			if bad >= 0 {
				t.Fatalf("%d rows: element %d (row %d) not written by plan %d", m, bad, bad/F, i)
			}
			rel = max(rel, e)
		}
		if rel > 2e-3 {
			t.Errorf("fc, %d rows: whole %+v against sliced %+v: relative error %.2e, want <= 2e-3", m, whole, sliced, rel)
		} else {
			t.Logf("fc, %d rows: whole against sliced: relative error %.2e", m, rel)
		}
	}
}

// TestGEMMPathNamesRows checks the path the header and the ledger name, for the caps of each
// kind of device: Hopper with the sm_90a module, Hopper without it, and the rest.
func TestGEMMPathNamesRows(t *testing.T) {
	g, w := planLayer(768, 3072, 132), planWGLayer(768, 3072)
	for _, c := range []struct {
		caps caps
		want string
	}{
		{caps{small: g, smallRows: 32, wg: w, wgRows: 64}, "rows 1-32 small_gemm, 33-64 wg_gemm (sm_90a), 65+ cuBLAS"},
		{caps{small: g, smallRows: 32}, "rows 1-32 small_gemm, 33+ cuBLAS"},
		{caps{wg: w, wgRows: 64}, "rows 1-64 wg_gemm (sm_90a), 65+ cuBLAS"},
		{caps{}, "cuBLAS GEMMs"},
	} {
		if got := c.caps.gemmPath(); got != c.want {
			t.Errorf("gemmPath() = %q, want %q", got, c.want)
		}
		for m := 1; m <= 80; m++ {
			n := 0
			for _, on := range []bool{c.caps.useSmall(m), c.caps.useWG(m), c.caps.onCuBLAS(m)} {
				if on {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%q: %d rows take %d paths, want 1", c.want, m, n)
			}
		}
	}
}

// TestWGEdgePlansMatchReference runs prefill and teacher-forced decode steps against the float64
// reference on a shape whose wg_gemm plans are the edge ones: a single K slice (QKV, and the MLP's
// first up to 48 rows: no partials pushed), K whole over two warpgroups of 128 (the MLP's first
// past 48 rows) and 16 slices in a cluster column (the MLP's second).
func TestWGEdgePlansMatchReference(t *testing.T) {
	cfg := Config{NLayer: 2, NHead: 4, NEmbd: 256, NPositions: 128, VocabSize: 1000, Inner: 4096, Eps: 1e-5}
	g := planWGLayer(cfg.NEmbd, cfg.Inner)
	if !g.on || g.qkv != sliced(4, 1) || g.fc != sliced(4, 1) || g.wide.fc != whole(8) || g.fcProj != sliced(1, 16) ||
		g.wide.fcProj != sliced(1, 16) {
		t.Fatalf("plans %+v: not the edge plans this test is for", g)
	}
	needGPU(t)
	w := testModel(cfg, 41)
	const steps = 8
	ps := makePlans(cfg, w, []int{1, 9, 30, 50, 7}, []int{0, 0, 0, 0, 3}, steps, 6)
	r := openNarrow(t, cfg, w, Options{MaxBatch: 8, MaxSeqLen: 64, MaxTokens: 64, Paged: true, Graphs: true, MemoryFraction: 0.02}, wgOnly)
	defer r.Close()
	if !r.s.caps.wg.on {
		t.Skipf("wg_gemm is not used on this GPU (compute capability %d)", r.s.ctx.Info().CC)
	}
	runPlans(t, r, cfg, ps, steps, 1e-2)
}

// TestProfileWGPlans times the batch-64 and batch-16 decode step graphs with wg_gemm's layer
// GEMMs on other (CN, S) plans than planWG's (in the narrow and the wide plans alike), one GEMM
// changed at a time, then together: the epilogues (the residual add and statistics, the folded
// norm and GELU) take longer on fewer, fuller blocks than the plain products gemmlab times. Set
// ROSETOP_GPU_PROFILE=1.
func TestProfileWGPlans(t *testing.T) {
	if os.Getenv("ROSETOP_GPU_PROFILE") == "" {
		t.Skip("ROSETOP_GPU_PROFILE is not set")
	}
	needGPU(t)
	w := testModel(gpt2Cfg, 1)
	type plans = wgLayerPlans // a zero plan keeps planWG's
	variants := []struct {
		name string
		p    plans
	}{
		{"planWG", plans{}},
		{"fc whole 8", plans{fc: whole(8)}},
		{"fc whole 4", plans{fc: whole(4)}},
		{"fc sliced 4x2", plans{fc: sliced(4, 2)}},
		{"fc proj 1x12", plans{fcProj: sliced(1, 12)}},
	}
	for _, B := range []int{64, 48, 32, 16, 1} {
		for round := range 2 {
			for _, v := range variants {
				profileGraph(t, w, B, fmt.Sprintf("round %d, %s", round, v.name), func(c *caps) {
					for _, g := range []*wgLayerPlans{&c.wg.wgLayerPlans, &c.wg.wide} {
						for _, o := range []struct{ dst, p *wgPlan }{{&g.qkv, &v.p.qkv}, {&g.proj, &v.p.proj}, {&g.fc, &v.p.fc},
							{&g.fcProj, &v.p.fcProj}} {
							if o.p.splits > 0 {
								*o.dst = *o.p
							}
						}
					}
				})
			}
		}
	}
}

// TestWGPrefetchesNextWeights: in a decode step on wg_gemm, each wg_gemm's last two arguments
// (what it prefetches into L2) are the packed weights of the step's next wg_gemm and their size,
// and the last one prefetches nothing. Runs without a GPU, on synthetic addresses.
func TestWGPrefetchesNextWeights(t *testing.T) {
	c := gpt2Cfg
	C, F := c.NEmbd, c.Inner
	g := planLayer(C, F, 132)
	s := launchState(c, true, caps{small: g, pdl: true, fold: folds(C, g), wg: planWGLayer(C, F), wgRows: wgMaxRows}, false)
	s.opt.MaxBatch, s.opt.MaxTokens = 64, 256
	setAddresses(reflect.ValueOf(s.wts), "wts")
	setAddresses(reflect.ValueOf(&s.act), "act")
	setAddresses(reflect.ValueOf(&s.meta), "meta")
	bytes := [4]int{C * 3 * C * 2, C * C * 2, C * F * 2, F * C * 2} // qkv, proj, fc, fc proj
	for _, rows := range []int{1, 33, 64} {
		p, err := s.newPlan(rows, rows, true, graphStep, false)
		if err != nil {
			t.Fatal(err)
		}
		prog := s.build(&p)
		var wgs []op
		for _, o := range prog.ops {
			if o.kind == opLaunch && o.k >= kWGGEMM && o.k < kWGGEMM+numWGKernels {
				wgs = append(wgs, o)
			}
		}
		if len(wgs) != 4*c.NLayer {
			t.Fatalf("%d rows: %d wg_gemm launches, want %d", rows, len(wgs), 4*c.NLayer)
		}
		for i, o := range wgs {
			a := prog.args[o.a0:o.a1]
			want, wantN := cu.P(0), cu.I(0)
			if i+1 < len(wgs) {
				want, wantN = prog.args[wgs[i+1].a0+2], cu.I(bytes[(i+1)%4]) // the next one's ws (y, X, ws, ...)
			}
			if a[len(a)-2] != want || a[len(a)-1] != wantN {
				t.Errorf("%d rows, wg_gemm %d (%s): prefetches %v, %v; want %v, %v", rows, i, o.name, a[len(a)-2], a[len(a)-1], want, wantN)
			}
		}
	}
}
