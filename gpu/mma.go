//go:build cgo

package gpu

// The decode GEMMs on Hopper: gemm.cu's small_gemm runs the four weight GEMMs of a layer for steps
// of up to smallMaxRows token rows, from copies of the weights packed in the order its tensor-core
// fragments are loaded, launched with programmatic dependent launch so the weights stream in while
// the previous kernel finishes, and with K split over a thread block cluster. Larger steps (prefill)
// and other GPUs use cuBLAS on the row-major weights.

const (
	smallMaxRows    = 64  // gemm.cu's M limit: 4 m16 tiles
	smallThreads    = 128 // 4 warps
	smallMaxCluster = 16  // Hopper's largest cluster (past the portable 8: allowed per kernel, smallAttrs)
	smallWeightRegs = 64  // 32-bit registers of W per thread: kp * nt * 4 (gemm.cu's KPMAX * NT * 4)
)

// smallPlan is how small_gemm runs one (N, K) shape: nt n8 tiles per warp (a block covers 32*nt
// of the N columns), K cut into splits slices of kp k32 steps, one slice per block of a cluster.
type smallPlan struct{ nt, splits, kp int }

// planSmall picks a plan for Y(m, N) = X(m, K) W: the widest blocks (nt 2 before 1) and the fewest
// K slices whose grid has at least sms blocks, else the plan with the most blocks. ok is false when
// no plan fits (N not a multiple of 32, K not a multiple of 32, or a slice needs too many
// registers even at 16 slices).
func planSmall(N, K, sms int) (p smallPlan, ok bool) {
	blocks := func(q smallPlan) int { return N / (32 * q.nt) * q.splits }
	for _, nt := range []int{2, 1} {
		if N%(32*nt) != 0 || K%32 != 0 {
			continue
		}
		for s := 1; s <= smallMaxCluster; s++ {
			if K%(32*s) != 0 || K/(32*s)*nt*4 > smallWeightRegs {
				continue
			}
			q := smallPlan{nt: nt, splits: s, kp: K / (32 * s)}
			if blocks(q) >= sms {
				return q, true
			}
			if !ok || blocks(q) > blocks(p) {
				p, ok = q, true
			}
		}
	}
	return p, ok
}

// smallShared is the dynamic shared memory of a small_gemm block for m rows (gemm.cu): X's slice
// (rows padded by 8 halves) or, after the products, the fp32 partial tile (rows padded by 4
// floats); then the norms of the rows the block writes (64 float pairs) and, for the residual
// epilogue, those rows of the residual stream.
func smallShared(m int, p smallPlan) int {
	rows, bn := (m+15)/16*16, 32*p.nt
	region := max(rows*(32*p.kp+8)*2, rows*(bn+4)*4)
	return region + 64*8 + (m+p.splits-1)/p.splits*bn*4
}

// packMMA writes the fp16 copy of the row-major (K, N) matrix src (its row k times scale[k]
// when scale is not nil) in small_gemm's order, for the n8 column tiles [nbLo, nbHi): tile nb,
// k32 step kp and lane l (g = l/4, t = l%4) own the 8 halves at ((nb*K/32 + kp)*32 + l)*8:
// column nb*8+g of rows kp*32 + 2t + {0, 1, 8, 9, 16, 17, 24, 25}, the B fragments of
// mma.m16n8k16 for the step's two k16 halves. Tiles may be packed by different goroutines at
// once.
func packMMA(dst []uint16, src, scale []float32, K, N, nbLo, nbHi int) {
	KT := K / 32
	rows := [8]int{0, 1, 8, 9, 16, 17, 24, 25}
	for nb := nbLo; nb < nbHi; nb++ {
		for kp := range KT {
			for l := range 32 {
				col, k0 := nb*8+l/4, kp*32+2*(l%4)
				out := dst[((nb*KT+kp)*32+l)*8:][:8]
				for e, r := range rows {
					v := src[(k0+r)*N+col]
					if scale != nil {
						v *= scale[k0+r]
					}
					out[e] = halfBits(v)
				}
			}
		}
	}
}

// smallGEMMs are the plans of a layer's four GEMMs; on is false when small_gemm is not used.
type smallGEMMs struct {
	on                    bool
	qkv, proj, fc, fcProj smallPlan
}

// planLayer plans the four GEMMs of a layer of width C and MLP width F on sms multiprocessors.
func planLayer(C, F, sms int) smallGEMMs {
	var g smallGEMMs
	var ok [4]bool
	g.qkv, ok[0] = planSmall(3*C, C, sms)
	g.proj, ok[1] = planSmall(C, C, sms)
	g.fc, ok[2] = planSmall(F, C, sms)
	g.fcProj, ok[3] = planSmall(C, F, sms)
	g.on = ok[0] && ok[1] && ok[2] && ok[3]
	return g
}

// smallDefaultRows is caps.smallRows on Hopper without wg_gemm: the largest decode step whose
// layer GEMMs take less GPU time on small_gemm with PDL than on cuBLAS (bench/RESULTS.md has the
// comparison).
const smallDefaultRows = 32

// smallAttrs lets each small_gemm kernel have the dynamic shared memory its plans need at
// smallMaxRows rows (above the default 48 KB for K slices over 376: none of GPT-2 124M's plans,
// larger models' may) and clusters of more than 8 blocks. It reports false, setting nothing more,
// when this device cannot hold a plan's memory.
func (s *state) smallAttrs(g smallGEMMs) (bool, error) {
	need := map[int]int{} // nt -> bytes
	for _, p := range []smallPlan{g.qkv, g.proj, g.fc, g.fcProj} {
		need[p.nt] = max(need[p.nt], smallShared(smallMaxRows, p))
	}
	for nt, bytes := range need {
		if bytes > s.ctx.Info().MaxSharedOptin {
			return false, nil
		}
		for e := range numEpilogues {
			k := s.k[smallGEMMKernel(nt, e)]
			if err := s.ctx.SetMaxShared(k, bytes); err != nil {
				return false, err
			}
			if err := s.ctx.AllowBigClusters(k); err != nil {
				return false, err
			}
		}
	}
	return true, nil
}
