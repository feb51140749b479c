package tui

import (
	"rosetop/bench"
)

// The smallest terminal the dashboard draws in; below it, it says so instead.
const (
	MinWidth  = 80
	MinHeight = 24
)

type paneID int

const (
	pQueue paneID = iota
	pAdmit
	pP99
	pLatency
	pITL
	pCold
	pEvents
	pServer // a remote server's own metrics; shown only against one
	nPanes
)

// layout is the outer size of every pane, computed from the terminal size and the theme's frame
// sizes; a pane with height 0 is hidden (it did not fit, lowest priority first).
type layout struct {
	w, h          int
	tooSmall      bool
	leftW, rightW int
	bodyH         int
	heights       [nPanes]int
}

// slot asks for rows: at least min (else hidden), grown up to max (0: no limit).
type slot struct {
	id       paneID
	min, max int
	prio     int // lower gets its minimum first
}

func computeLayout(st *paint, w, h, footerH int, v *bench.View) layout {
	l := layout{w: w, h: h}
	if w < MinWidth || h < MinHeight {
		l.tooSmall = true
		return l
	}
	l.rightW = min(max(w*45/100, 44), 100) // wide terminals widen the tables and events too
	l.leftW = w - l.rightW
	l.bodyH = h - headerH - footerH

	fh := paneFrameH(st)
	nLat, nCmp, nLedger, nSlow := 5, 4, 3, 3
	if v != nil {
		nLat = max(1, len(v.Latency))
		nCmp = max(1, len(v.Compare))
		iw, _ := paneInner(st, l.rightW, 0)
		nLedger = max(1, ledgerRows(v, iw))
		nSlow = len(v.SlowITL)
	}
	left := []slot{
		{id: pQueue, min: fh + 5, prio: 0},
		{id: pAdmit, min: fh + 4, max: fh + 8, prio: 1},
		{id: pP99, min: fh + 5, prio: 2},
	}
	latH := fh + 1 + nLat
	if watching(v) { // the server's totals in its place
		latH = fh + totalsRows
	}
	right := []slot{
		{id: pLatency, min: latH, max: latH, prio: 0},
	}
	if fleet(v) != nil {
		// The servers table in the ITL pane's place (a head, a server and "+k more" at least),
		// before the fleet's merged histograms: a short terminal keeps each server's row (the
		// fleet's p99s are on the p99 chart too).
		right = append(right, slot{id: pITL, min: fh + 3, max: fh + fleetRows(v), prio: 1})
	}
	if v != nil && v.Server != nil {
		n := fh + serverRows(v.Server)
		right = append(right, slot{id: pServer, min: n, max: n, prio: 1})
	}
	if dp := watchedDP(v); dp != nil {
		// The ranks table in the ITL pane's place, which watch mode leaves empty (a head, a
		// rank and "+k more" at least), after the server pane whose totals it breaks down.
		right = append(right, slot{id: pITL, min: fh + 3, max: fh + dpRows(dp), prio: 1})
	} else if fleet(v) == nil {
		right = append(right, slot{id: pITL, min: fh + 1, max: fh + 3 + nSlow, prio: 3})
	}
	right = append(right, []slot{
		{id: pCold, min: fh + 1 + nCmp, max: fh + 2 + nCmp + nLedger, prio: 1},
		{id: pEvents, min: fh + 2, prio: 2},
	}...)
	for _, col := range [][]slot{left, right} {
		for i, n := range allocate(l.bodyH, col) {
			l.heights[col[i].id] = n
		}
	}
	return l
}

// allocate gives each slot its minimum in priority order while it fits (others get 0), then
// grows bounded slots up to their max in priority order, then shares the rest evenly among the
// unbounded ones (or gives it to the last shown slot, so the column is always full).
func allocate(total int, slots []slot) []int {
	out := make([]int, len(slots))
	order := make([]int, len(slots))
	for i := range order {
		order[i] = i
	}
	for a := 1; a < len(order); a++ { // insertion sort by prio, stable
		for b := a; b > 0 && slots[order[b]].prio < slots[order[b-1]].prio; b-- {
			order[b], order[b-1] = order[b-1], order[b]
		}
	}
	left := total
	for _, i := range order {
		if slots[i].min <= left {
			out[i] = slots[i].min
			left -= slots[i].min
		}
	}
	for _, i := range order {
		if out[i] > 0 && slots[i].max > 0 {
			add := min(slots[i].max-out[i], left)
			out[i] += add
			left -= add
		}
	}
	var flex []int
	last := -1
	for i := range slots {
		if out[i] > 0 {
			last = i
			if slots[i].max == 0 {
				flex = append(flex, i)
			}
		}
	}
	for k, i := range flex {
		share := left / (len(flex) - k)
		out[i] += share
		left -= share
	}
	if left > 0 && last >= 0 {
		out[last] += left
	}
	return out
}
