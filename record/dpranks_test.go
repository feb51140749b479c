package record

import (
	"reflect"
	"testing"

	"rosetop/bench"
)

// TestServerDPRanks: a server's data-parallel ranks, its own and a fleet member's, come back as
// written; a panel written before the ranks were (its request rates last) reads with none.
func TestServerDPRanks(t *testing.T) {
	g := func(v float64) bench.Gauge { return bench.Gauge{V: v, Known: true} }
	dp := &bench.DPRanks{Ranks: []bench.DPRank{
		{ID: "0", Running: g(8), Waiting: g(0), KVUsage: g(0.31)},
		{ID: "1", Running: g(9), Waiting: bench.Gauge{}, KVUsage: g(0.97)},
	}, More: 3}
	p := &bench.ServerPanel{ServerMetrics: bench.ServerMetrics{Kind: "vllm", ReqRate: g(4), DP: dp,
		Members: []bench.ServerMetrics{{Kind: "vllm", ReqRate: g(1), DP: dp}, {Kind: "sglang", ReqRate: g(2)}}}}
	var e enc
	encServer(&e, p)
	d := dec{b: e.b, budget: new(int)}
	*d.budget = 1 << 20
	got := decServer(&d)
	if d.err != nil {
		t.Fatal(d.err)
	}
	if !reflect.DeepEqual(got.DP, dp) || !reflect.DeepEqual(got.Members[0].DP, dp) || got.Members[1].DP != nil {
		t.Fatalf("ranks %+v, members' %+v %+v; want %+v", got.DP, got.Members[0].DP, got.Members[1].DP, dp)
	}

	// As written before the ranks: each member's record and the panel's end at the request rate.
	var old enc
	old.record(func(e *enc) {
		encMetrics(e, &p.ServerMetrics, nil)
		e.uvarint(uint64(len(p.Members)))
		for i := range p.Members {
			e.record(func(e *enc) {
				encMetrics(e, &p.Members[i], nil)
				encGauge(e, p.Members[i].ReqRate)
			})
		}
		encGauge(e, p.ReqRate)
	})
	d = dec{b: old.b, budget: new(int)}
	*d.budget = 1 << 20
	got = decServer(&d)
	if d.err != nil || len(d.b) != 0 {
		t.Fatalf("%v, %d bytes left", d.err, len(d.b))
	}
	if got.DP != nil || got.Members[0].DP != nil || got.ReqRate != g(4) || got.Members[1].ReqRate != g(2) {
		t.Fatalf("an older panel: ranks %+v %+v, rates %+v %+v", got.DP, got.Members[0].DP, got.ReqRate, got.Members[1].ReqRate)
	}
}
