package bench

import (
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"time"
)

// ErrNeedsGPU is returned by Do(ActToggleGraph) on an engine that runs on the CPU.
var ErrNeedsGPU = errors.New("CUDA Graph needs a GPU")

// ErrSessionEnded is returned by Do once the session has ended (Close, or its engine failed):
// no action would take effect.
var ErrSessionEnded = errors.New("the session has ended: actions no longer apply")

// intervalSteps are the submit intervals (ms) the dashboard's -/+ keys step through.
var intervalSteps = [...]float64{0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}

// Do applies a dashboard control. Scheduler knobs and the schedule change live; paged attention
// and CUDA Graph need a new engine: shortly after the last engine key (see rebuildSettle) the
// current run ends and a new engine starts with a cold run, built with the latest options asked
// for. The message says what happened; an error says why nothing changed.
func (s *Session) Do(a Action) (string, error) {
	s.mu.Lock()
	msg, err := s.do(a)
	if err == nil {
		s.logf(LogConfig, "%s", msg)
		change, _, _ := strings.Cut(msg, ": ") // an engine key's change, without what follows from it
		s.live.mark(s.clock.Now(), change)
	}
	s.mu.Unlock()
	s.publish(true)
	return msg, err
}

// ErrExternalLoad is returned by the arrival controls of a session whose load comes from outside.
var ErrExternalLoad = errors.New("the load is external: clients decide when requests arrive")

// do applies a; the caller holds s.mu.
func (s *Session) do(a Action) (string, error) {
	if s.phase == PhaseDone {
		return "", ErrSessionEnded
	}
	if r := s.info.Remote; r != nil {
		if err := refuseRemote(a, r); err != nil {
			return "", err
		}
	}
	if s.opts.External {
		switch a {
		case ActToggleSchedule, ActIntervalDown, ActIntervalUp, ActTogglePause, ActConcurrencyDown, ActConcurrencyUp:
			return "", ErrExternalLoad
		}
	}
	switch a {
	case ActTogglePaged:
		s.want.Paged = !s.want.Paged
		return s.askEngine("paged attention " + onOff(s.want.Paged)), nil
	case ActToggleGraph:
		if s.info.Device == "cpu" {
			why := "no GPU was found"
			if s.info.DeviceNote != "" {
				why = s.info.DeviceNote
			}
			return "", fmt.Errorf("%w; the engine runs on %s (%s)", ErrNeedsGPU, s.info.DeviceDetail, why)
		}
		s.want.CUDAGraph = !s.want.CUDAGraph
		return s.askEngine("CUDA Graph " + onOff(s.want.CUDAGraph)), nil
	case ActRestart:
		return s.askRestart(), nil
	case ActToggleSchedule:
		next := "absolute"
		if s.arr.Schedule == "absolute" {
			next = "relative"
		}
		if s.arr.Schedule == "poisson" || s.arr.Schedule == "trace" {
			s.arr.Interval = 0
		}
		s.arr.Schedule = next
		s.arrGen++
		return "submit schedule " + next, nil
	case ActIntervalDown, ActIntervalUp:
		return s.stepInterval(a == ActIntervalUp)
	case ActTogglePause:
		if s.paused {
			s.paused = false
			close(s.resume)
			return "arrivals resumed", nil
		}
		s.paused, s.resume = true, make(chan struct{})
		return "arrivals paused", nil
	case ActPrefillBatchDown, ActPrefillBatchUp, ActMaxBatchDown, ActMaxBatchUp:
		return s.stepKnob(a)
	case ActConcurrencyDown, ActConcurrencyUp:
		return s.stepConcurrency(a == ActConcurrencyUp)
	}
	return "", fmt.Errorf("unknown action %d", a)
}

func (s *Session) stepInterval(up bool) (string, error) {
	if s.arr.Schedule == "poisson" || s.arr.Schedule == "trace" {
		return "", fmt.Errorf("arrivals follow a %s: press s for a relative/absolute schedule first", map[string]string{"poisson": "rate (--request-rate)", "trace": "trace (--replay)"}[s.arr.Schedule])
	}
	cur := ms(s.arr.Interval)
	next := cur
	if up {
		for _, v := range intervalSteps {
			if v > cur {
				next = v
				break
			}
		}
	} else {
		for _, v := range intervalSteps {
			if v < cur {
				next = v
			}
		}
	}
	if next == cur {
		return "", fmt.Errorf("submit interval is already %g ms, the end of its range", cur)
	}
	s.arr.Interval = time.Duration(next * float64(time.Millisecond))
	s.arrGen++
	return fmt.Sprintf("submit interval %g ms", next), nil
}

// stepKnob tunes the batch sizes and applies them from the next step: the prefill max batch by
// one, the max batch to the next power of two (or the engine's capacity). The prefill max batch
// stays at most the max batch both ways: it follows a lower max batch down and, when it was equal
// to it, back up.
func (s *Session) stepKnob(a Action) (string, error) {
	k := s.knobs
	limit := s.info.MaxBatch
	tied := k.PrefillMaxBatch == k.MaxBatch
	switch a {
	case ActPrefillBatchDown:
		if k.PrefillMaxBatch <= 1 {
			return "", errors.New("prefill max batch is already 1")
		}
		k.PrefillMaxBatch--
	case ActPrefillBatchUp:
		if k.PrefillMaxBatch >= k.MaxBatch {
			return "", fmt.Errorf("prefill max batch is already the max batch, %d: } raises that first", k.MaxBatch)
		}
		k.PrefillMaxBatch++
	case ActMaxBatchDown:
		if k.MaxBatch <= 1 {
			return "", errors.New("max batch is already 1")
		}
		k.MaxBatch = 1 << (bits.Len(uint(k.MaxBatch-1)) - 1) // the largest power of two below it
		if tied || k.PrefillMaxBatch > k.MaxBatch {
			k.PrefillMaxBatch = k.MaxBatch
		}
	case ActMaxBatchUp:
		if limit > 0 && k.MaxBatch >= limit {
			return "", fmt.Errorf("max batch is already the engine's capacity, %d (--max-batch-size at start)", limit)
		}
		k.MaxBatch = 1 << bits.Len(uint(k.MaxBatch)) // the smallest power of two above it
		if limit > 0 {
			k.MaxBatch = min(k.MaxBatch, limit)
		}
		if tied {
			k.PrefillMaxBatch = k.MaxBatch
		}
	}
	if err := k.Validate(limit); err != nil {
		return "", err
	}
	if s.srv != nil {
		if err := s.srv.SetConfig(k); err != nil {
			return "", err
		}
	}
	s.knobs = k
	if a == ActPrefillBatchDown || a == ActPrefillBatchUp {
		return fmt.Sprintf("prefill max batch %d", k.PrefillMaxBatch), nil
	}
	return fmt.Sprintf("max batch %d (prefill max batch %d)", k.MaxBatch, k.PrefillMaxBatch), nil
}

// maxConcurrency bounds the c/C keys, as --max-concurrency is bounded.
const maxConcurrency = 100_000

// stepConcurrency moves the steady state's most requests in flight to the power of two below or
// above. The steady state takes it at once (a lower cap lets the requests in flight finish); a
// cold or measured run keeps its own, and the steady state starts with the new one.
func (s *Session) stepConcurrency(up bool) (string, error) {
	n := s.concurrency
	switch {
	case !up && n <= 1:
		return "", errors.New("concurrency is already 1")
	case up && n >= maxConcurrency:
		return "", fmt.Errorf("concurrency is already %d, the most it takes", n)
	case up:
		n = min(maxConcurrency, 1<<bits.Len(uint(n)))
	default:
		n = 1 << (bits.Len(uint(n-1)) - 1)
	}
	s.concurrency = n
	if lr := s.liveRun; lr != nil {
		lr.limit = n
		select {
		case lr.wake <- struct{}{}:
		default:
		}
		return fmt.Sprintf("concurrency %d", n), nil
	}
	return fmt.Sprintf("concurrency %d (from the steady state on)", n), nil
}
