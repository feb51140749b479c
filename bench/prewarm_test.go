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
