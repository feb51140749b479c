//go:build !linux

package engine

// machineMemory is the memory this process may use in bytes; 0 (unknown) off Linux, where the
// memory checks are skipped.
func machineMemory() uint64 { return 0 }
