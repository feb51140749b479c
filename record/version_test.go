package record

import (
	"bytes"
	"strings"
	"testing"

	"github.com/charmbracelet/x/exp/golden"
)

// One committed recording per format version, each read by this reader: what it must hold.
// A new version adds its file and a row; the old rows stay.
var versionFiles = []struct {
	version int
	path    string
	frames  int
	keys    int
	engines int
	model   string
}{
	// scripts/record-demo.sh on a 2-core CPU: the embedded model, g refused twice, p, [ [ [ [ ] ].
	{1, "../testdata/recordings/cpu-tiny-v1.rec", 370, 9, 2, "tiny-gpt2 (embedded)"},
	// scripts/record-demo.sh on an H200 (driver 580.159.04): GPT-2 124M, g off and on, p, [ [ [ [ ] ].
	{1, "../testdata/recordings/h200-gpt2-v1.rec", 1109, 9, 4, "random:gpt2"},
}

func TestReadEveryVersion(t *testing.T) {
	for _, vf := range versionFiles {
		t.Run(strings.TrimSuffix(vf.path[strings.LastIndex(vf.path, "/")+1:], ".rec"), func(t *testing.T) {
			rec, err := Open(vf.path)
			if err != nil {
				t.Fatal(err)
			}
			defer rec.Close()
			if rec.Version != vf.version || rec.Stop != nil {
				t.Fatalf("version %d, stop %v; want version %d read to its end mark", rec.Version, rec.Stop, vf.version)
			}
			if rec.Frames() != vf.frames || len(rec.Keys()) != vf.keys || len(rec.Engine) != vf.engines || rec.Meta.Model != vf.model {
				t.Fatalf("%d views, %d keys, %d engines, model %q; want %d, %d, %d, %q",
					rec.Frames(), len(rec.Keys()), len(rec.Engine), rec.Meta.Model, vf.frames, vf.keys, vf.engines, vf.model)
			}
			c := rec.NewCursor()
			for i := range rec.Frames() {
				v, err := c.View(i)
				if err != nil {
					t.Fatal(err)
				}
				if v.Now < 0 || v.Header.Model == "" || len(v.Latency) == 0 {
					t.Fatalf("view %d does not look like a dashboard's: now %v, model %q, %d latency rows", i, v.Now, v.Header.Model, len(v.Latency))
				}
			}
			var out bytes.Buffer
			if err := WriteSummary(&out, rec); err != nil {
				t.Fatal(err)
			}
			golden.RequireEqual(t, out.Bytes())
		})
	}
}
