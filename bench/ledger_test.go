package bench

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestGroupLedger(t *testing.T) {
	es := []LedgerEntry{
		{What: "model load", Detail: "12 MB", Took: 40 * time.Millisecond},
		{What: "graph capture", Detail: "batch 1", Took: 10 * time.Millisecond},
		{What: "graph capture", Detail: "batch 2", Took: 12 * time.Millisecond},
	}
	want := []LedgerGroup{
		{What: "model load", Detail: "12 MB", N: 1, Took: 40 * time.Millisecond},
		{What: "graph capture", N: 2, Took: 22 * time.Millisecond},
	}
	if got := GroupLedger(es); !slices.Equal(got, want) {
		t.Fatalf("groups = %+v, want %+v", got, want)
	}
	// A session's hundreds of graph captures are one line of the report.
	for range 800 {
		es = append(es, LedgerEntry{What: "graph capture", Detail: "a shape", Took: time.Millisecond})
	}
	lines := ledgerLines(es)
	if len(lines) != 3 || lines[2] != "  graph capture ×802: 822.0 ms" {
		t.Errorf("ledger lines = %q", strings.Join(lines, "\n"))
	}
}
