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
	base := []string{"--num-requests", "3", "--max-new-tokens", "2"}
	for _, tc := range []struct {
		name string
		args []string
		want []int // requests submitted before each Prewarm
	}{
		{"two warmup runs", []string{"--warmup-runs", "2", "--repeat-runs", "2"}, []int{6}},
		{"one warmup run", []string{"--warmup-runs", "1", "--repeat-runs", "1"}, []int{3}},
		{"no warmup run", []string{"--warmup-runs", "0", "--repeat-runs", "2"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newFakeProvider()
			if _, _, err := fakeBench(t, context.Background(), p, append(slices.Clone(base), tc.args...)...); err != nil {
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
		_, _, err := fakeBench(t, context.Background(), p, append(base, "--warmup-runs", "1", "--repeat-runs", "1")...)
		if err == nil || !strings.Contains(err.Error(), "prewarm: device lost") {
			t.Fatalf("got %v, want the prewarm error", err)
		}
	})
}
