package tui

import (
	"fmt"
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
