//go:build cgo

package gpu

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"rosetop/gpu/cu"
)

// sourceSum is the sha256 scripts/gen-ptx.sh records for module cu: of the .cu followed by every
// header beside it (kernels/*.cuh, in byte order of their names).
func sourceSum(t *testing.T, cu string) [sha256.Size]byte {
	t.Helper()
	headers, err := filepath.Glob("kernels/*.cuh")
	if err != nil {
		t.Fatal(err)
	}
	var src []byte
	for _, f := range append([]string{cu}, headers...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	return sha256.Sum256(src)
}

// TestPTXUpToDate fails when a kernel source changed without scripts/gen-ptx.sh being run.
func TestPTXUpToDate(t *testing.T) {
	cus, err := filepath.Glob("kernels/*.cu")
	if err != nil || len(cus) == 0 {
		t.Fatalf("no kernel sources found (%v)", err)
	}
	re := regexp.MustCompile(`(?m)^// source-sha256: ([0-9a-f]{64})$`)
	for _, cu := range cus {
		sum := sourceSum(t, cu)
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
		// versions emit ISAs that need newer drivers. The sm_90a modules' PTX is never loaded.
		if strings.HasSuffix(cu, "_sm90a.cu") {
			if !strings.Contains(string(ptx), "\n.target sm_90a\n") {
				t.Errorf("%s is not PTX for sm_90a: generate it with scripts/gen-sm90a.sh", ptxPath)
			}
			continue
		}
		if !strings.Contains(string(ptx), "\n.version 7.8\n") || !strings.Contains(string(ptx), "\n.target sm_80\n") {
			t.Errorf("%s is not PTX ISA 7.8 for sm_80: generate it with nvcc 11.8 -arch=compute_80", ptxPath)
		}
	}
	// The fatbins: kernels/fatbin.sha256 lists the source hash each was built from.
	sums, err := os.ReadFile("kernels/fatbin.sha256")
	if err != nil {
		t.Fatalf("no kernels/fatbin.sha256: run scripts/gen-ptx.sh (%v)", err)
	}
	built := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			built[f[1]] = f[0]
		}
	}
	for _, cu := range cus {
		sum := sourceSum(t, cu)
		fb := strings.TrimSuffix(filepath.Base(cu), ".cu") + ".fatbin"
		if got, want := built[fb], hex.EncodeToString(sum[:]); got != want {
			gen := "scripts/gen-ptx.sh"
			if strings.HasSuffix(cu, "_sm90a.cu") {
				gen = "scripts/gen-sm90a.sh on the GPU machine"
			}
			t.Errorf("%s was built from a different %s (%q, source is %s): run %s", fb, cu, got, want[:12], gen)
		}
		if _, err := os.Stat(filepath.Join("kernels", fb)); err != nil {
			t.Errorf("%s is missing: run scripts/gen-ptx.sh", fb)
		}
	}
	// A fatbin starts with its magic number (0xBA55ED50, little endian).
	for name, fb := range map[string]string{"gpt2.fatbin": fatbinGPT2, "sample.fatbin": fatbinSample, "gemm.fatbin": fatbinGEMM,
		"gemm_sm90a.fatbin": fatbinWG} {
		if len(fb) < 4 || fb[:4] != "\x50\xed\x55\xba" {
			t.Errorf("embedded %s does not start with the fatbin magic", name)
		}
	}
	for _, k := range []string{"embed_ln", "residual_ln", "residual_ln_last", "bias_gelu", "qkv_bias_kv_write", "attention_paged", "attention_contig", "attention_decode_paged", "attention_decode_contig", "spin_ns"} {
		if !strings.Contains(ptxGPT2, ".entry "+k+"(") {
			t.Errorf("embedded gpt2.ptx has no kernel %s", k)
		}
	}
	if !strings.Contains(ptxSample, ".entry sample(") || !strings.Contains(ptxSample, ".entry argmax_part(") {
		t.Errorf("embedded sample.ptx lacks kernel sample or argmax_part")
	}
	for _, k := range []string{"gemm_small_n2", "gemm_small_n1", "gemm_small_n2_gelu", "gemm_small_n1_gelu"} {
		if !strings.Contains(ptxGEMM, ".entry "+k+"(") {
			t.Errorf("embedded gemm.ptx has no kernel %s", k)
		}
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
	for i := range dst {
		dst[i] = 0xffff // poison: the padding must be zeroed
	}
	toHalfT(dst, src, 3, 3, 0, 2)
	want := []float32{1, 4, 0, 2, 5, 0, 3, 6, 0} // (3, 2) padded to (3, 3)
	for i, h := range dst {
		if got := halfToFloat(h); got != want[i] {
			t.Fatalf("transposed[%d] = %g, want %g (all: %v)", i, got, want[i], dst)
		}
	}
}

// TestFillImageMatchesSerial builds a device image from pieces on every core and compares each
// tensor with a one-value-at-a-time conversion.
func TestFillImageMatchesSerial(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	randn := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(rng.NormFloat64())
		}
		return s
	}
	const rows, cols, pad = 3001, 7, 3008 // more rows than one piece, not a multiple of the tile
	const pk, pn = 3072, 776              // packed: more n8 tiles than one piece holds
	var a, b, c, d cu.Ptr
	specs := []tensorSpec{
		{dst: &a, src: randn(1<<21 + 5), n: 1<<21 + 5, half: true, name: "half"},
		{dst: &b, src: randn(rows * cols), n: rows * cols, half: true, name: "transposed", cols: cols, padRows: pad},
		{dst: &c, src: randn(33), n: 33, name: "float"},
		{dst: &d, src: randn(pk * pn), n: pk * pn, half: true, name: "packed", mma: pn},
	}
	offs := make([]int64, len(specs))
	var total int64
	for i, s := range specs {
		offs[i] = total
		total += align(int64(s.stored()) * elemSize(s.half))
	}
	img := make([]byte, total)
	for i := range img {
		img[i] = 0xff
	}
	fillImage(img, specs, offs)
	h16 := func(off int64, i int) uint16 { return uint16(img[off+int64(2*i)]) | uint16(img[off+int64(2*i)+1])<<8 }
	for i, f := range specs[0].src {
		if got, want := h16(offs[0], i), halfBits(f); got != want {
			t.Fatalf("half[%d] = %#04x, want %#04x", i, got, want)
		}
	}
	for ch := range cols {
		for r := range pad {
			want := uint16(0)
			if r < rows {
				want = halfBits(specs[1].src[r*cols+ch])
			}
			if got := h16(offs[1], ch*pad+r); got != want {
				t.Fatalf("transposed[%d][%d] = %#04x, want %#04x", ch, r, got, want)
			}
		}
	}
	for i, f := range specs[2].src {
		o := offs[2] + int64(4*i)
		bits := uint32(img[o]) | uint32(img[o+1])<<8 | uint32(img[o+2])<<16 | uint32(img[o+3])<<24
		if got := math.Float32frombits(bits); got != f {
			t.Fatalf("float[%d] = %g, want %g", i, got, f)
		}
	}
	want := make([]uint16, pk*pn)
	packMMA(want, specs[3].src, nil, pk, pn, 0, pn/8)
	for i, w := range want {
		if got := h16(offs[3], i); got != w {
			t.Fatalf("packed[%d] = %#04x, want %#04x", i, got, w)
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
