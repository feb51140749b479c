package gpu

import "time"

// mark attributes the time since the previous mark to op when profiling (tests only); it
// synchronizes, so it is never on outside a profile and never inside a capture.
func (s *state) mark(op string) {
	if s.prof != nil {
		s.prof.mark(op)
	}
}

// opProfile accumulates wall time per op with a synchronization after each (tests only).
type opProfile struct {
	rt   *cudaRuntime
	last time.Time
	ops  []string // first-seen order
	took map[string]time.Duration
}

func (p *opProfile) mark(op string) {
	_ = p.rt.sync()
	now := time.Now()
	if _, ok := p.took[op]; !ok {
		p.ops = append(p.ops, op)
	}
	p.took[op] += now.Sub(p.last)
	p.last = now
}
