package hub

import (
	"fmt"
	"io"
	"time"
)

// redrawEvery limits progress redraws to about ten a second.
const redrawEvery = 100 * time.Millisecond

// progress draws one download's bar on a terminal line: label, bytes done of total, percent and
// rate, redrawn in place with \r and ended with a newline. Used by the downloading goroutine only.
type progress struct {
	w       io.Writer // nil: silent
	now     func() time.Time
	label   string
	done    int64 // bytes in the file so far, resumed prefix included
	resumed int64 // bytes already there when this transfer began (excluded from the rate)
	total   int64 // -1 when unknown
	start   time.Time
	drawn   time.Time // last redraw
	width   int       // length of the last line, to blank leftovers of a longer one
}

func newProgress(w io.Writer, now func() time.Time, label string, off, total int64) *progress {
	p := &progress{w: w, now: now, label: label, done: off, resumed: off, total: total}
	if w != nil {
		p.start = now()
		p.draw(p.start)
	}
	return p
}

// Write counts bytes passing through (it is the tee of the download) and redraws when due.
func (p *progress) Write(b []byte) (int, error) {
	p.done += int64(len(b))
	if p.w != nil {
		if t := p.now(); t.Sub(p.drawn) >= redrawEvery {
			p.draw(t)
		}
	}
	return len(b), nil
}

// finish draws the final state and ends the line.
func (p *progress) finish() {
	if p.w == nil {
		return
	}
	p.draw(p.now())
	fmt.Fprintln(p.w)
}

func (p *progress) draw(t time.Time) {
	p.drawn = t
	line := fmt.Sprintf("downloading %s  %s", p.label, human(p.done))
	if p.total >= 0 {
		pct := 100.0
		if p.total > 0 {
			pct = 100 * float64(p.done) / float64(p.total)
		}
		line += fmt.Sprintf(" / %s  %5.1f%%", human(p.total), pct)
	}
	if el := t.Sub(p.start).Seconds(); el > 0 {
		line += fmt.Sprintf("  %s/s", human(int64(float64(p.done-p.resumed)/el)))
	}
	pad := p.width - len(line)
	p.width = len(line)
	if pad < 0 {
		pad = 0
	}
	fmt.Fprintf(p.w, "\r%s%*s", line, pad, "")
}

// human prints a byte count in decimal units, as the hub's web pages do.
func human(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}
