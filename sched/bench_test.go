package sched

import (
	"testing"

	"rosetop/engine"
)

// BenchmarkSchedulerStep measures the scheduler's own cost per step: 64 requests decoding on a
// backend that does nothing, with the real clock. A scheduler is rebuilt (untimed) before its
// sequences run out of room, so every timed step is a pure 64-sequence decode step, including
// KV block growth, prefix-cache bookkeeping when on, events and the snapshot.
func BenchmarkSchedulerStep(b *testing.B) {
	for _, prefix := range []bool{false, true} {
		name := map[bool]string{false: "prefix-cache=off", true: "prefix-cache=on"}[prefix]
		b.Run(name, func(b *testing.B) { benchStep(b, prefix) })
	}
}

func benchStep(b *testing.B, prefix bool) {
	const (
		batch  = 64
		maxLen = 2048
		prompt = 8
	)
	layout := engine.KVLayout{BlockSize: 16, NumBlocks: batch * maxLen / 16, Paged: true}
	start := func() *Scheduler {
		s, err := New(Options{Backend: noopBackend{}, Layout: layout, PrefixCache: prefix, MaxSeqLen: maxLen,
			EOS: -1, Config: Config{MaxBatch: batch, PrefillMaxBatch: batch}})
		if err != nil {
			b.Fatal(err)
		}
		for i := range batch {
			p := make([]int32, prompt)
			p[0] = int32(i)
			if _, err := s.Submit(Request{Tokens: p, MaxNewTokens: maxLen - prompt}); err != nil {
				b.Fatal(err)
			}
		}
		if out, err := s.Step(); err != nil || out.Snapshot.Running != batch {
			b.Fatalf("prefill: %v, %+v", err, out.Snapshot)
		}
		return s
	}
	var s *Scheduler
	left := 0
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if left == 0 {
			b.StopTimer()
			s = start()
			left = maxLen - prompt - 2
			b.StartTimer()
		}
		out, err := s.Step()
		if err != nil || out.Snapshot.DecodeTokens != batch {
			b.Fatalf("step: %v, %+v", err, out.Snapshot)
		}
		left--
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/step")
}
