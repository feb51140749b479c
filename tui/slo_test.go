package tui

import (
	"math"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"rosetop/bench"
)

// TestGoodputTargetsAndAttainment: with --goodput targets the header shows the attainment and
// the p99 chart's legend the charted targets (TTFT and TPOT, not E2EL); the frame keeps its size.
func TestGoodputTargetsAndAttainment(t *testing.T) {
	v := testView()
	v.Header.SLOs = []bench.SLO{{Metric: "ttft", Ms: 500}, {Metric: "tpot", Ms: 25}, {Metric: "e2el", Ms: 9000}}
	v.Header.Attainment, v.Header.AttainmentN = 87.5, 40
	out := ansi.Strip(sized(t, newFakeSession(v), "dark", 200, 60).View())
	checkFrame(t, out, 200, 60)
	for _, want := range []string{"SLO met 87.5% of 40", "TTFT target 500", "TPOT target 25"} {
		if !strings.Contains(out, want) {
			t.Errorf("frame lacks %q", want)
		}
	}
	if strings.Contains(out, "E2EL target") {
		t.Error("the p99 chart shows an E2EL target it has no series for")
	}
	v.Header.Attainment, v.Header.AttainmentN = math.NaN(), 0
	out = ansi.Strip(sized(t, newFakeSession(v), "dark", 200, 60).View())
	if !strings.Contains(out, "SLO met --") {
		t.Error("no request ended yet: the header should show SLO met --")
	}
	plain := ansi.Strip(sized(t, newFakeSession(testView()), "dark", 200, 60).View())
	if strings.Contains(plain, "SLO met") || strings.Contains(plain, "target") {
		t.Error("without targets the frame mentions them")
	}
}
