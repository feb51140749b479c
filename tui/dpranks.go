package tui

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"rosetop/bench"
)

// A server run data parallel (vLLM --data-parallel-size, SGLang --dp-size) labels its queue and
// KV gauges per rank; the server pane shows their totals, and the ranks table shows each rank
// apart, so that one rank backing up while the others idle is seen.

// watchedDP is the ranks the ranks table shows: the one watched server's, where it has two or
// more; nil otherwise (a session that sends requests has its ITL pane, a fleet's servers are
// each summed up in the servers table).
func watchedDP(v *bench.View) *bench.DPRanks {
	if !watching(v) || fleet(v) != nil || v.Server == nil || !dpShown(v.Server.DP) {
		return nil
	}
	return v.Server.DP
}

// dpShown reports whether r has ranks to show apart: two or more.
func dpShown(r *bench.DPRanks) bool { return r != nil && len(r.Ranks)+r.More > 1 }

// dpRows is the ranks table's height: its head, a row per rank, a line for those not kept.
func dpRows(r *bench.DPRanks) int {
	n := 1 + len(r.Ranks)
	if r.More > 0 {
		n++
	}
	return n
}

// dpTitle names the ranks table.
func dpTitle(r *bench.DPRanks) string {
	return fmt.Sprintf("data parallel · %d ranks", len(r.Ranks)+r.More)
}

// dpHot is the rank whose queue, and the rank whose KV cache, stands out from the others' (-1
// for none): its waiting at least dpHotQueue more than twice the next deepest queue's, its KV
// use at least dpHotKV more than the next fullest cache's. Two ranks alike are not one standing
// out.
func dpHot(rs []bench.DPRank) (queue, kv int) {
	pick := func(of func(bench.DPRank) bench.Gauge, out func(top, next float64) bool) int {
		top, next := -1, -1
		for i, r := range rs {
			switch g := of(r); {
			case !g.Usable():
			case top < 0 || g.V > of(rs[top]).V:
				top, next = i, top
			case next < 0 || g.V > of(rs[next]).V:
				next = i
			}
		}
		if next < 0 || !out(of(rs[top]).V, of(rs[next]).V) {
			return -1
		}
		return top
	}
	queue = pick(func(r bench.DPRank) bench.Gauge { return r.Waiting }, func(top, next float64) bool { return top >= 2*next+dpHotQueue })
	kv = pick(func(r bench.DPRank) bench.Gauge { return r.KVUsage }, func(top, next float64) bool { return top >= next+dpHotKV })
	return queue, kv
}

// What makes a rank stand out (dpHot).
const (
	dpHotQueue = 4   // requests waiting
	dpHotKV    = 0.2 // of the KV cache
)

// dpBarMax is the widest KV bar drawn.
const dpBarMax = 20

// dpBody is the ranks table in iw x ih: a head, then a row per rank (its id, waiting, running,
// KV use and, where there is room, a bar of it), the rank whose queue or KV stands out (dpHot)
// in the warning colour. Where the rows do not fit, the most loaded ranks (by waiting, then KV)
// are shown in rank order and the rest counted on the last line. An id wider than its column
// keeps its end, which tells ids apart ("…east-10"), behind an ellipsis.
func dpBody(st *paint, r *bench.DPRanks, iw, ih int) string {
	rs := r.Ranks
	idW := len("rank")
	for _, x := range rs {
		idW = max(idW, widthOf(outside(x.ID)))
	}
	idW = min(idW, max(len("rank"), iw-3*(numW+1)))
	barW := min(dpBarMax, iw-idW-3*(numW+1)-1)
	if barW < 4 {
		barW = 0
	}
	head := st.Muted.Render(fmt.Sprintf("%-*s %*s %*s %*s", idW, "rank", numW, "wait", numW, "run", numW, "KV"))
	lines := []string{fit(head, iw)}
	hotQ, hotKV := dpHot(rs)
	row := func(i int) string {
		x := rs[i]
		idPen, waitPen, kvPen := st.Text, st.Strong, st.Strong
		if i == hotQ {
			idPen, waitPen = st.Warn, st.Warn
		}
		if i == hotKV {
			idPen, kvPen = st.Warn, st.Warn
		}
		cell := func(p pen, g bench.Gauge, text string) string {
			if !g.Usable() {
				p, text = st.Muted, "n/a"
			}
			return " " + p.Render(fmt.Sprintf("%*s", numW, text))
		}
		out := idPen.Render(fit(tail(outside(x.ID), idW), idW)) +
			cell(waitPen, x.Waiting, countText(x.Waiting)) + cell(st.Text, x.Running, countText(x.Running))
		kv := x.KVUsage
		out += cell(kvPen, kv, fmt.Sprintf("%.1f%%", 100*kv.V))
		if barW > 0 && kv.Usable() {
			full := int(max(0, min(1, kv.V))*float64(barW) + 0.5)
			out += " " + kvPen.Render(strings.Repeat("█", full)) + st.Muted.Render(strings.Repeat("░", barW-full))
		}
		return fit(out, iw)
	}
	shown := dpShownRows(rs, hotQ, hotKV, max(0, ih-1), r.More > 0)
	for _, i := range shown {
		lines = append(lines, row(i))
	}
	var more []string
	switch cut := len(rs) - len(shown); {
	case len(shown) == 0:
		more = []string{fmt.Sprintf("no room for %d ranks", len(rs)+r.More)}
	case cut > 0 && r.More > 0:
		more = []string{fmt.Sprintf("+%d more, less loaded", cut), fmt.Sprintf("+%d not kept", r.More)}
	case cut > 0:
		more = []string{fmt.Sprintf("+%d more ranks, less loaded", cut)}
	case r.More > 0:
		more = []string{fmt.Sprintf("+%d more ranks not kept", r.More)}
	}
	if len(more) > 0 {
		lines = append(lines, fit(st.Muted.Render(strings.Join(more, " · ")), iw))
	}
	if len(lines) > ih { // a pane of one row: the count alone
		lines = lines[len(lines)-max(0, ih):]
	}
	return strings.Join(lines, "\n")
}

// dpShownRows are the indices of the ranks drawn in rows lines (less one for the count of the
// rest where they do not all fit, or more were not kept): all of them, else the standing-out
// ranks and the most loaded, by waiting then KV use, in rank order.
func dpShownRows(rs []bench.DPRank, hotQ, hotKV, rows int, more bool) []int {
	all := make([]int, len(rs))
	for i := range all {
		all[i] = i
	}
	if len(rs)+b2i(more) <= rows {
		return all
	}
	slices.SortStableFunc(all, func(a, b int) int {
		if ha, hb := a == hotQ || a == hotKV, b == hotQ || b == hotKV; ha != hb {
			return -cmp.Compare(b2i(ha), b2i(hb))
		}
		return dpLoadOrder(rs[a], rs[b])
	})
	n := max(0, rows-1)
	keep := all[:min(n, len(all))]
	slices.Sort(keep)
	return keep
}

// dpLoadOrder orders the more loaded rank first: more waiting, then more KV in use; a gauge
// not known counts as less than any.
func dpLoadOrder(a, b bench.DPRank) int {
	val := func(g bench.Gauge) float64 {
		if g.Usable() {
			return g.V
		}
		return -1
	}
	return cmp.Or(-cmp.Compare(val(a.Waiting), val(b.Waiting)), -cmp.Compare(val(a.KVUsage), val(b.KVUsage)))
}

// tail is s in at most w cells: whole where it fits, else an ellipsis and as much of its end
// as fits.
func tail(s string, w int) string {
	if widthOf(s) <= w || w < 2 {
		return s
	}
	r := []rune(s)
	for i := range r {
		if t := "…" + string(r[i:]); widthOf(t) <= w {
			return t
		}
	}
	return "…"
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// dpSummary is a servers table's cell for a server run data parallel: its ranks, and its most
// loaded rank's waiting and KV use ("dp8 w41 97%"); "" for a server of one rank.
func dpSummary(r *bench.DPRanks) string {
	if !dpShown(r) {
		return ""
	}
	out := fmt.Sprintf("dp%d", len(r.Ranks)+r.More)
	if len(r.Ranks) == 0 {
		return out
	}
	x := slices.MinFunc(r.Ranks, dpLoadOrder) // the most loaded
	if x.Waiting.Usable() {
		out += " w" + countText(x.Waiting)
	}
	if x.KVUsage.Usable() {
		out += fmt.Sprintf(" %.0f%%", 100*x.KVUsage.V)
	}
	return out
}

// dpServerTitle is the server pane's title where the ranks table has no room: the ranks in
// short (dpSummary) after the server's kind, where the title still fits in maxW cells; else
// title as it is.
func dpServerTitle(title, kind string, r *bench.DPRanks, maxW int) string {
	head := "server " + kind
	t := strings.Replace(title, head, head+" · "+dpSummary(r), 1)
	if t == title || widthOf(t) > maxW {
		return title
	}
	return t
}
