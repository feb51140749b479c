//go:build cgo

package cu

import (
	"runtime"
	"testing"
	"time"
)

// TestWorkerRunsCallsInOrderOnOneThread checks the spinning handoff with the worker polling
// (long spin) and parking after every call (no spin), so both wake-up paths run.
func TestWorkerRunsCallsInOrderOnOneThread(t *testing.T) {
	tests := []struct {
		name string
		spin time.Duration
	}{
		{"polling", time.Second},
		{"parking", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := startWorkerSpin(tc.spin, tc.spin)
			var got []int
			for i := range 2000 {
				w.Do(func() {
					got = append(got, i)
					if i%100 == 0 {
						runtime.Gosched() // let the caller reach its parking path now and then
					}
				})
			}
			w.Stop()
			if len(got) != 2000 {
				t.Fatalf("%d calls ran, want 2000", len(got))
			}
			for i, v := range got {
				if v != i {
					t.Fatalf("call %d ran as %d: out of order", i, v)
				}
			}
		})
	}
}

// TestWorkerCallerParks makes a call outlast the caller's spin (none here), so the caller
// parks and must be woken by the worker: the call returns only once the caller is parked.
func TestWorkerCallerParks(t *testing.T) {
	w := startWorkerSpin(0, 0)
	defer w.Stop()
	for range 100 {
		ran := false
		w.Do(func() {
			for !w.callerParked.Load() {
				runtime.Gosched()
			}
			ran = true
		})
		if !ran {
			t.Fatal("do returned before its call finished")
		}
	}
}

// TestWorkerHandoffAllocatesNothing: a decode step goes through Do, which must not allocate.
func TestWorkerHandoffAllocatesNothing(t *testing.T) {
	w := StartWorker()
	defer w.Stop()
	n := 0
	f := func() { n++ }
	if a := testing.AllocsPerRun(1000, func() { w.Do(f) }); a != 0 {
		t.Fatalf("do allocates %.1f times per call, want 0", a)
	}
}
