package tui

import (
	"fmt"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"rosetop/bench"
)

// Every terminal size gets a frame of exactly its size, the too-small message included (it is
// wider and taller than the tiniest terminals), with and without help, local and remote.
func TestEverySizeFillsTheTerminal(t *testing.T) {
	views := map[string]func(v *bench.View){"local": nil, "remote": remoteView}
	for name, mod := range views {
		for _, w := range []int{1, 2, 10, 31, 32, MinWidth - 1, MinWidth, MinWidth + 1, 120, 259} {
			for _, h := range []int{1, 2, 3, MinHeight - 1, MinHeight, MinHeight + 1, 60} {
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
