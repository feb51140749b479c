package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"rosetop/sched"
)

// byChoice is a multi-choice stream's chunks put together per choice index.
type byChoice struct {
	text   map[int]string
	tokens map[int][]int32
	finish map[int]string
	roles  map[int]int  // role chunks a choice got
	chunks map[int]int  // chunks a choice got
	first  map[int]bool // a choice's first chunk was a role chunk
	usage  *gotUsage
}

func streamByChoice(t *testing.T, h *harness, path string, body map[string]any) *byChoice {
	t.Helper()
	body["stream"] = true
	resp := h.do(context.Background(), http.MethodPost, path, body)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("POST %s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := readSSE(t, resp.Body)
	if len(events) == 0 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream %q does not end with [DONE]", events)
	}
	return groupChoices(t, events[:len(events)-1])
}

func groupChoices(t *testing.T, events []string) *byChoice {
	t.Helper()
	b := &byChoice{text: map[int]string{}, tokens: map[int][]int32{}, finish: map[int]string{}, roles: map[int]int{},
		chunks: map[int]int{}, first: map[int]bool{}}
	for _, js := range events {
		var c gotReply
		if err := json.Unmarshal([]byte(js), &c); err != nil {
			t.Fatal(err)
		}
		if c.Error != nil {
			t.Fatalf("error event %s", js)
		}
		if c.Usage != nil && len(c.Choices) == 0 {
			b.usage = c.Usage
		}
		if len(c.Choices) > 1 {
			t.Fatalf("chunk %s has %d choices: vLLM sends one a chunk", js, len(c.Choices))
		}
		for _, ch := range c.Choices {
			i := ch.Index
			if _, done := b.finish[i]; done {
				t.Fatalf("chunk %s after choice %d's finish", js, i)
			}
			b.text[i] += ch.Text
			b.chunks[i]++
			if ch.Delta != nil {
				if ch.Delta.Role != nil {
					b.roles[i]++
					b.first[i] = b.first[i] || b.chunks[i] == 1
				}
				if ch.Delta.Content != nil {
					b.text[i] += *ch.Delta.Content
				}
			}
			b.tokens[i] = append(b.tokens[i], ch.TokenIDs...)
			if ch.FinishReason != nil {
				b.finish[i] = *ch.FinishReason
			}
		}
	}
	return b
}

// TestBatchOfPrompts: /v1/completions takes a list of prompts (strings, or lists of token ids)
// with n choices each, as vLLM does: choice p*n + k is prompt p's k-th, whole or streamed; with
// greedy sampling each is the prompt's own reply; usage counts each prompt once and every
// choice's output.
func TestBatchOfPrompts(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	const maxNew = 12
	prompts := []string{"Hello, my name is", "The capital of France"}
	var ids, want [][]int32
	for _, p := range prompts {
		i, w := reference(t, h.te, p, maxNew)
		ids, want = append(ids, i), append(want, w)
	}
	wantUsage := gotUsage{PromptTokens: len(ids[0]) + len(ids[1]), CompletionTokens: 4 * maxNew}
	wantUsage.TotalTokens = wantUsage.PromptTokens + wantUsage.CompletionTokens
	for _, prompt := range []any{prompts, ids} {
		body := func() map[string]any {
			return map[string]any{"prompt": prompt, "n": 2, "max_tokens": maxNew, "temperature": 0, "return_token_ids": true}
		}
		var r gotReply
		if code := h.post("/v1/completions", body(), &r); code != 200 || len(r.Choices) != 4 {
			t.Fatalf("status %d, %d choices (%+v); want 200, 4", code, len(r.Choices), r.Error)
		}
		for i, c := range r.Choices {
			p := i / 2
			if c.Index != i || c.Text != h.te.model.Tokenizer.Decode(want[p]) || !slices.Equal(c.TokenIDs, want[p]) ||
				!slices.Equal(c.PromptTokenIDs, ids[p]) || c.FinishReason == nil || *c.FinishReason != "length" {
				t.Fatalf("choice %d: %+v; want index %d, prompt %d's greedy reply %v", i, c, i, p, want[p])
			}
		}
		if r.Usage == nil || *r.Usage != wantUsage {
			t.Fatalf("usage %+v, want %+v", r.Usage, wantUsage)
		}
		b := body()
		b["stream_options"] = map[string]any{"include_usage": true}
		s := streamByChoice(t, h, "/v1/completions", b)
		for i := range 4 {
			p := i / 2
			if s.text[i] != h.te.model.Tokenizer.Decode(want[p]) || !slices.Equal(s.tokens[i], want[p]) || s.finish[i] != "length" {
				t.Fatalf("streamed choice %d: %q %v %q; want prompt %d's greedy reply", i, s.text[i], s.tokens[i], s.finish[i], p)
			}
		}
		if s.usage == nil || *s.usage != wantUsage {
			t.Fatalf("streamed usage %+v, want %+v", s.usage, wantUsage)
		}
	}
}

// TestNChoices: n samples of one prompt differ from one another, and a seed repeats them; a chat
// stream gives each choice its own role chunk first.
func TestNChoices(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	body := func() map[string]any {
		return map[string]any{"messages": []map[string]string{{"role": "user", "content": "Hi"}}, "n": 3, "max_tokens": 16,
			"seed": 7, "ignore_eos": true}
	}
	var a, b gotReply
	h.post("/v1/chat/completions", body(), &a)
	h.post("/v1/chat/completions", body(), &b)
	if len(a.Choices) != 3 || len(b.Choices) != 3 {
		t.Fatalf("%d and %d choices, want 3", len(a.Choices), len(b.Choices))
	}
	texts := make([]string, 3)
	for i := range 3 {
		if a.Choices[i].Index != i || a.Choices[i].Message == nil || b.Choices[i].Message == nil {
			t.Fatalf("choice %d: %+v", i, a.Choices[i])
		}
		texts[i] = a.Choices[i].Message.Content
		if b.Choices[i].Message.Content != texts[i] {
			t.Fatalf("choice %d with seed 7: %q, then %q", i, texts[i], b.Choices[i].Message.Content)
		}
	}
	if texts[0] == texts[1] || texts[1] == texts[2] || texts[0] == texts[2] {
		t.Fatalf("three samples of one prompt alike: %q", texts)
	}
	s := streamByChoice(t, h, "/v1/chat/completions", body())
	for i := range 3 {
		if s.roles[i] != 1 || !s.first[i] || s.text[i] != texts[i] || s.finish[i] != "length" {
			t.Fatalf("streamed choice %d: %d role chunks (first: %v), %q, %q; want 1 first, %q, length",
				i, s.roles[i], s.first[i], s.text[i], s.finish[i], texts[i])
		}
	}
}

// TestChoicesDisconnect: a client that leaves a multi-choice stream ends every choice in the
// scheduler, and their KV blocks return.
func TestChoicesDisconnect(t *testing.T) {
	h := newHarness(t, engineOpts{maxSeqLen: 512}, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	resp := h.do(ctx, http.MethodPost, "/v1/completions", map[string]any{"prompt": []string{"Hello", "Bye"}, "n": 2,
		"max_tokens": 400, "ignore_eos": true, "stream": true})
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: {") {
		t.Fatalf("first line %q, %v", line, err)
	}
	h.te.hold() // no request can finish while the client leaves
	h.te.waitFor(func() bool { return h.te.last.KVUsed > 0 })
	cancel()
	resp.Body.Close()
	h.te.waitFor(func() bool { return h.te.cancels == 4 })
	h.te.resume()
	snap, recs := h.te.waitIdle()
	if len(recs) != 4 || snap.KVUsed != 0 {
		t.Fatalf("%d records, KV blocks used %d; want 4, 0", len(recs), snap.KVUsed)
	}
	for _, r := range recs {
		if r.Reason != sched.FinishCancelled || len(r.Output) >= 400 {
			t.Fatalf("reason %s after %d tokens; want cancelled early", r.Reason, len(r.Output))
		}
	}
}

// TestOverloadChoices: a request's choices count against --max-queue as the requests they are: n
// that would queue past the limit is answered 429, n that fits is queued; into an empty queue any
// n goes.
func TestOverloadChoices(t *testing.T) {
	for _, c := range []struct {
		name  string
		first string // posted first, queued
		then  string // posted once the first is queued
		code  int    // the second's status
		queue int    // requests queued in all
	}{
		{"past the limit", `{"prompt": "Hi", "max_tokens": 2, "n": 2}`, `{"prompt": ["a", "b"], "n": 2, "max_tokens": 2}`, http.StatusTooManyRequests, 2},
		{"up to the limit", `{"prompt": "Hi", "max_tokens": 2, "n": 2}`, `{"prompt": ["a", "b"], "max_tokens": 2}`, http.StatusOK, 4},
		{"empty queue", `{"prompt": "Hi", "max_tokens": 2, "n": 6}`, "", 0, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, engineOpts{paused: true}, Options{MaxQueue: 4})
			codes := make(chan int, 2)
			post := func(body string) {
				go func() {
					resp, err := h.client.Post(h.url+"/v1/completions", "application/json", strings.NewReader(body))
					if err != nil {
						codes <- 0
						return
					}
					resp.Body.Close()
					codes <- resp.StatusCode
				}()
			}
			post(c.first)
			var want []int
			if c.then != "" {
				h.te.waitFor(func() bool { return h.te.submitted == 2 })
				post(c.then)
				if c.code != http.StatusOK {
					if got := <-codes; got != c.code {
						t.Fatalf("second request: status %d, want %d", got, c.code)
					}
				} else {
					want = append(want, http.StatusOK)
				}
			}
			h.te.waitFor(func() bool { return h.te.submitted == c.queue })
			h.te.release()
			for range append(want, http.StatusOK) {
				if got := <-codes; got != http.StatusOK {
					t.Fatalf("a queued request: status %d, want 200", got)
				}
			}
		})
	}
}
