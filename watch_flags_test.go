package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"rosetop/remote"
)

// TestWatchFlagErrors: --watch is the dashboard's, watches only a server, and refuses by name,
// in one line and with exit 2, every flag that shapes a load it does not send, before reading
// any file such a flag names.
func TestWatchFlagErrors(t *testing.T) {
	const ep = "http://127.0.0.1:1/v1" // nothing is dialled: the flags are refused first
	dir := t.TempDir()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"bench", []string{"bench", "--endpoint", ep, "--watch"}, "--watch: rosetop bench measures the load it sends"},
		{"sweep", []string{"sweep", "--endpoint", ep, "--watch", "--concurrency", "1,2"}, "--watch: rosetop sweep measures the load it sends"},
		{"no endpoint", []string{"--watch"}, "--watch watches a server outside this process: give its API root with --endpoint URL"},
		{"num requests", []string{"--endpoint", ep, "--watch", "--num-requests", "5"}, "--num-requests means nothing with --watch"},
		{"rate and dataset", []string{"--endpoint", ep, "--watch", "--request-rate", "2", "--dataset", "random"}, "--request-rate, --dataset mean nothing with --watch"},
		{"dataset file not read", []string{"--endpoint", ep, "--watch", "--dataset", "sharegpt", "--dataset-path", filepath.Join(dir, "absent.json")}, "--dataset, --dataset-path mean nothing with --watch"},
		{"job", []string{"--endpoint", ep, "--watch", "--job", "admission"}, "--job means nothing with --watch"},
		{"dataset kinds' flags", []string{"--endpoint", ep, "--watch", "--input-len", "5", "--sonnet-input-len", "5"}, "--input-len, --sonnet-input-len mean nothing with --watch"},
		{"client flags", []string{"--endpoint", ep, "--watch", "--api", "chat", "--tokenizer", "gpt2"}, "--api, --tokenizer mean nothing with --watch"},
		{"json", []string{"--endpoint", ep, "--watch", "--json", filepath.Join(dir, "out.json")}, "--json and --csv hold the requests rosetop sends"},
		{"goodput tpot", []string{"--endpoint", ep, "--watch", "--goodput", "ttft:200,tpot:30"}, "--goodput tpot: watch mode reads the servers' latency histograms, and none holds a request's TPOT: give ttft or e2el targets"},
		{"goodput zero", []string{"--endpoint", ep, "--watch", "--goodput", "ttft:200,e2el:0"}, "--goodput e2el:0: no latency the server observes is within 0 ms: give a target above 0"},
		{"goodput malformed", []string{"--endpoint", ep, "--watch", "--goodput", "ttft"}, "--goodput"},
		{"engine flag", []string{"--endpoint", ep, "--watch", "--device", "cpu"}, "--device means nothing with --endpoint"},
		{"fleet driven", []string{"--endpoint", ep, "--endpoint", "http://127.0.0.1:2/v1"}, "--endpoint given 2 times: several servers are only watched, not driven: add --watch"},
		{"fleet bench", []string{"bench", "--endpoint", ep, "--endpoint", "http://127.0.0.1:2/v1"}, "--endpoint given 2 times: several servers are only watched, on the dashboard (rosetop --watch --endpoint URL --endpoint URL): rosetop bench drives one"},
		{"fleet sweep", []string{"sweep", "--concurrency", "1", "--endpoint", ep, "--endpoint", "http://127.0.0.1:2/v1"}, "several servers are only watched, on the dashboard (rosetop --watch --endpoint URL --endpoint URL): rosetop sweep drives one"},
		{"fleet metrics url", []string{"--endpoint", ep, "--endpoint", "http://127.0.0.1:2/v1", "--watch", "--metrics-url", "http://127.0.0.1:1/metrics"}, "--metrics-url names one server's page"},
		{"fleet twice", []string{"--endpoint", ep, "--endpoint", ep + "/", "--watch"}, "--endpoint " + ep + "/: given twice"},
		{"fleet bad url", []string{"--endpoint", ep, "--endpoint", "127.0.0.1:2", "--watch"}, `--endpoint "127.0.0.1:2": want an http or https URL`},
		{"fleet empty first", []string{"bench", "--endpoint=", "--endpoint=" + ep}, `--endpoint "": want an http or https URL`},
		{"fleet empty first watched", []string{"--watch", "--endpoint=", "--endpoint=" + ep}, `--endpoint "": want an http or https URL`},
		{"fleet one page", []string{"--watch", "--endpoint=http://127.0.0.1:1/a/v1", "--endpoint=http://127.0.0.1:1/b/v1"}, "have one /metrics page (http://127.0.0.1:1/metrics)"},
		{"fleet too many", fleetArgs(remote.MaxFleet + 1), fmt.Sprintf("--endpoint given %d times: at most %d servers", remote.MaxFleet+1, remote.MaxFleet)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
				t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", tc.args, code, stdout, stderr, tc.want)
			}
		})
	}
}

// fleetArgs watches n servers, none of which is dialled.
func fleetArgs(n int) []string {
	args := []string{"--watch"}
	for i := range n {
		args = append(args, "--endpoint", fmt.Sprintf("http://127.0.0.1:%d/v1", 1000+i))
	}
	return args
}

// TestFleetOptions: --endpoint given again with --watch names the fleet's other servers, in order.
func TestFleetOptions(t *testing.T) {
	o, err := parseDashboard(t.Context(), []string{"--watch", "--endpoint", "http://a:8000/v1", "--endpoint", "http://b:8000/v1", "--endpoint", "http://c:8000/v1"}, io.Discard)
	if err != nil || o.Endpoint != "http://a:8000/v1" || strings.Join(o.Fleet, " ") != "http://b:8000/v1 http://c:8000/v1" {
		t.Errorf("fleet: %v, endpoint %q, fleet %q", err, o.Endpoint, o.Fleet)
	}
}

// TestWatchOptions: --watch with the flags that name the server, and --record, parses, with no
// job; without it the dashboard keeps its default job.
func TestWatchOptions(t *testing.T) {
	if o, err := parseDashboard(t.Context(), []string{"--endpoint", "http://h:8000/v1", "--watch", "--goodput", "ttft:200,e2el:3000"}, io.Discard); err != nil ||
		len(o.sessionConfig().Goodput) != 2 {
		t.Errorf("watch with --goodput ttft and e2el: %v, targets %+v", err, o.sessionConfig().Goodput)
	}
	o, err := parseDashboard(t.Context(), []string{"--endpoint", "http://h:8000/v1", "--watch", "--model", "m", "--metrics-url", "http://h:9000/metrics", "--api-key", "k",
		"--record", filepath.Join(t.TempDir(), "w.rec")}, io.Discard)
	if err != nil || !o.Watch || o.Job != "" {
		t.Errorf("watch: %v, watch %v, job %q", err, o.Watch, o.Job)
	}
	o, err = parseDashboard(t.Context(), nil, io.Discard)
	if err != nil || o.Watch || o.Job != "decode-heavy" || o.NumRequests != 64 {
		t.Errorf("default: %v, watch %v, job %q, %d requests", err, o.Watch, o.Job, o.NumRequests)
	}
}

// TestWatchNoMetricsExit: a server that cannot be watched is a failure found while running
// (exit 1), as a refused connection is, not a bad flag.
func TestWatchNoMetricsExit(t *testing.T) {
	err := fmt.Errorf("%w: GET http://h/metrics: http 404", remote.ErrNoMetrics)
	if code := exitCode(err); code != exitFail {
		t.Errorf("exit %d, want %d", code, exitFail)
	}
}
