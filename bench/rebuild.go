package bench

import (
	"context"
	"fmt"
	"time"
)

// rebuildSettle is how long a change of engine waits after the last engine key (p, g, r)
// before it stops the run: keys pressed together make one rebuild, and a key pressed again
// undoes its change before it cost a cold start.
const rebuildSettle = 500 * time.Millisecond

// rebuildState is how far a rebuild taken by the session goroutine has got.
type rebuildState int

const (
	rebuildNone     rebuildState = iota // the engine runs; a change asked for waits in want and restart
	rebuildStopping                     // the run is being stopped; the build will read want
	rebuildBuilding                     // the next engine is being built with engineOpts
)

// askEngine answers an engine key whose change is already in want or restart: it wakes the
// session goroutine when a rebuild is wanted and says what will happen. The caller holds s.mu.
func (s *Session) askEngine(what string) string {
	s.keyAt = s.clock.Now()
	switch {
	case s.rebuild == rebuildStopping:
		return fmt.Sprintf("%s: engine %d, about to be built, takes it", what, s.engine+1)
	case s.rebuildWanted() && s.rebuild == rebuildBuilding:
		s.wake()
		return fmt.Sprintf("%s: engine %d follows once engine %d is built", what, s.engine+1, s.engine)
	case s.rebuildWanted():
		s.wake()
		return what + ": restarting engine"
	case s.rebuild == rebuildBuilding:
		return fmt.Sprintf("%s: as engine %d, being built, has it: no further rebuild", what, s.engine)
	}
	return fmt.Sprintf("%s: as engine %d runs: no rebuild", what, s.engine)
}

// askRestart answers r: a fresh engine, unless one is already on its way. The caller holds s.mu.
func (s *Session) askRestart() string {
	switch s.rebuild {
	case rebuildStopping:
		return fmt.Sprintf("restart: engine %d, about to be built, starts cold", s.engine+1)
	case rebuildBuilding:
		return fmt.Sprintf("restart: engine %d, being built, starts cold", s.engine)
	}
	s.restart = true
	return s.askEngine("restart")
}

// wake tells the session goroutine that the engine wanted changed; it never blocks.
func (s *Session) wake() {
	select {
	case s.restartCh <- struct{}{}:
	default: // a wake-up is pending: it reads the latest state
	}
}

// rebuildWanted reports whether an engine other than the current one (or the one being built)
// is wanted. While the run is being stopped, none is: the build to come reads want. The caller
// holds s.mu.
func (s *Session) rebuildWanted() bool {
	return s.rebuild != rebuildStopping && (s.restart || s.want != s.engineOpts)
}

// claimRebuild is the session goroutine's check for a rebuild: taken when one is wanted and has
// settled (from then on engine keys fold into the build), else whether one is wanted and how
// long it still settles. The caller holds s.mu.
func (s *Session) claimRebuild() (taken, wanted bool, wait time.Duration) {
	wanted, wait = s.rebuildWanted(), s.keyAt+rebuildSettle-s.clock.Now()
	if wanted && wait <= 0 {
		s.rebuild, s.restart = rebuildStopping, false
		return true, true, 0
	}
	return false, wanted, wait
}

// takeRebuild answers a wake-up of the session goroutine during runs: true when the engine is
// to be replaced now. A change still settling gets a timer that wakes it again when it is due.
func (s *Session) takeRebuild(ctx context.Context) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	taken, wanted, wait := s.claimRebuild()
	if wanted && !taken && !s.settling {
		s.settling = true
		go func() { // the settle timer: owns nothing but its wake-up
			s.clock.Sleep(ctx, wait)
			s.mu.Lock()
			s.settling = false
			s.mu.Unlock()
			s.wake()
		}()
	}
	return taken
}

// supersede is asked once an engine is built: it waits for a change asked for during the build
// to settle and reports whether the new engine is to be replaced before it runs a request.
func (s *Session) supersede(ctx context.Context) bool {
	for {
		s.mu.Lock()
		taken, wanted, wait := s.claimRebuild()
		s.mu.Unlock()
		if taken || !wanted {
			return taken
		}
		if s.clock.Sleep(ctx, wait) != nil {
			return false
		}
	}
}

// enginePlan is the header's view of engine n with options o; the caller holds s.mu.
func (s *Session) enginePlan(n int, o EngineOptions) *EnginePlan {
	return &EnginePlan{Engine: n, Paged: o.Paged, CUDAGraph: o.CUDAGraph && s.info.Device != "cpu"}
}

// building is the engine being built, or stopped for (nil: none); the caller holds s.mu.
func (s *Session) building() *EnginePlan {
	switch s.rebuild {
	case rebuildStopping:
		return s.enginePlan(s.engine+1, s.want)
	case rebuildBuilding:
		return s.enginePlan(s.engine, s.engineOpts)
	}
	return nil
}

// pending is the engine asked for and not begun (nil: none); the caller holds s.mu.
func (s *Session) pending() *EnginePlan {
	if !s.rebuildWanted() {
		return nil
	}
	p := s.enginePlan(s.engine+1, s.want)
	p.Restart = s.want == s.engineOpts
	return p
}
