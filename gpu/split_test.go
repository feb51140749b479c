//go:build cgo

package gpu

import "testing"

// TestSplitRows: which steps run as two lanes, and where the first lane ends. No GPU needed.
func TestSplitRows(t *testing.T) {
	for _, c := range []struct {
		name      string
		opt       Options
		small     bool
		n, nb     int
		wantFirst int
	}{
		{"off by default", Options{}, true, 48, 48, 0},
		{"batch 48 decode", Options{SplitDecodeRows: 32}, true, 48, 48, 24},
		{"batch 32 decode", Options{SplitDecodeRows: 32}, true, 32, 32, 16},
		{"batch 64", Options{SplitDecodeRows: 32}, true, 64, 64, 32},
		{"batch 64: past a lowered range", Options{SplitDecodeRows: 32, SplitDecodeMaxRows: 48}, true, 64, 64, 0},
		{"batch 24: below the range", Options{SplitDecodeRows: 32}, true, 24, 24, 0},
		{"prefill (more rows than sequences)", Options{SplitDecodeRows: 32}, true, 48, 8, 0},
		{"no small_gemm (cuBLAS is on the main stream only)", Options{SplitDecodeRows: 32}, false, 48, 48, 0},
		{"lanes wider than small_gemm's rows", Options{SplitDecodeRows: 32, SmallGEMMRows: 16}, true, 48, 48, 0},
		{"off", Options{SplitDecodeRows: -1}, true, 48, 48, 0},
		{"from 2 rows", Options{SplitDecodeRows: 2}, true, 2, 2, 1},
		{"5 rows: lanes of 4 and 1", Options{SplitDecodeRows: 2}, true, 5, 5, 4},
		{"24 rows: lanes of 16 and 8", Options{SplitDecodeRows: 2}, true, 24, 24, 16},
		{"40 rows: 24 and 16", Options{SplitDecodeRows: 32}, true, 40, 40, 24},
		{"one row", Options{SplitDecodeRows: 1}, true, 1, 1, 0},
		{"56 rows: 32 and 24", Options{SplitDecodeRows: 32}, true, 56, 56, 32},
		{"63 rows: the second lane's 31 is no GEMM row class", Options{SplitDecodeRows: 32}, true, 63, 63, 0},
	} {
		s := &state{opt: c.opt, small: smallGEMMs{on: c.small}}
		if got := s.splitRows(c.n, c.nb); got != c.wantFirst {
			t.Errorf("%s: splitRows(%d, %d) = %d, want %d", c.name, c.n, c.nb, got, c.wantFirst)
		}
	}
}
