package serve

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestErrors: every error case answers OpenAI's error object with the status, type, param and
// code a client expects, and a message naming what was wrong.
func TestErrors(t *testing.T) {
	h := newHarness(t, engineOpts{maxSeqLen: 64}, Options{MaxBodyBytes: 4096})
	long := strings.Repeat("hello ", 70) // 70 tokens: over the 64-token context
	chat := func(extra string) string {
		return `{"messages": [{"role": "user", "content": "Hi"}]` + extra + `}`
	}
	cases := []struct {
		name, method, path, body string
		status                   int
		typ, param, code, msg    string // param, code "": null
	}{
		{"malformed JSON", "POST", "/v1/completions", `{"prompt": "Hi",`, 400, typeInvalid, "", "", "malformed JSON"},
		{"not an object", "POST", "/v1/completions", `[1, 2]`, 400, typeInvalid, "", "", "JSON object"},
		// JSON is UTF-8 (RFC 8259 section 8.1): a Latin-1 "café" is refused, not read as "caf\ufffd".
		{"not UTF-8", "POST", "/v1/completions", "{\"prompt\": \"caf\xe9\"}", 400, typeInvalid, "", "", "not valid UTF-8 (byte 15)"},
		{"not UTF-8 in chat", "POST", "/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"\xff\"}]}", 400, typeInvalid, "", "", "not valid UTF-8"},
		{"null body", "POST", "/v1/completions", `null`, 400, typeInvalid, "", "", "JSON object"},
		{"wrong type", "POST", "/v1/completions", `{"prompt": "Hi", "max_tokens": "ten"}`, 400, typeInvalid, "max_tokens", "", "'max_tokens' must be an integer, got string"},
		{"fraction for an integer", "POST", "/v1/completions", `{"prompt": "Hi", "max_tokens": 2.5}`, 400, typeInvalid, "max_tokens", "", "'max_tokens' must be an integer, got number 2.5"},
		{"integer past int64", "POST", "/v1/completions", `{"prompt": "Hi", "seed": 18446744073709551615}`, 400, typeInvalid, "seed", "", "'seed' must be an integer in [-9223372036854775808, 9223372036854775807]"},
		{"string for a number", "POST", "/v1/completions", `{"prompt": "Hi", "temperature": "hot"}`, 400, typeInvalid, "temperature", "", "'temperature' must be a number, got string"},
		{"number past float64", "POST", "/v1/completions", `{"prompt": "Hi", "temperature": 1e400}`, 400, typeInvalid, "temperature", "", "'temperature' must be a finite number, got number 1e400"},
		{"string for messages", "POST", "/v1/chat/completions", `{"messages": "Hi"}`, 400, typeInvalid, "messages", "", "'messages' must be an array, got string"},
		{"bool for stream_options", "POST", "/v1/completions", `{"prompt": "Hi", "stream": true, "stream_options": true}`, 400, typeInvalid, "stream_options", "", "'stream_options' must be an object, got bool"},
		{"no prompt", "POST", "/v1/completions", `{}`, 400, typeInvalid, "prompt", "", "prompt is required"},
		{"empty prompt", "POST", "/v1/completions", `{"prompt": ""}`, 400, typeInvalid, "prompt", "", "empty"},
		{"batch with an empty prompt", "POST", "/v1/completions", `{"prompt": ["a", ""]}`, 400, typeInvalid, "prompt", "", "prompt 1 of 2: the prompt is empty"},
		{"batch with a bad token id", "POST", "/v1/completions", `{"prompt": [[1], [2, -1]]}`, 400, typeInvalid, "prompt", "", "prompt 1 of 2: prompt token id -1 at index 1"},
		{"batch too large", "POST", "/v1/completions", `{"prompt": [` + strings.Repeat(`"a", `, 128) + `"a"]}`, 400, typeInvalid, "prompt", "", "at most 128 prompts, got 129"},
		{"mixed batch", "POST", "/v1/completions", `{"prompt": ["a", [1]]}`, 400, typeInvalid, "prompt", "", "a list of strings or a list of lists of token ids"},
		{"token id out of vocabulary", "POST", "/v1/completions", `{"prompt": [1, 50257]}`, 400, typeInvalid, "prompt", "", "50257"},
		{"negative token id", "POST", "/v1/completions", `{"prompt": [-1]}`, 400, typeInvalid, "prompt", "", "-1"},
		// encoding/json reads a null element as 0, a token id ("!") the client never sent.
		{"null token id", "POST", "/v1/completions", `{"prompt": [15496, null]}`, 400, typeInvalid, "prompt", "", "prompt token id at index 1 is null"},
		{"null in a token list", "POST", "/v1/completions", `{"prompt": [[null, 15496]]}`, 400, typeInvalid, "prompt", "", "prompt token id at index 0 is null"},
		{"string among token ids", "POST", "/v1/completions", `{"prompt": [15496, "a"]}`, 400, typeInvalid, "prompt", "", "prompt must be a string, a list of token ids, a list of strings or a list of lists of token ids"},
		{"prompt over the context", "POST", "/v1/completions", `{"prompt": "` + long + `", "max_tokens": 1}`, 400, typeInvalid, "prompt", "context_length_exceeded", "maximum context length is 64"},
		{"max_tokens over the context", "POST", "/v1/completions", `{"prompt": "Hi", "max_tokens": 64}`, 400, typeInvalid, "max_tokens", "context_length_exceeded", "'max_tokens' is too large: 64. This model's maximum context length is 64 tokens and your request has 1 input tokens (64 > 64 - 1)."},
		{"max_tokens past int32", "POST", "/v1/completions", `{"prompt": "Hi", "max_tokens": 99999999999999}`, 400, typeInvalid, "max_tokens", "context_length_exceeded", "'max_tokens' is too large: 99999999999999."},
		{"max_completion_tokens over the context", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "Hi"}], "max_completion_tokens": 1000}`, 400, typeInvalid, "max_completion_tokens", "context_length_exceeded", "'max_completion_tokens' is too large: 1000."},
		{"messages over the context", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "` + long + `"}]}`, 400, typeInvalid, "messages", "context_length_exceeded", "However, your request has "},
		{"messages over the context, no negative count", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "` + long + `"}]}`, 400, typeInvalid, "messages", "context_length_exceeded", "input tokens. Please reduce the length of the messages."},
		{"max_tokens 0", "POST", "/v1/completions", `{"prompt": "Hi", "max_tokens": 0}`, 400, typeInvalid, "max_tokens", "", "at least 1"},
		{"max_completion_tokens 0", "POST", "/v1/chat/completions", chat(`, "max_completion_tokens": 0`), 400, typeInvalid, "max_completion_tokens", "", "at least 1"},
		{"temperature too high", "POST", "/v1/completions", `{"prompt": "Hi", "temperature": 2.5}`, 400, typeInvalid, "temperature", "", "temperature"},
		{"top_p 0", "POST", "/v1/completions", `{"prompt": "Hi", "top_p": 0}`, 400, typeInvalid, "top_p", "", "top_p"},
		{"top_k -2", "POST", "/v1/completions", `{"prompt": "Hi", "top_k": -2}`, 400, typeInvalid, "top_k", "", "top_k"},
		{"min_tokens over max_tokens", "POST", "/v1/completions", `{"prompt": "Hi", "max_tokens": 4, "min_tokens": 5}`, 400, typeInvalid, "min_tokens", "", "min_tokens"},
		{"empty stop", "POST", "/v1/completions", `{"prompt": "Hi", "stop": ""}`, 400, typeInvalid, "stop", "", "empty"},
		{"65 stops", "POST", "/v1/completions", `{"prompt": "Hi", "stop": ["s0","s1","s2","s3","s4","s5","s6","s7","s8","s9","s10","s11","s12","s13","s14","s15","s16","s17","s18","s19","s20","s21","s22","s23","s24","s25","s26","s27","s28","s29","s30","s31","s32","s33","s34","s35","s36","s37","s38","s39","s40","s41","s42","s43","s44","s45","s46","s47","s48","s49","s50","s51","s52","s53","s54","s55","s56","s57","s58","s59","s60","s61","s62","s63","s64"]}`, 400, typeInvalid, "stop", "", "at most 64"},
		{"stop of numbers", "POST", "/v1/completions", `{"prompt": "Hi", "stop": [1]}`, 400, typeInvalid, "stop", "", "list of strings"},
		{"stream_options without stream", "POST", "/v1/completions", `{"prompt": "Hi", "stream_options": {"include_usage": true}}`, 400, typeInvalid, "stream_options", "", "stream is true"},
		{"stream_options of nulls without stream", "POST", "/v1/completions", `{"prompt": "Hi", "stream_options": {"include_usage": null}}`, 400, typeInvalid, "stream_options", "", "stream is true"},
		// vLLM's validate_stream_options refuses any non-empty object without stream.
		{"stream_options with an unknown member without stream", "POST", "/v1/completions", `{"prompt": "Hi", "stream_options": {"foo": 1}}`, 400, typeInvalid, "stream_options", "", "stream is true"},
		{"string for include_usage", "POST", "/v1/completions", `{"prompt": "Hi", "stream": true, "stream_options": {"include_usage": "yes"}}`, 400, typeInvalid, "stream_options.include_usage", "", "'stream_options.include_usage' must be a boolean, got string"},
		{"n 0", "POST", "/v1/completions", `{"prompt": "Hi", "n": 0}`, 400, typeInvalid, "n", "", "n must be at least 1, got 0"},
		{"n too large", "POST", "/v1/completions", `{"prompt": ["a", "b"], "n": 65}`, 400, typeInvalid, "n", "", "at most 128 choices (prompts x n), got 2 x 65"},
		{"n huge", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "Hi"}], "n": 1e15}`, 400, typeInvalid, "n", "", "got 1 x 1000000000000000"},
		{"best_of 2", "POST", "/v1/completions", `{"prompt": "Hi", "best_of": 2}`, 400, typeInvalid, "best_of", "unsupported_parameter", "'best_of'"},
		{"best_of 3", "POST", "/v1/completions", `{"prompt": "Hi", "best_of": 3}`, 400, typeInvalid, "best_of", "unsupported_parameter", "'best_of'"},
		{"best_of past n", "POST", "/v1/completions", `{"prompt": "Hi", "n": 2, "best_of": 3}`, 400, typeInvalid, "best_of", "unsupported_parameter", "only null or n (2)"},
		{"best_of below n", "POST", "/v1/completions", `{"prompt": "Hi", "n": 2, "best_of": 1}`, 400, typeInvalid, "best_of", "unsupported_parameter", "only null or n (2)"},
		{"string for best_of", "POST", "/v1/completions", `{"prompt": "Hi", "best_of": "two"}`, 400, typeInvalid, "best_of", "", "'best_of' must be an integer, got string"},
		// vLLM's limits on logprobs: its max_logprobs (20), -1 as the whole vocabulary
		// (_validate_logprobs), other negatives (check_logprobs), top_logprobs only with logprobs.
		{"logprobs over the maximum", "POST", "/v1/completions", `{"prompt": "Hi", "logprobs": 21}`, 400, typeInvalid, "logprobs", "",
			"Requested sample logprobs of 21, which is greater than max allowed: 20"},
		{"logprobs -1", "POST", "/v1/completions", `{"prompt": "Hi", "logprobs": -1}`, 400, typeInvalid, "logprobs", "",
			"Requested sample logprobs of 50257, which is greater than max allowed: 20"},
		{"logprobs -2", "POST", "/v1/completions", `{"prompt": "Hi", "logprobs": -2}`, 400, typeInvalid, "logprobs", "", "`logprobs` must be a positive value or -1."},
		{"logprobs a string", "POST", "/v1/completions", `{"prompt": "Hi", "logprobs": "2"}`, 400, typeInvalid, "logprobs", "", "'logprobs' must be an integer, got string"},
		{"logprobs a fraction", "POST", "/v1/completions", `{"prompt": "Hi", "logprobs": 2.5}`, 400, typeInvalid, "logprobs", "", "'logprobs' must be an integer, got number 2.5"},
		{"chat top_logprobs over the maximum", "POST", "/v1/chat/completions", chat(`, "logprobs": true, "top_logprobs": 21`), 400, typeInvalid, "logprobs", "",
			"Requested sample logprobs of 21, which is greater than max allowed: 20"},
		{"chat top_logprobs -1", "POST", "/v1/chat/completions", chat(`, "logprobs": true, "top_logprobs": -1`), 400, typeInvalid, "logprobs", "",
			"Requested sample logprobs of 50257, which is greater than max allowed: 20"},
		{"chat top_logprobs -3", "POST", "/v1/chat/completions", chat(`, "logprobs": true, "top_logprobs": -3`), 400, typeInvalid, "top_logprobs", "",
			"`top_logprobs` must be a positive value or -1."},
		{"chat top_logprobs without logprobs", "POST", "/v1/chat/completions", chat(`, "top_logprobs": 2`), 400, typeInvalid, "top_logprobs", "",
			"when using `top_logprobs`, `logprobs` must be set to true."},
		{"chat top_logprobs with logprobs false", "POST", "/v1/chat/completions", chat(`, "logprobs": false, "top_logprobs": 1`), 400, typeInvalid, "top_logprobs", "",
			"when using `top_logprobs`, `logprobs` must be set to true."},
		{"chat top_logprobs -1 without logprobs", "POST", "/v1/chat/completions", chat(`, "top_logprobs": -1`), 400, typeInvalid, "top_logprobs", "",
			"when using `top_logprobs`, `logprobs` must be set to true."},
		{"chat logprobs a number", "POST", "/v1/chat/completions", chat(`, "logprobs": 1`), 400, typeInvalid, "logprobs", "", "'logprobs' must be a boolean, got number"},
		// chat's echo is not implemented.
		{"chat echo", "POST", "/v1/chat/completions", chat(`, "echo": true`), 400, typeInvalid, "echo", "unsupported_parameter", "'echo' is true"},
		// vLLM's limits on prompt_logprobs: check_logprobs (with stream, below -1), its max_logprobs
		// (_validate_logprobs, after the output logprobs'); echo's are logprobs'.
		{"prompt_logprobs with stream", "POST", "/v1/completions", `{"prompt": "Hi", "stream": true, "prompt_logprobs": 1}`, 400, typeInvalid, "prompt_logprobs", "",
			"`prompt_logprobs` are not available when `stream=True`."},
		{"prompt_logprobs -1 with stream", "POST", "/v1/completions", `{"prompt": "Hi", "stream": true, "prompt_logprobs": -1}`, 400, typeInvalid, "prompt_logprobs", "",
			"`prompt_logprobs` are not available when `stream=True`."},
		{"chat prompt_logprobs with stream", "POST", "/v1/chat/completions", chat(`, "stream": true, "prompt_logprobs": 2`), 400, typeInvalid, "prompt_logprobs", "",
			"`prompt_logprobs` are not available when `stream=True`."},
		{"prompt_logprobs -2", "POST", "/v1/completions", `{"prompt": "Hi", "prompt_logprobs": -2}`, 400, typeInvalid, "prompt_logprobs", "",
			"`prompt_logprobs` must be a positive value or -1."},
		{"prompt_logprobs -2 with stream", "POST", "/v1/completions", `{"prompt": "Hi", "stream": true, "prompt_logprobs": -2}`, 400, typeInvalid, "prompt_logprobs", "",
			"`prompt_logprobs` must be a positive value or -1."},
		{"prompt_logprobs over the maximum", "POST", "/v1/completions", `{"prompt": "Hi", "prompt_logprobs": 21}`, 400, typeInvalid, "prompt_logprobs", "",
			"Requested prompt logprobs of 21, which is greater than max allowed: 20"},
		{"prompt_logprobs -1", "POST", "/v1/completions", `{"prompt": "Hi", "prompt_logprobs": -1}`, 400, typeInvalid, "prompt_logprobs", "",
			"Requested prompt logprobs of 50257, which is greater than max allowed: 20"},
		{"chat prompt_logprobs over the maximum", "POST", "/v1/chat/completions", chat(`, "prompt_logprobs": 25`), 400, typeInvalid, "prompt_logprobs", "",
			"Requested prompt logprobs of 25, which is greater than max allowed: 20"},
		{"prompt_logprobs after logprobs", "POST", "/v1/completions", `{"prompt": "Hi", "logprobs": 21, "prompt_logprobs": 21}`, 400, typeInvalid, "logprobs", "",
			"Requested sample logprobs of 21"},
		{"echo with logprobs over the maximum", "POST", "/v1/completions", `{"prompt": "Hi", "echo": true, "logprobs": 21}`, 400, typeInvalid, "logprobs", "",
			"Requested sample logprobs of 21"},
		{"prompt_logprobs a string", "POST", "/v1/completions", `{"prompt": "Hi", "prompt_logprobs": "2"}`, 400, typeInvalid, "prompt_logprobs", "",
			"'prompt_logprobs' must be an integer, got string"},
		{"prompt_logprobs a fraction", "POST", "/v1/chat/completions", chat(`, "prompt_logprobs": 1.5`), 400, typeInvalid, "prompt_logprobs", "",
			"'prompt_logprobs' must be an integer, got number 1.5"},
		{"suffix", "POST", "/v1/completions", `{"prompt": "Hi", "suffix": "x"}`, 400, typeInvalid, "suffix", "unsupported_parameter", "'suffix'"},
		{"logit_bias", "POST", "/v1/completions", `{"prompt": "Hi", "logit_bias": {"50256": -100}}`, 400, typeInvalid, "logit_bias", "unsupported_parameter", "'logit_bias'"},
		{"presence_penalty", "POST", "/v1/completions", `{"prompt": "Hi", "presence_penalty": 0.5}`, 400, typeInvalid, "presence_penalty", "unsupported_parameter", "presence_penalty"},
		{"frequency_penalty", "POST", "/v1/completions", `{"prompt": "Hi", "frequency_penalty": -1}`, 400, typeInvalid, "frequency_penalty", "unsupported_parameter", "frequency_penalty"},
		{"repetition_penalty", "POST", "/v1/completions", `{"prompt": "Hi", "repetition_penalty": 1.2}`, 400, typeInvalid, "repetition_penalty", "unsupported_parameter", "repetition_penalty"},
		{"tools", "POST", "/v1/chat/completions", chat(`, "tools": [{"type": "function", "function": {"name": "f"}}]`), 400, typeInvalid, "tools", "unsupported_parameter", "'tools'"},
		{"tool_choice", "POST", "/v1/chat/completions", chat(`, "tool_choice": "auto"`), 400, typeInvalid, "tool_choice", "unsupported_parameter", "'tool_choice'"},
		// vLLM refuses it too without tools (ChatCompletionRequest.check_tool_usage: a 400 naming tool_choice).
		{"tool_choice required", "POST", "/v1/chat/completions", chat(`, "tool_choice": "required"`), 400, typeInvalid, "tool_choice", "unsupported_parameter", "'tool_choice'"},
		{"stop token id out of vocabulary", "POST", "/v1/completions", `{"prompt": "Hi", "stop_token_ids": [50256, 50257, -1]}`, 400, typeInvalid,
			"stop_token_ids", "", "token_id(s) [50257, -1] in stop_token_ids contain out-of-vocab token ids. Vocabulary size: 50257"},
		{"stop token id a string", "POST", "/v1/chat/completions", chat(`, "stop_token_ids": ["13"]`), 400, typeInvalid, "stop_token_ids", "", "must be a list of integers"},
		{"include_stop_str_in_output a string", "POST", "/v1/completions", `{"prompt": "Hi", "include_stop_str_in_output": "yes"}`, 400, typeInvalid,
			"include_stop_str_in_output", "", "'include_stop_str_in_output' must be a boolean, got string"},
		{"response_format", "POST", "/v1/chat/completions", chat(`, "response_format": {"type": "json_object"}`), 400, typeInvalid, "response_format", "unsupported_parameter", "response_format"},
		{"no messages", "POST", "/v1/chat/completions", `{"messages": []}`, 400, typeInvalid, "messages", "", "at least one"},
		{"unknown role", "POST", "/v1/chat/completions", `{"messages": [{"role": "tool", "content": "x"}]}`, 400, typeInvalid, "messages", "", "\"tool\""},
		{"image part", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}`, 400, typeInvalid, "messages", "", "image_url"},
		{"unknown model", "POST", "/v1/completions", `{"model": "gpt-4", "prompt": "Hi"}`, 404, typeInvalid, "model", "model_not_found", "gpt-4"},
		{"unknown chat model", "POST", "/v1/chat/completions", `{"model": "gpt-4", "messages": [{"role": "user", "content": "Hi"}]}`, 404, typeInvalid, "model", "model_not_found", "tiny-gpt2"},
		{"unknown path", "GET", "/v1/embeddings", ``, 404, typeInvalid, "", "not_found", "/v1/embeddings"},
		{"GET completions", "GET", "/v1/completions", ``, 405, typeInvalid, "", "method_not_allowed", "POST"},
		{"POST models", "POST", "/v1/models", `{}`, 405, typeInvalid, "", "method_not_allowed", "GET"},
		{"body over the limit", "POST", "/v1/completions", `{"prompt": "` + strings.Repeat("a", 5000) + `"}`, 413, typeInvalid, "", "request_too_large", "4096 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body any
			if c.body != "" {
				body = c.body
			}
			resp := h.do(context.Background(), c.method, c.path, body)
			checkError(t, resp, c.status, c.typ, c.param, c.code, c.msg)
		})
	}
}

// TestContentType: a generation request must say its body is JSON (parameters and case aside),
// as vLLM requires; anything else is a 400 before the body is parsed.
func TestContentType(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	for _, c := range []struct {
		ctype, path, msg string
		status           int
	}{
		{"application/x-www-form-urlencoded", "/v1/completions", `Only 'application/json' is allowed, not Content-Type "application/x-www-form-urlencoded"`, 400},
		{"text/plain", "/v1/chat/completions", `not Content-Type "text/plain"`, 400},
		{"", "/v1/completions", "the request has no Content-Type", 400},
		{"application/json-seq", "/v1/completions", `not Content-Type "application/json-seq"`, 400},
		{"Application/JSON; charset=utf-8", "/v1/completions", "", 200},
	} {
		body := `{"prompt": "Hi", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}`
		req, err := http.NewRequest(http.MethodPost, h.url+c.path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if c.ctype != "" {
			req.Header.Set("Content-Type", c.ctype)
		}
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if c.status == http.StatusOK {
			var r gotReply
			err := json.NewDecoder(resp.Body).Decode(&r)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || err != nil || r.Usage.CompletionTokens != 2 {
				t.Fatalf("Content-Type %q: %d %+v %v; want a reply of 2 tokens", c.ctype, resp.StatusCode, r, err)
			}
			continue
		}
		checkError(t, resp, c.status, typeInvalid, "", "", c.msg)
	}
}

// checkError reads resp and fails t unless it is OpenAI's error object with the status, type,
// param and code given ("": null) and a one-line message containing msg.
func checkError(t *testing.T, resp *http.Response, status int, typ, param, code, msg string) {
	t.Helper()
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Error map[string]*string `json:"error"`
	}
	if err := json.Unmarshal(raw, &e); err != nil || e.Error == nil {
		t.Fatalf("body %q: not an error object (%v)", raw, err)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := e.Error[k]; !ok {
			t.Fatalf("error %s lacks %q", raw, k)
		}
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	got := str(e.Error["message"])
	if resp.StatusCode != status || str(e.Error["type"]) != typ || str(e.Error["param"]) != param ||
		str(e.Error["code"]) != code || !strings.Contains(got, msg) || strings.Contains(got, "\n") {
		t.Fatalf("%d %s; want %d, type %s, param %q, code %q, a one-line message with %q", resp.StatusCode, raw, status, typ, param, code, msg)
	}
	if resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("Content-Type %q", resp.Header.Get("Content-Type"))
	}
	if status == http.StatusMethodNotAllowed && resp.Header.Get("Allow") == "" {
		t.Fatalf("405 without Allow")
	}
}

// TestNeutralValues: fields rosetop does not implement are accepted at their neutral values.
func TestNeutralValues(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	body := `{"prompt": "Hi", "max_tokens": 2, "n": 1, "best_of": 1, "echo": false, "suffix": null, "logprobs": null,
		"logit_bias": {}, "presence_penalty": 0, "frequency_penalty": 0.0, "repetition_penalty": 1, "stop_token_ids": [],
		"include_stop_str_in_output": false,
		"response_format": {"type": "text"}, "user": "someone", "metadata": {"a": "b"}, "unknown_field": 3}`
	var r gotReply
	if code := h.post("/v1/completions", body, &r); code != 200 || r.Usage.CompletionTokens != 2 {
		t.Fatalf("status %d, reply %+v", code, r)
	}
	// best_of equal to n returns the n choices drawn, as without it.
	if code := h.post("/v1/completions", `{"prompt": "Hi", "max_tokens": 2, "n": 2, "best_of": 2.0}`, &r); code != 200 || len(r.Choices) != 2 {
		t.Fatalf("best_of = n: status %d, reply %+v", code, r)
	}
	chat := `{"messages": [{"role": "user", "content": "Hi", "tool_calls": []}], "max_tokens": 2, "logprobs": false,
		"top_logprobs": 0, "echo": false, "tools": [], "tool_choice": "none", "modalities": ["text"], "stream": false, "stream_options": {}}`
	if code := h.post("/v1/chat/completions", chat, &r); code != 200 || r.Usage.CompletionTokens != 2 {
		t.Fatalf("chat: status %d, reply %+v", code, r)
	}
	// An empty model names none, as vLLM reads it (OpenAIServing._is_model_supported): the
	// served one answers, under its own name.
	if code := h.post("/v1/completions", `{"model": "", "prompt": "Hi", "max_tokens": 2}`, &r); code != 200 || r.Model != "tiny-gpt2" {
		t.Fatalf("model \"\": status %d, reply %+v", code, r)
	}
}
