package sched

import "context"

// Run is the scheduler loop: it steps while there is work, sends every step that did something
// (ran the engine or ended a request) to out, blocking until the consumer takes it, and when a step
// finds nothing to do it sleeps until Submit, Cancel, SetConfig, a tokenize worker or Close wakes
// it. It returns ctx.Err() when ctx is done, or the error of a failed engine step (after sending
// that step's output); requests still queued then stay queued for a later Run.
func (s *Scheduler) Run(ctx context.Context, out chan<- StepOutput) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		o, err := s.Step()
		idle := o.Snapshot.Kind == StepIdle && len(o.Events) == 0
		if !idle {
			select {
			case out <- o:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err != nil {
			return err
		}
		if idle {
			// Nothing ran and nothing ended: the next step would do the same until something
			// outside the loop changes, and every such change pokes s.wake.
			select {
			case <-s.wake:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}
