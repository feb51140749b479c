//go:build cgo

package gpu

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestKernelDefinesMatchGo checks the kernels' #define constants that Go code relies on against
// the Go constants they mirror: a change on one side only would launch kernels with shared
// memory, slices or statistics laid out differently from what they read. Runs without a GPU.
func TestKernelDefinesMatchGo(t *testing.T) {
	def := regexp.MustCompile(`(?m)^#define (\w+) (\d+)\b`)
	got := map[string]int{}
	for _, f := range []string{"kernels/gemm_sm90a.cu", "kernels/gemm.cuh"} {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range def.FindAllStringSubmatch(string(src), -1) {
			v, _ := strconv.Atoi(m[2])
			got[m[1]] = v
		}
	}
	for name, want := range map[string]int{
		"WG_KSMAX": wgMaxSlice, "X_BOX": xBox,
		"SG_MAX_PARTS": foldMaxParts, "SG_MAX_CLUSTER": smallMaxCluster,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("#define %s: %d (found %v), want %d", name, v, ok, want)
		}
	}
}
