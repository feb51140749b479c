package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"rosetop/engine"
	"rosetop/engine/tokenizer"
	"rosetop/sched"
)

// reference generates as `rosetop generate` does (engine.Generate on an engine of its own, no
// scheduler) and returns the prompt ids and the output ids.
func reference(t *testing.T, te *testEngine, prompt string, maxNew int) (ids, out []int32) {
	t.Helper()
	e, err := engine.New(te.model, engine.Options{Device: "cpu", MaxBatch: 1, MaxSeqLen: te.m.MaxSeqLen})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ids = te.model.Tokenizer.Encode(prompt)
	out, err = e.Generate(context.Background(), ids, maxNew, engine.SamplingParams{}, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(out, te.m.EOS) {
		t.Fatalf("the reference output %v holds EOS: pick another prompt", out)
	}
	return ids, out
}

// TestGreedyMatchesGenerate: greedy output through HTTP, whole and streamed, on both endpoints,
// equals `rosetop generate`'s for the same prompt (tokens and text), and the replies have OpenAI's
// shape: ids, objects, the model, one choice, usage, the chat stream's role chunk, the usage chunk.
func TestGreedyMatchesGenerate(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	const maxNew = 20
	chatText := "system: You are terse.\nuser: Hello,\nmy name is\nassistant:"
	cases := []struct {
		name, path, prompt, object, idPrefix string
		body                                 map[string]any
	}{
		{"completions", "/v1/completions", "Hello, my name is", "text_completion", "cmpl-",
			map[string]any{"prompt": "Hello, my name is"}},
		{"chat", "/v1/chat/completions", chatText, "chat.completion", "chatcmpl-",
			map[string]any{"messages": []map[string]any{{"role": "system", "content": "You are terse."},
				{"role": "user", "content": []map[string]string{{"type": "text", "text": "Hello,"}, {"type": "text", "text": "my name is"}}}}}},
	}
	for _, c := range cases {
		ids, want := reference(t, h.te, c.prompt, maxNew)
		wantText := h.te.model.Tokenizer.Decode(want)
		body := func() map[string]any {
			b := map[string]any{"model": "tiny-gpt2", "max_tokens": maxNew, "temperature": 0, "return_token_ids": true}
			for k, v := range c.body {
				b[k] = v
			}
			return b
		}
		t.Run(c.name+"/whole", func(t *testing.T) {
			var r gotReply
			if code := h.post(c.path, body(), &r); code != 200 {
				t.Fatalf("status %d: %+v", code, r.Error)
			}
			u := gotUsage{PromptTokens: len(ids), CompletionTokens: maxNew, TotalTokens: len(ids) + maxNew}
			if r.Object != c.object || !strings.HasPrefix(r.ID, c.idPrefix) || r.Model != "tiny-gpt2" || r.Created == 0 ||
				len(r.Choices) != 1 || r.Usage == nil || *r.Usage != u {
				t.Fatalf("reply %+v: want object %s, id %s..., model tiny-gpt2, one choice, usage %+v", r, c.object, c.idPrefix, u)
			}
			ch := r.Choices[0]
			prompt := ch.PromptTokenIDs
			if chat := c.path == "/v1/chat/completions"; chat {
				prompt = r.PromptTokenIDs // vLLM's ChatCompletionResponse.prompt_token_ids
				if ch.PromptTokenIDs != nil {
					t.Fatalf("chat choice %+v has prompt_token_ids: vLLM puts them on the reply", ch)
				}
			} else if r.PromptTokenIDs != nil {
				t.Fatalf("completion reply has prompt_token_ids %v: vLLM puts them on the choice", r.PromptTokenIDs)
			}
			if ch.FinishReason == nil || *ch.FinishReason != "length" || r.text() != wantText ||
				!slices.Equal(ch.TokenIDs, want) || !slices.Equal(prompt, ids) {
				t.Fatalf("choice %+v text %q prompt %v; want finish length, text %q, tokens %v, prompt %v", ch, r.text(), prompt, wantText, want, ids)
			}
			if c.path == "/v1/chat/completions" && ch.Message.Role != "assistant" {
				t.Fatalf("message role %q", ch.Message.Role)
			}
		})
		t.Run(c.name+"/stream", func(t *testing.T) {
			b := body()
			b["stream_options"] = map[string]any{"include_usage": true}
			s := h.stream(c.path, b)
			if s.text != wantText || !slices.Equal(s.tokens, want) || !slices.Equal(s.prompt, ids) || s.finish != "length" ||
				s.usage == nil || s.usage.CompletionTokens != maxNew || s.usage.PromptTokens != len(ids) {
				t.Fatalf("stream: text %q tokens %v prompt %v finish %q usage %+v; want %q %v %v length",
					s.text, s.tokens, s.prompt, s.finish, s.usage, wantText, want, ids)
			}
			checkChunks(t, s, c.object+".chunk", c.path == "/v1/chat/completions", maxNew)
			// vLLM: a chat stream's prompt ids are on its first chunk (the role chunk), a completion's
			// on its first chunk's choice.
			first := s.chunks[0]
			got := first.Choices[0].PromptTokenIDs
			if c.path == "/v1/chat/completions" {
				got = first.PromptTokenIDs
			}
			if !slices.Equal(got, ids) {
				t.Fatalf("first chunk %v: want the prompt ids %v where vLLM puts them", s.raw[0], ids)
			}
		})
	}
}

// checkChunks checks a stream's chunks: one id, the chunk object, a text chunk per token (after
// a role chunk for chat), the last of them with the finish reason, then the usage chunk with no
// choices; "usage": null in every other chunk (include_usage). vLLM sends the finish reason with
// the last token (vllm/entrypoints/openai/completion/serving.py, chat_completion/serving.py):
// `vllm bench serve` takes every chunk with choices for a token, so an extra one adds an
// inter-token latency.
func checkChunks(t *testing.T, s *streamed, object string, chat bool, tokens int) {
	t.Helper()
	if object == "text_completion.chunk" {
		object = "text_completion"
	}
	want := tokens + 1 // + the usage chunk
	if chat {
		want++
	}
	if len(s.chunks) != want {
		t.Fatalf("%d chunks, want %d", len(s.chunks), want)
	}
	for i, c := range s.chunks {
		if c.ID != s.chunks[0].ID || c.Object != object || c.Model != "tiny-gpt2" {
			t.Fatalf("chunk %d: id %q object %q model %q; want %q %q", i, c.ID, c.Object, c.Model, s.chunks[0].ID, object)
		}
		last := i == len(s.chunks)-1
		if u, ok := s.raw[i]["usage"]; !ok || (u == nil) == last {
			t.Fatalf("chunk %d: usage %v (present %v); want null except in the last chunk", i, u, ok)
		}
		if last != (len(c.Choices) == 0) {
			t.Fatalf("chunk %d: %d choices", i, len(c.Choices))
		}
	}
	final := s.chunks[len(s.chunks)-2].Choices[0]
	if final.FinishReason == nil || len(final.TokenIDs) != 1 {
		t.Fatalf("last chunk with choices %+v: want the last token and the finish reason", s.raw[len(s.raw)-2])
	}
	if !chat {
		return
	}
	first := s.chunks[0].Choices[0].Delta
	if first == nil || first.Role == nil || *first.Role != "assistant" || first.Content == nil || *first.Content != "" {
		t.Fatalf("first chat chunk %+v: want delta {role: assistant, content: \"\"}", s.raw[0])
	}
}

// TestSampling: temperature, top_p, top_k and seed reach the engine: a seed repeats a sample, another
// seed changes it, and top_k 1 or a tiny top_p at temperature 1 is greedy.
func TestSampling(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	run := func(extra map[string]any) []int32 {
		t.Helper()
		body := map[string]any{"prompt": "The weather today", "max_tokens": 12, "return_token_ids": true}
		for k, v := range extra {
			body[k] = v
		}
		var r gotReply
		if code := h.post("/v1/completions", body, &r); code != 200 {
			t.Fatalf("%v: status %d %+v", extra, code, r.Error)
		}
		return r.Choices[0].TokenIDs
	}
	greedy := run(map[string]any{"temperature": 0})
	seven := run(map[string]any{"temperature": 1, "seed": 7})
	cases := []struct {
		name  string
		extra map[string]any
		want  []int32
		same  bool
	}{
		{"same seed", map[string]any{"temperature": 1, "seed": 7}, seven, true},
		{"other seed", map[string]any{"temperature": 1, "seed": 8}, seven, false},
		{"sampled is not greedy", map[string]any{"temperature": 1, "seed": 7}, greedy, false},
		{"top_k 1", map[string]any{"temperature": 1, "top_k": 1, "seed": 3}, greedy, true},
		{"top_p tiny", map[string]any{"temperature": 1, "top_p": 1e-9, "seed": 3}, greedy, true},
		{"top_p below float32's least", map[string]any{"temperature": 1, "top_p": 1e-300, "seed": 3}, greedy, true},
		{"top_k -1 is off", map[string]any{"temperature": 1, "top_k": -1, "seed": 7}, seven, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := run(c.extra); slices.Equal(got, c.want) != c.same {
				t.Fatalf("%v: got %v, compared with %v: want equal %v", c.extra, got, c.want, c.same)
			}
		})
	}
}

// TestStop: stop strings end the request with finish_reason stop, the text cut before the match,
// usage counting the tokens up to the one that completed it (the fifth of five strings: more than
// OpenAI's four, as vLLM takes); the scheduler ends the request at that token and its blocks
// return. An engine that does not run the request's stop check (sched.Request.Stop) gets a
// Stream.Stop once it sends a token past the match, and the client the same reply.
func TestStop(t *testing.T) {
	for _, checked := range []bool{true, false} {
		t.Run(map[bool]string{true: "checked", false: "unchecked"}[checked], func(t *testing.T) {
			testStop(t, checked)
		})
	}
}

func testStop(t *testing.T, checked bool) {
	h := newHarness(t, engineOpts{ignoreStop: !checked}, Options{})
	const maxNew = 24
	_, ref := reference(t, h.te, "Hello, my name is", maxNew)
	tok := h.te.model.Tokenizer
	full := tok.Decode(ref)
	stop, k := stopAcrossChange(tok, ref)
	at := strings.Index(full, stop)
	for _, streamed := range []bool{false, true} {
		name := map[bool]string{false: "whole", true: "stream"}[streamed]
		t.Run(name, func(t *testing.T) {
			before, _ := h.te.counts()
			body := map[string]any{"prompt": "Hello, my name is", "max_tokens": maxNew, "temperature": 0,
				"stop": []string{"\x00never", "\x00a", "\x00b", "\x00c", stop}, "return_token_ids": true}
			var text, finish string
			var tokens []int32
			if streamed {
				s := h.stream("/v1/completions", body)
				text, finish, tokens = s.text, s.finish, s.tokens
			} else {
				var r gotReply
				if code := h.post("/v1/completions", body, &r); code != 200 {
					t.Fatalf("status %d: %+v", code, r.Error)
				}
				text, finish, tokens = r.text(), *r.Choices[0].FinishReason, r.Choices[0].TokenIDs
			}
			if text != full[:at] || finish != "stop" || !slices.Equal(tokens, ref[:k]) {
				t.Fatalf("text %q finish %q tokens %v; want %q (stop %q), stop, %v", text, finish, tokens, full[:at], stop, ref[:k])
			}
			snap, recs := h.te.waitIdle()
			r := recs[len(recs)-1]
			cancels, _ := h.te.counts()
			cancels -= before
			if checked {
				// The scheduler ended the request (finished, not cancelled) at the token that
				// completed the match, with no Stop call from the handler.
				if cancels != 0 || r.Reason != sched.FinishStop || !slices.Equal(r.Output, ref[:k]) || snap.KVUsed != 0 {
					t.Fatalf("after the stop: %d cancels, reason %s after %d tokens, KV blocks used %d; want 0 cancels, stop after %d, 0 blocks",
						cancels, r.Reason, len(r.Output), snap.KVUsed, k)
				}
				return
			}
			// The handler stopped it (finished, not cancelled); the scheduler may have run it to
			// its end first.
			if cancels != 1 || len(r.Output) <= k || (r.Reason != sched.FinishStop && len(r.Output) != maxNew) || snap.KVUsed != 0 {
				t.Fatalf("after the stop: %d cancels, reason %s after %d tokens, KV blocks used %d; want 1 cancel, past %d tokens, 0 blocks",
					cancels, r.Reason, len(r.Output), snap.KVUsed, k)
			}
		})
	}
}

// TestEOSOptions: ignore_eos, min_tokens and skip_special_tokens, on a scripted model that samples
// EOS as outputs 3 and 6 (the tiny model never does) through the real scheduler.
func TestEOSOptions(t *testing.T) {
	const word = 383 // " The"
	var eos int32 = 50256
	h := newHarness(t, engineOpts{script: func(pos int) int32 {
		if pos == 3 || pos == 6 { // prompt of one token: outputs 3 and 6 (positions 1.. are outputs)
			return eos
		}
		return word
	}}, Options{})
	the := " The"
	cases := []struct {
		name   string
		extra  map[string]any
		finish string
		tokens int
		text   string
	}{
		{"stops at EOS", nil, "stop", 3, the + the},
		{"ignore_eos", map[string]any{"ignore_eos": true}, "length", 8, strings.Repeat(the, 6)},
		{"ignore_eos keeps special tokens", map[string]any{"ignore_eos": true, "skip_special_tokens": false}, "length", 8,
			the + the + "<|endoftext|>" + the + the + "<|endoftext|>" + the + the},
		{"min_tokens just below the EOS", map[string]any{"min_tokens": 2}, "stop", 3, the + the},
		{"min_tokens at the EOS", map[string]any{"min_tokens": 3}, "stop", 6, the + the + the + the},
		{"min_tokens past the EOS", map[string]any{"min_tokens": 4}, "stop", 6, the + the + the + the},
		{"min_tokens past the EOS, special tokens kept", map[string]any{"min_tokens": 4, "skip_special_tokens": false}, "stop", 6,
			the + the + "<|endoftext|>" + the + the},
	}
	for _, c := range cases {
		for _, streamed := range []bool{false, true} {
			t.Run(c.name+map[bool]string{false: "/whole", true: "/stream"}[streamed], func(t *testing.T) {
				text, finish, n := h.askTokens(t, word, c.extra, streamed)
				if text != c.text || finish != c.finish || n != c.tokens {
					t.Fatalf("text %q finish %q tokens %d; want %q %q %d", text, finish, n, c.text, c.finish, c.tokens)
				}
			})
		}
	}
}

// TestContinuousUsage: with stream_options.continuous_usage_stats every chunk's usage counts the
// tokens sent up to and including that chunk, as vLLM's chat_completion_stream_generator and
// completion_stream_generator do: the chat role chunk, sent before any token, counts none.
func TestContinuousUsage(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
		body := map[string]any{"prompt": "Hello", "messages": []map[string]string{{"role": "user", "content": "Hello"}},
			"max_tokens": 5, "ignore_eos": true, "return_token_ids": true,
			"stream_options": map[string]bool{"include_usage": true, "continuous_usage_stats": true}}
		s := h.stream(path, body)
		sent := 0
		for i, c := range s.chunks {
			for _, ch := range c.Choices {
				sent += len(ch.TokenIDs)
			}
			if c.Usage == nil || c.Usage.CompletionTokens != sent || c.Usage.TotalTokens != c.Usage.PromptTokens+sent {
				t.Fatalf("%s: chunk %d (%v) has usage %+v after %d tokens sent", path, i, s.raw[i], c.Usage, sent)
			}
		}
		if sent != 5 {
			t.Fatalf("%s: %d tokens sent, want 5", path, sent)
		}
	}
}

// TestStreamOptions: stream_options as vLLM reads them (StreamOptions, should_include_usage):
// include_usage is true when stream_options is given without it, false when null or false;
// continuous_usage_stats puts usage on every chunk only with include_usage.
func TestStreamOptions(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	cases := []struct {
		name       string
		options    any // nil: absent
		usage      bool
		continuous bool
	}{
		{"absent", nil, false, false},
		{"null", "null", false, false},
		{"empty", map[string]any{}, true, false},
		{"include_usage true", map[string]any{"include_usage": true}, true, false},
		{"include_usage null", map[string]any{"include_usage": nil}, false, false},
		{"include_usage false", map[string]any{"include_usage": false}, false, false},
		{"continuous alone", map[string]any{"continuous_usage_stats": true}, true, true},
		{"continuous without include_usage", map[string]any{"include_usage": false, "continuous_usage_stats": true}, false, false},
	}
	for _, c := range cases {
		for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
			t.Run(c.name+path, func(t *testing.T) {
				body := map[string]any{"max_tokens": 3, "ignore_eos": true}
				if path == "/v1/completions" {
					body["prompt"] = "Hello"
				} else {
					body["messages"] = []map[string]string{{"role": "user", "content": "Hello"}}
				}
				switch o := c.options.(type) {
				case nil:
				case string:
					body["stream_options"] = json.RawMessage(o)
				default:
					body["stream_options"] = o
				}
				s := h.stream(path, body)
				last := s.chunks[len(s.chunks)-1]
				usageChunk := len(last.Choices) == 0 && last.Usage != nil && last.Usage.CompletionTokens == 3
				withUsage := 0 // chunks with choices whose usage is an object
				for _, ch := range s.chunks {
					if len(ch.Choices) > 0 && ch.Usage != nil {
						withUsage++
					}
				}
				if usageChunk != c.usage || (withUsage == len(s.chunks)-1) != c.continuous || (!c.continuous && withUsage != 0) {
					t.Fatalf("usage chunk %v, %d of %d chunks with usage; want usage chunk %v, continuous %v: %v",
						usageChunk, withUsage, len(s.chunks), c.usage, c.continuous, s.raw)
				}
				if !c.usage && len(s.chunks) > 0 {
					if _, ok := s.raw[0]["usage"]; ok {
						t.Fatalf("usage in a stream that did not ask for it: %v", s.raw[0])
					}
				}
			})
		}
	}
}

// TestPromptForms: a completion prompt may be a string, token ids, or a list holding one of either;
// all give the same output.
func TestPromptForms(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	ids := h.te.model.Tokenizer.Encode("Once upon a time")
	var want []int32
	for _, p := range []any{"Once upon a time", ids, []string{"Once upon a time"}, [][]int32{ids}} {
		var r gotReply
		if code := h.post("/v1/completions", map[string]any{"prompt": p, "max_tokens": 6, "temperature": 0, "return_token_ids": true}, &r); code != 200 {
			t.Fatalf("prompt %v: status %d %+v", p, code, r.Error)
		}
		if want == nil {
			want = r.Choices[0].TokenIDs
		}
		if !slices.Equal(r.Choices[0].TokenIDs, want) || r.Usage.PromptTokens != len(ids) {
			t.Fatalf("prompt %v: tokens %v usage %+v; want %v and %d prompt tokens", p, r.Choices[0].TokenIDs, r.Usage, want, len(ids))
		}
	}
}

// TestMaxTokens: the defaults (16 for completions; the rest of the context for chat) and chat's
// max_completion_tokens over max_tokens.
func TestMaxTokens(t *testing.T) {
	h := newHarness(t, engineOpts{maxSeqLen: 96}, Options{})
	msgs := []map[string]any{{"role": "user", "content": "Hi"}}
	chatPrompt := len(h.te.model.Tokenizer.Encode("user: Hi\nassistant:"))
	cases := []struct {
		name, path string
		body       map[string]any
		want       int
	}{
		{"completions default", "/v1/completions", map[string]any{"prompt": "Hi"}, 16},
		{"completions max_tokens", "/v1/completions", map[string]any{"prompt": "Hi", "max_tokens": 5}, 5},
		{"chat default fills the context", "/v1/chat/completions", map[string]any{"messages": msgs}, 96 - chatPrompt},
		{"chat max_tokens", "/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 7}, 7},
		{"chat max_completion_tokens wins", "/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 7, "max_completion_tokens": 3}, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.body["ignore_eos"] = true
			var r gotReply
			if code := h.post(c.path, c.body, &r); code != 200 {
				t.Fatalf("status %d: %+v", code, r.Error)
			}
			if r.Usage.CompletionTokens != c.want || *r.Choices[0].FinishReason != "length" {
				t.Fatalf("usage %+v finish %s; want %d tokens, length", r.Usage, *r.Choices[0].FinishReason, c.want)
			}
			if r.Choices[0].TokenIDs != nil {
				t.Fatalf("token_ids without return_token_ids")
			}
		})
	}
}

// stopIDAt returns, for a greedy output ref, a token id whose first occurrence is not its first
// token, and the outputs up to and including it.
func stopIDAt(t *testing.T, ref []int32) (int32, int) {
	t.Helper()
	for i := 1; i < len(ref); i++ {
		if !slices.Contains(ref[:i], ref[i]) {
			return ref[i], i + 1
		}
	}
	t.Fatalf("the reference output %v repeats one token: pick another prompt", ref)
	return 0, 0
}

// TestStopTokenIDs: a stop token id ends the request at the token that is one, as vLLM's
// check_stop does: finish_reason stop, the token among the outputs and counted in usage, its text
// left out (kept with include_stop_str_in_output); the scheduler ends the request there (its
// record says stop, with the reply's tokens, and its blocks return). An engine that does not run
// the request's stop check gets a Stream.Stop, and the client the same reply.
func TestStopTokenIDs(t *testing.T) {
	for _, checked := range []bool{true, false} {
		t.Run(map[bool]string{true: "checked", false: "unchecked"}[checked], func(t *testing.T) {
			h := newHarness(t, engineOpts{ignoreStop: !checked}, Options{})
			const prompt, maxNew = "Hello, my name is", 24
			tok := h.te.model.Tokenizer
			for _, include := range []bool{false, true} {
				for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
					text := prompt
					if path == "/v1/chat/completions" {
						if !checked {
							continue
						}
						text = "user: " + prompt + "\nassistant:"
					}
					_, ref := reference(t, h.te, text, maxNew)
					id, k := stopIDAt(t, ref)
					want := tok.Decode(ref[:k-1])
					if include {
						want = tok.Decode(ref[:k])
					}
					for _, streamed := range []bool{false, true} {
						name := fmt.Sprintf("%s/include=%v/streamed=%v", path, include, streamed)
						t.Run(name, func(t *testing.T) {
							before, _ := h.te.counts()
							body := map[string]any{"prompt": prompt, "messages": []map[string]string{{"role": "user", "content": prompt}},
								"max_tokens": maxNew, "temperature": 0, "stop_token_ids": []int32{id, 50256},
								"include_stop_str_in_output": include, "return_token_ids": true}
							var text, finish string
							var tokens []int32
							var n int
							if streamed {
								body["stream_options"] = map[string]any{"include_usage": true}
								s := h.stream(path, body)
								text, finish, tokens, n = s.text, s.finish, s.tokens, s.usage.CompletionTokens
							} else {
								var r gotReply
								if code := h.post(path, body, &r); code != 200 {
									t.Fatalf("status %d: %+v", code, r.Error)
								}
								text, finish, tokens, n = r.text(), *r.Choices[0].FinishReason, r.Choices[0].TokenIDs, r.Usage.CompletionTokens
							}
							if text != want || finish != "stop" || !slices.Equal(tokens, ref[:k]) || n != k {
								t.Fatalf("text %q finish %q tokens %v (usage %d); want %q, stop, %v (%d)", text, finish, tokens, n, want, ref[:k], k)
							}
							snap, recs := h.te.waitIdle()
							r := recs[len(recs)-1]
							cancels, _ := h.te.counts()
							cancels -= before
							if checked && (cancels != 0 || r.Reason != sched.FinishStop || !slices.Equal(r.Output, ref[:k]) || snap.KVUsed != 0) {
								t.Fatalf("after the stop id: %d cancels, reason %s after %d tokens, KV blocks used %d; want 0 cancels, stop after %d, 0 blocks",
									cancels, r.Reason, len(r.Output), snap.KVUsed, k)
							}
							if !checked && (cancels != 1 || len(r.Output) <= k || snap.KVUsed != 0) {
								t.Fatalf("after the stop id: %d cancels, %d tokens, KV blocks used %d; want 1 cancel, past %d tokens, 0 blocks",
									cancels, len(r.Output), snap.KVUsed, k)
							}
						})
					}
				}
			}
		})
	}
}

// TestStopTokenIDsEOS: stop token ids with min_tokens, ignore_eos, skip_special_tokens and
// include_stop_str_in_output, on a scripted model that samples " and" as outputs 2 and 5 and EOS
// as output 7, through the real scheduler, whole and streamed (a chunk per token): as vLLM's
// check_stop, a stop id or EOS before min_tokens outputs ends nothing (its text stays), EOS is a
// stop id under ignore_eos when listed, and the ending token's text is left out unless
// include_stop_str_in_output, where skip_special_tokens still drops an EOS's.
func TestStopTokenIDsEOS(t *testing.T) {
	const word, and = 383, 290 // " The", " and"
	var eos int32 = 50256
	h := newHarness(t, engineOpts{script: func(pos int) int32 {
		switch pos { // a prompt of one token: position p is output p
		case 2, 5:
			return and
		case 7:
			return eos
		}
		return word
	}}, Options{})
	const the, a = " The", " and"
	cases := []struct {
		name   string
		extra  map[string]any
		tokens int
		reason sched.FinishReason
		text   string
	}{
		{"stop id", map[string]any{"stop_token_ids": []int{and}}, 2, sched.FinishStop, the},
		{"stop id kept", map[string]any{"stop_token_ids": []int{and}, "include_stop_str_in_output": true}, 2, sched.FinishStop, the + a},
		{"stop id on the last token", map[string]any{"stop_token_ids": []int{and}, "max_tokens": 2}, 2, sched.FinishStop, the},
		{"stop id just past min_tokens", map[string]any{"stop_token_ids": []int{and}, "min_tokens": 1}, 2, sched.FinishStop, the},
		{"stop id as output min_tokens", map[string]any{"stop_token_ids": []int{and}, "min_tokens": 2}, 5, sched.FinishStop, the + a + the + the},
		{"stop id before min_tokens", map[string]any{"stop_token_ids": []int{and}, "min_tokens": 3}, 5, sched.FinishStop, the + a + the + the},
		{"EOS first", map[string]any{"stop_token_ids": []int{int(eos)}, "min_tokens": 6}, 7, sched.FinishEOS, the + a + the + the + a + the},
		{"EOS a stop id under ignore_eos", map[string]any{"stop_token_ids": []int{int(eos)}, "ignore_eos": true}, 7, sched.FinishStop,
			the + a + the + the + a + the},
		{"EOS kept, special tokens skipped", map[string]any{"stop_token_ids": []int{int(eos)}, "ignore_eos": true, "include_stop_str_in_output": true},
			7, sched.FinishStop, the + a + the + the + a + the},
		{"EOS kept with its text", map[string]any{"stop_token_ids": []int{int(eos)}, "ignore_eos": true, "include_stop_str_in_output": true,
			"skip_special_tokens": false}, 7, sched.FinishStop, the + a + the + the + a + the + "<|endoftext|>"},
		{"ending EOS kept with its text", map[string]any{"include_stop_str_in_output": true, "skip_special_tokens": false}, 7, sched.FinishEOS,
			the + a + the + the + a + the + "<|endoftext|>"},
		{"ending EOS left out", map[string]any{"skip_special_tokens": false}, 7, sched.FinishEOS, the + a + the + the + a + the},
		{"stop string kept, in a stop id's text", map[string]any{"stop_token_ids": []int{and}, "stop": "e a", "include_stop_str_in_output": true},
			2, sched.FinishStop, the + " a"},
		{"stop id never sampled", map[string]any{"stop_token_ids": []int{0}, "ignore_eos": true}, 8, sched.FinishLength,
			the + a + the + the + a + the + the},
	}
	for _, c := range cases {
		for _, streamed := range []bool{false, true} {
			t.Run(c.name+map[bool]string{false: "/whole", true: "/stream"}[streamed], func(t *testing.T) {
				text, finish, n := h.askTokens(t, word, c.extra, streamed)
				wantFinish := "stop"
				if c.reason == sched.FinishLength {
					wantFinish = "length"
				}
				_, recs := h.te.waitIdle()
				r := recs[len(recs)-1]
				if text != c.text || finish != wantFinish || n != c.tokens || r.Reason != c.reason || len(r.Output) != c.tokens {
					t.Fatalf("text %q finish %q tokens %d, record %s with %d; want %q %q %d, %s", text, finish, n, r.Reason, len(r.Output),
						c.text, wantFinish, c.tokens, c.reason)
				}
			})
		}
	}
}

// TestIncludeStopStr: with include_stop_str_in_output the text runs through the stop string (cut
// after it), and a stream holds nothing back (vLLM's stop_buffer_length is 0): each chunk carries
// its token's whole text, where without it the first chunks hold back the stop string's length -
// 1 bytes. Both endpoints, through the real server on the tiny model.
func TestIncludeStopStr(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	const prompt, maxNew = "Hello, my name is", 24
	tok := h.te.model.Tokenizer
	for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
		text := prompt
		if path == "/v1/chat/completions" {
			text = "user: " + prompt + "\nassistant:"
		}
		_, ref := reference(t, h.te, text, maxNew)
		full := tok.Decode(ref)
		stop, k := stopAcrossChange(tok, ref)
		at := strings.Index(full, stop)
		for _, include := range []bool{false, true} {
			want := full[:at]
			if include {
				want = full[:at+len(stop)]
			}
			body := func() map[string]any {
				return map[string]any{"prompt": prompt, "messages": []map[string]string{{"role": "user", "content": prompt}},
					"max_tokens": maxNew, "temperature": 0, "stop": stop, "include_stop_str_in_output": include}
			}
			t.Run(fmt.Sprintf("%s/include=%v/whole", path, include), func(t *testing.T) {
				var r gotReply
				if code := h.post(path, body(), &r); code != 200 {
					t.Fatalf("status %d: %+v", code, r.Error)
				}
				if r.text() != want || *r.Choices[0].FinishReason != "stop" || r.Usage.CompletionTokens != k {
					t.Fatalf("text %q finish %q usage %+v; want %q, stop, %d tokens", r.text(), *r.Choices[0].FinishReason, r.Usage, want, k)
				}
			})
			t.Run(fmt.Sprintf("%s/include=%v/stream", path, include), func(t *testing.T) {
				s := h.stream(path, body())
				if s.text != want || s.finish != "stop" {
					t.Fatalf("text %q finish %q; want %q, stop", s.text, s.finish, want)
				}
				var pieces []string // each token's chunk's text
				for _, c := range s.chunks {
					if d := c.Choices[0].Delta; d != nil && d.Role != nil {
						continue // the role chunk
					}
					p := c.Choices[0].Text
					if d := c.Choices[0].Delta; d != nil && d.Content != nil {
						p = *d.Content
					}
					pieces = append(pieces, p)
				}
				if len(pieces) != k {
					t.Fatalf("%d token chunks, want %d", len(pieces), k)
				}
				heldBack := pieces[0] != tok.Decode(ref[:1])
				for j := range k - 1 {
					if include && pieces[j] != tok.Decode(ref[j:j+1]) {
						t.Fatalf("chunk %d: %q, want its token's text %q: nothing held back", j, pieces[j], tok.Decode(ref[j:j+1]))
					}
				}
				if heldBack == include {
					t.Fatalf("first chunk %q, token text %q: held back %v, want %v", pieces[0], tok.Decode(ref[:1]), heldBack, !include)
				}
			})
		}
	}
}

// askTokens posts a completion of 8 tokens after the one-token prompt word, with extra fields,
// whole or streamed (where it checks a chunk per token and the usage chunk), and returns the
// text, the finish reason and the completion tokens usage counts.
func (h *harness) askTokens(t *testing.T, word int, extra map[string]any, streamed bool) (text, finish string, n int) {
	t.Helper()
	body := map[string]any{"prompt": []int{word}, "max_tokens": 8}
	for k, v := range extra {
		body[k] = v
	}
	if streamed {
		body["stream_options"] = map[string]any{"include_usage": true}
		s := h.stream("/v1/completions", body)
		if n = s.usage.CompletionTokens; len(s.chunks) != n+1 { // a chunk per token, the last with the finish reason, + usage
			t.Fatalf("%d chunks for %d tokens: want one per token and the usage chunk", len(s.chunks), n)
		}
		return s.text, s.finish, n
	}
	var r gotReply
	if code := h.post("/v1/completions", body, &r); code != 200 {
		t.Fatalf("status %d: %+v", code, r.Error)
	}
	return r.text(), *r.Choices[0].FinishReason, r.Usage.CompletionTokens
}

// stopAcrossChange is a stop string across the first change of token in ref (the end of one
// token and the start of the next, so that it is found only when the later token arrives: vLLM's
// look-back), and k, the tokens of ref until it is complete.
func stopAcrossChange(tok *tokenizer.Tokenizer, ref []int32) (stop string, k int) {
	i := 1
	for ref[i] == ref[0] {
		i++
	}
	prev, next := tok.Decode(ref[i-1:i]), tok.Decode(ref[i:i+1])
	stop = prev[len(prev)-3:] + next[:2]
	k = 1
	for !strings.Contains(tok.Decode(ref[:k]), stop) {
		k++
	}
	return stop, k
}
