package remote

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// hangingServer answers GET /v1/models with one model unless hangModels, and holds every other
// request (and /v1/models with hangModels) open until the client goes away; it sends on arrived
// the path of each request it holds.
func hangingServer(t *testing.T, hangModels bool) (*httptest.Server, <-chan string) {
	t.Helper()
	arrived := make(chan string, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" && !hangModels {
			io.WriteString(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
			return
		}
		arrived <- r.URL.Path
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv, arrived
}

// TestPrepareInterrupted: a context cancelled while Prepare waits for the server (its model list,
// or its first /metrics page) ends Prepare with an error that errors.Is takes for
// context.Canceled, as every interrupted run's, and no note that the server has no metrics.
func TestPrepareInterrupted(t *testing.T) {
	for _, tc := range []struct {
		name       string
		hangModels bool
		path       string
	}{{"models", true, "/v1/models"}, {"first scrape", false, "/metrics"}} {
		t.Run(tc.name, func(t *testing.T) {
			srv, arrived := hangingServer(t, tc.hangModels)
			p, err := NewProvider(ProviderOptions{Client: Config{BaseURL: srv.URL + "/v1"}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var progress bytes.Buffer
			done := make(chan error, 1)
			go func() { done <- p.Prepare(ctx, &progress) }()
			if got := <-arrived; got != tc.path {
				t.Fatalf("the server was held at %s, want %s", got, tc.path)
			}
			cancel()
			err = <-done
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Prepare = %v, want an error wrapping context.Canceled", err)
			}
			if strings.Contains(progress.String(), "no server metrics") {
				t.Errorf("progress notes missing metrics after an interrupt:\n%s", progress.String())
			}
		})
	}
}

// TestCanceledIsContextCanceled: a request the caller cancels fails with a Failure that is
// ErrCanceled and context.Canceled alike.
func TestCanceledIsContextCanceled(t *testing.T) {
	if !errors.Is(ErrCanceled, context.Canceled) || ErrCanceled.Error() != "remote: canceled" {
		t.Fatalf("ErrCanceled = %q, errors.Is(context.Canceled) %v", ErrCanceled, errors.Is(ErrCanceled, context.Canceled))
	}
	f := &Failure{Reason: ReasonCanceled}
	if !errors.Is(f, ErrCanceled) || !errors.Is(f, context.Canceled) || errors.Is(&Failure{Reason: ReasonStreamCut}, context.Canceled) {
		t.Errorf("a canceled Failure is not both ErrCanceled and context.Canceled, or another one is canceled")
	}
}
