package bench

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestPrewarmBetweenColdAndSteadyRuns: the engine pays its remaining one-time costs once, after
// the warmup runs and before the first steady run; never when there is no warmup run; and a
// failure ends the benchmark with the error.
func TestPrewarmBetweenColdAndSteadyRuns(t *testing.T) {
	for _, tc := range []struct {
		name           string
		warmup, repeat int
		want           []int // requests submitted before each Prewarm
	}{
		{"two warmup runs", 2, 2, []int{6}},
		{"one warmup run", 1, 1, []int{3}},
		{"no warmup run", 0, 2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newFakeProvider()
			if _, _, err := fakeBench(t, context.Background(), p, testConfig(requests(3, 2), runs(tc.warmup, tc.repeat)), Exports{}); err != nil {
				t.Fatal(err)
			}
			s := p.servers[0]
			s.mu.Lock()
			defer s.mu.Unlock()
			if !slices.Equal(s.prewarms, tc.want) {
				t.Errorf("Prewarm after %v submitted requests, want %v", s.prewarms, tc.want)
			}
		})
	}
	t.Run("failure", func(t *testing.T) {
		p := newFakeProvider()
		p.prewarmErr = errors.New("device lost")
		_, _, err := fakeBench(t, context.Background(), p, testConfig(requests(3, 2), runs(1, 1)), Exports{})
		if err == nil || !strings.Contains(err.Error(), "prewarm: device lost") {
			t.Fatalf("got %v, want the prewarm error", err)
		}
	})
}

// TestPrewarmLoggedWhenItPays: the events pane says the prewarm paid costs only when it did (the
// ledger grew); an engine with nothing left to pay, as the CPU engine, logs nothing.
func TestPrewarmLoggedWhenItPays(t *testing.T) {
	for _, pays := range []bool{false, true} {
		p := newFakeProvider()
		p.prewarmPays = pays
		s, published := newFakeSession(t, p, testConfig(requests(3, 2), runs(1, 1)))
		v := waitFor(t, s, published, "a steady run", func(v *View) bool { return len(v.Steady) >= 1 })
		logged := slices.ContainsFunc(v.Events, func(e LogEvent) bool { return strings.HasPrefix(e.Text, "prewarm: ") })
		if logged != pays {
			t.Errorf("prewarm paid %v: logged %v, want %v", pays, logged, pays)
		}
	}
}
