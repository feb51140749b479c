package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// coldStartLines is rosetop's block after the runs (not in the seeds): the engine's cold run
// beside the steady runs' median, and the ledger of one-time costs that explains the difference
// (seed 000: JIT and graph capture land in the first run's TTFT). Empty without both a cold and
// a steady run.
func coldStartLines(cold *Summary, steady int, cmp []Comparison, ledger []LedgerEntry) []string {
	if cold == nil || steady == 0 {
		return nil
	}
	lines := []string{
		"=== cold start ===",
		fmt.Sprintf("Cold run (%s) vs steady (median of %d):", cold.Label, steady),
	}
	for _, c := range cmp {
		if math.IsNaN(c.Cold) || math.IsNaN(c.Steady) {
			continue
		}
		ratio := "n/a"
		if !math.IsNaN(c.Ratio) {
			ratio = fmt.Sprintf("%.2fx", c.Ratio) + [...]string{", cold faster", "", ", cold slower"}[c.ColdSlower()+1]
		}
		lines = append(lines, fmt.Sprintf("  %s: %.2f cold, %.2f steady (%s)", c.Metric, c.Cold, c.Steady, ratio))
	}
	return append(lines, ledgerLines(ledger)...)
}

// fmtTook prints a duration in ms with precision that suits it.
func fmtTook(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	if ms < 1 {
		return fmt.Sprintf("%.3f ms", ms)
	}
	return fmt.Sprintf("%.1f ms", ms)
}

// writeColdStart writes the block (nothing when there is none).
func writeColdStart(w io.Writer, lines []string) error {
	if len(lines) == 0 {
		return nil
	}
	_, err := io.WriteString(w, strings.Join(lines, "\n")+"\n")
	return err
}
