package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"rosetop/bench"
	"rosetop/remote"
	"rosetop/sched"
)

// A bench.Session's stream is a Stream as it is.
var _ Stream = (*bench.Stream)(nil)

// sessionEngine is the adapter `rosetop serve` needs: a bench.Session taking external load as an
// Engine. Submit's bench.ErrStopped becomes sched.ErrClosed, which the server answers 503.
type sessionEngine struct {
	s *bench.Session
	m Model
}

func (e *sessionEngine) Submit(ctx context.Context, r sched.Request) (Stream, error) {
	st, err := e.s.Submit(ctx, r)
	if errors.Is(err, bench.ErrStopped) {
		return nil, fmt.Errorf("%w: %w", sched.ErrClosed, err)
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}

func (e *sessionEngine) Waiting() int { return e.s.Waiting() }
func (e *sessionEngine) Model() Model { return e.m }

// newSessionHarness runs a Server over a real bench.Session in external mode (the CPU engine on
// the embedded model, batches of up to maxBatch), onStep seeing each step when not nil, accepted
// connections passed to setup when not nil; the server and the session stop with the test.
func newSessionHarness(t *testing.T, maxSeqLen, maxBatch int, so Options, onStep func(*sched.StepOutput), setup func(net.Conn)) *harness {
	t.Helper()
	cfg := bench.Config{
		Workload:   bench.Workload{Prompt: "Hello", PromptRepeats: 1, NumRequests: 4, MaxNewTokens: 8, StreamInterval: 1},
		Arrivals:   bench.Arrivals{Schedule: "relative"},
		Sched:      sched.Config{MaxBatch: maxBatch, PrefillMaxBatch: maxBatch, Policy: sched.Mixed},
		MaxSeqLen:  maxSeqLen,
		RepeatRuns: 1,
	}
	s, err := bench.NewSession(context.Background(), cfg, bench.SessionOptions{
		Provider: bench.NewInProcess(bench.InProcessOptions{Device: "cpu", Threads: 2, PrefixCache: true}),
		External: true, OnStep: onStep,
	})
	if err != nil {
		t.Fatal(err)
	}
	info := s.Model()
	eng := &sessionEngine{s: s, m: Model{ID: "tiny-gpt2", MaxSeqLen: maxSeqLen, VocabSize: info.Vocab, Tokenizer: info.Codec,
		EOS: info.EOS, Created: time.Unix(1700000000, 0)}}
	srv, err := New(eng, so)
	if err != nil {
		t.Fatal(err)
	}
	return serveHarness(t, srv, setup, time.Minute, func() {
		if err := s.Close(); err != nil {
			t.Errorf("session: %v", err)
		}
	})
}

// TestBenchSession: the server over a real bench.Session in external mode, its metrics fed by the
// session's step tap: whole and streamed replies, and counters that equal what the requests did.
func TestBenchSession(t *testing.T) {
	m, err := NewMetrics(MetricsOptions{Model: "tiny-gpt2", MaxModelLen: 128})
	if err != nil {
		t.Fatal(err)
	}
	h := newSessionHarness(t, 128, 8, Options{Metrics: m}, m.ObserveStep, nil)

	tokens := 0
	for i, n := range []int{5, 7, 3} {
		var r gotReply
		if code := h.post("/v1/completions", map[string]any{"prompt": fmt.Sprintf("Request %d", i), "max_tokens": n, "ignore_eos": true}, &r); code != 200 || r.Usage.CompletionTokens != n {
			t.Fatalf("request %d: status %d, reply %+v", i, code, r)
		}
		tokens += n
	}
	st := h.stream("/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": "Hi"}},
		"max_tokens": 6, "ignore_eos": true, "stream_options": map[string]bool{"include_usage": true}})
	if st.finish != "length" || st.usage == nil || st.usage.CompletionTokens != 6 {
		t.Fatalf("stream: finish %q usage %+v", st.finish, st.usage)
	}
	tokens += 6
	fams, _ := h.scrape()
	if got := fams["rosetop_generation_tokens_total"].Metric[0].Counter.GetValue(); got != float64(tokens) {
		t.Fatalf("generation_tokens_total %v, want %d", got, tokens)
	}
	if got := fams["rosetop_e2e_request_latency_seconds"].Metric[0].Histogram.GetSampleCount(); got != 4 {
		t.Fatalf("e2e latency count %d, want 4", got)
	}
}

// TestRemoteClient: rosetop's own OpenAI client (remote, as `rosetop --target` uses it) reads this
// server's streams: the text, the finish reason, a chunk per token with its count
// (continuous_usage_stats), and the usage.
func TestRemoteClient(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	c, err := remote.New(remote.Config{BaseURL: h.url})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if model, err := c.FirstModel(context.Background()); err != nil || model != "tiny-gpt2" {
		t.Fatalf("first model %q, %v", model, err)
	}
	for _, api := range []remote.API{remote.Completions, remote.Chat} {
		var chunkTokens []int
		res, err := c.Do(context.Background(), remote.Request{API: api, Model: "tiny-gpt2", Prompt: "Hello", MaxTokens: 9,
			IgnoreEOS: true, ContinuousUsage: true}, func(ch remote.Chunk) { chunkTokens = append(chunkTokens, ch.Tokens) })
		if err != nil || !res.OK() {
			t.Fatalf("%v: %v %+v", api, err, res.Failure)
		}
		if res.Finish != "length" || res.OutputTokens != 9 || res.Tokens != remote.TokensUsage || res.Text == "" {
			t.Fatalf("%v: finish %q, %d tokens from %v, text %q", api, res.Finish, res.OutputTokens, res.Tokens, res.Text)
		}
		sum := 0
		for _, n := range chunkTokens {
			sum += max(n, 0)
		}
		if sum != 9 {
			t.Fatalf("%v: chunks carried %v tokens, want 9 in all", api, chunkTokens)
		}
	}
}
