package remote

import (
	"testing"
	"time"

	"rosetop/bench"
)

// vLLM's bucket bounds (vllm/v1/metrics/loggers.py): TTFT's, ITL's, and the request latencies'
// (end-to-end, queue, prefill), each then +Inf.
var (
	benchTTFTBounds = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	benchITLBounds  = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	benchReqBounds  = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
)

// benchHist is a histogram over bounds after n scrapes of a loaded server: each scrape adds
// rate observations, spread over the buckets from the one at skew on.
func benchHist(bounds []float64, n, rate, skew int) Histogram {
	h := Histogram{Known: true, Buckets: make([]Bucket, len(bounds)+1)}
	per := float64(n * rate)
	for i, b := range bounds {
		share := 0.0
		if i >= skew {
			share = min(1, float64(i-skew+1)/4)
		}
		h.Buckets[i] = Bucket{UpperBound: b, Count: per * share}
	}
	h.Buckets[len(bounds)] = Bucket{UpperBound: inf, Count: per}
	h.Count, h.Sum = per, per*0.2
	return h
}

// benchScrape is server i's n-th scrape, every 500 ms.
func benchScrape(i, n int) Snapshot {
	skew := i % 5
	return Snapshot{At: time.Duration(n) * 500 * time.Millisecond, Kind: KindVLLM,
		Running: Value{float64(20 + i%7), true}, Waiting: Value{float64(i % 3), true}, KVUsage: Value{0.4, true},
		PromptTokens: Value{float64(n * 4000), true}, GenerationTokens: Value{float64(n * 1500), true},
		TTFT: benchHist(benchTTFTBounds, n, 8, skew+6), ITL: benchHist(benchITLBounds, n, 1500, skew),
		E2E: benchHist(benchReqBounds, n, 8, skew+2), Queue: benchHist(benchReqBounds, n, 8, 0), Prefill: benchHist(benchReqBounds, n, 8, 0)}
}

// benchFleet is a fleet of n servers, each with a 30 s window of scrapes every 500 ms filed.
func benchFleet(n int) (*fleet, int) {
	ws := make([]*watcher, n)
	for i := range ws {
		ws[i] = &watcher{window: 30 * time.Second, every: 500 * time.Millisecond, watch: true, serverFirsts: true}
		ws[i].publish()
	}
	f := newFleet(ws, []bench.SLO{{Metric: "ttft", Ms: 500}})
	const filled = 64
	for s := 1; s <= filled; s++ {
		for i, w := range ws {
			w.add(benchScrape(i, s), nil)
		}
	}
	return f, filled
}

// BenchmarkFleetRound is a fleet of 64 servers over one scrape interval (500 ms): every server
// files a scrape, as its loop does, and the session reads the fleet's view for each frame
// (at most every 50 ms: 10 in the interval), the frames falling between the scrapes.
func BenchmarkFleetRound(b *testing.B) {
	const servers, frames = 64, 10
	f, n := benchFleet(servers)
	snaps := make([]Snapshot, servers)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		n++
		for i := range snaps {
			snaps[i] = benchScrape(i, n)
		}
		b.StartTimer()
		for i, w := range f.ws {
			w.add(snaps[i], nil) // the fleet's loop does nothing more after a scrape lands
			if (i+1)*frames%servers < frames {
				if m := f.latest(); len(m.Members) != servers {
					b.Fatal("no fleet view")
				}
			}
		}
	}
}

// BenchmarkFleetView is one build of the view of a fleet of 64 servers.
func BenchmarkFleetView(b *testing.B) {
	f, _ := benchFleet(64)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		f.mu.Lock()
		f.buildLocked()
		f.mu.Unlock()
	}
}
