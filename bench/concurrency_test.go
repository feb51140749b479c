package bench

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestConcurrencyKeys: C doubles the steady state's requests in flight at once (the submitter
// fills the new slots), c halves it down to 1; a session with external load refuses both.
func TestConcurrencyKeys(t *testing.T) {
	const n = 4
	p := newFakeProvider()
	p.hold = 2 * n // the cold and measured runs finish; every steady request is held
	submitted := make(chan int, 64)
	p.onSubmit = func(k int) { submitted <- k }
	s, err := NewSession(context.Background(), testConfig(requests(n, 3), runs(1, 1)), SessionOptions{Provider: p, Clock: newFakeClock(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	deadline := time.After(20 * time.Second) // turns a hang into a failure
	waitSubmitted := func(want int) {
		t.Helper()
		for k := -1; k < want; {
			select {
			case k = <-submitted:
			case <-deadline:
				t.Fatalf("request %d was never submitted", want)
			}
		}
	}
	waitSubmitted(3*n - 1) // n in flight in the steady state
	if msg, err := s.Do(ActConcurrencyUp); err != nil || msg != "concurrency 8" {
		t.Fatalf("C: %q, %v", msg, err)
	}
	waitSubmitted(4*n - 1) // n more in the new slots
	for _, want := range []string{"concurrency 4", "concurrency 2", "concurrency 1"} {
		if msg, err := s.Do(ActConcurrencyDown); err != nil || msg != want {
			t.Fatalf("c: %q, %v; want %q", msg, err, want)
		}
	}
	if _, err := s.Do(ActConcurrencyDown); err == nil || !strings.Contains(err.Error(), "already 1") {
		t.Errorf("c at 1: %v", err)
	}
	if v := s.View(); v.Header.Concurrency != 1 {
		t.Errorf("header concurrency %d, want 1", v.Header.Concurrency)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	close(submitted)
	for k := range submitted {
		t.Errorf("request %d submitted past the %d slots", k, 2*n)
	}

	ext, err := NewSession(context.Background(), testConfig(requests(n, 3)), SessionOptions{Provider: newFakeProvider(), Clock: newFakeClock(time.Second), External: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ext.Close()
	if _, err := ext.Do(ActConcurrencyUp); !errors.Is(err, ErrExternalLoad) {
		t.Errorf("external load: %v", err)
	}
}

func TestConcurrencySteps(t *testing.T) {
	for _, tc := range []struct {
		from     int
		up       bool
		want     int
		inFlight bool // the steady state is running
	}{{64, true, 128, true}, {64, false, 32, true}, {10, false, 8, false}, {10, true, 16, false}, {99_000, true, maxConcurrency, false}} {
		s := &Session{concurrency: tc.from}
		if tc.inFlight {
			s.liveRun = newLiveRun(tc.from)
		}
		msg, err := s.stepConcurrency(tc.up)
		if err != nil || s.concurrency != tc.want || (tc.inFlight && s.liveRun.limit != tc.want) || strings.Contains(msg, "steady state on") == tc.inFlight {
			t.Errorf("from %d up %v: %q, %v, concurrency %d", tc.from, tc.up, msg, err, s.concurrency)
		}
	}
}
