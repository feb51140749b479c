//go:build cgo

package gpu

import (
	"fmt"
	"strings"

	"rosetop/gpu/cu"
)

// caps are the paths this device and its libraries allow the runner, fixed at Open: on Hopper the
// layer GEMMs of steps up to 64 rows on wg_gemm where its sm_90a module loads, else those of small
// steps on small_gemm, with programmatic dependent launch and the norms folded into them;
// elsewhere cuBLAS. Tests narrow them through openWith.
type caps struct {
	small     smallGEMMs // small_gemm's plans of the layer GEMMs; small.on false: not used
	smallRows int        // steps of up to this many GEMM rows (at most smallMaxRows) run on small_gemm
	fold      bool       // small_gemm steps fold their norms and residual adds into the GEMMs (fold.go)
	wg        wgGEMMs    // wg_gemm's plans (always folded); wg.on false: not used
	wgRows    int        // steps of more rows than small_gemm's and up to this many (at most wgMaxRows) run on wg_gemm
	head      bool       // greedy decode steps on wg_gemm take their LM head and argmax on lm_head_argmax (head.go)
	headGrid  int        // ... in this many blocks
	pdl       bool       // programmatic dependent launch (Hopper with cuLaunchKernelEx)
	lt        bool       // the fc GEMM of cuBLAS steps through cuBLASLt when it loads (lt.go)
}

// useSmall reports whether a step's layer GEMMs of m rows run on small_gemm.
func (c *caps) useSmall(m int) bool { return c.small.on && m <= min(c.smallRows, smallMaxRows) }

// useWG reports whether a step's layer GEMMs of m rows run on wg_gemm.
func (c *caps) useWG(m int) bool { return c.wg.on && !c.useSmall(m) && m <= min(c.wgRows, wgMaxRows) }

// onCuBLAS reports whether a step's layer GEMMs of m rows run on cuBLAS.
func (c *caps) onCuBLAS(m int) bool { return !c.useSmall(m) && !c.useWG(m) }

// gemmPath names the layer GEMMs' paths, for the header and the ledger.
func (c *caps) gemmPath() string {
	var parts []string
	lo := 1
	if c.small.on {
		hi := min(c.smallRows, smallMaxRows)
		parts, lo = append(parts, fmt.Sprintf("%d-%d small_gemm", lo, hi)), hi+1
	}
	if c.wg.on && lo <= min(c.wgRows, wgMaxRows) {
		hi := min(c.wgRows, wgMaxRows)
		parts, lo = append(parts, fmt.Sprintf("%d-%d wg_gemm (sm_90a)", lo, hi)), hi+1
	}
	if len(parts) == 0 {
		return "cuBLAS GEMMs"
	}
	return "rows " + strings.Join(append(parts, fmt.Sprintf("%d+ cuBLAS", lo)), ", ")
}

// layerGEMMs is how a step runs its layers' GEMMs.
type layerGEMMs uint8

const (
	viaCuBLAS layerGEMMs = iota // cuBLAS (the fc GEMM through cuBLASLt when planned), norms of their own
	viaSmall                    // small_gemm, norms of their own
	viaFolded                   // small_gemm with the norms and residual adds in its epilogues
	viaWG                       // wg_gemm, folded as viaFolded
)

// folded reports whether the norms and residual adds live in the GEMMs' epilogues.
func (g layerGEMMs) folded() bool { return g == viaFolded || g == viaWG }

// stepKind is what a step's program holds besides the forward pass.
type stepKind uint8

const (
	eagerStep     stepKind = iota // the metadata upload first; the sampler writes meta.next
	graphStep                     // a decode graph's: its sampler also moves the device metadata on (ahead.go)
	predictedStep                 // a step queued ahead: no upload, on the metadata the step before moved on
)

// stepPlan is how one step shape runs, computed once (newPlan) and passed down the forward pass:
// nothing below it chooses a path again.
type stepPlan struct {
	rows, seqs int        // token rows and sequences the kernels run (a graph's: its bucket)
	m, mHead   int        // the GEMMs' rows (gemmRows) of the layers and of the LM head
	decode     bool       // a token per sequence: attention also adds the QKV bias and writes the KV cache
	gemms      layerGEMMs // the layers' GEMM path
	pdl        bool       // the row kernels, small_gemm and wg_gemm launch with programmatic dependent launch
	fc         *ltPlan    // viaCuBLAS: the fc GEMM's cuBLASLt plan at m rows; nil: cublasGemmEx, then bias_gelu
	// projSplits, fcProjSplits: the K slices of the output projections' GEMMs (viaCuBLAS), whose
	// partial sums the residual add sums.
	projSplits, fcProjSplits int
	greedy                   bool   // every row samples greedily: argmax_next alone
	head                     bool   // ... on wg_gemm, in a decode step: lm_head_argmax, then argmax_parts_next
	upload                   bool   // the program starts with the metadata upload (meta_copy)
	advance                  bool   // the sampler moves the device metadata on to the step after (graphs)
	embedNext                bool   // ... and embeds that step's rows (a greedy graph whose norms are not folded)
	embedded                 bool   // the step before's sampler embedded this step's rows: no embedding
	next                     cu.Ptr // where the sampler writes the ids: mapped pinned memory
}

// newPlan plans a step of rows token rows in seqs sequences of kind k; greedy: every row samples
// greedily. A queued step's sampler writes meta.nextAlt when alt.
func (s *state) newPlan(rows, seqs int, greedy bool, k stepKind, alt bool) (stepPlan, error) {
	c, C, F := &s.caps, s.cfg.NEmbd, s.cfg.Inner
	p := stepPlan{rows: rows, seqs: seqs, m: gemmRows(rows), mHead: gemmRows(seqs), decode: rows == seqs, greedy: greedy,
		projSplits: 1, fcProjSplits: 1, upload: k != predictedStep, advance: k != eagerStep, next: s.meta.nextDev}
	switch {
	case c.useWG(p.m):
		p.gemms = viaWG
	case c.useSmall(p.m) && c.fold:
		p.gemms = viaFolded
	case c.useSmall(p.m):
		p.gemms = viaSmall
	default:
		p.projSplits, p.fcProjSplits = splitsAt(p.m, C, projSplits), splitsAt(p.m, F, fcProjSplits)
		if s.lt != nil {
			if p.fc = s.lt.plans[p.m]; p.fc == nil {
				return p, fmt.Errorf("gpu: no cuBLASLt fc plan for %d rows", p.m)
			}
		}
	}
	p.pdl = c.pdl && p.gemms != viaCuBLAS
	p.head = c.head && p.gemms == viaWG && p.decode && greedy
	p.embedNext = p.advance && greedy && rowWarp(C) && !p.gemms.folded()
	p.embedded = k == predictedStep && p.embedNext
	if alt {
		p.next = s.meta.nextAltDev
	}
	return p, nil
}

// yRows is the rows between two partials of the last layer's MLP output in y (pstride / C of
// residual_ln_last): the layers' GEMM rows, or on the folded paths the plain product's own rows.
func (p *stepPlan) yRows() int {
	if p.gemms.folded() {
		return p.rows
	}
	return p.m
}

// splitsAt is how many K slices a cuBLAS GEMM of m rows and K = k runs as: splits for
// decode-sized steps (up to splitMaxRows rows) whose K splits evenly, else 1.
func splitsAt(m, k, splits int) int {
	if m <= splitMaxRows && k%(16*splits) == 0 {
		return splits
	}
	return 1
}
