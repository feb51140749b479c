//go:build !unix

package engine

import "time"

// processCPUTime is not measured here; benchmarks then report no CPU time.
func processCPUTime() time.Duration { return 0 }
