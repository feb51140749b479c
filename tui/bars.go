package tui

import (
	"fmt"
	"math"

	"rosetop/bench"
)

// admitChart draws one bar per recent prefill admission (newest at the right) and the prefill
// max batch limit in force at each as a dashed line; a bar that reaches its limit (the queue
// had more waiting than one admission may take) is drawn in the warning colour. The bars are
// drawn as ntcharts' barchart draws them (graph.DrawColumnBottomToTop) into a grid kept between
// frames: barchart.Draw allocates its whole canvas anew on every call.
type admitChart struct {
	g    grid
	w, h int
}

func newAdmitChart() *admitChart { return &admitChart{} }

func (c *admitChart) SetSize(w, h int) {
	if w == c.w && h == c.h {
		return
	}
	c.w, c.h = w, h
	c.g.resize(max(w, 1), max(h, 1))
}

// body renders the legend line and the bars into iw x ih.
func (c *admitChart) body(st *paint, adm []bench.Admission, iw, ih int) string {
	c.SetSize(iw, ih-1)
	if len(adm) > iw {
		adm = adm[len(adm)-iw:]
	}
	top, sum, limit := 1, 0, 0
	for _, a := range adm {
		top = max(top, a.Size, a.Limit)
		sum += a.Size
	}
	if len(adm) > 0 {
		limit = adm[len(adm)-1].Limit
	}
	var head string
	if len(adm) == 0 {
		head = st.Muted.Render("no admissions yet")
	} else {
		mean := float64(sum) / float64(len(adm))
		head = st.Muted.Render("last ") + st.Text.Render(fmt.Sprintf("%-4d", len(adm))) +
			st.Muted.Render(" mean ") + st.Strong.Render(fmt.Sprintf("%-5s", numRaw(mean)))
		if limit > 0 { // a remote server's admissions have no limit of rosetop's
			head += st.Muted.Render(" limit ") + st.Warn.Render(fmt.Sprintf("%d ┄", limit))
		}
	}
	if ih < 2 {
		return fit(head, iw)
	}
	g := &c.g
	g.clear()
	h := g.h
	scale := float64(h) / float64(top) // rows per request
	off := g.w - len(adm)              // right-aligned: the newest admission at the right edge
	for i, a := range adm {
		k := inkSeries
		if a.Limit > 0 && a.Size >= a.Limit {
			k = inkWarn
		}
		g.column(off+i, h-1, math.Min(float64(a.Size)*scale, float64(h)), k)
	}
	// The limit line: in each bar's column, the row whose top edge is the limit, where empty.
	for i, a := range adm {
		if a.Limit <= 0 {
			continue
		}
		y := max(0, h-int(math.Ceil(float64(a.Limit)/float64(top)*float64(h)-1e-9)))
		if g.at(off+i, y) == 0 {
			g.set(off+i, y, '┄', inkWarn)
		}
	}
	return fit(head, iw) + "\n" + g.render(st)
}
