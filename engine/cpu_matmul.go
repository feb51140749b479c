package engine

// Matrix multiply of a batch of rows by a Conv1D weight: y = x W + b, W stored [in, out].
//
// The output is cut into tiles of matRows rows x cols columns, the unit of parallel work. Within a
// tile, each strip of 16 columns is computed by a register-blocked kernel: 4 rows x 16 columns of
// accumulators stay in registers while k runs over W's rows, so every W element loaded serves
// 4 rows and every x element 16 columns. A tile's strips of W (in x cols floats) are read
// from memory once and then from cache for the tile's other row groups. In decode the whole batch
// is one row tile: W is streamed once per step. The epilogue adds the bias and applies GELU, or
// adds the result into the residual stream.

const (
	matRows    = 16  // rows per tile
	matMaxCols = 128 // widest column tile; narrowed so every thread gets several tiles
	matMinCols = 32
	// matKChunk is how many rows of W a tile's strips walk before moving on: W's rows are out*4
	// bytes apart (a page or more), so a strip alone would touch a new page at every k; walking
	// all strips over the same 64 rows reuses each page (and TLB entry) for the whole tile width.
	matKChunk = 64
)

// epilogue says what a matmul does with a finished tile.
type epilogue int

const (
	epiStore    epilogue = iota // y = xW + b
	epiGELU                     // y = gelu(xW + b)
	epiResidual                 // y += xW + b (y is the residual stream)
)

// matmulJob is one y = x W + b over all tiles; it is reused for every matmul of a step.
type matmulJob struct {
	x       []float32 // (n, in)
	w       []float32 // (in, out)
	b       []float32 // (out)
	y       []float32 // (n, out)
	n       int
	in, out int
	cols    int // column tile width
	epi     epilogue
	tiles   [][]float32 // per worker (matRows * matMaxCols) accumulators
	k       *kernels
	colTile int // column tiles per row tile
}

// colsFor picks the column tile width for an output of out columns on threads workers: the
// widest of 128, 64, 32 (whole 16-column strips) that still gives every worker four tiles per
// row tile. It depends only on out and threads, never on the batch.
func colsFor(out, threads int) int {
	c := matMaxCols
	for c > matMinCols && (out+c-1)/c < 4*threads {
		c /= 2
	}
	return c
}

func (j *matmulJob) do(w, lo, hi int) {
	tile := j.tiles[w]
	for t := lo; t < hi; t++ {
		rt, ct := t/j.colTile, t%j.colTile
		r0, c0 := rt*matRows, ct*j.cols
		j.tile(tile, r0, min(r0+matRows, j.n), c0, min(c0+j.cols, j.out))
	}
}

// tile computes rows [r0, r1) x columns [c0, c1) of y. acc holds the tile's accumulators: the
// 16-column strips first, each (rows, 16), then the last c1-c0 mod 16 columns, (rows, tail).
func (j *matmulJob) tile(acc []float32, r0, r1, c0, c1 int) {
	rows, in, out := r1-r0, j.in, j.out
	strips := (c1 - c0) / 16
	tail := (c1 - c0) % 16
	acc = acc[:rows*(c1-c0)]
	clear(acc)
	for kc := 0; kc < in; kc += matKChunk {
		kn := min(matKChunk, in-kc)
		for s := range strips {
			a := acc[s*rows*16 : (s+1)*rows*16]
			w := j.w[kc*out+c0+s*16:]
			r := r0
			for ; r+4 <= r1; r += 4 {
				j.k.mm4(a[(r-r0)*16:], j.x[r*in+kc:], in, w, out, kn)
			}
			for ; r < r1; r++ {
				j.k.mm1(a[(r-r0)*16:], j.x[r*in+kc:], w, out, kn)
			}
		}
	}
	if tail > 0 { // columns past the last whole strip (never for the GPT-2 family)
		a := acc[strips*rows*16:]
		cs := c0 + strips*16
		for r := r0; r < r1; r++ {
			ar := a[(r-r0)*tail : (r-r0+1)*tail]
			for k, xv := range j.x[r*in : r*in+in] {
				wr := j.w[k*out+cs : k*out+cs+tail]
				for c := range ar {
					ar[c] += xv * wr[c]
				}
			}
		}
	}
	b := j.b[c0:c1]
	for r := r0; r < r1; r++ {
		y := j.y[r*out+c0 : r*out+c1]
		for c := range y {
			var v float32
			if s := c / 16; s < strips {
				v = acc[s*rows*16+(r-r0)*16+c%16]
			} else {
				v = acc[strips*rows*16+(r-r0)*tail+c-strips*16]
			}
			v += b[c]
			switch j.epi {
			case epiStore:
				y[c] = v
			case epiGELU:
				y[c] = geluTanh(v)
			case epiResidual:
				y[c] += v
			}
		}
	}
}
