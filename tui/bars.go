package tui

import (
	"fmt"
	"math"

	"github.com/NimbleMarkets/ntcharts/barchart"
	"github.com/NimbleMarkets/ntcharts/canvas"

	"rosetop/bench"
	"rosetop/themes"
)

// admitChart draws one bar per recent prefill admission (newest at the right) and the prefill
// max batch limit in force at each as a dashed line; a bar that reaches its limit (the queue
// had more waiting than one admission may take) is drawn in the warning colour.
type admitChart struct {
	bc   barchart.Model
	w, h int
}

func newAdmitChart() *admitChart { return &admitChart{} }

func (c *admitChart) SetSize(w, h int) {
	if w == c.w && h == c.h {
		return
	}
	c.w, c.h = w, h
	c.bc = barchart.New(max(w, 1), max(h, 1),
		barchart.WithNoAxis(), barchart.WithNoAutoMaxValue(), barchart.WithNoAutoBarWidth(),
		barchart.WithBarWidth(1), barchart.WithBarGap(0))
}

// body renders the legend line and the bars into iw x ih.
func (c *admitChart) body(st themes.Styles, adm []bench.Admission, iw, ih int) string {
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
			st.Muted.Render(" mean ") + st.Strong.Render(fmt.Sprintf("%-5s", numRaw(mean))) +
			st.Muted.Render(" limit ") + st.Warn.Render(fmt.Sprintf("%d ┄", limit))
	}
	if ih < 2 {
		return fit(head, iw)
	}
	bc := &c.bc
	bc.Clear()
	bc.SetMax(float64(top))
	for _, a := range adm {
		s := st.Series[0]
		if a.Limit > 0 && a.Size >= a.Limit {
			s = st.Warn
		}
		bc.Push(barchart.BarData{Values: []barchart.BarValue{{Value: float64(a.Size), Style: s}}})
	}
	bc.Draw()
	// The limit line: in each bar's column, the row whose top edge is the limit, where empty.
	h := bc.Canvas.Height()
	for i, a := range adm {
		if a.Limit <= 0 {
			continue
		}
		y := h - int(math.Ceil(float64(a.Limit)/float64(top)*float64(h)-1e-9))
		p := canvas.Point{X: i, Y: max(0, y)}
		if bc.Canvas.Cell(p).Rune == 0 {
			bc.Canvas.SetCell(p, canvas.NewCellWithStyle('┄', st.Warn))
		}
	}
	return fit(head, iw) + "\n" + canvasString(&bc.Canvas)
}
