package engine

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"testing"
)

func newTestEngine(t testing.TB, m *Model, opts Options) *Engine {
	t.Helper()
	opts.Device = "cpu"
	e, err := New(m, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func TestGenerateRejectsBadInput(t *testing.T) {
	m := smallModel(t, smallConfig(), 1) // n_positions 48
	e := newTestEngine(t, m, Options{MaxBatch: 1, MaxSeqLen: 20})
	long := make([]int32, 49)
	cases := []struct {
		name   string
		prompt []int32
		maxNew int
		want   string
	}{
		{"empty prompt", nil, 5, "bad generation request: prompt is empty"},
		{"prompt past n_positions", long, 5, "bad generation request: prompt is 49 tokens; the model's n_positions is 48"},
		{"prompt past max seq len", long[:21], 5, "bad generation request: prompt is 21 tokens; the engine holds at most 20 positions per sequence"},
		{"zero new tokens", []int32{1}, 0, "bad generation request: max new tokens is 0, want >= 1"},
		{"negative new tokens", []int32{1}, -3, "bad generation request: max new tokens is -3, want >= 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Generate(context.Background(), tc.prompt, tc.maxNew, SamplingParams{}, false, nil)
			if err == nil || err.Error() != tc.want || !errors.Is(err, ErrBadPrompt) {
				t.Errorf("Generate error = %v, want %q wrapping ErrBadPrompt", err, tc.want)
			}
		})
	}
}

func TestGenerateClipsAtMaxSeqLen(t *testing.T) {
	m := smallModel(t, smallConfig(), 1) // n_positions 48
	cases := []struct {
		name      string
		opts      Options
		maxSeqLen int
	}{
		{"contiguous holds MaxSeqLen", Options{MaxBatch: 1, MaxSeqLen: 20}, 20},
		{"paged holds whole blocks", Options{MaxBatch: 1, MaxSeqLen: 20, Paged: true}, 32},
		{"paged pool past n_positions", Options{MaxBatch: 2, MaxSeqLen: 40, Paged: true}, 48},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEngine(t, m, tc.opts)
			if got := e.MaxSeqLen(); got != tc.maxSeqLen {
				t.Fatalf("MaxSeqLen = %d, want %d", got, tc.maxSeqLen)
			}
			var streamed []int32
			out, err := e.Generate(context.Background(), []int32{5, 6, 7}, 100, SamplingParams{}, false, func(id int32) { streamed = append(streamed, id) })
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != tc.maxSeqLen-3 {
				t.Errorf("%d new tokens, want %d (MaxSeqLen - 3 prompt tokens)", len(out), tc.maxSeqLen-3)
			}
			if !slices.Equal(out, streamed) {
				t.Errorf("streamed %v, returned %v", streamed, out)
			}
		})
	}
}

func TestGenerateStopsOnEOS(t *testing.T) {
	m := smallModel(t, smallConfig(), 1)
	e := newTestEngine(t, m, Options{MaxBatch: 1})
	prompt := []int32{1, 2, 3}
	free, err := e.Generate(context.Background(), prompt, 6, SamplingParams{}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	// make the third greedy token the EOS: generation must end right after it, EOS included
	m.Config.EOSTokenID = free[2]
	stop := slices.Index(free, free[2]) + 1
	got, err := e.Generate(context.Background(), prompt, 6, SamplingParams{}, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, free[:stop]) {
		t.Errorf("with EOS %d: got %v, want %v", free[2], got, free[:stop])
	}
	got, _ = e.Generate(context.Background(), prompt, 6, SamplingParams{}, false, nil)
	if !slices.Equal(got, free) {
		t.Errorf("stopOnEOS off: got %v, want %v", got, free)
	}
}

func TestGenerateCancel(t *testing.T) {
	m := smallModel(t, smallConfig(), 1)
	e := newTestEngine(t, m, Options{MaxBatch: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	out, err := e.Generate(ctx, []int32{1}, 10, SamplingParams{Temperature: 1, Seed: 1}, false, func(int32) {
		if n++; n == 2 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) || len(out) != 2 {
		t.Errorf("Generate = %d tokens, %v; want 2 tokens and context.Canceled", len(out), err)
	}
}

// TestGenerateCancelInsideStep: ctx cancelled while a step runs stops that step on the CPU
// backend (Batch.Stop): Generate returns ctx's error and the tokens of the steps before it.
func TestGenerateCancelInsideStep(t *testing.T) {
	m := smallModel(t, smallConfig(), 1)
	e := newTestEngine(t, m, Options{MaxBatch: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	be := &cancelling{Backend: e.Backend, at: 3, cancel: cancel}
	e.Backend = be
	out, err := e.Generate(ctx, []int32{1, 2, 3}, 10, SamplingParams{}, false, nil)
	if !errors.Is(err, context.Canceled) || len(out) != 2 {
		t.Errorf("Generate = %d tokens, %v; want 2 tokens and context.Canceled", len(out), err)
	}
	if !errors.Is(be.err, ErrStopped) {
		t.Errorf("the cancelled step returned %v, want ErrStopped", be.err)
	}
}

// cancelling calls cancel in its call number at, waits until the batch's Stop is set (Generate
// sets it once ctx is done), then runs the step, keeping that call's error.
type cancelling struct {
	Backend
	at, calls int
	cancel    func()
	err       error
}

func (c *cancelling) Step(b *Batch, next []int32) error {
	if c.calls++; c.calls != c.at {
		return c.Backend.Step(b, next)
	}
	c.cancel()
	if b.Stop == nil {
		return errors.New("the step has no Stop to set")
	}
	for !b.stopped() {
		runtime.Gosched()
	}
	c.err = c.Backend.Step(b, next)
	return c.err
}
