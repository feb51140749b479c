//go:build linux

package engine

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// machineMemory is the memory this process may use, in bytes: the machine's physical memory, or
// less where the address-space limit (ulimit -v) or the cgroup's limit (a container's
// memory.max) is lower; 0 when the physical memory cannot be read.
func machineMemory() uint64 {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return 0
	}
	n := uint64(si.Totalram) * uint64(si.Unit)
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &rl); err == nil && rl.Cur > 0 && rl.Cur < n {
		n = rl.Cur // RLIM_INFINITY is the largest uint64: never below n
	}
	if c := cgroupMemoryMax(); c > 0 && c < n {
		n = c
	}
	return n
}

// cgroupMemoryMax is the memory limit of this process's cgroup (v2 memory.max, else v1
// memory.limit_in_bytes), 0 when there is none or it cannot be read.
func cgroupMemoryMax() uint64 {
	var paths []string
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "0::"); ok { // the v2 hierarchy's line
				paths = append(paths, filepath.Join("/sys/fs/cgroup", rest, "memory.max"))
			}
		}
	}
	paths = append(paths, "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64) // "max": no limit
		if err != nil {
			return 0
		}
		return v
	}
	return 0
}
