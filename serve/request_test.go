package serve

import (
	"slices"
	"strings"
	"testing"

	"rosetop/engine/tokenizer"
)

// FuzzParseRequest: any body is either a valid job within the model's limits or a 4xx error
// object with a one-line message; never a panic.
func FuzzParseRequest(f *testing.F) {
	tok, err := tokenizer.GPT2()
	if err != nil {
		f.Fatal(err)
	}
	m := &Model{ID: "gpt2", MaxSeqLen: 64, VocabSize: tok.VocabSize(), Tokenizer: tok, EOS: tok.EOS()}
	for _, s := range []string{
		`{"prompt": "Hello", "max_tokens": 8, "stop": ["a", "b"], "min_tokens": 2, "seed": -3}`,
		`{"prompt": [1, 2, 3], "stream": true, "stream_options": {"include_usage": true}}`,
		`{"prompt": [[5]], "temperature": 0.5, "top_p": 0.9, "top_k": 40, "ignore_eos": true}`,
		`{"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}], "max_completion_tokens": 3}`,
		`{"messages": [{"role": "system", "content": null}, {"role": "user", "content": "x"}], "n": 1}`,
		`{"prompt": "x", "n": 2}`, `[]`, `null`, `{"prompt": ["a", "b"]}`, `{"prompt": "x", "max_tokens": 1e30}`,
		`{"prompt": "x", "max_tokens": 4.0, "seed": -1e3, "top_k": 2.5}`,
		`{"prompt": "x", "stop_token_ids": [50256, 5.0, 5, 1e30, -1], "include_stop_str_in_output": true}`,
		`{"messages": [{"role": "user", "content": "x"}], "stop_token_ids": [3, 1], "include_stop_str_in_output": null}`,
	} {
		f.Add([]byte(s), strings.Contains(s, "messages"))
	}
	f.Fuzz(func(t *testing.T, body []byte, chat bool) {
		if len(body) > 4096 {
			t.Skip()
		}
		parse := parseCompletion
		if chat {
			parse = parseChat
		}
		j, e := parse(body, m)
		if (j == nil) == (e == nil) {
			t.Fatalf("job %v, error %v: want exactly one", j, e)
		}
		if e != nil {
			if e.status != 400 && e.status != 404 || e.Message == "" || strings.Contains(e.Message, "\n") {
				t.Fatalf("error %d %q: want a 4xx with a one-line message", e.status, e.Message)
			}
			return
		}
		r := j.req
		switch {
		case len(r.Tokens) == 0 || r.MaxNewTokens < 1 || len(r.Tokens)+r.MaxNewTokens > m.MaxSeqLen:
			t.Fatalf("prompt of %d tokens + %d new: outside the context of %d", len(r.Tokens), r.MaxNewTokens, m.MaxSeqLen)
		case r.MinNewTokens < 0 || r.MinNewTokens > r.MaxNewTokens:
			t.Fatalf("min new tokens %d outside [0, %d]", r.MinNewTokens, r.MaxNewTokens)
		case r.Sampling.Temperature < 0 || r.Sampling.Temperature > maxTemperature || r.Sampling.TopP < 0 || r.Sampling.TopP > 1 ||
			r.Sampling.TopK < 0 || r.Sampling.TopK >= m.VocabSize:
			t.Fatalf("sampling %+v out of range", r.Sampling)
		case len(j.stops) > maxStops:
			t.Fatalf("%d stop strings", len(j.stops))
		case j.usage && !j.stream:
			t.Fatal("include_usage without stream")
		}
		for _, id := range r.Tokens {
			if id < 0 || int(id) >= m.VocabSize {
				t.Fatalf("prompt id %d outside the vocabulary", id)
			}
		}
		for _, s := range j.stops {
			if s == "" {
				t.Fatal("an empty stop string")
			}
		}
		for i, id := range j.stopIDs {
			if id < 0 || int(id) >= m.VocabSize || i > 0 && id <= j.stopIDs[i-1] {
				t.Fatalf("stop ids %v: want sorted, unique, in [0, %d)", j.stopIDs, m.VocabSize)
			}
		}
	})
}

// TestStopTokenIDsParse: stop_token_ids as vLLM takes them (list[int] | None, whole numbers in
// pydantic's lax mode), repeats dropped (SamplingParams.__post_init__), every id inside the
// vocabulary (SamplingParams._validate_stop_token_ids, whose message lists the ids outside it);
// include_stop_str_in_output a boolean.
func TestStopTokenIDsParse(t *testing.T) {
	tok, err := tokenizer.GPT2()
	if err != nil {
		t.Fatal(err)
	}
	m := &Model{ID: "gpt2", MaxSeqLen: 64, VocabSize: tok.VocabSize(), Tokenizer: tok, EOS: tok.EOS()}
	for _, c := range []struct {
		name, fields     string
		ids              []int32
		include          bool
		errParam, errMsg string
	}{
		{name: "absent"},
		{name: "null", fields: `"stop_token_ids": null, "include_stop_str_in_output": null`},
		{name: "empty", fields: `"stop_token_ids": []`},
		{name: "sorted, repeats dropped", fields: `"stop_token_ids": [50256, 13, 13, 0]`, ids: []int32{0, 13, 50256}},
		{name: "whole numbers", fields: `"stop_token_ids": [5.0, 2e0, 5]`, ids: []int32{2, 5}},
		{name: "include", fields: `"include_stop_str_in_output": true`, include: true},
		{name: "out of the vocabulary", fields: `"stop_token_ids": [1, 50257, -1, 50257, 1e30, -2.0]`, errParam: "stop_token_ids",
			errMsg: "token_id(s) [50257, -1, 1e30, -2] in stop_token_ids contain out-of-vocab token ids. Vocabulary size: 50257"},
		{name: "a string", fields: `"stop_token_ids": [1, "2"]`, errParam: "stop_token_ids", errMsg: `must be a list of integers, got "2" at index 1`},
		{name: "a null", fields: `"stop_token_ids": [null]`, errParam: "stop_token_ids", errMsg: "must be a list of integers, got null at index 0"},
		{name: "a fraction", fields: `"stop_token_ids": [2.5]`, errParam: "stop_token_ids", errMsg: "must be a list of integers, got 2.5 at index 0"},
		{name: "not a list", fields: `"stop_token_ids": 5`, errParam: "stop_token_ids", errMsg: "stop_token_ids must be a list of integers"},
		{name: "include not a boolean", fields: `"include_stop_str_in_output": "yes"`, errParam: "include_stop_str_in_output",
			errMsg: "'include_stop_str_in_output' must be a boolean, got string"},
	} {
		for _, chat := range []bool{false, true} {
			t.Run(c.name+map[bool]string{false: "/completions", true: "/chat"}[chat], func(t *testing.T) {
				body, parse := `{"prompt": "Hi"`, parseCompletion
				if chat {
					body, parse = `{"messages": [{"role": "user", "content": "Hi"}]`, parseChat
				}
				if c.fields != "" {
					body += ", " + c.fields
				}
				j, e := parse([]byte(body+"}"), m)
				if c.errParam != "" {
					if e == nil || e.Param == nil || *e.Param != c.errParam || !strings.Contains(e.Message, c.errMsg) {
						t.Fatalf("error %+v; want one about %s saying %q", e, c.errParam, c.errMsg)
					}
					return
				}
				if e != nil {
					t.Fatalf("refused: %s", e.Message)
				}
				if !slices.Equal(j.stopIDs, c.ids) || j.includeStop != c.include {
					t.Fatalf("stop ids %v include %v; want %v %v", j.stopIDs, j.includeStop, c.ids, c.include)
				}
				if (j.request(m).Stop != nil) != (len(c.ids) > 0) {
					t.Fatalf("the scheduler request's Stop is %v: want one only with stop ids (no stop strings here)", j.request(m).Stop)
				}
			})
		}
	}
}

// TestChatTemplate: messages render as role-prefixed lines ending with the assistant's turn; a
// content list's text parts are joined with newlines, as vLLM's "string" content format joins
// them (vllm/entrypoints/chat_utils.py, _parse_chat_message_content_parts).
func TestChatTemplate(t *testing.T) {
	got, e := chatPrompt([]chatMessage{
		{Role: "system", Content: []byte(`"You are terse."`)},
		{Role: "user", Content: []byte(`[{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}]`)},
		{Role: "assistant", Content: []byte(`null`)},
		{Role: "user", Content: []byte(`"Again"`)},
	})
	want := "system: You are terse.\nuser: Hel\nlo\nassistant: \nuser: Again\nassistant:"
	if e != nil || got != want {
		t.Fatalf("got %q (%v), want %q", got, e, want)
	}
}

// TestChatRefusalPart: an assistant message's content may hold refusal parts beside text parts
// (OpenAI's ChatCompletionAssistantMessageParam: ChatCompletionContentPartRefusalParam,
// {"type": "refusal", "refusal": ...}); vLLM reads a refusal part's text as a text part's
// (chat_utils.py, MM_PARSER_MAP["refusal"]). A client replaying such a conversation is served.
func TestChatRefusalPart(t *testing.T) {
	got, e := chatPrompt([]chatMessage{
		{Role: "user", Content: []byte(`"Say it"`)},
		{Role: "assistant", Content: []byte(`[{"type": "text", "text": "Well"}, {"type": "refusal", "refusal": "No."}]`)},
	})
	want := "user: Say it\nassistant: Well\nNo.\nassistant:"
	if e != nil || got != want {
		t.Fatalf("got %q (%v), want %q", got, e, want)
	}
}

// TestWholeNumbers: an integer parameter written as a whole number with a fraction or an exponent
// (5.0, 2e0: Python's json.dumps of a float) is that integer, as vLLM's pydantic models take it
// (lax mode: a float with no fractional part); a fraction is still refused.
func TestWholeNumbers(t *testing.T) {
	tok, err := tokenizer.GPT2()
	if err != nil {
		t.Fatal(err)
	}
	m := &Model{ID: "gpt2", MaxSeqLen: 64, VocabSize: tok.VocabSize(), Tokenizer: tok, EOS: tok.EOS()}
	for _, c := range []struct {
		name, body        string
		chat              bool
		maxNew, minNew    int
		topK              int
		seed              uint64
		errParam, errText string // a 400 about errParam, with errText in its message
	}{
		{name: "completions", body: `{"prompt": "Hi", "max_tokens": 5.0, "min_tokens": 2e0, "top_k": 1.0, "seed": -3.0}`,
			maxNew: 5, minNew: 2, topK: 1, seed: 1<<64 - 3},
		{name: "chat", body: `{"messages": [{"role": "user", "content": "Hi"}], "max_completion_tokens": 4.0, "seed": 7E0}`,
			chat: true, maxNew: 4, seed: 7},
		{name: "exponent past the context", body: `{"prompt": "Hi", "max_tokens": 1e18}`,
			errParam: "max_tokens", errText: "'max_tokens' is too large: 1000000000000000000."},
		{name: "fraction", body: `{"prompt": "Hi", "max_tokens": 2.5}`, errParam: "max_tokens", errText: "must be an integer, got number 2.5"},
		{name: "past int64", body: `{"prompt": "Hi", "seed": 1e19}`, errParam: "seed", errText: "must be an integer in [-9223372036854775808, 9223372036854775807]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			parse := parseCompletion
			if c.chat {
				parse = parseChat
			}
			j, e := parse([]byte(c.body), m)
			if c.errParam != "" {
				if e == nil || e.Param == nil || *e.Param != c.errParam || !strings.Contains(e.Message, c.errText) {
					t.Fatalf("error %+v; want one about %s saying %q", e, c.errParam, c.errText)
				}
				return
			}
			if e != nil {
				t.Fatalf("refused: %s", e.Message)
			}
			if r := j.req; r.MaxNewTokens != c.maxNew || r.MinNewTokens != c.minNew || r.Sampling.TopK != c.topK || r.Sampling.Seed != c.seed {
				t.Fatalf("max %d min %d top_k %d seed %d; want %d %d %d %d", r.MaxNewTokens, r.MinNewTokens, r.Sampling.TopK, r.Sampling.Seed,
					c.maxNew, c.minNew, c.topK, c.seed)
			}
		})
	}
}

// TestTopK: top_k reaches the engine as 0 (off) or a count below the vocabulary: -1, 0 and any
// count that keeps the whole vocabulary are off, so that no backend reads a wrapped value (the
// CUDA sampler takes top-k as an int32, where 4294967297 would read as 1: greedy).
func TestTopK(t *testing.T) {
	tok, err := tokenizer.GPT2()
	if err != nil {
		t.Fatal(err)
	}
	m := &Model{ID: "gpt2", MaxSeqLen: 64, VocabSize: tok.VocabSize(), Tokenizer: tok, EOS: tok.EOS()}
	for _, c := range []struct {
		topK string
		want int
	}{{"-1", 0}, {"0", 0}, {"1", 1}, {"40", 40}, {"50256", 50256}, {"50257", 0}, {"4294967297", 0}, {"9223372036854775807", 0}} {
		j, e := parseCompletion([]byte(`{"prompt": "Hi", "top_k": `+c.topK+`}`), m)
		if e != nil || j.req.Sampling.TopK != c.want {
			t.Fatalf("top_k %s: %v (%v); want %d", c.topK, j, e, c.want)
		}
	}
}
