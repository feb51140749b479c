package bench

import (
	"fmt"
	"time"
)

// LedgerGroup is the ledger's entries of one kind summed: "graph capture ×816: 261 ms".
type LedgerGroup struct {
	What   string
	Detail string // the entry's detail when the group has one entry; "" otherwise
	N      int
	Took   time.Duration
}

// GroupLedger sums entries by What, in first-seen order.
func GroupLedger(es []LedgerEntry) []LedgerGroup {
	idx := map[string]int{}
	var gs []LedgerGroup
	for _, e := range es {
		j, ok := idx[e.What]
		if !ok {
			idx[e.What] = len(gs)
			gs = append(gs, LedgerGroup{What: e.What, Detail: e.Detail})
			j = len(gs) - 1
		} else {
			gs[j].Detail = ""
		}
		gs[j].N++
		gs[j].Took += e.Took
	}
	return gs
}

// ledgerLines is the "Engine ledger" block of the reports: one line a kind of cost, however many
// graphs a long session captured.
func ledgerLines(ledger []LedgerEntry) []string {
	lines := []string{"Engine ledger (one-time costs):"}
	for _, g := range GroupLedger(ledger) {
		what := g.What
		switch {
		case g.N > 1:
			what += fmt.Sprintf(" ×%d", g.N)
		case g.Detail != "":
			what += " [" + g.Detail + "]"
		}
		lines = append(lines, fmt.Sprintf("  %s: %s", what, fmtTook(g.Took)))
	}
	return lines
}
