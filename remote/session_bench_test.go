package remote

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"rosetop/bench"
)

// BenchmarkSession is the whole client side of `rosetop bench --endpoint` (the streaming client,
// the remote Server's events, the session's recorder and summaries) on decode-heavy's shape, 64
// requests of 256 tokens at once, against a server that writes and flushes every chunk as fast
// as it can on the same cores. It reports the tokens/s the client side keeps up with.
func BenchmarkSession(b *testing.B) {
	const requests, tokens = 64, 256
	chunk, tail := []byte(benchChunk), benchBody(1)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"m","max_model_len":4096}]}`)
	})
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for range tokens - 1 {
			if _, err := w.Write(chunk); err != nil || rc.Flush() != nil {
				return
			}
		}
		_, _ = w.Write(tail) // its usage says 1 token: the run is timed, not its counts
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	cfg := sessionConfig(requests, tokens, 0, 1)
	cfg.Workload.UniquePrompts = false
	var elapsed time.Duration
	for range b.N {
		p, err := NewProvider(ProviderOptions{Client: Config{BaseURL: srv.URL + "/v1"}})
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Prepare(context.Background(), io.Discard); err != nil { // the tokenizer's load is not the stream's
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := bench.RunBench(context.Background(), cfg, bench.SessionOptions{Provider: p}, bench.Exports{}, io.Discard, io.Discard); err != nil {
			b.Fatal(err)
		}
		elapsed += time.Since(t0)
	}
	b.ReportMetric(float64(b.N*requests*tokens)/elapsed.Seconds(), "tokens/s")
}
