package engine

import (
	"strings"
	"testing"
	"time"
)

// TestLedgerBounded: an engine that keeps capturing graphs for hours holds its first entries one
// by one and sums the rest per kind, so the ledger stays small and its total time stays exact.
func TestLedgerBounded(t *testing.T) {
	var l Ledger
	l.Add(LedgerEntry{What: "model load", Took: time.Second})
	for range 100_000 {
		l.Add(LedgerEntry{What: "graph capture", Detail: "a shape", Took: time.Millisecond})
	}
	es := l.Entries()
	if len(es) != ledgerKeep+1 || l.Len() != len(es) {
		t.Fatalf("%d entries (Len %d), want the first %d and one sum", len(es), l.Len(), ledgerKeep)
	}
	var total time.Duration
	for _, e := range es {
		total += e.Took
	}
	if want := time.Second + 100_000*time.Millisecond; total != want {
		t.Errorf("total %v, want %v", total, want)
	}
	last := es[len(es)-1]
	if last.What != "graph capture" || !strings.HasPrefix(last.Detail, "99745 more after the first 256 entries") {
		t.Errorf("the summing entry is %+v", last)
	}
}
