package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestInterruptWhileConnecting: Ctrl-C while bench or sweep waits for the server's first answer
// (GET /v1/models, which this server never gives) is an interrupt as any other: one line, exit 130.
func TestInterruptWhileConnecting(t *testing.T) {
	arrived := make(chan struct{}, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	}))
	defer srv.Close()
	for _, args := range [][]string{
		{"bench", "--endpoint", srv.URL + "/v1", "--num-requests", "1"},
		{"sweep", "--endpoint", srv.URL + "/v1", "--concurrency", "1", "--num-requests", "1", "--out-dir", t.TempDir()},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		var stdout, stderr bytes.Buffer
		done := make(chan int, 1)
		go func() { done <- run(ctx, args, strings.NewReader(""), &stdout, &stderr) }()
		<-arrived
		cancel()
		// sweep's progress bar may come first
		if code := <-done; code != exitInterrupted || !strings.HasSuffix(stderr.String(), "\nrosetop: interrupted\n") && stderr.String() != "rosetop: interrupted\n" ||
			strings.Contains(stderr.String(), "canceled") {
			t.Errorf("%s: exit %d, stderr %q; want %d and \"rosetop: interrupted\"", args[0], code, stderr.String(), exitInterrupted)
		}
	}
}
