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
