package serve

import (
	"bufio"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRequestLogCancelledTTFT: a stream the client leaves after its first token is logged with
// that token's TTFT, which the request's first event carried, not a 0 for want of a record.
func TestRequestLogCancelledTTFT(t *testing.T) {
	lines := make(logLines, 4)
	// The dispatcher holds after the first step: the first token goes out, no other follows.
	h := newHarness(t, engineOpts{holdAt: 1}, Options{Log: slog.New(slog.NewTextHandler(lines, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := h.do(ctx, http.MethodPost, "/v1/completions", `{"prompt": "Hi", "max_tokens": 20, "ignore_eos": true, "stream": true}`)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "data: {") {
	}
	if sc.Err() != nil {
		t.Fatal(sc.Err())
	}
	cancel() // the client goes away after the first chunk
	resp.Body.Close()
	line := <-lines
	for _, want := range []string{"path=/v1/completions", "stream=true", "completion_tokens=1", "finish=cancelled", "ttft="} {
		if !strings.Contains(line, want) {
			t.Fatalf("log line %q lacks %q", line, want)
		}
	}
	_, v, _ := strings.Cut(line, "ttft=")
	v, _, _ = strings.Cut(strings.TrimSpace(v), " ")
	if d, err := time.ParseDuration(v); err != nil || d <= 0 {
		t.Errorf("log line %q: ttft %q, want the first token's time to first token (> 0)", line, v)
	}
}

// TestRequestLogNoTTFT: a request the client leaves while it waits for the scheduler is logged
// without a ttft, which it never had (not as 0s).
func TestRequestLogNoTTFT(t *testing.T) {
	lines := make(logLines, 4)
	h := newHarness(t, engineOpts{paused: true}, Options{Log: slog.New(slog.NewTextHandler(lines, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := h.client.Do(mustJSONRequest(t, ctx, h.url+"/v1/completions", `{"prompt": "Hi", "max_tokens": 5}`)); err == nil {
			resp.Body.Close()
		}
	}()
	h.te.waitFor(func() bool { return h.te.submitted == 1 })
	cancel()
	<-done
	line := <-lines
	if !strings.Contains(line, "finish=cancelled") || strings.Contains(line, "ttft=") {
		t.Errorf("log line %q: want finish=cancelled and no ttft", line)
	}
	h.te.release()
}

// mustJSONRequest is a POST of body to url, as JSON, on ctx.
func mustJSONRequest(t *testing.T, ctx context.Context, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return req
}
