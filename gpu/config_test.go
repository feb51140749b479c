//go:build cgo

package gpu

import (
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	ok := gpt2Cfg
	tests := []struct {
		name string
		edit func(*Config)
		want string // "" = valid
	}{
		{"gpt2", func(*Config) {}, ""},
		{"tiny head size 8", func(c *Config) { c.NEmbd, c.NHead = 32, 4 }, ""},
		{"head size 48", func(c *Config) { c.NEmbd, c.NHead = 768, 16 }, "head size 48"},
		{"head size 4", func(c *Config) { c.NEmbd, c.NHead = 32, 8 }, "head size 4"},
		{"odd MLP width", func(c *Config) { c.Inner = 3071 }, "MLP width 3071"},
		{"heads do not divide", func(c *Config) { c.NHead = 7 }, "not a multiple"},
		{"too wide", func(c *Config) { c.NEmbd, c.NHead = 4096, 32 }, "at most 2048"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("valid config rejected: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestOptionsBlockSize: a paged block size must be a power of two (the attention kernel splits
// positions into blocks with shifts); contiguous KV ignores it.
func TestOptionsBlockSize(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string // "" = valid
		bs   int    // the block size after defaults
	}{
		{Options{MaxBatch: 1, Paged: true}, "", 16},
		{Options{MaxBatch: 1, Paged: true, BlockSize: 32}, "", 32},
		{Options{MaxBatch: 1, Paged: true, BlockSize: 1}, "", 1},
		{Options{MaxBatch: 1, Paged: true, BlockSize: 12}, "paged block size 12: want a power of two", 0},
		{Options{MaxBatch: 1, BlockSize: 12, MaxSeqLen: 100}, "", 100},
	} {
		err := tc.o.defaults(gpt2Cfg)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v rejected: %v", tc.o, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: got %v, want an error containing %q", tc.o, err, tc.want)
		case tc.want == "" && tc.o.BlockSize != tc.bs:
			t.Errorf("%+v: block size %d after defaults, want %d", tc.o, tc.o.BlockSize, tc.bs)
		}
	}
}

// TestMaxKVSlots: the last 16-byte word of the last slot a layer may hold still has a 32-bit
// index (the attention kernel's addressing), at every width the config allows.
func TestMaxKVSlots(t *testing.T) {
	for _, C := range []int{32, 64, 768, 1024, 1600, 2048} {
		n := maxKVSlots(C)
		if last := (n-1)*int64(C/8) + int64(C/8) - 1; last >= 1<<32 {
			t.Errorf("C %d: %d slots, the last word's index %d needs more than 32 bits", C, n, last)
		}
		if next := n * int64(C/8); next+int64(C/8)-1 < 1<<32 {
			t.Errorf("C %d: %d slots leaves room for another (cap too low)", C, n)
		}
	}
}
