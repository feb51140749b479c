package engine

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestMachineMemoryHonoursUlimit: under an address-space limit (ulimit -v) below the machine's
// memory, the memory checks use the limit, so a model past it is refused in one line instead of
// crashing the process when the allocation fails.
func TestMachineMemoryHonoursUlimit(t *testing.T) {
	const limit = 3 << 30
	if os.Getenv("ROSETOP_MEMORY_CHILD") != "" {
		if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString(strconv.FormatUint(machineMemory(), 10) + "\n")
		return
	}
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil || uint64(si.Totalram)*uint64(si.Unit) <= limit {
		t.Skip("this machine has no more memory than the limit the test sets")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMachineMemoryHonoursUlimit$")
	cmd.Env = append(os.Environ(), "ROSETOP_MEMORY_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	got, err := strconv.ParseUint(strings.SplitN(string(out), "\n", 2)[0], 10, 64)
	if err != nil || got == 0 || got > limit { // a lower cgroup limit may win
		t.Errorf("machineMemory under ulimit -v 3 GiB = %q, want at most %d", out, uint64(limit))
	}
}

// TestCgroupLimit: the lowest limit on the process's cgroup and its ancestors, in the v2 layout
// (a leaf of "max" under a limited parent) and the v1 one (the memory controller's own path).
func TestCgroupLimit(t *testing.T) {
	mount := t.TempDir()
	put := func(path, v string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put(filepath.Join(mount, "memory.max"), "max")
	put(filepath.Join(mount, "pod", "memory.max"), "1073741824")
	put(filepath.Join(mount, "pod", "app", "memory.max"), "max")
	put(filepath.Join(mount, "memory", "memory.limit_in_bytes"), "9223372036854771712")
	put(filepath.Join(mount, "memory", "a", "memory.limit_in_bytes"), "3221225472")
	put(filepath.Join(mount, "memory", "a", "b", "memory.limit_in_bytes"), "2147483648")
	for _, tc := range []struct {
		name, cgroup string
		want         uint64
	}{
		{"v2 parent's limit", "0::/pod/app\n", 1 << 30},
		{"v2 none", "0::/\n", 0},
		{"v1 own limit", "4:memory:/a/b\n1:cpu:/\n", 2 << 30},
		{"v1 with other controllers", "4:cpuacct,memory:/a\n", 3 << 30},
		{"v1 unlimited", "4:memory:/\n", 9223372036854771712},
		{"both", "4:memory:/a/b\n0::/pod/app\n", 1 << 30},
		{"no memory controller", "1:cpu:/a\n", 0},
	} {
		if got := cgroupLimit(tc.cgroup, mount); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
