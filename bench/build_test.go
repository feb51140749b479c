package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testBuild is a build on workers goroutines with a fake clock and no notes.
func testBuild(workers int) build {
	return build{ctx: context.Background(), workers: workers, clock: newFakeClock(0), notes: io.Discard}
}

// TestBuildEachCallsEveryIndexOnce: every index is handed out exactly once, whatever the number
// of workers, and tick counts every returned call.
func TestBuildEachCallsEveryIndexOnce(t *testing.T) {
	for _, workers := range []int{1, 3, 16} {
		for _, n := range []int{0, 1, 5, 200} {
			calls := make([]atomic.Int32, n)
			ticks := 0
			if err := testBuild(workers).each(n, func(done int) { ticks = done }, func(i int) { calls[i].Add(1) }); err != nil {
				t.Fatal(err)
			}
			for i := range calls {
				if c := calls[i].Load(); c != 1 {
					t.Errorf("%d workers, n %d: index %d called %d times", workers, n, i, c)
				}
			}
			if ticks != n {
				t.Errorf("%d workers, n %d: the last tick counted %d", workers, n, ticks)
			}
		}
	}
}

// TestBuildEachStopsWhenCancelled: once ctx is done no more indices are handed out; each returns
// ctx's error after the calls in flight returned.
func TestBuildEachStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	b := testBuild(4)
	b.ctx = ctx
	var calls, inFlight, late atomic.Int32
	var cancelled atomic.Bool
	err := b.each(10000, nil, func(i int) {
		inFlight.Add(1)
		defer inFlight.Add(-1)
		if cancelled.Load() {
			late.Add(1)
		}
		if calls.Add(1) == 20 {
			cancel()
			cancelled.Store(true)
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if n := late.Load(); n > 3 {
		t.Errorf("%d calls began after the cancel, want at most one for each of the 3 other workers", n)
	}
	if n := inFlight.Load(); n != 0 {
		t.Errorf("each returned with %d calls in flight", n)
	}
}

// TestBuildProgress: a build that takes a while notes its progress after buildNoteAfter, then
// every progressEvery, and says when it is done; a quick build writes nothing.
func TestBuildProgress(t *testing.T) {
	for _, tc := range []struct {
		name string
		step time.Duration // fake time between two returned calls
		want []string
	}{
		{"slow", time.Second, []string{
			"rosetop: building 30 prompts (x): 2/30, about 28s left",
			"rosetop: building 30 prompts (x): 12/30, about 18s left",
			"rosetop: building 30 prompts (x): 22/30, about 8s left",
			"rosetop: building 30 prompts (x): done in 30.0 s",
		}},
		{"quick", time.Millisecond, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock(time.Hour)
			var notes bytes.Buffer
			b := build{ctx: context.Background(), workers: 1, clock: clock, notes: &notes}
			p := b.progress("building 30 prompts (x)")
			tick := func(done int) { clock.advance(tc.step); p.update(int64(done), 30) }
			if err := b.each(30, tick, func(int) {}); err != nil {
				t.Fatal(err)
			}
			p.done()
			var got []string
			if s := strings.TrimSpace(notes.String()); s != "" {
				got = strings.Split(s, "\n")
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("notes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestSampleIndependentOfWorkers: every dataset's sample for a seed is the same on one worker as
// on many, so a benchmark is reproducible across machines.
func TestSampleIndependentOfWorkers(t *testing.T) {
	m := gpt2Model(t, 1024)
	sg, err := LoadDataset(t.Context(), "sharegpt", writeTemp(t, "sg.json", shareGPTSample), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	sg.Seed = 5
	tr := &Dataset{Kind: "trace", Path: "t", Seed: 5}
	for i := range 40 {
		tr.rows = append(tr.rows, datasetRow{inputLen: 300 + 7*i, outputLen: 3, hashIDs: []int64{int64(i % 3), int64(i)}, line: i + 1})
	}
	for _, d := range []*Dataset{
		{Kind: "random", InputLen: 100, OutputLen: 8, RangeRatio: 0.5, Seed: 5},
		sg, tr,
	} {
		one, err := d.sample(testBuild(1), 40, m)
		if err != nil {
			t.Fatal(err)
		}
		many, err := d.sample(testBuild(7), 40, m)
		if err != nil {
			t.Fatal(err)
		}
		for i := range one {
			if !slices.Equal(one[i].tokens, many[i].tokens) || one[i].text != many[i].text || one[i].maxNew != many[i].maxNew {
				t.Fatalf("%s: request %d differs between 1 and 7 workers", d.Kind, i)
			}
		}
	}
}

// TestSampleTextKeepsTheShuffledOrder: rows tokenized in parallel batches are kept as the serial
// rule keeps them: the first n rows of the seeded shuffle that fit, in that order.
func TestSampleTextKeepsTheShuffledOrder(t *testing.T) {
	m := gpt2Model(t, 64)
	d := &Dataset{Kind: "jsonl", Path: "p", OutputLen: 0, Seed: 9}
	for i := range 300 {
		prompt := strings.Repeat("word ", 1+i%10) + "end"
		if i%4 == 0 {
			prompt = strings.Repeat("long ", 80) // 80 tokens: more than the 64 positions
		}
		d.rows = append(d.rows, datasetRow{prompt: prompt, outputLen: 2, line: i + 1})
	}
	var want []string
	for _, k := range rand.New(rand.NewPCG(d.Seed, 0x5a3b1e)).Perm(len(d.rows)) { // sampleText's shuffle
		if len(want) < 150 && k%4 != 0 {
			want = append(want, d.rows[k].prompt)
		}
	}
	got, err := d.sample(testBuild(3), 150, m)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i].text != want[i] {
			t.Fatalf("request %d is %q, want the shuffle's %q", i, got[i].text, want[i])
		}
	}
}

// cancelAfterEncodes is a provider whose tokenizer cancels the session's context at its n-th
// Encode and counts every call.
type cancelAfterEncodes struct {
	*fakeProvider
	n      int64
	cancel context.CancelFunc
	calls  atomic.Int64
	once   sync.Once
}

func (p *cancelAfterEncodes) Model() ModelInfo {
	m := p.fakeProvider.Model()
	m.Codec = countingCodec{TextCodec: m.Codec, p: p}
	return m
}

type countingCodec struct {
	TextCodec
	p *cancelAfterEncodes
}

func (c countingCodec) Encode(s string) []int32 {
	if c.p.calls.Add(1) == c.p.n {
		c.p.once.Do(c.p.cancel)
	}
	return c.TextCodec.Encode(s)
}

// TestNewSessionInterruptedWhileBuilding: a signal while a dataset's prompts are built stops
// NewSession with context.Canceled without building the rest.
func TestNewSessionInterruptedWhileBuilding(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := &cancelAfterEncodes{fakeProvider: newFakeProvider(), n: 10, cancel: cancel}
	cfg := testConfig(requests(5000, 4), func(c *Config) {
		c.Workload.Dataset = &Dataset{Kind: "random", InputLen: 64, OutputLen: 4, Seed: 1}
	})
	s, err := NewSession(ctx, cfg, SessionOptions{Provider: p, Clock: newFakeClock(0)})
	if err == nil {
		s.Close()
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("NewSession: %v, want context.Canceled", err)
	}
	if n := p.calls.Load(); n > 1000 {
		t.Errorf("%d prompts encoded after the cancel at the 10th of 5000", n)
	}
}

// slowCodec is a tokenizer whose every Encode takes a second of the fake clock.
type slowCodec struct {
	TextCodec
	clock *fakeClock
}

func (c slowCodec) Encode(s string) []int32 {
	c.clock.advance(time.Second)
	return c.TextCodec.Encode(s)
}

type slowProvider struct {
	*fakeProvider
	clock *fakeClock
}

func (p slowProvider) Model() ModelInfo {
	m := p.fakeProvider.Model()
	m.Codec = slowCodec{TextCodec: m.Codec, clock: p.clock}
	return m
}

// TestNewSessionNotesASlowBuild: a session whose prompts take long to build says how far it has
// got on its progress writer (bench's stderr, the dashboard's terminal) and when it is done.
func TestNewSessionNotesASlowBuild(t *testing.T) {
	clock := newFakeClock(0)
	var notes bytes.Buffer
	cfg := testConfig(requests(40, 4), func(c *Config) {
		c.Workload.Dataset = &Dataset{Kind: "random", InputLen: 16, OutputLen: 4, Seed: 1}
	})
	s, err := NewSession(context.Background(), cfg, SessionOptions{Provider: slowProvider{newFakeProvider(), clock}, Clock: clock, Progress: &notes})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	got := notes.String()
	if !strings.Contains(got, "rosetop: building 40 prompts (--dataset random): ") || !strings.Contains(got, "left\n") ||
		!strings.Contains(got, "rosetop: building 40 prompts (--dataset random): done in ") {
		t.Errorf("progress notes %q, want the build's progress and its end", got)
	}
}
