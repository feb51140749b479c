package engine

// Matrix multiply of a batch of rows by a Conv1D weight: y = x W + b, W stored [in, out].
//
// The backend repacks every Conv1D weight once, when it is built, into panels of panelW
// columns (packedMat): in Hugging Face's layout the 16 or 24 columns a kernel needs sit in a new
// page at every k (rows are out*4 bytes apart), which defeats the hardware prefetchers; a panel is
// one contiguous stream. The copy costs the Conv1D weights once more in memory (85M floats,
// 340 MB, for GPT-2 124M; 1.2G floats for gpt2-xl); the model's own slices are left untouched
// (mmapped F32 pages are clean and the kernel may drop them once the packing has read them).
//
// A panel is the unit of parallel work. Within it, a register-blocked kernel keeps 4 rows x 24
// columns of accumulators in registers while k runs over a chunk of the panel, so each W element
// loaded serves 4 rows and each x element 24 columns; the chunk (matKChunk rows, 12 KB) stays in
// L1 for the other row groups. In decode the whole batch is one row tile: W is read from memory
// once per step. The epilogue adds the bias and applies GELU, or adds into the residual stream.

const (
	panelW  = 24 // columns per packed panel: 3 AVX2 vectors
	matRows = 16 // rows per tile: the accumulators of a panel for one row tile
	// matKChunk is how many k a tile walks for each group of 4 rows before the next group: the
	// chunk of the panel (matKChunk x 24 floats) is read from memory by the first group and from
	// L1 by the others.
	matKChunk = 128
)

// packedMat is a Conv1D weight W (in, out) in panels: panel p holds W[k][24p : 24p+24] for
// k = 0..in-1, row after row; columns past out are zero.
type packedMat struct {
	in, out int
	p       []float32 // (ceil(out/24), in, 24)
}

// packMat copies w (in, out) into panels.
func packMat(w []float32, in, out int) packedMat {
	panels := (out + panelW - 1) / panelW
	m := packedMat{in: in, out: out, p: make([]float32, panels*in*panelW)}
	for p := range panels {
		c0 := p * panelW
		n := min(panelW, out-c0)
		dst := m.p[p*in*panelW : (p+1)*in*panelW]
		for k := range in {
			copy(dst[k*panelW:k*panelW+n], w[k*out+c0:k*out+c0+n])
		}
	}
	return m
}

// packMatT copies the transpose of w (rows, cols), i.e. a (cols, rows) weight, into panels: the
// LM head reads wte (V, C) as the weight (C, V).
func packMatT(w []float32, rows, cols int) packedMat {
	panels := (rows + panelW - 1) / panelW
	m := packedMat{in: cols, out: rows, p: make([]float32, panels*cols*panelW)}
	for p := range panels {
		r0 := p * panelW
		n := min(panelW, rows-r0)
		dst := m.p[p*cols*panelW : (p+1)*cols*panelW]
		for j := range n {
			src := w[(r0+j)*cols : (r0+j+1)*cols]
			for k, v := range src {
				dst[k*panelW+j] = v
			}
		}
	}
	return m
}

// epilogue says what a matmul does with a finished tile.
type epilogue int

const (
	epiStore    epilogue = iota // y = xW + b (y = xW when b is nil)
	epiGELU                     // y = gelu(xW + b)
	epiResidual                 // y += xW + b (y is the residual stream)
)

// matmulJob is one y = x W + b over all panels; it is reused for every matmul of a step.
type matmulJob struct {
	x     []float32 // (n, in)
	w     *packedMat
	b     []float32 // (out), or nil: no bias
	y     []float32 // (n, out)
	n     int
	epi   epilogue
	tiles [][]float32 // per worker (matRows, 24) accumulators
	k     *kernels
}

// do computes panels [lo, hi) for every row.
func (j *matmulJob) do(w, lo, hi int) {
	acc := j.tiles[w]
	for p := lo; p < hi; p++ {
		for r0 := 0; r0 < j.n; r0 += matRows {
			j.tile(acc, p, r0, min(r0+matRows, j.n))
		}
	}
}

// tile computes rows [r0, r1) of panel p's columns into acc (rows, 24), then the epilogue.
func (j *matmulJob) tile(acc []float32, p, r0, r1 int) {
	in, rows := j.w.in, r1-r0
	acc = acc[:rows*panelW]
	clear(acc)
	base := p * in * panelW // panel p's offset in j.w.p
	for kc := 0; kc < in; kc += matKChunk {
		kn := min(matKChunk, in-kc)
		w := j.w.p[base+kc*panelW:]
		// Each group of 4 rows prefetches its share (kn lines, 2/3 of a chunk) of what follows
		// this chunk in memory: the next chunk or panel is then on its way while this one runs
		// from L1. Two groups (8 rows) cover it; more run further ahead.
		pf := base + (kc+kn)*panelW
		r := r0
		for ; r+4 <= r1; r += 4 {
			lo := min(pf, len(j.w.p))
			pf += (kn &^ 1) * 16
			j.k.mp4(acc[(r-r0)*panelW:], j.x[r*in+kc:], in, w, kn, j.w.p[lo:min(pf, len(j.w.p))])
		}
		for ; r < r1; r++ {
			j.k.mp1(acc[(r-r0)*panelW:], j.x[r*in+kc:], w, kn)
		}
	}
	j.epilogue(acc, p, r0, r1)
}

// epilogue writes rows [r0, r1) of panel p's columns from acc (rows, 24) into y: bias, then
// GELU or the residual add.
func (j *matmulJob) epilogue(acc []float32, p, r0, r1 int) {
	out := j.w.out
	c0 := p * panelW
	n := min(panelW, out-c0)
	var b []float32
	if j.b != nil {
		b = j.b[c0 : c0+n]
	}
	for r := r0; r < r1; r++ {
		a := acc[(r-r0)*panelW : (r-r0)*panelW+n]
		y := j.y[r*out+c0 : r*out+c0+n]
		switch {
		case b == nil:
			copy(y, a)
		case j.epi == epiGELU:
			j.k.gelu(y, a, b)
		default:
			j.k.bias(y, a, b, j.epi == epiResidual)
		}
	}
}
