//go:build cgo

package gpu

import (
	"fmt"
	"os"
)

// ROSETOP_WG_FATBIN, in a test binary, replaces the embedded sm_90a fatbin with the file it names,
// so that a kernel change built on the GPU machine (scripts/gen-sm90a.sh) runs in the same device
// call as the test binary built here before it.
func init() {
	if p := os.Getenv("ROSETOP_WG_FATBIN"); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			fmt.Fprintf(os.Stderr, "ROSETOP_WG_FATBIN: %v\n", err)
			os.Exit(2)
		}
		fatbinWG = string(b)
	}
}
