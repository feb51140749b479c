//go:build unix

package engine

import (
	"syscall"
	"time"
)

// processCPUTime is the user+system CPU time this process has used: benchmarks report it per
// operation next to wall time, since on a machine shared with other work wall time varies with
// their load while the CPU time of a step mostly does not.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
