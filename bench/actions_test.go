package bench

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

// gatedProvider holds every engine build after the first until the test lets it go: building
// receives a token when a build is held, release lets one build go on.
type gatedProvider struct {
	Provider
	building chan struct{}
	release  chan struct{}
	mu       sync.Mutex
	builds   int // guarded by mu
}

func newGatedProvider(p Provider) *gatedProvider {
	return &gatedProvider{Provider: p, building: make(chan struct{}), release: make(chan struct{})}
}

func (p *gatedProvider) NewServer(ctx context.Context, spec ServerSpec) (Server, error) {
	p.mu.Lock()
	p.builds++
	n := p.builds
	p.mu.Unlock()
	if n > 1 {
		p.building <- struct{}{}
		<-p.release
	}
	return p.Provider.NewServer(ctx, spec)
}

// newTinySession starts a dashboard session on the embedded tiny model; published receives a
// token after every new View.
func newTinySession(t *testing.T, prov Provider, cfg Config) (*Session, chan struct{}) {
	t.Helper()
	published := make(chan struct{}, 1)
	notify := func() {
		select {
		case published <- struct{}{}:
		default:
		}
	}
	s, err := NewSession(context.Background(), cfg, SessionOptions{Provider: prov, KeepRecords: true, onPublish: notify})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, published
}

// The batch sizes tuned while an engine is being rebuilt are the ones the new engine runs with:
// they were lost, the header going back to the values read when the build began.
func TestKnobsTunedDuringRebuildKept(t *testing.T) {
	gp := newGatedProvider(cpuEngine(2))
	s, published := newTinySession(t, gp, testConfig(requests(4, 4), runs(1, 1), func(c *Config) { c.Sched.MaxBatch, c.Sched.PrefillMaxBatch = 16, 16 }))
	if _, err := s.Do(ActRestart); err != nil {
		t.Fatal(err)
	}
	<-gp.building
	for _, a := range []Action{ActMaxBatchDown, ActMaxBatchDown, ActPrefillBatchDown} {
		if _, err := s.Do(a); err != nil {
			t.Fatalf("Do(%d) during the rebuild: %v", a, err)
		}
	}
	gp.release <- struct{}{}
	v := waitFor(t, s, published, "engine 2's cold run", func(v *View) bool { return v.Header.RunLabel == "cold run (engine 2)" })
	if h := v.Header; h.MaxBatch != 4 || h.PrefillMaxBatch != 3 {
		t.Errorf("header after the rebuild: max batch %d, prefill max batch %d; want 4 and 3 as tuned during it", h.MaxBatch, h.PrefillMaxBatch)
	}
	s.mu.Lock()
	cfg := s.srv.(*inProcServer).Config()
	s.mu.Unlock()
	if cfg.MaxBatch != 4 || cfg.PrefillMaxBatch != 3 {
		t.Errorf("new engine's scheduler runs max batch %d, prefill max batch %d; want 4 and 3", cfg.MaxBatch, cfg.PrefillMaxBatch)
	}
}

// Once the session has ended, every action is refused: none would take effect, and a restart
// said "restarting engine" with no engine to restart.
func TestActionsAfterEndRefused(t *testing.T) {
	s, _ := newTinySession(t, cpuEngine(2), testConfig(requests(4, 4), runs(1, 1)))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := s.View().Header
	for a := ActTogglePaged; a <= ActConcurrencyUp; a++ {
		if msg, err := s.Do(a); !errors.Is(err, ErrSessionEnded) {
			t.Errorf("Do(%d) after Close = %q, %v; want ErrSessionEnded", a, msg, err)
		}
	}
	if after := s.View().Header; after.MaxBatch != before.MaxBatch || after.Paused != before.Paused || after.Concurrency != before.Concurrency {
		t.Errorf("a refused action changed the header: %+v -> %+v", before, after)
	}
	var b bytes.Buffer
	if err := s.Report(&b); err != nil || !strings.Contains(b.String(), "=== rosetop session:") {
		t.Errorf("Report after the refusals: %v\n%s", err, b.String())
	}
}
