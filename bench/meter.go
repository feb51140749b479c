package bench

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/charmbracelet/x/term"
)

// meterRate is how often the progress line is redrawn on a terminal: a few times a second, each
// a read of the run's counters under the session's lock.
const meterRate = 250 * time.Millisecond

// meterHooks stand in, in tests, for what the progress line asks of the system.
type meterHooks struct {
	tty    *bool            // whether stderr is a terminal; nil: asked of stderr
	tick   <-chan time.Time // the ticks it redraws on; nil: a ticker every meterRate (terminal) or progressEvery
	ticked func()           // called after each tick was handled, on the waiting goroutine; nil: none
}

// runMeter shows on stderr how far a headless bench's run in progress has got, as rosetop sweep
// shows its points: on a terminal one line redrawn in place and erased before anything else is
// written and at the end; elsewhere a plain line every progressEvery. Every write to stdout and
// stderr while the session runs goes through it (guard), so that none lands on a drawn line.
type runMeter struct {
	w     io.Writer  // stderr
	tty   bool       // immutable
	width func() int // the terminal's columns, 0 when unknown; nil: unknown. Immutable

	mu sync.Mutex // serializes every write to stdout and stderr; guards the fields below
	// active is the label of the run in progress, set and cleared by the session goroutine's
	// run events: a tick draws only the run it names, never one that just ended.
	active  string
	drawn   bool   // a progress line is on the terminal, not erased yet
	midLine bool   // the last write to stdout or stderr did not end its line
	hint    string // a note that the run will take minutes, not written yet
}

// newRunMeter is the meter on stderr; hooks.tty, when set, says whether stderr is a terminal.
func newRunMeter(stderr io.Writer, hooks meterHooks) *runMeter {
	m := &runMeter{w: stderr}
	if hooks.tty != nil {
		m.tty = *hooks.tty
		return m
	}
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(f.Fd()) && os.Getenv("TERM") != "dumb" {
		// TERM=dumb cannot erase a line: plain lines there.
		m.tty = true
		m.width = func() int {
			w, _, err := term.GetSize(f.Fd())
			if err != nil {
				return 0
			}
			return w
		}
	}
	return m
}

// guard returns w writing through the meter: a drawn line is erased first.
func (m *runMeter) guard(w io.Writer) io.Writer { return guardedWriter{m: m, w: w} }

type guardedWriter struct {
	m *runMeter
	w io.Writer
}

func (g guardedWriter) Write(p []byte) (int, error) {
	g.m.mu.Lock()
	defer g.m.mu.Unlock()
	g.m.erase()
	n, err := g.w.Write(p)
	if n > 0 {
		g.m.midLine = p[n-1] != '\n'
	}
	return n, err
}

// erase takes a drawn line off the terminal; the caller holds m.mu.
func (m *runMeter) erase() {
	if m.drawn {
		io.WriteString(m.w, "\r\x1b[K")
		m.drawn = false
	}
}

// runStarted and runEnded are the session goroutine's run events: the meter draws label's run
// from the next tick, and nothing more of it once it ended.
func (m *runMeter) runStarted(label string) {
	m.mu.Lock()
	m.active = label
	m.mu.Unlock()
}

func (m *runMeter) runEnded() {
	m.mu.Lock()
	m.active = ""
	m.erase()
	m.mu.Unlock()
}

// wait waits for the session, showing its runs' progress on every tick, and returns the
// session's error with the line erased: the meter has stopped before the caller prints more.
func (m *runMeter) wait(s *Session, hooks meterHooks) error {
	tick := hooks.tick
	if tick == nil {
		t := time.NewTicker(progressEvery)
		if m.tty {
			t.Reset(meterRate)
		}
		defer t.Stop()
		tick = t.C
	}
	defer func() {
		m.mu.Lock()
		m.active = ""
		m.erase()
		m.mu.Unlock()
	}()
	for {
		select {
		case <-s.done:
			return s.err
		case <-tick:
			m.update(s)
			if hooks.ticked != nil {
				hooks.ticked()
			}
		}
	}
}

// update reads the run's counters under the session's lock, then draws them (on a terminal) or
// writes them as a line.
func (m *runMeter) update(s *Session) {
	s.mu.Lock()
	rs := s.cur
	if rs == nil {
		s.mu.Unlock()
		return
	}
	label, p := rs.info.Label, rs.status(s.clock.Now())
	submitted, failed := len(rs.ids), rs.failed
	shorter := ""
	if p.Elapsed >= progressEvery && p.ETA > longRun && !rs.hinted && s.wl != nil {
		rs.hinted = true
		shorter = s.wl.shorter()
	}
	s.mu.Unlock()

	line := meterLine(label, p, submitted, failed)
	m.mu.Lock()
	defer m.mu.Unlock()
	if shorter != "" {
		m.hint = fmt.Sprintf("rosetop: %s will take minutes: %s make runs shorter\n", label, shorter)
	}
	if m.midLine { // another write's line is not finished: nothing may go between
		return
	}
	if m.hint != "" {
		m.erase()
		io.WriteString(m.w, m.hint)
		m.hint = ""
	}
	if label != m.active {
		return
	}
	if !m.tty {
		fmt.Fprintln(m.w, line)
		return
	}
	if m.width != nil {
		if w := m.width(); w > 1 && len(line) >= w { // a wrapped line could not be erased
			line = line[:w-1]
		}
	}
	fmt.Fprintf(m.w, "\r\x1b[K%s", line)
	m.drawn = true
}

// meterLine is the progress line: "rosetop: run 2/3: 8/20 finished, 12/20 submitted, 1 failed,
// 3.2s elapsed, ETA 4s".
func meterLine(label string, p *RunProgress, submitted, failed int) string {
	eta := "ETA --"
	if p.ETA > 0 {
		eta = "ETA " + meterDuration(p.ETA)
	}
	return fmt.Sprintf("rosetop: %s: %d/%d finished, %d/%d submitted, %d failed, %s elapsed, %s",
		label, p.Finished, p.Requests, submitted, p.Requests, failed, meterDuration(p.Elapsed), eta)
}

// meterDuration is d to a tenth of a second under a minute, else to the second: "2.3s", "4m5s".
func meterDuration(d time.Duration) string {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
