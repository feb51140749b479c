package remote

import (
	"context"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"rosetop/bench"
	"rosetop/remote/remotetest"
	"rosetop/sched"
)

// sleepClock is a session clock that stands still but for Sleep, which hands each wait to the
// test (on slept) and moves the clock on by it at once; with hold set, Sleep waits for its
// context instead, as a long real wait would.
type sleepClock struct {
	fakeClock
	slept chan time.Duration // buffered: Sleep never blocks on it
	hold  chan struct{}      // closed: Sleep blocks until its context ends
}

func newSleepClock() *sleepClock {
	c := &sleepClock{slept: make(chan time.Duration, 64), hold: make(chan struct{})}
	c.set(time.Second)
	return c
}

func (c *sleepClock) Sleep(ctx context.Context, d time.Duration) error {
	c.slept <- d
	select {
	case <-c.hold:
		<-ctx.Done()
	default:
		c.add(d)
	}
	return ctx.Err()
}

// TestRetryAfter: a Retry-After header's seconds or HTTP-date (against the answer's Date, else
// now), at most MaxRetryAfter; nothing for one that is absent, past or not understood.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	date := func(t time.Time) string { return t.Format(http.TimeFormat) }
	for _, tc := range []struct {
		name, value, date string
		want              time.Duration
	}{
		{"none", "", "", 0},
		{"seconds", "7", "", 7 * time.Second},
		{"seconds with spaces", " 2 ", "", 2 * time.Second},
		{"zero", "0", "", 0},
		{"a day", "86400", "", MaxRetryAfter},
		{"past uint64", "99999999999999999999999", "", MaxRetryAfter},
		{"negative", "-5", "", 0},
		{"fraction", "1.5", "", 0},
		{"garbage", "soon", "", 0},
		{"date against now", date(now.Add(20 * time.Second)), "", 20 * time.Second},
		{"date against the answer's Date", date(now.Add(time.Hour + 5*time.Second)), date(now.Add(time.Hour)), 5 * time.Second},
		{"date past", date(now.Add(-time.Minute)), "", 0},
		{"date next year", date(now.AddDate(1, 0, 0)), "", MaxRetryAfter},
	} {
		h := http.Header{}
		if tc.value != "" {
			h.Set("Retry-After", tc.value)
		}
		if tc.date != "" {
			h.Set("Date", tc.date)
		}
		if got := retryAfter(h, now); got != tc.want {
			t.Errorf("%s: Retry-After %q: %v, want %v", tc.name, tc.value, got, tc.want)
		}
	}
}

// TestBackoffOnRefusals: a 429 or a 5xx answer counts toward the backoff as a refused
// connection does, a Retry-After (at most MaxRetryAfter) is a floor on the next request's wait,
// any other answer resets both, and a cancelled request stops waiting and is never sent.
func TestBackoffOnRefusals(t *testing.T) {
	faults := []remotetest.Fault{remotetest.Status429, remotetest.Status503HTML, remotetest.OK, remotetest.Status429}
	retry := []string{"7", "", "", "86400"}
	srv := startTestServer(t, remotetest.Options{
		Faults:     func(n int) remotetest.Fault { return faults[min(n, len(faults)-1)] },
		RetryAfter: func(n int) string { return retry[min(n, len(retry)-1)] },
	})
	clk := newSleepClock()
	s, out := runningServer(t, srv, clk)
	guard := time.After(30 * time.Second)
	submit := func() sched.RequestID { return submitHello(t, s) }
	finished := func(id sched.RequestID) *sched.Record { return awaitFinished(t, out, id, guard) }
	// waited is the wait before the request just finished; 0: none.
	waited := func() time.Duration {
		select {
		case d := <-clk.slept:
			return d
		default:
			return 0
		}
	}
	for i, want := range []time.Duration{
		0,               // the first request goes at once, and is answered 429, Retry-After: 7
		7 * time.Second, // the Retry-After over backoff(1); answered 503 without one
		backoff(2),      // two refusals in a row; answered 200
		0,               // a success reset the backoff; answered 429, Retry-After: 86400
	} {
		finished(submit())
		if got := waited(); got != want {
			t.Errorf("request %d waited %v, want %v", i, got, want)
		}
	}
	// The next waits the day asked for, bounded, until it is cancelled.
	close(clk.hold)
	id := submit()
	select {
	case d := <-clk.slept:
		if d != MaxRetryAfter {
			t.Errorf("after Retry-After: 86400 the request waits %v, want %v", d, MaxRetryAfter)
		}
	case <-guard:
		t.Fatal("the request after Retry-After: 86400 did not wait")
	}
	s.Cancel(id)
	if rec := finished(id); rec.Reason != sched.FinishCancelled {
		t.Errorf("a request cancelled while it waited: %v (%v), want cancelled", rec.Reason, rec.Err)
	}
	if n := srv.Requests(); n != 4 {
		t.Errorf("the server saw %d requests, want 4: a request cancelled while it waited is not sent", n)
	}
}

// runningServer is a remote server over srv on clk, running until the test ends.
func runningServer(t *testing.T, srv *remotetest.Server, clk bench.Clock) (*remoteServer, <-chan sched.StepOutput) {
	t.Helper()
	p := newTestProvider(t, srv, ProviderOptions{})
	if err := p.Prepare(context.Background(), io.Discard); err != nil {
		t.Fatal(err)
	}
	bs, err := p.NewServer(context.Background(), bench.ServerSpec{Clock: clk, MaxBatch: 4, Sched: sched.Config{MaxBatch: 4, PrefillMaxBatch: 4}})
	if err != nil {
		t.Fatal(err)
	}
	s := bs.(*remoteServer)
	s.jitter = func(d time.Duration) time.Duration { return d } // the waits the tests check
	ctx, cancel := context.WithCancel(context.Background())
	out, ran := make(chan sched.StepOutput), make(chan error, 1)
	go func() { ran <- s.Run(ctx, out) }()
	t.Cleanup(func() {
		cancel()
		<-ran
		s.Close()
	})
	return s, out
}

// submitHello submits a 4-token request.
func submitHello(t *testing.T, s *remoteServer) sched.RequestID {
	t.Helper()
	id, err := s.Submit(sched.Request{Text: "Hello", MaxNewTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// awaitFinished reads steps until request id's finished event, failing the test at guard.
func awaitFinished(t *testing.T, out <-chan sched.StepOutput, id sched.RequestID, guard <-chan time.Time) *sched.Record {
	t.Helper()
	for {
		select {
		case so := <-out:
			for _, e := range so.Events {
				if e.Kind == sched.EventFinished && e.ID == id {
					return e.Record
				}
			}
		case <-guard:
			t.Fatalf("request %d did not finish", id)
		}
	}
}

// hookClock is a sleepClock that calls onSleep (when set) in each Sleep, before the clock moves.
type hookClock struct {
	*sleepClock
	onSleep func()
}

func (c *hookClock) Sleep(ctx context.Context, d time.Duration) error {
	if c.onSleep != nil {
		c.onSleep()
	}
	return c.sleepClock.Sleep(ctx, d)
}

// TestBackoffLooksAgain: a Retry-After that another request's refusal brought while this one
// waited its backoff holds this one too: the wait is looked at again after each sleep.
func TestBackoffLooksAgain(t *testing.T) {
	srv := startTestServer(t, remotetest.Options{})
	clk := &hookClock{sleepClock: newSleepClock()}
	s, out := runningServer(t, srv, clk)
	s.mu.Lock()
	s.refused = 1 // the next request waits backoff(1)
	s.mu.Unlock()
	var once sync.Once
	clk.onSleep = func() {
		once.Do(func() { // meanwhile another request was answered 429, Retry-After: 30
			s.mu.Lock()
			s.retryAt = clk.Now() + 30*time.Second
			s.mu.Unlock()
		})
	}
	awaitFinished(t, out, submitHello(t, s), time.After(30*time.Second))
	var waits []time.Duration
	for len(clk.slept) > 0 {
		waits = append(waits, <-clk.slept)
	}
	if want := []time.Duration{backoff(1), 30*time.Second - backoff(1)}; !slices.Equal(waits, want) {
		t.Errorf("waits %v, want %v: the backoff, then the rest of the Retry-After that came meanwhile", waits, want)
	}
}
