//go:build linux

package engine

import (
	"os"
	"path/filepath"
	"slices"
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

// cgroupMemoryMax is the lowest memory limit on this process's cgroup and its ancestors (v2
// memory.max, v1 memory.limit_in_bytes), 0 when none is set or can be read.
func cgroupMemoryMax() uint64 {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0
	}
	return cgroupLimit(string(b), "/sys/fs/cgroup")
}

// cgroupLimit is cgroupMemoryMax for a /proc/self/cgroup text and the cgroup file system's
// mount point.
func cgroupLimit(procCgroup, mount string) uint64 {
	var limit uint64
	for _, line := range strings.Split(procCgroup, "\n") {
		// "0::/path" (v2), "4:memory:/path" or "4:memory,x:/path" (v1)
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		root, file := "", ""
		switch {
		case parts[0] == "0" && parts[1] == "":
			root, file = mount, "memory.max"
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			root, file = filepath.Join(mount, "memory"), "memory.limit_in_bytes"
		default:
			continue
		}
		for dir := filepath.Join(root, parts[2]); ; dir = filepath.Dir(dir) {
			if v := readLimit(filepath.Join(dir, file)); v > 0 && (limit == 0 || v < limit) {
				limit = v
			}
			if dir == root || !strings.HasPrefix(dir, root) {
				break
			}
		}
	}
	return limit
}

// readLimit is the number in a cgroup limit file, 0 for "max" or one that cannot be read.
func readLimit(path string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0
	}
	return v
}
