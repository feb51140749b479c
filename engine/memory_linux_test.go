package engine

import (
	"os"
	"os/exec"
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
