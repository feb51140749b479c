package bench

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

// fakeBench runs RunBench over the fake provider and clock.
func fakeBench(t *testing.T, ctx context.Context, p *fakeProvider, cfg Config, exp Exports) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = RunBench(ctx, cfg, SessionOptions{Provider: p, Clock: newFakeClock(time.Second)}, exp, &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestReportGolden(t *testing.T) {
	cases := []struct {
		name   string
		cfg    Config
		remote bool // the fake servers stand for a remote server's
	}{
		{"decode_heavy", testConfig(decodeHeavy, requests(8, 6), runs(1, 2)), false},
		{"paced_absolute", testConfig(paced, requests(6, 4)), false},
		{"prefill_one_token", testConfig(prefillHeavy, func(c *Config) { c.Workload.PromptRepeats, c.Workload.NumRequests = 4, 5 }), false},
		{"relative_interval", testConfig(requests(4, 3), func(c *Config) { c.Arrivals.Interval = 2 * time.Millisecond }), false},
		{"remote", testConfig(decodeHeavy, requests(10, 5), runs(1, 1)), true},
		{"burst_max_concurrency", testConfig(requests(6, 3), func(c *Config) { c.Arrivals.MaxConcurrency = 2 }), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newFakeProvider()
			if tc.remote {
				p.remote = &RemoteInfo{Endpoint: "http://h:8000/v1", API: "completions", Kind: "vllm"}
			}
			out, _, err := fakeBench(t, context.Background(), p, tc.cfg, Exports{})
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if out != string(want) {
				t.Errorf("report differs from %s:\n--- got\n%s\n--- want\n%s", golden, out, want)
			}
			if strings.Contains(out, "\x1b") {
				t.Error("report contains ANSI escapes")
			}
		})
	}
}
