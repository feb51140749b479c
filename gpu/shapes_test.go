//go:build cgo

package gpu

import (
	"slices"
	"testing"
)

func TestGEMMRows(t *testing.T) {
	tests := []struct {
		name string
		n    int
		want int
	}{
		{"one", 1, 1},
		{"two", 2, 2},
		{"three pads to four", 3, 4},
		{"nine pads to sixteen", 9, 16},
		{"seventeen pads to 24", 17, 24},
		{"33 pads to 48", 33, 48},
		{"64 stays", 64, 64},
		{"65 pads to 128", 65, 128},
		{"129 pads to 256", 129, 256},
		{"257 pads to 512", 257, 512},
		{"1036 pads to 1280", 1036, 1280},
		{"2048 stays", 2048, 2048},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := gemmRows(tc.n); got != tc.want {
				t.Errorf("gemmRows(%d) = %d, want %d", tc.n, got, tc.want)
			}
		})
	}
	// Up to 64 rows the classes are the decode graph buckets, so a graph's GEMMs run unpadded.
	for _, b := range buckets(64) {
		if got := gemmRows(b); got != b {
			t.Errorf("gemmRows(bucket %d) = %d, want the bucket", b, got)
		}
	}
	want := []int{1, 2, 4, 8, 16, 24, 32, 48, 64, 128, 256, 512, 768, 1024, 1280, 1536, 1792, 2048}
	if got := gemmRowClasses(2048); !slices.Equal(got, want) {
		t.Errorf("gemmRowClasses(2048) = %v, want %v", got, want)
	}
	// Every n maps into the classes, never below n, and fewer than 256 rows above it.
	classes := gemmRowClasses(4096)
	for n := 1; n <= 4096; n++ {
		m := gemmRows(n)
		if m < n || !slices.Contains(classes, m) || m-n >= 256 {
			t.Fatalf("gemmRows(%d) = %d: below n, not a class of %v, or 256+ rows wasted", n, m, classes)
		}
	}
}
