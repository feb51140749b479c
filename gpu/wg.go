//go:build cgo

package gpu

import (
	"fmt"

	"rosetop/gpu/cu"
)

// The decode GEMMs of steps of up to 64 rows on Hopper: gemm_sm90a.cu's wg_gemm, where its
// module loads. A block computes a block of columns with wgmma, its weights bulk copies issued
// before the PDL wait from a copy packed in wgmma's order (packWG), X's slice (by tensor copies
// or row by row: xmaps.go) shared over a cluster row of column blocks by multicast. Either a
// block takes 64 columns of a K slice, and the slices of a cluster column are summed by pushing
// partial rows into their owners' shared memory; or it takes 32 columns of all of K, split over
// its two warpgroups and summed in its own shared memory. It runs only with the norms folded
// into its epilogues (fold.go): a layer is its four GEMMs and the attention kernel.

const (
	wgBN          = 64  // columns a block of a K-sliced plan
	wgWholeBN     = 32  // columns a block of a plan that keeps K whole
	wgMaxGroups   = 2   // warpgroups a block that keeps K whole (gemm_sm90a.cu: 128 threads each)
	wgMinWhole    = 128 // the least K a warpgroup of such a block: its partial fits in its half of the slab
	wgMaxSlice    = 384 // the longest K a warpgroup: A's fragments in registers (WG_KSMAX)
	wgMaxRows     = 64  // wgmma's M
	wgMaxRow      = 4   // the widest cluster row of K-sliced blocks: more share X's load (bench/RESULTS.md)
	wgWholeRow    = 8   // ... of blocks that keep K whole
	wgGroupThread = 128 // threads a warpgroup
	// wgWideRows, wgWideCluster: steps of more rows take plans of clusters of at most 8 blocks,
	// the portable size (wgGEMMs.wide).
	wgWideRows    = 48
	wgWideCluster = 8
)

// wgEpilogues are wg_gemm's kernels for blocks of wgBN columns, in kernelID order from kWGGEMM
// (gemm_sm90a.cu WG_KERNEL); wgWholeEpilogues are those for blocks of wgWholeBN, after them; then
// the same again whose X comes by tensor copies (xmaps.go).
var (
	wgEpilogues      = [...]epilogue{epiPlain, epiLN, epiLNGELU, epiRes}
	wgWholeEpilogues = [...]epilogue{epiLNGELU}
)

// numWGKernels counts wg_gemm's kernels.
const numWGKernels = 2 * kernelID(len(wgEpilogues)+len(wgWholeEpilogues))

// wgKernel is wg_gemm with epilogue e for blocks of bn columns, X by tensor copies when boxes; ok
// is false for an epilogue or a width it does not have.
func wgKernel(e epilogue, bn int, boxes bool) (kernelID, bool) {
	k, es := kWGGEMM, wgEpilogues[:]
	if boxes {
		k += numWGKernels / 2
	}
	switch bn {
	case wgBN:
	case wgWholeBN:
		k, es = k+kernelID(len(wgEpilogues)), wgWholeEpilogues[:]
	default:
		return 0, false
	}
	for i, w := range es {
		if w == e {
			return k + kernelID(i), true
		}
	}
	return 0, false
}

// wgPlan is how wg_gemm runs one (N, K) shape: blocks of bn columns, K in splits slices (a
// cluster column), clusters of cn column blocks sharing X (a cluster row). Blocks of wgBN columns
// are one warpgroup; blocks of wgWholeBN keep K whole (splits 1) over wgMaxGroups.
type wgPlan struct{ cn, splits, bn int }

// groups is the warpgroups of a block of plan p.
func (p wgPlan) groups() int {
	if p.bn == wgWholeBN {
		return wgMaxGroups
	}
	return 1
}

// planWG, when whole, keeps K whole in a block of wgWholeBN columns where its wgMaxGroups
// warpgroups of wgMinWhole to wgMaxSlice K each (a multiple of xBox: each starts at a box's first
// column) hold it (no partial sums leave the block); else, or where they cannot, it picks the
// fewest K slices of at most wgMaxSlice (a multiple of 16) over blocks of wgBN columns. The
// cluster row is the widest that divides the column blocks, within maxCluster blocks a cluster:
// up to wgMaxRow blocks for K slices, wgWholeRow for K whole. ok is false when N is not a
// positive multiple of 64 (packWG's blocks) or no slice fits.
func planWG(N, K, maxCluster int, whole bool) (p wgPlan, ok bool) {
	if N%wgBN != 0 || N < wgBN {
		return p, false
	}
	row := func(blocks, splits, cn int) int {
		for cn > 1 && (blocks%cn != 0 || cn*splits > maxCluster) {
			cn /= 2
		}
		return cn
	}
	if g := wgMaxGroups; whole && K%(xBox*g) == 0 && K/g <= wgMaxSlice && K/g >= wgMinWhole {
		return wgPlan{cn: row(N/wgWholeBN, 1, wgWholeRow), splits: 1, bn: wgWholeBN}, true
	}
	for s := 1; s <= smallMaxCluster; s++ {
		if K%(16*s) == 0 && K/s <= wgMaxSlice {
			return wgPlan{cn: row(N/wgBN, s, wgMaxRow), splits: s, bn: wgBN}, true
		}
	}
	return p, false
}

// wgLayerPlans are the plans of a layer's four GEMMs.
type wgLayerPlans struct{ qkv, proj, fc, fcProj wgPlan }

// wgGEMMs are a layer's plans for steps of up to wgWideRows rows and for wider ones; on is false
// when wg_gemm is not used.
type wgGEMMs struct {
	on           bool
	wgLayerPlans // clusters of up to 16 blocks
	// wide: clusters of up to wgWideCluster blocks, for steps of more than wgWideRows rows (GPT-2:
	// the MLP's second GEMM 1 x 8 instead of 2 x 8, QKV 1 x 2 instead of 4 x 2; faster at 64 rows,
	// slower at 1-48: RESULTS.md).
	wide wgLayerPlans
}

// at is the plans of a step of m rows.
func (g *wgGEMMs) at(m int) *wgLayerPlans {
	if m > wgWideRows {
		return &g.wide
	}
	return &g.wgLayerPlans
}

// planWGLayer plans the four GEMMs of a layer of width C and MLP width F. The MLP's first keeps K
// whole past wgWideRows rows, and the QKV GEMM's cluster rows are single blocks there (each copies
// X alone, by tensor copies: xBoxes); the rest slice K and share X (GPT-2 124M: each faster only
// there, bench/RESULTS.md). They run only folded (fold.go); the GEMMs that end a residual branch
// take blocks of 64 columns, so that the next norm combines few statistics pairs (one a block).
func planWGLayer(C, F int) wgGEMMs {
	var g wgGEMMs
	var ok [4]bool
	plan := func(maxCluster int) wgLayerPlans {
		var p wgLayerPlans
		p.qkv, ok[0] = planWG(3*C, C, maxCluster, false)
		p.proj, ok[1] = planWG(C, C, maxCluster, false)
		p.fc, ok[2] = planWG(F, C, maxCluster, maxCluster == wgWideCluster)
		p.fcProj, ok[3] = planWG(C, F, maxCluster, false)
		return p
	}
	g.wide = plan(wgWideCluster)
	g.wide.qkv.cn = 1
	g.wgLayerPlans = plan(smallMaxCluster) // ok: whether a slice fits, the same for both
	g.on = ok[0] && ok[1] && ok[2] && ok[3] && foldsAt(C, wgBN)
	return g
}

// wgShared is the dynamic shared memory of a wg_gemm block for m rows and K = k with epilogue e
// (gemm_sm90a.cu): W's slab, X's slice (room for whole boxes of xBox x xBox, or for 64 rows of
// ks + 8 halves), the partial slots, the residual's rows (epiRes), the rows' norms and three
// mbarriers.
func wgShared(m, k int, p wgPlan, e epilogue) int {
	ks, r := k/p.splits, (m+p.splits-1)/p.splits
	n := ks*p.bn*2 + max((ks+xBox-1)/xBox*xBox*xBox*2, 64*(ks+8)*2) + 64*8 + 3*8
	if p.bn == wgBN { // the partial slots: blocks that keep K whole sum theirs in their weights' slab
		n += p.splits * r * p.bn * 4
	}
	if e == epiRes {
		n += r * p.bn * 4
	}
	return n
}

// packWG writes the fp16 copy of the row-major (K, N) matrix src (its row k times scale[k] when
// scale is not nil) in wg_gemm's order, for the 64-column blocks [nbLo, nbHi): block nb's k16
// step kk is 1024 halves at (nb*K/16 + kk)*1024, wgmma's no-swizzle K-major core matrices (8
// columns x 8 k, 128 bytes): column n, row k at (n/8)*128 + (k%16/8)*64 + (n%8)*8 + k%8. So a
// block's K slice of any length is one contiguous slab, and the half of a k16 step that a block
// of 32 columns takes is 512 contiguous halves. Blocks may be packed by different goroutines at
// once.
func packWG(dst []uint16, src, scale []float32, K, N, nbLo, nbHi int) {
	for nb := nbLo; nb < nbHi; nb++ {
		for k := range K {
			row, base := src[k*N+nb*wgBN:][:wgBN], wgAt(nb, K, k)
			s := float32(1)
			if scale != nil {
				s = scale[k]
			}
			for n, v := range row {
				dst[base+(n/8)*128+(n%8)*8] = halfBits(v * s)
			}
		}
	}
}

// wgAt is where packWG puts row k of column 0 of 64-column block nb of a matrix of K rows; column
// n is (n/8)*128 + (n%8)*8 halves further.
func wgAt(nb, K, k int) int { return (nb*K+k/16*16)*wgBN + (k%16/8)*64 + k%8 }

// wgAttrs lets each wg_gemm kernel have the dynamic shared memory its plans need at wgMaxRows
// rows and clusters of more than 8 blocks. It reports false, setting nothing more, when this
// device cannot hold a plan's memory.
func (s *state) wgAttrs(g wgGEMMs, C, F int) (bool, error) {
	need := 0
	for _, p := range []*wgLayerPlans{&g.wgLayerPlans, &g.wide} {
		for _, q := range []struct {
			p wgPlan
			k int
		}{{p.qkv, C}, {p.proj, C}, {p.fc, C}, {p.fcProj, F}} {
			need = max(need, wgShared(wgMaxRows, q.k, q.p, epiRes))
		}
	}
	if need > s.ctx.Info().MaxSharedOptin {
		return false, nil
	}
	for i := range numWGKernels {
		k := s.k[kWGGEMM+i]
		if err := s.ctx.SetMaxShared(k, need); err != nil {
			return false, err
		}
		if err := s.ctx.AllowBigClusters(k); err != nil {
			return false, err
		}
	}
	return true, nil
}

// wgGEMM appends y(m, out) = x(m, in) W through epilogue e on wg_gemm, x activation buffer xb,
// from W's packed copy wp with plan pl (y fp32, or fp16 for the GELU epilogue; with epiRes y is
// the residual stream). C and eps are the model's width and norm epsilon, for the folded norms.
// m must be 1..wgMaxRows.
func (p *program) wgGEMM(name string, pdl bool, y, x cu.Ptr, xb xBuffer, wp cu.Ptr, m, in, out int, pl wgPlan, e gemmEpi, C int, eps float32) {
	boxes := xBoxes(m)
	k, ok := wgKernel(e.kind, pl.bn, boxes)
	switch {
	case m < 1 || m > wgMaxRows:
		p.fail(fmt.Errorf("gpu: wg_gemm for %d rows, want 1..%d", m, wgMaxRows))
		return
	case !ok:
		p.fail(fmt.Errorf("gpu: wg_gemm has no epilogue %d for blocks of %d columns", e.kind, pl.bn))
		return
	}
	p.launchCluster(name, k, out/pl.bn, pl.splits, wgGroupThread*pl.groups(), wgShared(m, in, pl, e.kind), pdl, pl.cn, pl.splits,
		cu.P(y), xArg(x, xb, m, boxes), cu.P(wp), cu.P(e.bias), cu.I(m), cu.I(out), cu.I(in), cu.I(pl.cn), cu.P(e.colc), cu.P(e.stats),
		cu.I(e.parts), cu.I(statStride(C)), cu.F(eps), cu.P(e.x16), cu.P(e.next), cu.I(e.nextBytes))
}
