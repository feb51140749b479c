package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"rosetop/engine"
)

// lpChoice is a choice as a client decodes it, its logprobs kept raw.
type lpChoice struct {
	Index   int    `json:"index"`
	Text    string `json:"text"`
	Message *struct {
		Content string `json:"content"`
	} `json:"message"`
	Delta *struct {
		Role    *string `json:"role"`
		Content *string `json:"content"`
	} `json:"delta"`
	FinishReason *string         `json:"finish_reason"`
	TokenIDs     []int32         `json:"token_ids"`
	Logprobs     json.RawMessage `json:"logprobs"`
}

type lpReply struct {
	Choices []lpChoice `json:"choices"`
	Usage   *gotUsage  `json:"usage"`
	Error   *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// text is the choice's text: a completion's, a chat message's or a chat delta's content.
func (c *lpChoice) text() string {
	switch {
	case c.Message != nil:
		return c.Message.Content
	case c.Delta != nil && c.Delta.Content != nil:
		return *c.Delta.Content
	}
	return c.Text
}

type gotCompletionLP struct {
	TextOffset    []int             `json:"text_offset"`
	TokenLogprobs []float64         `json:"token_logprobs"`
	Tokens        []string          `json:"tokens"`
	TopLogprobs   []json.RawMessage `json:"top_logprobs"`
}

type gotChatLP struct {
	Content []struct {
		gotChatEntry
		TopLogprobs []gotChatEntry `json:"top_logprobs"`
	} `json:"content"`
}

type gotChatEntry struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"` // a list of numbers: base64 would not decode into it
}

// kv is one member of a JSON object, in order.
type kv struct {
	key string
	v   float64
}

// members reads a JSON object of numbers keeping its members' order (and repeats, were there any).
func members(t *testing.T, raw json.RawMessage) []kv {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tk, err := dec.Token(); err != nil || tk != json.Delim('{') {
		t.Fatalf("top_logprobs entry %s is not an object", raw)
	}
	var out []kv
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var v float64
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("top_logprobs entry %s: %v", raw, err)
		}
		out = append(out, kv{k.(string), v})
	}
	return out
}

// postLP posts body and returns its reply; the status must be 200.
func (h *harness) postLP(t *testing.T, path string, body map[string]any) *lpReply {
	t.Helper()
	var r lpReply
	if code := h.post(path, body, &r); code != http.StatusOK {
		t.Fatalf("POST %s: status %d: %+v", path, code, r.Error)
	}
	return &r
}

// streamLP posts body with stream and returns its chunks (the usage chunk too), in order.
func (h *harness) streamLP(t *testing.T, path string, body map[string]any) []lpReply {
	t.Helper()
	body["stream"] = true
	resp := h.do(context.Background(), http.MethodPost, path, body)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %d: %s", path, resp.StatusCode, raw)
	}
	events := readSSE(t, resp.Body)
	if len(events) == 0 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream %q does not end with [DONE]", events)
	}
	var out []lpReply
	for _, e := range events[:len(events)-1] {
		var r lpReply
		if err := json.Unmarshal([]byte(e), &r); err != nil {
			t.Fatalf("event %s: %v", e, err)
		}
		if r.Error != nil {
			t.Fatalf("error event %s", e)
		}
		out = append(out, r)
	}
	return out
}

// byIndex groups a stream's choice chunks by choice index.
func byIndex(chunks []lpReply) map[int][]lpChoice {
	out := map[int][]lpChoice{}
	for _, r := range chunks {
		for _, c := range r.Choices {
			out[c.Index] = append(out[c.Index], c)
		}
	}
	return out
}

// engineOutput is what the scheduler reported of a submitted request: its output ids and their
// logprobs, checked to be aligned and to hold top alternatives each.
func engineOutput(t *testing.T, s submission, top int) ([]int32, []engine.TokenLogprobs) {
	t.Helper()
	if !s.req.Logprobs || s.req.TopLogprobs != top {
		t.Fatalf("submitted with Logprobs %v, TopLogprobs %d; want true, %d", s.req.Logprobs, s.req.TopLogprobs, top)
	}
	var ids []int32
	var lps []engine.TokenLogprobs
	for _, ev := range s.events {
		if len(ev.Logprobs) != len(ev.Tokens) {
			t.Fatalf("the scheduler reported %d logprobs for %d tokens", len(ev.Logprobs), len(ev.Tokens))
		}
		ids, lps = append(ids, ev.Tokens...), append(lps, ev.Logprobs...)
	}
	for k, x := range lps {
		if x.Sampled.Token != ids[k] || len(x.Top) != top {
			t.Fatalf("token %d: logprobs of %d with %d alternatives; want %d, %d", k, x.Sampled.Token, len(x.Top), ids[k], top)
		}
	}
	return ids, lps
}

// alone is a token's text decoded alone, and whether it is a whole one (not part of a character,
// which vLLM's decoder corrects).
func alone(h *harness, id int32) (string, bool) {
	s := h.te.model.Tokenizer.Decode([]int32{id})
	return s, !strings.HasSuffix(s, "\uFFFD")
}

// entryIDs is a position's distinct ids in vLLM's dict order: the sampled token, then the top.
func entryIDs(x engine.TokenLogprobs) []int32 {
	ids := []int32{x.Sampled.Token}
	for _, e := range x.Top {
		if !slices.Contains(ids, e.Token) {
			ids = append(ids, e.Token)
		}
	}
	return ids
}

func logprobOf(x engine.TokenLogprobs, id int32) float64 {
	if id == x.Sampled.Token {
		return float64(x.Sampled.Logprob)
	}
	for _, e := range x.Top {
		if e.Token == id {
			return float64(e.Logprob)
		}
	}
	return 0
}

// checkCompletionLP checks a completion's logprobs of the output tokens ids (with the engine's
// lps) against vLLM's rules: a token's text and the engine's logprob; top_logprobs keyed by text,
// the sampled token first, then the top ones in order (each the engine's value); text_offset from
// offset by code points.
func checkCompletionLP(t *testing.T, h *harness, raw json.RawMessage, ids []int32, lps []engine.TokenLogprobs, offset int, asIDs bool) {
	t.Helper()
	var got gotCompletionLP
	if err := json.Unmarshal(raw, &got); err != nil || got.Tokens == nil || got.TextOffset == nil || got.TokenLogprobs == nil || got.TopLogprobs == nil {
		t.Fatalf("logprobs %s: %v; want the four lists", raw, err)
	}
	n := len(ids)
	if len(got.Tokens) != n || len(got.TokenLogprobs) != n || len(got.TopLogprobs) != n || len(got.TextOffset) != n {
		t.Fatalf("logprobs %s: want %d entries in each list", raw, n)
	}
	for k, id := range ids {
		text, whole := alone(h, id)
		switch {
		case asIDs:
			text = fmt.Sprintf("token_id:%d", id)
		case !whole:
			text = got.Tokens[k] // corrected: tested in TestLogprobsPartialCharacters
			if strings.HasSuffix(text, "\uFFFD") {
				t.Fatalf("token %d: %q is part of a character", k, text)
			}
		}
		if got.Tokens[k] != text || got.TokenLogprobs[k] != float64(lps[k].Sampled.Logprob) {
			t.Fatalf("token %d: %q %v; want %q %v (the engine's)", k, got.Tokens[k], got.TokenLogprobs[k], text, lps[k].Sampled.Logprob)
		}
		want := offset
		if k > 0 {
			want = got.TextOffset[k-1] + utf8.RuneCountInString(got.Tokens[k-1])
		}
		if got.TextOffset[k] != want {
			t.Fatalf("text_offset %v: entry %d is not %d", got.TextOffset, k, want)
		}
		top := members(t, got.TopLogprobs[k])
		if len(top) == 0 || top[0].key != text || top[0].v != got.TokenLogprobs[k] {
			t.Fatalf("top_logprobs %v: the sampled token %q %v is not first", top, text, got.TokenLogprobs[k])
		}
		var want2 []kv // the entries of whole, distinct texts (or all, by id)
		distinct := true
		for _, e := range entryIDs(lps[k]) {
			s, ok := alone(h, e)
			if asIDs {
				s, ok = fmt.Sprintf("token_id:%d", e), true
			}
			distinct = distinct && ok && !slices.ContainsFunc(want2, func(x kv) bool { return x.key == s })
			want2 = append(want2, kv{s, logprobOf(lps[k], e)})
		}
		if distinct && !slices.Equal(top, want2) {
			t.Fatalf("token %d: top_logprobs %v, want %v", k, top, want2)
		}
		if len(top) > len(want2) {
			t.Fatalf("token %d: top_logprobs %v has more than %d entries", k, top, len(want2))
		}
	}
}

// checkChatLP checks a chat choice's logprobs against vLLM's rules: each token's text, the
// engine's logprob and the text's bytes; top_logprobs the first top entries of [sampled, top...].
func checkChatLP(t *testing.T, h *harness, raw json.RawMessage, ids []int32, lps []engine.TokenLogprobs, top int, asIDs bool) {
	t.Helper()
	var got gotChatLP
	if err := json.Unmarshal(raw, &got); err != nil || got.Content == nil {
		t.Fatalf("logprobs %s: %v; want a content list", raw, err)
	}
	if len(got.Content) != len(ids) {
		t.Fatalf("logprobs %s: want %d entries", raw, len(ids))
	}
	asInts := func(s string) []int {
		out := []int{}
		for _, b := range []byte(s) {
			out = append(out, int(b))
		}
		return out
	}
	for k, id := range ids {
		c := got.Content[k]
		text, whole := alone(h, id)
		if !whole { // corrected: tested in TestLogprobsPartialCharacters; the bytes are still the text's
			if bs := c.Bytes; bs == nil || len(bs) >= 3 && slices.Equal(bs[len(bs)-3:], asInts("\uFFFD")) {
				t.Fatalf("token %d: bytes %v of part of a character", k, bs)
			}
			text = string(intsToBytes(c.Bytes))
		}
		token := text
		if asIDs {
			token = fmt.Sprintf("token_id:%d", id)
		}
		if c.Token != token || !slices.Equal(c.Bytes, asInts(text)) || c.Logprob != float64(lps[k].Sampled.Logprob) {
			t.Fatalf("token %d: %q %v %v; want %q %v, bytes of %q", k, c.Token, c.Logprob, c.Bytes, token, lps[k].Sampled.Logprob, text)
		}
		es := entryIDs(lps[k])
		if c.TopLogprobs == nil || len(c.TopLogprobs) != min(top, len(es)) {
			t.Fatalf("token %d: %d top_logprobs, want %d", k, len(c.TopLogprobs), min(top, len(es)))
		}
		for i, e := range c.TopLogprobs {
			s, ok := alone(h, es[i])
			if asIDs {
				s, ok = fmt.Sprintf("token_id:%d", es[i]), true
			}
			if e.Logprob != logprobOf(lps[k], es[i]) || ok && (e.Token != s || !slices.Equal(e.Bytes, asInts(s))) {
				t.Fatalf("token %d: top_logprobs[%d] %+v; want %q %v", k, i, e, s, logprobOf(lps[k], es[i]))
			}
		}
	}
}

func intsToBytes(xs []int) []byte {
	out := make([]byte, len(xs))
	for i, x := range xs {
		out[i] = byte(x)
	}
	return out
}

// asWritten is v encoded as a whole reply is (json.Encoder's defaults: HTML characters escaped).
func asWritten(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCompletionLogprobsEndToEnd: /v1/completions with logprobs, n = 2, whole and streamed,
// greedy and sampled, logprobs 0 too: each choice's request asks the scheduler for them, and its
// logprobs are those the scheduler reported for its tokens, as vLLM formats them; a stream's
// chunks carry their own tokens' logprobs, text_offset starting at the text sent before.
func TestCompletionLogprobsEndToEnd(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	for _, c := range []struct {
		temperature float64
		top         int
	}{{1, 3}, {0, 2}, {1, 0}} {
		for _, streamed := range []bool{false, true} {
			t.Run(fmt.Sprintf("temperature %v logprobs %d stream %v", c.temperature, c.top, streamed), func(t *testing.T) {
				before := len(h.te.requests(0))
				body := map[string]any{"prompt": "Hello, my name is", "max_tokens": 10, "logprobs": c.top, "n": 2, "seed": 11,
					"temperature": c.temperature, "return_token_ids": true}
				var choices map[int][]lpChoice
				if streamed {
					choices = byIndex(h.streamLP(t, "/v1/completions", body))
				} else {
					r := h.postLP(t, "/v1/completions", body)
					choices = byIndex([]lpReply{*r})
				}
				h.te.waitIdle()
				subs := h.te.requests(before)
				if len(subs) != 2 || len(choices) != 2 {
					t.Fatalf("%d requests, %d choices; want 2", len(subs), len(choices))
				}
				for i, s := range subs {
					ids, lps := engineOutput(t, s, c.top)
					if c.temperature == 0 && c.top > 0 {
						for k, x := range lps {
							if x.Top[0].Token != ids[k] {
								t.Fatalf("greedy token %d: %d, not the most likely %d", k, ids[k], x.Top[0].Token)
							}
						}
					}
					sent, at := 0, 0 // code points of text sent, tokens covered
					for _, ch := range choices[i] {
						n := len(ch.TokenIDs)
						if !slices.Equal(ch.TokenIDs, ids[at:at+n]) {
							t.Fatalf("choice %d: token_ids %v, want %v", i, ch.TokenIDs, ids[at:at+n])
						}
						checkCompletionLP(t, h, ch.Logprobs, ids[at:at+n], lps[at:at+n], sent, false)
						sent += utf8.RuneCountInString(ch.Text)
						at += n
					}
					if at != len(ids) || at != 10 {
						t.Fatalf("choice %d: logprobs of %d tokens, the engine's %d; want 10", i, at, len(ids))
					}
					if !streamed {
						want := asWritten(t, completionLogprobsOf(positions(h.te.m.Tokenizer, lps...), c.top, 0, false))
						if got := string(choices[i][0].Logprobs); got != want {
							t.Fatalf("choice %d: logprobs\n%s\nwant\n%s", i, got, want)
						}
					}
				}
			})
		}
	}
}

// TestChatLogprobsEndToEnd: /v1/chat/completions with logprobs (top_logprobs 3, 0 and absent),
// n = 2, whole and streamed: each choice's logprobs are the scheduler's for its tokens, as vLLM
// formats them; a stream's role chunks have null logprobs and its other chunks their own tokens'.
func TestChatLogprobsEndToEnd(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	for _, top := range []int{3, 0, -1} { // -1: top_logprobs absent
		for _, streamed := range []bool{false, true} {
			t.Run(fmt.Sprintf("top_logprobs %d stream %v", top, streamed), func(t *testing.T) {
				before := len(h.te.requests(0))
				body := map[string]any{"messages": []map[string]string{{"role": "user", "content": "Hi"}}, "max_tokens": 8,
					"logprobs": true, "n": 2, "seed": 5, "return_token_ids": true}
				if top >= 0 {
					body["top_logprobs"] = top
				}
				var choices map[int][]lpChoice
				if streamed {
					choices = byIndex(h.streamLP(t, "/v1/chat/completions", body))
				} else {
					choices = byIndex([]lpReply{*h.postLP(t, "/v1/chat/completions", body)})
				}
				h.te.waitIdle()
				subs := h.te.requests(before)
				if len(subs) != 2 || len(choices) != 2 {
					t.Fatalf("%d requests, %d choices; want 2", len(subs), len(choices))
				}
				for i, s := range subs {
					ids, lps := engineOutput(t, s, max(top, 0))
					at := 0
					for j, ch := range choices[i] {
						if streamed && j == 0 {
							if ch.Delta == nil || ch.Delta.Role == nil || string(ch.Logprobs) != "null" {
								t.Fatalf("choice %d: first chunk %+v with logprobs %s; want the role chunk, null", i, ch, ch.Logprobs)
							}
							continue
						}
						n := len(ch.TokenIDs)
						if !slices.Equal(ch.TokenIDs, ids[at:at+n]) {
							t.Fatalf("choice %d: token_ids %v, want %v", i, ch.TokenIDs, ids[at:at+n])
						}
						checkChatLP(t, h, ch.Logprobs, ids[at:at+n], lps[at:at+n], max(top, 0), false)
						at += n
					}
					if at != len(ids) || at != 8 {
						t.Fatalf("choice %d: logprobs of %d tokens, the engine's %d; want 8", i, at, len(ids))
					}
					if !streamed {
						want := asWritten(t, chatLogprobsOf(positions(h.te.m.Tokenizer, lps...), max(top, 0), false))
						if got := string(choices[i][0].Logprobs); got != want {
							t.Fatalf("choice %d: logprobs\n%s\nwant\n%s", i, got, want)
						}
					}
				}
			})
		}
	}
}

// stopAt picks a stop string in the text of ids: the text of a whole token k (two bytes or
// more) found nowhere before it, so that it first completes at token k. It returns the string, the
// text before it and k+1, the tokens a reply stopped by it counts.
func stopAt(t *testing.T, h *harness, ids []int32) (stop, before string, tokens int) {
	t.Helper()
	tok := h.te.model.Tokenizer
	for k := 2; k < len(ids); k++ {
		s, whole := alone(h, ids[k])
		prefix := tok.Decode(ids[:k])
		if whole && len(s) >= 2 && utf8.ValidString(prefix) && strings.Index(prefix+s, s) == len(prefix) {
			return s, prefix, k + 1
		}
	}
	t.Fatalf("no stop string in %v", ids)
	return "", "", 0
}

// TestLogprobsStopString: a stop string cuts the text, and the logprobs are those of every token
// the reply counts, the one that completed the stop string included (vLLM's output token_ids and
// logprobs are not cut with the text); a stream sends the last of them with the finish reason.
func TestLogprobsStopString(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	for _, chat := range []bool{false, true} {
		path := map[bool]string{false: "/v1/completions", true: "/v1/chat/completions"}[chat]
		base := func() map[string]any {
			b := map[string]any{"max_tokens": 16, "temperature": 0, "return_token_ids": true}
			if chat {
				b["messages"] = []map[string]string{{"role": "user", "content": "Hi"}}
				b["logprobs"], b["top_logprobs"] = true, 1
			} else {
				b["prompt"], b["logprobs"] = "Hello, my name is", 1
			}
			return b
		}
		full := h.postLP(t, path, base())
		stop, text, k := stopAt(t, h, full.Choices[0].TokenIDs)
		for _, streamed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s stream %v", path, streamed), func(t *testing.T) {
				before := len(h.te.requests(0))
				body := base()
				body["stop"] = stop
				var chunks []lpChoice
				if streamed {
					chunks = byIndex(h.streamLP(t, path, body))[0]
					if chat {
						chunks = chunks[1:] // the role chunk
					}
				} else {
					r := h.postLP(t, path, body)
					if r.Usage.CompletionTokens != k {
						t.Fatalf("usage %+v; want %d completion tokens", r.Usage, k)
					}
					chunks = r.Choices
				}
				h.te.waitIdle()
				ids, lps := engineOutput(t, h.te.requests(before)[0], 1)
				var got string
				at := 0
				for _, ch := range chunks {
					got += ch.text()
					n := len(ch.TokenIDs)
					if chat {
						checkChatLP(t, h, ch.Logprobs, ids[at:at+n], lps[at:at+n], 1, false)
					} else {
						checkCompletionLP(t, h, ch.Logprobs, ids[at:at+n], lps[at:at+n], utf8.RuneCountInString(got)-utf8.RuneCountInString(ch.text()), false)
					}
					at += n
				}
				last := chunks[len(chunks)-1]
				if got != text || at != k || len(ids) != k || last.FinishReason == nil || *last.FinishReason != "stop" || len(last.TokenIDs) == 0 {
					t.Fatalf("text %q, logprobs of %d tokens (the engine's %d), last chunk %+v; want %q (stop %q), %d tokens, the last with finish stop",
						got, at, len(ids), last, text, stop, k)
				}
			})
		}
	}
}

// TestLogprobsTokensAsIDs: return_tokens_as_token_ids spells every logprobs token "token_id:N",
// on both endpoints; a chat token's bytes stay its text's.
func TestLogprobsTokensAsIDs(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	before := len(h.te.requests(0))
	r := h.postLP(t, "/v1/completions", map[string]any{"prompt": "Hello", "max_tokens": 6, "logprobs": 2, "seed": 3,
		"return_tokens_as_token_ids": true})
	h.te.waitIdle()
	ids, lps := engineOutput(t, h.te.requests(before)[0], 2)
	checkCompletionLP(t, h, r.Choices[0].Logprobs, ids, lps, 0, true)
	before = len(h.te.requests(0))
	r = h.postLP(t, "/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": "Hi"}},
		"max_tokens": 6, "logprobs": true, "top_logprobs": 2, "seed": 3, "return_tokens_as_token_ids": true})
	h.te.waitIdle()
	ids, lps = engineOutput(t, h.te.requests(before)[0], 2)
	checkChatLP(t, h, r.Choices[0].Logprobs, ids, lps, 2, true)
}

// TestNoLogprobs: without logprobs a choice's logprobs are null and the scheduler is not asked;
// so too for chat's logprobs true with an explicit top_logprobs null (vLLM samples with
// logprobs=None then and answers them only when top_logprobs is not None).
func TestNoLogprobs(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	for _, c := range []struct {
		path     string
		logprobs any
	}{{"/v1/completions", nil}, {"/v1/chat/completions", nil}, {"/v1/chat/completions", true}} {
		path := c.path
		before := len(h.te.requests(0))
		body := map[string]any{"prompt": "Hi", "messages": []map[string]string{{"role": "user", "content": "Hi"}}, "max_tokens": 3,
			"logprobs": c.logprobs, "top_logprobs": 0}
		if c.logprobs != nil {
			body["top_logprobs"] = nil
		}
		r := h.postLP(t, path, body)
		chunks := byIndex(h.streamLP(t, path, body))[0]
		h.te.waitIdle()
		for _, s := range h.te.requests(before) {
			if s.req.Logprobs || s.req.TopLogprobs != 0 {
				t.Fatalf("%s: submitted with Logprobs %v, TopLogprobs %d", path, s.req.Logprobs, s.req.TopLogprobs)
			}
		}
		for _, c := range append(chunks, r.Choices...) {
			if string(c.Logprobs) != "null" {
				t.Fatalf("%s: logprobs %s, want null", path, c.Logprobs)
			}
		}
	}
}

// TestEcho: /v1/completions' echo puts each prompt's text before its choices' text (a stream in
// each choice's first chunk), token id prompts decoded; with return_token_ids the text is left
// out, as vLLM does. Usage is as without echo.
func TestEcho(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	for _, c := range []struct {
		name    string
		prompt  any
		texts   []string // each prompt's text
		tokenID bool
	}{
		{"text", "Hello, my name is", []string{"Hello, my name is"}, false},
		{"token ids", []int{15496, 11}, []string{"Hello,"}, false},
		{"batch", []string{"One", "Two three"}, []string{"One", "Two three"}, false},
		{"return_token_ids", "Hello, my name is", []string{""}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := func(echo bool) map[string]any {
				return map[string]any{"prompt": c.prompt, "max_tokens": 5, "n": 2, "seed": 9, "echo": echo, "return_token_ids": c.tokenID}
			}
			plain, echoed := h.postLP(t, "/v1/completions", body(false)), h.postLP(t, "/v1/completions", body(true))
			if len(echoed.Choices) != 2*len(c.texts) || *echoed.Usage != *plain.Usage {
				t.Fatalf("%d choices, usage %+v; want %d, %+v", len(echoed.Choices), echoed.Usage, 2*len(c.texts), plain.Usage)
			}
			plainStream, echoedStream := byIndex(h.streamLP(t, "/v1/completions", body(false))), byIndex(h.streamLP(t, "/v1/completions", body(true)))
			for i, ch := range echoed.Choices {
				want := c.texts[i/2] + plain.Choices[i].Text
				if ch.Text != want || ch.Index != i {
					t.Fatalf("choice %d: %q, want %q", i, ch.Text, want)
				}
				first := echoedStream[i][0].Text
				var got, plainText string
				for _, x := range echoedStream[i] {
					got += x.Text
				}
				for _, x := range plainStream[i] {
					plainText += x.Text
				}
				if got != c.texts[i/2]+plainText || !strings.HasPrefix(first, c.texts[i/2]) || len(echoedStream[i]) != len(plainStream[i]) {
					t.Fatalf("stream choice %d: %q in %d chunks (first %q); want %q in %d", i, got, len(echoedStream[i]), first,
						c.texts[i/2]+plainText, len(plainStream[i]))
				}
			}
		})
	}
}

// TestEchoMaxTokens0: echo with max_tokens 0 answers the prompt alone, as vLLM does: it still
// samples one token (max_tokens 1), which usage counts, finish "length"; a stream sends each
// choice one chunk. Without echo max_tokens 0 stays a 400.
func TestEchoMaxTokens0(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	body := map[string]any{"prompt": "Hello, my name is", "max_tokens": 0, "n": 2, "echo": true, "return_token_ids": false}
	r := h.postLP(t, "/v1/completions", body)
	if len(r.Choices) != 2 || r.Usage.CompletionTokens != 2 {
		t.Fatalf("%d choices, usage %+v; want 2 choices, 2 completion tokens", len(r.Choices), r.Usage)
	}
	for _, c := range r.Choices {
		if c.Text != "Hello, my name is" || *c.FinishReason != "length" {
			t.Fatalf("choice %+v: want the prompt alone, finish length", c)
		}
	}
	body["stream_options"] = map[string]any{"include_usage": true}
	chunks := h.streamLP(t, "/v1/completions", body)
	for i, cs := range byIndex(chunks) {
		if len(cs) != 1 || cs[0].Text != "Hello, my name is" || cs[0].FinishReason == nil || *cs[0].FinishReason != "length" {
			t.Fatalf("choice %d: chunks %+v; want one, the prompt, finish length", i, cs)
		}
	}
	if u := chunks[len(chunks)-1].Usage; u == nil || u.CompletionTokens != 2 {
		t.Fatalf("usage chunk %+v; want 2 completion tokens", chunks[len(chunks)-1])
	}
	for _, s := range h.te.requests(0) {
		if s.req.MaxNewTokens != 1 {
			t.Fatalf("submitted with MaxNewTokens %d; want 1", s.req.MaxNewTokens)
		}
	}
	resp := h.do(context.Background(), http.MethodPost, "/v1/completions", `{"prompt": "Hi", "max_tokens": 0}`)
	checkError(t, resp, 400, typeInvalid, "max_tokens", "", "max_tokens must be at least 1, got 0")
}

// TestCompletionLogprobsLax: completions' logprobs reads as vLLM's pydantic model does: false and
// true are 0 and 1 (lax mode reads a bool into an int), 2.0 is 2; each asks for logprobs.
func TestCompletionLogprobsLax(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	for _, c := range []struct {
		raw string
		top int
	}{{"false", 0}, {"true", 1}, {"2.0", 2}} {
		before := len(h.te.requests(0))
		var r lpReply
		if code := h.post("/v1/completions", `{"prompt": "Hi", "max_tokens": 3, "logprobs": `+c.raw+`}`, &r); code != 200 {
			t.Fatalf("logprobs %s: status %d: %+v", c.raw, code, r.Error)
		}
		h.te.waitIdle()
		ids, lps := engineOutput(t, h.te.requests(before)[0], c.top)
		checkCompletionLP(t, h, r.Choices[0].Logprobs, ids, lps, 0, false)
	}
}
