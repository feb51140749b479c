package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkReplayRealClock replays a 200-request trace (gamma gaps at 100 req/s, burstiness 0.5)
// on the real clock and the embedded model, and reports how far each submit landed from the
// trace's offset: the real-time side of the replay, which unit tests leave to the fake clock.
//
//	go test ./bench/ -run XXX -bench ReplayRealClock -benchtime 1x
func BenchmarkReplayRealClock(b *testing.B) {
	var lines strings.Builder
	off := 0.0
	rng := rand.New(rand.NewPCG(5, 5))
	for range 200 {
		lines.WriteString(`{"timestamp": ` + strconv.FormatFloat(math.Round(off), 'f', 0, 64) + `, "input_length": 8, "output_length": 2}` + "\n")
		off += 1000 * arrivalGap(rng, 100, 0.5)
	}
	dir := b.TempDir()
	trace := filepath.Join(dir, "t.jsonl")
	if err := os.WriteFile(trace, []byte(lines.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	d, err := LoadTrace(b.Context(), trace, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		path := filepath.Join(dir, "out.json")
		cfg := testConfig(requests(200, 2), func(c *Config) {
			c.Workload.Dataset = d
			c.Arrivals = Arrivals{Schedule: "trace", Offsets: d.Offsets(200, 1)}
		})
		var out, errOut bytes.Buffer
		if err := RunBench(context.Background(), cfg, SessionOptions{Provider: cpuEngine(2)}, Exports{JSONPath: path}, &out, &errOut); err != nil {
			b.Fatalf("%v\n%s", err, errOut.String())
		}
		data, _ := os.ReadFile(path)
		var rep struct {
			Runs []struct {
				Requests []struct {
					SubmitStartMs float64 `json:"submit_start_ms"`
				} `json:"requests"`
			} `json:"runs"`
		}
		if err := json.Unmarshal(data, &rep); err != nil {
			b.Fatal(err)
		}
		reqs := rep.Runs[0].Requests
		var errs []float64
		for i, r := range reqs {
			errs = append(errs, math.Abs(r.SubmitStartMs-reqs[0].SubmitStartMs-float64(d.Offsets(200, 1)[i].Microseconds())/1000))
		}
		sort.Float64s(errs)
		b.ReportMetric(errs[len(errs)/2], "p50-offset-error-ms")
		b.ReportMetric(errs[len(errs)*99/100], "p99-offset-error-ms")
		b.ReportMetric(errs[len(errs)-1], "max-offset-error-ms")
	}
}
