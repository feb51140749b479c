package engine

import (
	"errors"
	"strings"
	"testing"
)

func TestNewRejectsBadOptions(t *testing.T) {
	m := smallModel(t, smallConfig(), 1)
	cases := []struct {
		name string
		opts Options
		want string
	}{
		{"unknown device", Options{Device: "gpu", MaxBatch: 1}, `unknown --device "gpu" (want auto, cpu or cuda)`},
		{"zero batch", Options{Device: "cpu"}, "max batch size 0: want >= 1"},
		{"seq len past n_positions", Options{Device: "cpu", MaxBatch: 1, MaxSeqLen: 49}, "max sequence length 49: want 1..48 (the model's n_positions)"},
		{"negative seq len", Options{Device: "cpu", MaxBatch: 1, MaxSeqLen: -1}, "max sequence length -1: want 1..48 (the model's n_positions)"},
		{"negative threads", Options{Device: "cpu", MaxBatch: 1, Threads: -2}, "threads -2: want >= 0 (0: all cores)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(m, tc.opts)
			if err == nil {
				e.Close()
				t.Fatalf("New(%+v) succeeded, want %q", tc.opts, tc.want)
			}
			if err.Error() != tc.want || !errors.Is(err, ErrBadOptions) {
				t.Errorf("New error = %q, want %q wrapping ErrBadOptions", err, tc.want)
			}
		})
	}
	if _, err := New(nil, Options{Device: "cpu", MaxBatch: 1}); err == nil {
		t.Error("New(nil model) succeeded")
	}
}

func TestNewCUDAWithoutGPU(t *testing.T) {
	ok, why := probeCUDA()
	if ok {
		t.Skip("this machine has a usable GPU")
	}
	_, err := New(smallModel(t, smallConfig(), 1), Options{Device: "cuda", MaxBatch: 1})
	want := "--device cuda: no usable GPU (" + why + ")"
	if err == nil || err.Error() != want || strings.Contains(err.Error(), "\n") {
		t.Fatalf("New(cuda) error = %v, want %q", err, want)
	}
	if !errors.Is(err, ErrNoCUDA) {
		t.Errorf("error %v does not wrap ErrNoCUDA", err)
	}
}

func TestNewAutoFallsBackToCPU(t *testing.T) {
	ok, why := probeCUDA()
	if ok {
		t.Skip("this machine has a usable GPU")
	}
	for _, device := range []string{"auto", ""} {
		e, err := New(smallModel(t, smallConfig(), 1), Options{Device: device, MaxBatch: 2, CUDAGraph: true})
		if err != nil {
			t.Fatalf("New(%q): %v", device, err)
		}
		if _, isCPU := e.Backend.(*CPUBackend); !isCPU {
			t.Errorf("New(%q) backend is %T, want *CPUBackend", device, e.Backend)
		}
		want := "auto: " + why + "; CUDA Graph needs a GPU (off on the CPU)"
		if e.DeviceNote != want {
			t.Errorf("New(%q) DeviceNote = %q, want %q", device, e.DeviceNote, want)
		}
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}

func TestNewCPULayouts(t *testing.T) {
	m := smallModel(t, smallConfig(), 1) // n_positions 48
	cases := []struct {
		name string
		opts Options
		want KVLayout
	}{
		{"contiguous default length", Options{Device: "cpu", MaxBatch: 3}, KVLayout{BlockSize: 48, NumBlocks: 3}},
		{"contiguous", Options{Device: "cpu", MaxBatch: 2, MaxSeqLen: 20}, KVLayout{BlockSize: 20, NumBlocks: 2}},
		{"paged rounds up", Options{Device: "cpu", Paged: true, MaxBatch: 2, MaxSeqLen: 20}, KVLayout{BlockSize: 16, NumBlocks: 4, Paged: true}},
		{"paged default length", Options{Device: "cpu", Paged: true, MaxBatch: 4}, KVLayout{BlockSize: 16, NumBlocks: 12, Paged: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(m, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if e.Layout != tc.want {
				t.Errorf("layout = %+v, want %+v", e.Layout, tc.want)
			}
			if e.DeviceNote != "cpu: requested" {
				t.Errorf("DeviceNote = %q", e.DeviceNote)
			}
			entries := e.Ledger.Entries()
			if len(entries) != 1 || entries[0].What != "KV pool allocation" {
				t.Fatalf("ledger = %+v, want one KV pool allocation entry", entries)
			}
			t.Logf("%s: %s", entries[0].What, entries[0].Detail)
		})
	}
}

// TestPrewarmCPU: the CPU backend has no one-time costs to pay: Prewarm does nothing.
func TestPrewarmCPU(t *testing.T) {
	e, err := New(smallModel(t, smallConfig(), 1), Options{Device: "cpu", MaxBatch: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, ok := e.Backend.(Prewarmer); ok {
		t.Error("the CPU backend claims one-time costs to prewarm")
	}
	n := e.Ledger.Len()
	if err := e.Prewarm(); err != nil || e.Ledger.Len() != n {
		t.Errorf("Prewarm: %v, ledger %d -> %d entries", err, n, e.Ledger.Len())
	}
}

// A CPU KV pool larger than the machine's memory is refused before it is allocated.
func TestNewRefusesKVPoolPastMemory(t *testing.T) {
	mem := machineMemory()
	if mem == 0 {
		t.Skip("this system does not say how much memory it has")
	}
	m := smallModel(t, smallConfig(), 1)
	perSeq := uint64(m.Config.NPositions) * uint64(m.Config.NLayer) * 2 * uint64(m.Config.NEmbd) * 4
	batch := int(mem/perSeq) + 1
	e, err := New(m, Options{Device: "cpu", MaxBatch: batch})
	if err == nil {
		e.Close()
		t.Fatalf("New with a %d-sequence KV pool succeeded on a machine of %d bytes", batch, mem)
	}
	if !errors.Is(err, ErrBadOptions) || !strings.Contains(err.Error(), "of memory this process may use") {
		t.Fatalf("New error = %q, want a KV pool past the machine's memory, wrapping ErrBadOptions", err)
	}
}

// A KV pool whose byte count overflows an int is refused, not wrapped to a small pool that the
// backend would then index past.
func TestNewRefusesOverflowingKVPool(t *testing.T) {
	m := smallModel(t, smallConfig(), 1)
	for _, batch := range []int{1 << 54, 1 << 60, 1<<62 + 1, 3 << 60, 1<<63 - 1} {
		for _, paged := range []bool{false, true} {
			e, err := New(m, Options{Device: "cpu", MaxBatch: batch, Paged: paged})
			if err == nil {
				e.Close()
				t.Fatalf("New with %d sequences (paged %v) succeeded", batch, paged)
			}
			if !errors.Is(err, ErrBadOptions) || !strings.Contains(err.Error(), "lower --max-batch-size or --max-seq-len") {
				t.Errorf("New with %d sequences (paged %v): error %q, want a KV pool too large, wrapping ErrBadOptions", batch, paged, err)
			}
		}
	}
}
