package bench

import (
	"math"
	"slices"
	"testing"
	"time"

	"rosetop/engine"
	"rosetop/sched"
)

// stepBackend is an engine that samples token 7 for every sequence and costs the fake clock
// 2 ms + 50 us per token, so that the prefill and decode calls of one step end at different
// times (a first token's time is not its step's Snapshot.At).
type stepBackend struct{ clock *fakeClock }

func (b stepBackend) Step(batch *engine.Batch, next []int32) error {
	for i := range next {
		next[i] = 7
	}
	b.clock.advance(2*time.Millisecond + time.Duration(batch.Tokens())*50*time.Microsecond)
	return nil
}

// TestRollingLatencyAtFirstToken drives the real scheduler with a fake engine and clock, step
// by step, loaded like the decode-heavy job (every request decodes as many tokens, so a batch
// finishes together): a request's TTFT, queue wait and prefill->first are in the rolling windows
// from the step of its first token, before it finishes, equal to what its record gives; ITL
// samples come with each token, TPOT at finish, and nothing is counted twice.
func TestRollingLatencyAtFirstToken(t *testing.T) {
	clock := newFakeClock(time.Second)
	s, err := sched.New(sched.Options{
		Backend: stepBackend{clock}, Layout: engine.KVLayout{BlockSize: 16, NumBlocks: 64, Paged: true}, MaxSeqLen: 64,
		EOS: -1, Clock: clock, Config: sched.Config{MaxBatch: 4, PrefillMaxBatch: 2, Policy: sched.PrefillFirst},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n, newTokens = 6, 8
	for i := range n {
		clock.advance(300 * time.Microsecond)
		if _, err := s.Submit(sched.Request{Tokens: []int32{1, 2, 3, int32(10 + i)}, MaxNewTokens: newTokens}); err != nil {
			t.Fatal(err)
		}
	}

	l := newLiveState(30 * time.Second)
	var firstOrder []sched.RequestID // requests in the order of their first token
	records := map[sched.RequestID]*sched.Record{}
	tokens, early := 0, 0
	for step := 1; len(records) < n; step++ {
		if step > 100 {
			t.Fatalf("%d of %d requests finished after 100 steps", len(records), n)
		}
		so, err := s.Step()
		if err != nil {
			t.Fatal(err)
		}
		for i := range so.Events {
			e := &so.Events[i]
			l.addEvent(so.Snapshot.At, e) // what the session's recorder does
			switch e.Kind {
			case sched.EventTokens:
				tokens++
				if e.First != nil {
					firstOrder = append(firstOrder, e.ID)
				}
			case sched.EventFinished:
				records[e.ID] = e.Record
			}
		}
		rows := l.rolling(so.Snapshot.At)
		for _, w := range []int{winTTFT, winQueueWait, winPrefillFirst} {
			if rows[w].Dist.N != len(firstOrder) {
				t.Fatalf("step %d: %s has %d samples, %d requests have their first token", step, rows[w].Name, rows[w].Dist.N, len(firstOrder))
			}
		}
		if rows[winTPOT].Dist.N != len(records) || rows[winITL].Dist.N != tokens-len(firstOrder) {
			t.Fatalf("step %d: TPOT %d samples for %d finished, ITL %d samples for %d tokens after a first",
				step, rows[winTPOT].Dist.N, len(records), rows[winITL].Dist.N, tokens-len(firstOrder))
		}
		if len(firstOrder) > len(records) {
			early++
		}
	}
	if early < newTokens-1 {
		t.Errorf("TTFT samples were ahead of the finished requests in %d steps; the batch decoded %d", early, newTokens)
	}
	if len(l.open) != 0 {
		t.Errorf("%d requests still open after every one finished", len(l.open))
	}

	// The early samples are exactly the records' values, in first-token order.
	now := clock.Now()
	metrics := make([]requestMetrics, 0, n)
	reqs := make([]RequestResult, 0, n)
	for _, id := range firstOrder {
		r := RequestResult{Index: len(reqs), Record: records[id]}
		reqs, metrics = append(reqs, r), append(metrics, metricsOf(&r))
	}
	cases := []struct {
		name string
		win  int
		get  func(m *requestMetrics) float64
	}{
		{"TTFT", winTTFT, func(m *requestMetrics) float64 { return m.TTFT }},
		{"queue wait", winQueueWait, func(m *requestMetrics) float64 { return m.QueueWait }},
		{"prefill->first", winPrefillFirst, func(m *requestMetrics) float64 { return m.PrefillFirst }},
	}
	for _, c := range cases {
		var want []float64
		for i := range metrics {
			want = append(want, c.get(&metrics[i]))
		}
		if got := l.windows[c.win].values(now); !slices.Equal(got, want) {
			t.Errorf("%s window %v, records give %v", c.name, got, want)
		}
	}
	if qw := l.windows[winQueueWait].values(now); slices.Max(qw) <= 0 {
		t.Errorf("no request waited (queue waits %v): the test would not tell queue wait from prefill->first", qw)
	}
	var wantITL []float64
	for i := range metrics {
		wantITL = append(wantITL, metrics[i].ITL...)
	}
	gotITL := l.windows[winITL].values(now)
	slices.Sort(gotITL)
	slices.Sort(wantITL)
	if !slices.Equal(gotITL, wantITL) {
		t.Errorf("ITL window %v, records give %v", gotITL, wantITL)
	}

	// The dashboard's rolling rows agree with the run summary computed from the records.
	sum := summarize(runInfo{}, reqs)
	rows := l.rolling(now)
	for i, d := range []Dist{sum.TTFT, sum.QueueWait, sum.PrefillFirst, sum.TPOT, sum.ITL} {
		if !sameDist(rows[i].Dist, d) {
			t.Errorf("%s: rolling %+v, run summary %+v", rows[i].Name, rows[i].Dist, d)
		}
	}
}

// sameDist compares two distributions of one multiset of samples; the mean may differ in its
// last bits when the samples were summed in another order.
func sameDist(a, b Dist) bool {
	return a.N == b.N && a.P50 == b.P50 && a.P95 == b.P95 && a.P99 == b.P99 && a.Max == b.Max &&
		math.Abs(a.Mean-b.Mean) <= 1e-9*math.Abs(b.Mean)
}

// streamEvents is what the scheduler emits for a finished request: one event per token, the
// first carrying First, then the finished event; for a remote server's record, one event per
// chunk with its tokens.
func streamEvents(rec *sched.Record) []sched.Event {
	var out []sched.Event
	t := rec.Times
	for i, at := range t.Tokens {
		e := sched.Event{Kind: sched.EventTokens, ID: rec.ID, At: at}
		if rec.Stream != nil {
			e.Tokens = make([]int32, rec.Stream.ChunkTokens[i])
		} else {
			e.Tokens = rec.Output[i : i+1 : i+1]
		}
		if i == 0 {
			f := t
			f.Tokens, f.Finished = t.Tokens[:1:1], 0
			e.First = &f
		}
		out = append(out, e)
	}
	return append(out, sched.Event{Kind: sched.EventFinished, ID: rec.ID, Record: rec})
}

// TestRollingLatencyEventShapes: however a request's events come, each of its samples is in the
// windows once, and the TTFT sample is in before the finish exactly when the first token event
// carried First.
func TestRollingLatencyEventShapes(t *testing.T) {
	const tokens = 6
	cases := []struct {
		name   string
		events func(rec *sched.Record) []sched.Event
		reason sched.FinishReason
		early  bool // the TTFT sample is in before the finished event
		tpot   int  // TPOT samples at the end
		itl    int  // ITL samples at the end
	}{
		{"streamed", streamEvents, sched.FinishLength, true, 1, tokens - 1},
		{"no First: all at finish", func(rec *sched.Record) []sched.Event {
			ev := streamEvents(rec)
			ev[0].First = nil
			return ev
		}, sched.FinishLength, false, 1, tokens - 1},
		{"several tokens in one event: the rest of the gaps from the record", func(rec *sched.Record) []sched.Event {
			ev := streamEvents(rec)
			ev[2].Tokens = rec.Output[2:4:4] // tokens 3 and 4 together
			return append(ev[:3], ev[4:]...)
		}, sched.FinishLength, true, 1, tokens - 1},
		{"cancelled after its first tokens: what it measured stays", func(rec *sched.Record) []sched.Event {
			ev := streamEvents(rec)
			return []sched.Event{ev[0], ev[1], ev[2], ev[len(ev)-1]}
		}, sched.FinishCancelled, true, 0, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newLiveState(30 * time.Second)
			r := fakeRequest(3, time.Second, tokens, time.Millisecond+time.Microsecond)
			r.Record.Reason = c.reason
			r.Record.Times.Tokens[3] += 200 * time.Microsecond // uneven gaps: a misplaced one would show
			evs := c.events(r.Record)
			for i := range evs[:len(evs)-1] {
				l.addEvent(r.Record.Times.Finished, &evs[i])
			}
			now := r.Record.Times.Finished
			if n := l.rolling(now)[winTTFT].Dist.N; (n == 1) != c.early || n > 1 {
				t.Errorf("before the finish: %d TTFT samples, early %v", n, c.early)
			}
			l.addEvent(now, &evs[len(evs)-1])
			rows := l.rolling(now)
			if rows[winTTFT].Dist.N != 1 || rows[winQueueWait].Dist.N != 1 || rows[winPrefillFirst].Dist.N != 1 ||
				rows[winTPOT].Dist.N != c.tpot || rows[winITL].Dist.N != c.itl {
				t.Errorf("after the finish: TTFT %d queue %d prefill %d TPOT %d ITL %d samples, want 1 1 1 %d %d",
					rows[winTTFT].Dist.N, rows[winQueueWait].Dist.N, rows[winPrefillFirst].Dist.N, rows[winTPOT].Dist.N, rows[winITL].Dist.N, c.tpot, c.itl)
			}
			want := firstTokenMetrics(&r.Record.Times)
			if got := rows[winTTFT].Dist.Max; got != want.TTFT {
				t.Errorf("TTFT %v, record gives %v", got, want.TTFT)
			}
			var gaps []float64
			for i := 1; i <= c.itl; i++ {
				gaps = append(gaps, ms(r.Record.Times.Tokens[i]-r.Record.Times.Tokens[i-1]))
			}
			got := l.windows[winITL].values(now)
			slices.Sort(got)
			slices.Sort(gaps)
			if !slices.Equal(got, gaps) {
				t.Errorf("ITL samples %v, want %v", got, gaps)
			}
			if len(l.open) != 0 {
				t.Errorf("%d requests still open", len(l.open))
			}
		})
	}
}
