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

// fakeBench runs RunBench's code over the fake provider and clock.
func fakeBench(t *testing.T, ctx context.Context, p *fakeProvider, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cfg, err := ParseFlags(args, os.Stderr)
	if err != nil {
		t.Fatalf("ParseFlags(%q): %v", args, err)
	}
	var out, errOut bytes.Buffer
	err = runBench(ctx, cfg, SessionOptions{Provider: p, Clock: newFakeClock(time.Second)}, &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestReportGolden(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"decode_heavy", []string{"--job", "decode-heavy", "--num-requests", "8", "--max-new-tokens", "6", "--repeat-runs", "2"}},
		{"paced_absolute", []string{"--job", "paced", "--num-requests", "6", "--max-new-tokens", "4"}},
		{"prefill_one_token", []string{"--job", "prefill-heavy", "--prompt-repeats", "4", "--num-requests", "5"}},
		{"relative_interval", []string{"--num-requests", "4", "--max-new-tokens", "3", "--submit-interval-ms", "2", "--repeat-runs", "1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := fakeBench(t, context.Background(), newFakeProvider(), tc.args...)
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
