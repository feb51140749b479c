package gpu

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestPTXUpToDate fails when a kernel source changed without scripts/gen-ptx.sh being run.
func TestPTXUpToDate(t *testing.T) {
	cus, err := filepath.Glob("kernels/*.cu")
	if err != nil || len(cus) == 0 {
		t.Fatalf("no kernel sources found (%v)", err)
	}
	re := regexp.MustCompile(`(?m)^// source-sha256: ([0-9a-f]{64})$`)
	for _, cu := range cus {
		src, err := os.ReadFile(cu)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(src)
		ptxPath := strings.TrimSuffix(cu, ".cu") + ".ptx"
		ptx, err := os.ReadFile(ptxPath)
		if err != nil {
			t.Fatalf("%s has no PTX: run scripts/gen-ptx.sh (%v)", cu, err)
		}
		m := re.FindSubmatch(ptx)
		if m == nil {
			t.Fatalf("%s has no source-sha256 header: run scripts/gen-ptx.sh", ptxPath)
		}
		if got, want := string(m[1]), hex.EncodeToString(sum[:]); got != want {
			t.Errorf("%s was generated from a different %s (sha256 %s, source is %s): run scripts/gen-ptx.sh", ptxPath, cu, got[:12], want[:12])
		}
		// compute_80 PTX from nvcc 11.8 is ISA 7.8 and loads on drivers >= 520; newer nvcc
		// versions emit ISAs that need newer drivers.
		if !strings.Contains(string(ptx), "\n.version 7.8\n") || !strings.Contains(string(ptx), "\n.target sm_80\n") {
			t.Errorf("%s is not PTX ISA 7.8 for sm_80: generate it with nvcc 11.8 -arch=compute_80", ptxPath)
		}
	}
	for _, k := range []string{"embed_ln", "residual_ln", "residual_ln_last", "bias_gelu", "qkv_bias_kv_write", "attention_paged", "attention_contig"} {
		if !strings.Contains(ptxGPT2, ".entry "+k+"(") {
			t.Errorf("embedded gpt2.ptx has no kernel %s", k)
		}
	}
	if !strings.Contains(ptxSample, ".entry sample(") {
		t.Errorf("embedded sample.ptx has no kernel sample")
	}
}

func TestHalfBits(t *testing.T) {
	tests := []struct {
		name string
		in   float32
		want uint16
	}{
		{"zero", 0, 0x0000},
		{"negative zero", float32(math.Copysign(0, -1)), 0x8000},
		{"one", 1, 0x3c00},
		{"minus two", -2, 0xc000},
		{"max half", 65504, 0x7bff},
		{"overflow", 70000, 0x7c00},
		{"infinity", float32(math.Inf(1)), 0x7c00},
		{"nan", float32(math.NaN()), 0x7e00},
		{"smallest subnormal", 0x1p-24, 0x0001},
		{"underflow", 0x1p-26, 0x0000},
		{"ties to even down", 1 + 0x1p-11, 0x3c00},
		{"ties to even up", 1 + 3*0x1p-11, 0x3c02},
		{"third", 1.0 / 3, 0x3555},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := halfBits(tc.in); got != tc.want {
				t.Errorf("halfBits(%g) = %#04x, want %#04x", tc.in, got, tc.want)
			}
		})
	}
	// Every finite half survives the round trip.
	for h := 0; h < 1<<16; h++ {
		if h&0x7c00 == 0x7c00 {
			continue
		}
		if got := halfBits(halfToFloat(uint16(h))); got != uint16(h) {
			t.Fatalf("round trip of %#04x gave %#04x", h, got)
		}
	}
}

func TestToHalfTransposes(t *testing.T) {
	src := []float32{1, 2, 3, 4, 5, 6} // (2, 3)
	dst := make([]uint16, 9)
	toHalfT(dst, src, 3, 3)
	want := []float32{1, 4, 0, 2, 5, 0, 3, 6, 0} // (3, 2) padded to (3, 3)
	for i, h := range dst {
		if got := halfToFloat(h); got != want[i] {
			t.Fatalf("transposed[%d] = %g, want %g (all: %v)", i, got, want[i], dst)
		}
	}
}

func TestBuckets(t *testing.T) {
	tests := []struct {
		max  int
		want []int
	}{
		{1, []int{1}},
		{3, []int{1, 2, 3}},
		{64, []int{1, 2, 4, 8, 16, 24, 32, 48, 64}},
		{100, []int{1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 100}},
		{256, []int{1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256}},
	}
	for _, tc := range tests {
		if got := buckets(tc.max); !slices.Equal(got, tc.want) {
			t.Errorf("buckets(%d) = %v, want %v", tc.max, got, tc.want)
		}
	}
	bs := buckets(64)
	for n, want := range map[int]int{1: 1, 3: 4, 17: 24, 33: 48, 64: 64} {
		if got := bucketFor(bs, n); got != want {
			t.Errorf("bucketFor(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestProbeWithoutGPU(t *testing.T) {
	desc, err := Probe()
	if err != nil {
		if !errors.Is(err, ErrUnavailable) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Probe error %q: want a one-line error matching ErrUnavailable", err)
		}
		t.Logf("no GPU here: %v", err)
		return
	}
	if desc == "" {
		t.Error("Probe found a GPU but described it as empty")
	}
}
