package sticky

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// full takes n bytes, then fails.
type full struct {
	b strings.Builder
	n int
}

var errFull = errors.New("no space left on device")

func (f *full) Write(p []byte) (int, error) {
	if f.b.Len()+len(p) > f.n {
		return 0, errFull
	}
	return f.b.Write(p)
}

func TestWriterKeepsTheFirstError(t *testing.T) {
	f := &full{n: 6}
	w := &Writer{W: f}
	fmt.Fprint(w, "abc")
	fmt.Fprint(w, "defg") // fails: 7 > 6
	if n, err := fmt.Fprint(w, "h"); n != 0 || !errors.Is(err, errFull) {
		t.Errorf("a write after the failure: %d, %v; want 0 and the first error", n, err)
	}
	if !errors.Is(w.Err, errFull) || f.b.String() != "abc" {
		t.Errorf("Err %v, written %q; want the first error and abc", w.Err, f.b.String())
	}
}
