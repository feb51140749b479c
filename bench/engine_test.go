package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"rosetop/sched"
)

// ranSession runs cfg headless on prov to its end and closes it, keeping every record.
func ranSession(t *testing.T, cfg Config, prov Provider) *Session {
	t.Helper()
	s, err := NewSession(context.Background(), cfg, SessionOptions{Provider: prov, KeepRecords: true, headless: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTTFTDecompositionEngine: on the real scheduler and engine (tokenize workers on, so every
// part is exercised), TTFT = add_request + tokenize + queue wait + prefill->first token holds
// for every request, and every part is >= 0 (the timestamps are ordered).
func TestTTFTDecompositionEngine(t *testing.T) {
	cfg := testConfig(requests(6, 3), func(c *Config) {
		c.Workload.UniquePrompts = true
		c.Sched.MaxBatch, c.Sched.PrefillMaxBatch = 4, 2
	})
	s := ranSession(t, cfg, NewInProcess(InProcessOptions{Device: "cpu", Threads: 2, TokenizeWorkers: 2, PrefixCache: true}))
	if len(s.results) != 1 || len(s.results[0].reqs) != 6 {
		t.Fatalf("results = %d runs", len(s.results))
	}
	for _, r := range s.results[0].reqs {
		tm := r.Record.Times
		if !r.completed() {
			t.Fatalf("request %d: %s %v", r.Index, r.Record.Reason, r.Record.Err)
		}
		ordered := tm.SubmitStart <= tm.SubmitEnd && tm.SubmitEnd <= tm.Tokenized && tm.Tokenized <= tm.Admitted &&
			tm.Admitted <= tm.FirstToken && tm.FirstToken <= tm.Finished && tm.Tokens[0] == tm.FirstToken
		if !ordered {
			t.Errorf("request %d: timestamps out of order: %+v", r.Index, tm)
		}
		m := metricsOf(&r)
		sum := m.AddRequest + m.Tokenize + m.QueueWait + m.PrefillFirst
		if math.Abs(sum-m.TTFT) > 1e-9 {
			t.Errorf("request %d: add %.6f + tokenize %.6f + queue %.6f + prefill %.6f = %.6f, TTFT %.6f",
				r.Index, m.AddRequest, m.Tokenize, m.QueueWait, m.PrefillFirst, sum, m.TTFT)
		}
		if len(r.Record.Output) != 3 || len(tm.Tokens) != 3 {
			t.Errorf("request %d: %d outputs, %d token times", r.Index, len(r.Record.Output), len(tm.Tokens))
		}
	}
}

// interruptingProvider cancels a context on the k-th submit: a Ctrl-C in the middle of a run of
// the real engine, without timing.
type interruptingProvider struct {
	Provider
	k      int
	cancel context.CancelFunc
}

func (p *interruptingProvider) NewServer(ctx context.Context, spec ServerSpec) (Server, error) {
	srv, err := p.Provider.NewServer(ctx, spec)
	return &interruptingServer{Server: srv, p: p}, err
}

type interruptingServer struct {
	Server
	p    *interruptingProvider
	mu   sync.Mutex
	subs int // guarded by mu
}

func (s *interruptingServer) Submit(r sched.Request) (sched.RequestID, error) {
	id, err := s.Server.Submit(r)
	s.mu.Lock()
	s.subs++
	if s.subs == s.p.k {
		s.p.cancel()
	}
	s.mu.Unlock()
	return id, err
}

func TestCtrlCEngine(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := testConfig(requests(6, 16), runs(1, 1), func(c *Config) {
		c.Arrivals.Interval, c.Workload.StopOnEOS = time.Millisecond, false
	})
	p := &interruptingProvider{Provider: cpuEngine(2), k: 6 + 3, cancel: cancel} // the 3rd submit of run 1
	var out, errOut bytes.Buffer
	err := RunBench(ctx, cfg, SessionOptions{Provider: p}, Exports{}, &out, &errOut)
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v, want ErrInterrupted; stderr:\n%s", err, errOut.String())
	}
	text := out.String()
	if !strings.HasPrefix(text, "=== warmup 1/1 ===\nCold run, not measured: 6 requests in ") || !strings.Contains(text, "=== streaming benchmark ===\n") ||
		!strings.Contains(text, "Interrupted: partial run") {
		t.Errorf("report:\n%s", text)
	}
	// TestMain's goleak check proves the engine, scheduler, recorder and submitter stopped.
}

// TestLoopPanic: a panic in the scheduler loop ends the session with an error naming it and
// where it happened, as a failed step does, instead of killing the process.
func TestLoopPanic(t *testing.T) {
	p := newFakeProvider()
	p.runPanic = "index out of range"
	_, _, err := fakeBench(t, context.Background(), p, testConfig(requests(3, 2), runs(1, 1)), Exports{})
	if err == nil || !strings.Contains(err.Error(), "scheduler: panic: index out of range (in rosetop/bench.(*fakeServer).Run at fake_test.go:") {
		t.Fatalf("got %v, want the panic with its place", err)
	}
}

// TestStopsOnTheModelsEOS: the scheduler stops a request on the model's eos_token_id
// (config.json), as generate and transformers do, not on the tokenizer's <|endoftext|>.
func TestStopsOnTheModelsEOS(t *testing.T) {
	prov := &inProcess{opts: InProcessOptions{Device: "cpu", Threads: 2}}
	defer prov.Close()
	if err := prov.Prepare(context.Background(), io.Discard); err != nil {
		t.Fatal(err)
	}
	output := func(stopOnEOS bool) *sched.Record {
		t.Helper()
		cfg := testConfig(requests(1, 8), func(c *Config) { c.Workload.StopOnEOS = stopOnEOS })
		return ranSession(t, cfg, prov).results[0].reqs[0].Record
	}
	free := output(false).Output
	if len(free) != 8 {
		t.Fatalf("%d tokens without EOS, want 8", len(free))
	}
	eos := free[2]
	if eos == prov.model.Tokenizer.EOS() {
		t.Skipf("the third token is <|endoftext|> itself")
	}
	prov.model.Config.EOSTokenID = eos
	if got := prov.Model().EOS; got != eos {
		t.Errorf("Model().EOS = %d, want config.json's %d", got, eos)
	}
	r := output(true)
	if want := slices.Index(free, eos) + 1; len(r.Output) != want || r.Reason != sched.FinishEOS {
		t.Errorf("stopped after %d tokens (%s), want %d at EOS %d; free run %v", len(r.Output), r.Reason, want, eos, free)
	}
}
