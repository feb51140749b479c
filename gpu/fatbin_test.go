//go:build cgo

package gpu

import (
	"fmt"
	"os"
)

// In a test binary, ROSETOP_WG_FATBIN replaces the embedded sm_90a fatbin and ROSETOP_GPT2_FATBIN
// the embedded gpt2 fatbin with the file each names, so that a kernel change built on the GPU
// machine (scripts/gen-sm90a.sh, or nvcc on gpu/kernels/gpt2.cu) runs in the same device call as
// the test binary built here before it.
func init() {
	for _, o := range []struct {
		env string
		dst *string
	}{{"ROSETOP_WG_FATBIN", &fatbinWG}, {"ROSETOP_GPT2_FATBIN", &fatbinGPT2}} {
		p := os.Getenv(o.env)
		if p == "" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", o.env, err)
			os.Exit(2)
		}
		*o.dst = string(b)
	}
}
