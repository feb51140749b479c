package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"strings"
	"testing"

	"rosetop/sched"
)

// tally is what /metrics says of finished requests (vLLM's names).
type tally struct {
	success   map[string]float64 // request_success_total by finished_reason
	requests  float64            // request_generation_tokens' count: finished requests
	genSum    float64            // request_generation_tokens' sum: their tokens
	generated float64            // generation_tokens_total: every token sampled
	e2eSeen   float64            // e2e_request_latency_seconds' count
}

func (h *harness) tally() tally {
	h.t.Helper()
	fams, _ := h.scrape()
	t := tally{success: map[string]float64{}}
	for _, m := range fams["vllm:request_success_total"].GetMetric() {
		for _, l := range m.Label {
			if l.GetName() == "finished_reason" {
				t.success[l.GetValue()] = m.Counter.GetValue()
			}
		}
	}
	gen := fams["vllm:request_generation_tokens"].GetMetric()[0].Histogram
	t.requests, t.genSum = float64(gen.GetSampleCount()), gen.GetSampleSum()
	t.generated = fams["vllm:generation_tokens_total"].GetMetric()[0].Counter.GetValue()
	t.e2eSeen = float64(fams["vllm:e2e_request_latency_seconds"].GetMetric()[0].Histogram.GetSampleCount())
	return t
}

// since is t minus before.
func (t tally) since(before tally) tally {
	d := tally{success: maps.Clone(t.success), requests: t.requests - before.requests, genSum: t.genSum - before.genSum,
		generated: t.generated - before.generated, e2eSeen: t.e2eSeen - before.e2eSeen}
	for k, v := range before.success {
		d.success[k] -= v
	}
	return d
}

// replied is what the replies of one request said: each choice's finish reason and the tokens
// usage counts.
type replied struct {
	finishes   map[string]float64
	completion float64
}

// ask posts body (as a stream when streamed, with usage) and returns what its reply said.
func (h *harness) ask(path string, body map[string]any, streamed bool) replied {
	h.t.Helper()
	body = maps.Clone(body)
	got := replied{finishes: map[string]float64{}}
	if streamed {
		body["stream"], body["stream_options"] = true, map[string]any{"include_usage": true}
		resp := h.do(context.Background(), http.MethodPost, path, body)
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			h.t.Fatalf("status %d", resp.StatusCode)
		}
		for _, e := range readSSE(h.t, resp.Body) {
			var c gotReply
			if e == "[DONE]" {
				continue
			}
			if err := json.Unmarshal([]byte(e), &c); err != nil || c.Error != nil {
				h.t.Fatalf("event %q: %v", e, err)
			}
			for _, ch := range c.Choices {
				if ch.FinishReason != nil {
					got.finishes[*ch.FinishReason]++
				}
			}
			if c.Usage != nil {
				got.completion = float64(c.Usage.CompletionTokens)
			}
		}
		return got
	}
	var r gotReply
	if code := h.post(path, body, &r); code != http.StatusOK {
		h.t.Fatalf("status %d: %+v", code, r.Error)
	}
	for _, ch := range r.Choices {
		got.finishes[*ch.FinishReason]++
	}
	got.completion = float64(r.Usage.CompletionTokens)
	return got
}

// checkAgree checks that the metrics a request's records fed (d) say what its reply said.
func checkAgree(t *testing.T, got replied, d tally) {
	t.Helper()
	choices := 0.0
	for _, n := range got.finishes {
		choices += n
	}
	for _, k := range []string{"stop", "length", "abort", "error"} {
		if d.success[k] != got.finishes[k] {
			t.Errorf("request_success_total grew by %v, the replies' finish reasons are %v", d.success, got.finishes)
			break
		}
	}
	if d.requests != choices || d.e2eSeen != choices || d.genSum != got.completion || d.generated != got.completion {
		t.Errorf("metrics: %v requests (%v e2e latencies) of %v generated tokens in all, %v tokens sampled; replies: %v choices, %v completion tokens",
			d.requests, d.e2eSeen, d.genSum, d.generated, choices, got.completion)
	}
}

// TestFinishAgrees: the reply and the metrics fed by the request's finished record agree on how
// it ended and on its tokens, as in vLLM, where stop strings are matched in the engine: a stop
// string completed by the last token max_tokens allows ends the request as "stop", not "length",
// and one completed earlier ends it at that token, with no token sampled after it. Likewise a
// stop token id (vLLM's check_stop puts it before the length check), counted among the tokens,
// with include_stop_str_in_output too. Through the real server and scheduler on the tiny model,
// whole and streamed, with n = 1 and n = 2.
func TestFinishAgrees(t *testing.T) {
	m, err := NewMetrics(MetricsOptions{Names: VLLMNames, Model: "tiny-gpt2", MaxModelLen: 256})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, engineOpts{metrics: m}, Options{Metrics: m})
	const prompt, maxNew = "Hello, my name is", 24
	// stopAt returns a stop string that the k-th greedy token after text completes (across a
	// change of token: vLLM's look-back), and k.
	stopAt := func(text string) (string, int) {
		_, ref := reference(t, h.te, text, maxNew)
		return stopAcrossChange(h.te.model.Tokenizer, ref)
	}
	for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
		text := prompt
		if path == "/v1/chat/completions" {
			text = "user: " + prompt + "\nassistant:"
		}
		stop, k := stopAt(text)
		_, ref := reference(t, h.te, text, maxNew)
		id, kid := stopIDAt(t, ref)
		cases := []struct {
			name   string
			body   map[string]any
			finish string
		}{
			{"stop on the last token", map[string]any{"max_tokens": k, "stop": stop}, "stop"},
			{"stop before the last token", map[string]any{"max_tokens": maxNew, "stop": stop}, "stop"},
			{"length, a stop string never completed", map[string]any{"max_tokens": k - 1, "stop": stop}, "length"},
			{"length, no stop strings", map[string]any{"max_tokens": k}, "length"},
			{"two choices, stop on the last token", map[string]any{"max_tokens": k, "stop": stop, "n": 2}, "stop"},
			{"two choices, stop before the last token", map[string]any{"max_tokens": maxNew, "stop": []string{"\x00never", stop}, "n": 2}, "stop"},
			{"stop string kept in the text", map[string]any{"max_tokens": maxNew, "stop": stop, "include_stop_str_in_output": true}, "stop"},
			{"stop id on the last token", map[string]any{"max_tokens": kid, "stop_token_ids": []int32{id}}, "stop"},
			{"stop id before the last token", map[string]any{"max_tokens": maxNew, "stop_token_ids": []int32{id}}, "stop"},
			{"stop id kept in the text", map[string]any{"max_tokens": maxNew, "stop_token_ids": []int32{id}, "include_stop_str_in_output": true}, "stop"},
			{"stop id and stop string", map[string]any{"max_tokens": maxNew, "stop_token_ids": []int32{id}, "stop": stop}, "stop"},
			{"length, a stop id never sampled", map[string]any{"max_tokens": kid - 1, "stop_token_ids": []int32{id}}, "length"},
			{"two choices, stop id on the last token", map[string]any{"max_tokens": kid, "stop_token_ids": []int32{id}, "n": 2}, "stop"},
			{"two choices, stop id before the last token", map[string]any{"max_tokens": maxNew, "stop_token_ids": []int32{0, id}, "n": 2}, "stop"},
		}
		for _, c := range cases {
			for _, streamed := range []bool{false, true} {
				t.Run(c.name+path+map[bool]string{false: "/whole", true: "/stream"}[streamed], func(t *testing.T) {
					body := maps.Clone(c.body)
					body["temperature"] = 0
					if path == "/v1/completions" {
						body["prompt"] = prompt
					} else {
						body["messages"] = []map[string]string{{"role": "user", "content": prompt}}
					}
					before := h.tally()
					got := h.ask(path, body, streamed)
					h.te.waitIdle()
					if n := len(got.finishes); n != 1 || got.finishes[c.finish] == 0 {
						t.Fatalf("finish reasons %v, want %s", got.finishes, c.finish)
					}
					checkAgree(t, got, h.tally().since(before))
				})
			}
		}
	}
}

// TestFinishAgreesEOS: on a scripted model that samples EOS as output 3, an EOS, a stop string
// completed by the EOS's predecessor, and one completed by the last allowed token all read "stop"
// in the reply and in the metrics.
func TestFinishAgreesEOS(t *testing.T) {
	m, err := NewMetrics(MetricsOptions{Names: VLLMNames, Model: "tiny-gpt2", MaxModelLen: 256})
	if err != nil {
		t.Fatal(err)
	}
	const word = 383 // " The"
	h := newHarness(t, engineOpts{metrics: m, script: func(pos int) int32 {
		if pos == 3 { // a prompt of one token: output 3
			return 50256
		}
		return word
	}}, Options{Metrics: m})
	cases := []struct {
		name string
		body map[string]any
	}{
		{"EOS, stop strings never completed", map[string]any{"max_tokens": 8, "stop": "xyz"}},
		{"stop by the token before the EOS", map[string]any{"max_tokens": 8, "stop": "The The"}},
		{"stop on the last token", map[string]any{"max_tokens": 2, "stop": "The The"}},
		{"stop on the last token, min_tokens", map[string]any{"max_tokens": 2, "min_tokens": 1, "stop": "The The"}},
	}
	for _, c := range cases {
		for _, streamed := range []bool{false, true} {
			t.Run(c.name+map[bool]string{false: "/whole", true: "/stream"}[streamed], func(t *testing.T) {
				body := maps.Clone(c.body)
				body["prompt"] = []int{word}
				before := h.tally()
				got := h.ask("/v1/completions", body, streamed)
				h.te.waitIdle()
				if got.finishes["stop"] != 1 {
					t.Fatalf("finish reasons %v, want stop", got.finishes)
				}
				checkAgree(t, got, h.tally().since(before))
			})
		}
	}
}

// TestFinishAgreesCancelled: a client that leaves a request with stop strings mid-stream gets
// it counted as aborted, with the tokens it was sampled.
func TestFinishAgreesCancelled(t *testing.T) {
	m, err := NewMetrics(MetricsOptions{Names: VLLMNames, Model: "tiny-gpt2", MaxModelLen: 512})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, engineOpts{metrics: m, maxSeqLen: 512}, Options{Metrics: m})
	before := h.tally()
	ctx, cancel := context.WithCancel(context.Background())
	resp := h.do(ctx, http.MethodPost, "/v1/completions", map[string]any{"prompt": "Hello", "max_tokens": 400, "ignore_eos": true,
		"stream": true, "stop": []string{"\x00never"}})
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: {") {
		t.Fatalf("first line %q, %v", line, err)
	}
	h.leaveMidStream(cancel, resp.Body)
	_, recs := h.te.waitIdle()
	r := recs[0]
	d := h.tally().since(before)
	if r.Reason != sched.FinishCancelled || d.success["abort"] != 1 || d.success["stop"]+d.success["length"] != 0 ||
		d.genSum != float64(len(r.Output)) || d.generated != float64(len(r.Output)) {
		t.Fatalf("record %s with %d tokens; metrics %+v", r.Reason, len(r.Output), d)
	}
}
