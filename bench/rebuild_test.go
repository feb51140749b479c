package bench

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// heldClock is a fakeClock whose sleeps wait for the test: each Sleep says so on sleeping and
// returns, its time passed, when the test sends on wake.
type heldClock struct {
	*fakeClock
	sleeping chan time.Duration
	wake     chan struct{}
}

func (c *heldClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case c.sleeping <- d:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-c.wake:
		c.advance(d)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// within receives from ch, failing t when nothing comes in a generous guard time (a hang).
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
	}
	t.Fatalf("timed out waiting for %s", what)
	var zero T
	return zero
}

// builtOptions is what each engine of p was built with, in order.
func builtOptions(p *fakeProvider) []EngineOptions {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.built)
}

// doMsg applies a, failing t on a refusal, and returns its message.
func doMsg(t *testing.T, s *Session, a Action) string {
	t.Helper()
	msg, err := s.Do(a)
	if err != nil {
		t.Fatalf("Do(%d): %v", a, err)
	}
	return msg
}

// newGatedFakeSession starts a session of 4-request runs on the fake provider, its builds after
// the first held until the test lets each go (gp.building, gp.release). When the test ends, held
// builds are let go, so that Close returns whatever state the test left.
func newGatedFakeSession(t *testing.T) (*fakeProvider, *gatedProvider, *Session, chan struct{}) {
	p := newFakeProvider()
	gp := newGatedProvider(p)
	stop, served := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(stop); <-served }) // after Close
	s, published := newClockedSession(t, gp, newFakeClock(time.Second), testConfig(requests(4, 3), runs(1, 1)))
	t.Cleanup(func() { // before Close
		go func() {
			defer close(served)
			serveBuilds(t, s, gp, stop, nil, 0)
		}()
	})
	return p, gp, s, published
}

// checkPlans checks the header's engine being built and engine pending.
func checkPlans(t *testing.T, s *Session, when string, building, pending *EnginePlan) {
	t.Helper()
	h := s.View().Header
	str := func(p *EnginePlan) string {
		if p == nil {
			return "none"
		}
		return fmt.Sprintf("%+v", *p)
	}
	if str(h.Building) != str(building) || str(h.Pending) != str(pending) {
		t.Errorf("%s: building %s, pending %s; want %s and %s", when, str(h.Building), str(h.Pending), str(building), str(pending))
	}
}

// p pressed twice in quick succession leaves the engine and its run alone: the first change
// waits a moment for more keys, the second undoes it. It rebuilt the engine twice, into the
// options it had, cutting the run and the first new engine's cold run.
func TestEngineKeyUndoneBeforeRebuild(t *testing.T) {
	clk := &heldClock{fakeClock: newFakeClock(time.Second), sleeping: make(chan time.Duration), wake: make(chan struct{})}
	p := newFakeProvider()
	submitted, held := make(chan struct{}), make(chan struct{})
	var first sync.Once
	p.onSubmit = func(k int) {
		first.Do(func() { // the warmup run stays in progress until the test lets it go on
			submitted <- struct{}{}
			<-held
		})
	}
	s, published := newClockedSession(t, p, clk, testConfig(requests(4, 3), runs(1, 1)))
	release := sync.OnceFunc(func() { close(held) })
	t.Cleanup(release) // before Close, on a failure too
	within(t, submitted, "the warmup run's first request")

	if msg := doMsg(t, s, ActTogglePaged); msg != "paged attention on: restarting engine" {
		t.Errorf("first p: %q", msg)
	}
	if d := within(t, clk.sleeping, "the change to settle"); d != rebuildSettle {
		t.Errorf("the change settles for %v, want %v", d, rebuildSettle)
	}
	checkPlans(t, s, "after the first p", nil, &EnginePlan{Engine: 2, Paged: true})
	if msg := doMsg(t, s, ActTogglePaged); msg != "paged attention off: as engine 1 runs: no rebuild" {
		t.Errorf("second p: %q", msg)
	}
	checkPlans(t, s, "after the second p", nil, nil)
	clk.wake <- struct{}{}
	release()

	v := waitFor(t, s, published, "the warmup run and a steady run", func(v *View) bool { return v.Cold != nil && len(v.Steady) > 0 })
	if v.Cold.Label != "warmup 1/1" || v.Cold.Partial {
		t.Errorf("cold run %q (partial %v), want warmup 1/1 run to its end", v.Cold.Label, v.Cold.Partial)
	}
	if got := builtOptions(p); len(got) != 1 {
		t.Errorf("engines built: %+v, want the first one only", got)
	}
	var b bytes.Buffer
	if err := s.Report(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "cut short") || strings.Contains(b.String(), "engine 2") {
		t.Errorf("summary table:\n%s", b.String())
	}
}

// Engine keys pressed while an engine is being built are weighed against the options it is
// built with: back to them, no further rebuild; r, none either (it starts cold anyway). Each
// asked for another engine, which cut the new one's cold run at once.
func TestEngineKeysDuringBuildFold(t *testing.T) {
	p, gp, s, published := newGatedFakeSession(t)
	waitFor(t, s, published, "the steady state", func(v *View) bool { return v.Header.Phase == PhaseLive })

	doMsg(t, s, ActTogglePaged)
	within(t, gp.building, "engine 2's build")
	two := &EnginePlan{Engine: 2, Paged: true}
	checkPlans(t, s, "during engine 2's build", two, nil)
	for _, step := range []struct {
		a       Action
		want    string
		pending *EnginePlan
	}{
		{ActTogglePaged, "paged attention off: engine 3 follows once engine 2 is built", &EnginePlan{Engine: 3}},
		{ActTogglePaged, "paged attention on: as engine 2, being built, has it: no further rebuild", nil},
		{ActRestart, "restart: engine 2, being built, starts cold", nil},
	} {
		if msg := doMsg(t, s, step.a); msg != step.want {
			t.Errorf("Do(%d) during the build: %q, want %q", step.a, msg, step.want)
		}
		checkPlans(t, s, "during engine 2's build", two, step.pending)
	}
	gp.release <- struct{}{}
	v := waitFor(t, s, published, "engine 2's cold run, then its steady state", func(v *View) bool {
		return v.Cold != nil && v.Cold.Label == "cold run (engine 2)" && v.Header.Phase == PhaseLive
	})
	if v.Cold.Partial || !v.Header.Paged {
		t.Errorf("engine 2: cold run partial %v, paged %v; want a whole cold run, paged", v.Cold.Partial, v.Header.Paged)
	}
	checkPlans(t, s, "engine 2 running", nil, nil)
	if got, want := builtOptions(p), []EngineOptions{{}, {Paged: true}}; !slices.Equal(got, want) {
		t.Errorf("engines built: %+v, want %+v", got, want)
	}
}

// A change asked for while an engine is built, and kept, replaces that engine before it runs a
// request: it ran a cold run that was cut at once and reported as such.
func TestEngineSupersededDuringBuildNeverRuns(t *testing.T) {
	p, gp, s, published := newGatedFakeSession(t)
	waitFor(t, s, published, "the steady state", func(v *View) bool { return v.Header.Phase == PhaseLive })

	doMsg(t, s, ActTogglePaged)
	within(t, gp.building, "engine 2's build")
	doMsg(t, s, ActTogglePaged)
	gp.release <- struct{}{}
	within(t, gp.building, "engine 3's build")
	gp.release <- struct{}{}
	v := waitFor(t, s, published, "engine 3's cold run", func(v *View) bool {
		return v.Cold != nil && v.Cold.Label == "cold run (engine 3)"
	})
	if v.Cold.Partial || v.Header.Paged {
		t.Errorf("engine 3: cold run partial %v, paged %v; want a whole cold run, not paged", v.Cold.Partial, v.Header.Paged)
	}
	if got, want := builtOptions(p), []EngineOptions{{}, {Paged: true}, {}}; !slices.Equal(got, want) {
		t.Errorf("engines built: %+v, want %+v", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := s.Report(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "engine 2") || !strings.Contains(b.String(), "engine 3: ") {
		t.Errorf("summary table, want engines 1 and 3 only:\n%s", b.String())
	}
}
