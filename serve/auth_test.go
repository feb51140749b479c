package serve

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestAPIKeys: with keys, a request to the API needs "Bearer KEY" with one of them (the scheme
// in any case), else 401 with vLLM's {"error": "Unauthorized"}, /v1 paths that do not exist
// included; /health, /ping, /version and /metrics stay open for probes and scrapers; a
// preflight passes.
func TestAPIKeys(t *testing.T) {
	metrics, err := NewMetrics(MetricsOptions{Model: "m", MaxModelLen: 256})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, engineOpts{}, Options{APIKeys: []string{"k1", "second key"}, Metrics: metrics, AllowedOrigins: []string{"*"}})
	body := fmt.Sprintf(`{"model":%q,"prompt":"Hi","max_tokens":2}`, h.srv.model.ID)
	json := map[string]string{"Content-Type": "application/json"}
	with := func(auth string) map[string]string {
		return map[string]string{"Content-Type": "application/json", "Authorization": auth}
	}
	for _, tc := range []struct {
		method, path, body string
		headers            map[string]string
		status             int
	}{
		{"POST", "/v1/completions", body, json, 401},
		{"POST", "/v1/completions", body, with("Bearer wrong"), 401},
		{"POST", "/v1/completions", body, with("Basic k1"), 401},
		{"POST", "/v1/completions", body, with("Bearer k1"), 200},
		{"POST", "/v1/completions", body, with("bearer second key"), 200},
		{"GET", "/v1/models", "", nil, 401},
		{"GET", "/v1/nothing-here", "", nil, 401},
		{"POST", "/tokenize", `{"prompt":"Hi"}`, json, 401},
		{"POST", "/tokenize", `{"prompt":"Hi"}`, with("Bearer k1"), 200},
		{"GET", "/health", "", nil, 200},
		{"GET", "/metrics", "", nil, 200},
		{"POST", "/ping", "", nil, 200},
		{"GET", "/version", "", nil, 200},
		{"GET", "/nothing-here", "", nil, 404},
		{"OPTIONS", "/v1/completions", "", map[string]string{"Origin": "http://a.example", "Access-Control-Request-Method": "POST"}, 200},
	} {
		status, hdr, got := corsDo(t, h, tc.method, tc.path, tc.body, tc.headers)
		if status != tc.status {
			t.Errorf("%s %s %v: %d %s; want %d", tc.method, tc.path, tc.headers, status, got, tc.status)
		}
		if status == 401 && (got != `{"error":"Unauthorized"}` || hdr.Get("Content-Type") != "application/json") {
			t.Errorf("%s %s: 401 with %q (%s); want vLLM's {\"error\":\"Unauthorized\"}", tc.method, tc.path, got, hdr.Get("Content-Type"))
		}
	}
}

// TestAPIKeyEmpty: an empty key would let in a request that carries none: New refuses it.
func TestAPIKeyEmpty(t *testing.T) {
	te := newTestEngine(t, engineOpts{maxBatch: 1, maxSeqLen: 16})
	if _, err := New(te, Options{APIKeys: []string{"k", ""}}); !errors.Is(err, ErrBadOptions) || !strings.Contains(err.Error(), "empty API key") {
		t.Errorf("New: %v", err)
	}
}
