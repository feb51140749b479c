package remote

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// benchChunk is a vLLM completions chunk of typical size.
const benchChunk = `data: {"id":"cmpl-3f6b2d0c9a8e4f1b","object":"text_completion","created":1735689600,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"text":" token","logprobs":null,"finish_reason":null,"stop_reason":null}]}` + "\n\n"

// benchBody is one whole stream of n chunks, the last with a finish reason, then usage and
// [DONE].
func benchBody(n int) []byte {
	var b bytes.Buffer
	for range n - 1 {
		b.WriteString(benchChunk)
	}
	b.WriteString(strings.Replace(benchChunk, `"finish_reason":null`, `"finish_reason":"length"`, 1))
	fmt.Fprintf(&b, "data: {\"id\":\"cmpl-3f6b2d0c9a8e4f1b\",\"object\":\"text_completion\",\"created\":1735689600,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":8,\"total_tokens\":%d,\"completion_tokens\":%d}}\n\n", n+8, n)
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// BenchmarkStreams is the client against a server that writes and flushes every chunk as fast
// as it can: each iteration runs `streams` concurrent requests of `chunks` chunks. It reports
// chunks/s over the whole client (HTTP, SSE, JSON, timing) with the server on the same cores.
func BenchmarkStreams(b *testing.B) {
	for _, streams := range []int{1, 64, 256} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) { benchStreams(b, streams, 256) })
	}
}

func benchStreams(b *testing.B, streams, chunks int) {
	chunk := []byte(benchChunk)
	tail := benchBody(1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for range chunks - 1 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
		}
		_, _ = w.Write(tail)
	}))
	defer srv.Close()
	c, err := New(Config{BaseURL: srv.URL + "/v1", MaxConns: streams})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := Request{API: Completions, Model: "m", Prompt: "Hello", MaxTokens: chunks}
	var total atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		var wg sync.WaitGroup
		for range streams {
			wg.Go(func() {
				res, err := c.Do(context.Background(), req, func(Chunk) {})
				if err != nil {
					b.Error(err)
					return
				}
				total.Add(int64(len(res.Chunks)))
			})
		}
		wg.Wait()
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if want := int64(b.N * streams * chunks); total.Load() != want {
		b.Fatalf("%d chunks, want %d", total.Load(), want)
	}
	b.ReportMetric(float64(total.Load())/elapsed.Seconds(), "chunks/s")
}

// BenchmarkParse is the client's per-chunk work without HTTP: SSE framing, JSON decoding and
// the Result's records, over a body already in memory.
func BenchmarkParse(b *testing.B) {
	const n = 256
	body := benchBody(n)
	c, err := New(Config{BaseURL: "http://h"})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	start := time.Now()
	for range b.N {
		var res Result
		sr := newStreamReader(c, bytes.NewReader(body), &res, n, nil)
		if f, err := sr.run(); f != nil || err != nil || len(res.Chunks) != n {
			b.Fatalf("%v %v %d", f, err, len(res.Chunks))
		}
		sr.finish(nil)
	}
	b.ReportMetric(float64(b.N*n)/time.Since(start).Seconds(), "chunks/s")
}
