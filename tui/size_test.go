package tui

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"rosetop/bench"
)

// Every terminal size gets a frame of exactly its size, the too-small message included (it is
// wider and taller than the tiniest terminals), with and without help, local and remote, and
// with wide runes (a model in a directory named in CJK or emoji) where the help box's edges cut.
func TestEverySizeFillsTheTerminal(t *testing.T) {
	views := map[string]func(v *bench.View){"local": nil, "remote": remoteView, "wide": wideView}
	for name, mod := range views {
		for _, w := range []int{1, 2, 10, 31, 32, MinWidth - 1, MinWidth, MinWidth + 1, 120, 234, 259} {
			for _, h := range []int{1, 2, 3, MinHeight - 1, MinHeight, MinHeight + 1, 50, 60} {
				t.Run(fmt.Sprintf("%s_%dx%d", name, w, h), func(t *testing.T) {
					v := testView()
					if mod != nil {
						mod(v)
					}
					m := sized(t, newFakeSession(v), "dark", w, h)
					checkFrame(t, ansi.Strip(m.View()), w, h)
					tm, _ := m.Update(keyMsg("?"))
					checkFrame(t, ansi.Strip(tm.View()), w, h)
				})
			}
		}
	}
}

// wideView names the model by a path with wide runes, as its ledger entry and events do.
func wideView(v *bench.View) {
	name := "/data/models/模型🚀"
	v.Header.Model = name
	v.Ledger[0].Detail = name + ": 4 layers, 4 heads, 32 channels"
	v.Events[0].Text = "model " + name + " loaded on cpu"
}

// A view holding NaN or an infinity where a number was expected (a damaged recording decodes
// to one) draws a whole frame, with no "NaN" or "Inf" in it, rather than panicking.
func TestNonFiniteValuesDraw(t *testing.T) {
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		v := testView()
		for _, tls := range [][]bench.Timeline{v.Queue, v.P99} {
			for i := range tls {
				for j := range tls[i].Tracks {
					for k := range tls[i].Tracks[j].Points {
						if k%3 == 0 {
							tls[i].Tracks[j].Points[k].Value = bad
						}
					}
				}
			}
		}
		for i := range v.ITL {
			if i%5 == 0 {
				v.ITL[i] = bad
			}
		}
		v.SlowITL[0].ITL[len(v.SlowITL[0].ITL)-1] = bad
		v.Header.TokensPerSec, v.Latency[0].Dist.P50, v.Compare[0].Ratio = bad, bad, bad
		const w, h = 120, 40
		m := sized(t, newFakeSession(v), "dark", w, h)
		out := ansi.Strip(m.View())
		checkFrame(t, out, w, h)
		if strings.Contains(out, "NaN") || strings.Contains(out, "Inf") {
			t.Errorf("%v: shown as a number:\n%s", bad, out)
		}
	}
}

// One NaN among the inter-token latencies leaves the others' bars drawn.
func TestITLBarsBesideNaN(t *testing.T) {
	v := testView()
	v.ITL = append(v.ITL[:len(v.ITL):len(v.ITL)], math.NaN())
	body := newITLChart().body(&paint{}, v, 60, 3)
	if !strings.ContainsAny(body, "▁▂▃▄▅▆▇█") {
		t.Errorf("no bar drawn:\n%s", body)
	}
}

// A terminal too small for the dashboard reads both sizes as long as it is 12 columns wide and
// 3 rows tall (a shorter message when the long one would be cut), and its blank rows are blank.
func TestTooSmallMessage(t *testing.T) {
	for _, sz := range [][2]int{{20, 5}, {12, 3}, {30, 10}, {40, 12}, {79, 30}} {
		w, h := sz[0], sz[1]
		m := sized(t, newFakeSession(testView()), "dark", w, h)
		out := ansi.Strip(m.View())
		checkFrame(t, out, w, h)
		for _, want := range []string{"80×24", fmt.Sprintf("%d×%d", w, h), "q quits"} {
			if !strings.Contains(out, want) {
				t.Errorf("%dx%d: %q missing:\n%s", w, h, want, out)
			}
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.TrimSpace(l) == "…" {
				t.Errorf("%dx%d: a blank row shows a cut:\n%s", w, h, out)
				break
			}
		}
	}
}
