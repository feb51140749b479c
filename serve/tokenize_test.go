package serve

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"rosetop/engine/tokenizer"
)

// tokenizeReply is /tokenize's reply as a client reads it.
type tokenizeReply struct {
	Count       int       `json:"count"`
	MaxModelLen int       `json:"max_model_len"`
	Tokens      []int32   `json:"tokens"`
	TokenStrs   *[]string `json:"token_strs"`
}

// TestTokenize: /tokenize answers as vLLM's: a prompt's ids, their count and max_model_len
// (token_strs null unless asked, then spelled as the vocabulary spells them), messages as a
// chat completion renders them, an empty prompt as no ids; and /detokenize gives the ids' text
// back, special tokens included, a character split off its last byte as U+FFFD. This is what
// vllm bench serve does with a server's tokenizer before a random-dataset run.
func TestTokenize(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	tok := h.srv.model.Tokenizer
	var got tokenizeReply
	if code := h.post("/tokenize", map[string]any{"model": h.srv.model.ID, "prompt": "Hello world"}, &got); code != http.StatusOK ||
		!slices.Equal(got.Tokens, tok.Encode("Hello world")) || got.Count != len(got.Tokens) || got.MaxModelLen != 256 || got.TokenStrs != nil {
		t.Errorf("prompt: %d %+v", code, got)
	}
	got = tokenizeReply{}
	if code := h.post("/tokenize", map[string]any{"prompt": "Hello world", "return_token_strs": true}, &got); code != http.StatusOK ||
		got.TokenStrs == nil || !slices.Equal(*got.TokenStrs, []string{"Hello", "Ġworld"}) {
		t.Errorf("token strings: %d %+v", code, got)
	}
	got = tokenizeReply{}
	msgs := []map[string]any{{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Hi"}}
	if code := h.post("/tokenize", map[string]any{"messages": msgs}, &got); code != http.StatusOK ||
		!slices.Equal(got.Tokens, tok.Encode("system: Be terse.\nuser: Hi\nassistant:")) {
		t.Errorf("messages: %d %+v", code, got)
	}
	got = tokenizeReply{Count: -1}
	if code := h.post("/tokenize", map[string]any{"prompt": ""}, &got); code != http.StatusOK || got.Count != 0 || got.Tokens == nil {
		t.Errorf("empty prompt: %d %+v; want count 0 and tokens []", code, got)
	}

	text := "héllo 👋<|endoftext|>"
	ids := tok.Encode(text)
	var back struct{ Prompt string }
	if code := h.post("/detokenize", map[string]any{"model": h.srv.model.ID, "tokens": ids}, &back); code != http.StatusOK || back.Prompt != text {
		t.Errorf("detokenize: %d %q, want %q", code, back.Prompt, text)
	}
	wave := tok.Encode("👋")
	if len(wave) < 2 {
		t.Fatalf("👋 is %d tokens; the test wants a character over several", len(wave))
	}
	if code := h.post("/detokenize", map[string]any{"tokens": wave[:len(wave)-1]}, &back); code != http.StatusOK || back.Prompt != "\uFFFD" {
		t.Errorf("a split character: %d %q, want U+FFFD", code, back.Prompt)
	}
	if got := tokenizer.Spell(tok.TokenBytes(h.srv.model.EOS)); got != "<|endoftext|>" {
		t.Errorf("the EOS spelled %q", got)
	}
}

// TestTokenizeErrors: a bad tokenize or detokenize request is an OpenAI error object naming what
// is wrong: another model (404), neither prompt nor messages, ids null, negative or past the
// vocabulary, no ids, a body that is not JSON, a GET (405).
func TestTokenizeErrors(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	for _, tc := range []struct {
		path   string
		body   any
		status int
		want   string
	}{
		{"/tokenize", map[string]any{"model": "other", "prompt": "Hi"}, 404, "The model `other` does not exist"},
		{"/tokenize", map[string]any{"model": h.srv.model.ID}, 400, "a tokenize request needs a prompt"},
		{"/tokenize", map[string]any{"messages": []map[string]any{{"role": "tool", "content": "x"}}}, 400, `messages[0].role "tool" is not supported`},
		{"/tokenize", map[string]any{"prompt": "Hi", "add_generation_prompt": false}, 400, "Unsupported parameter: 'add_generation_prompt'"},
		{"/detokenize", map[string]any{"tokens": []any{15496, nil}}, 400, "tokens[1] is null"},
		{"/detokenize", map[string]any{"tokens": []int{-1}}, 400, "tokens[0] = -1 is out of the vocabulary"},
		{"/detokenize", map[string]any{"tokens": []int{1 << 40}}, 400, "tokens[0] = 1099511627776 is out of the vocabulary"},
		{"/detokenize", map[string]any{"model": h.srv.model.ID}, 400, "a detokenize request needs tokens"},
		{"/detokenize", "[1, 2]", 400, "the request body must be a JSON object"},
	} {
		var reply struct{ Error struct{ Message string } }
		if code := h.post(tc.path, tc.body, &reply); code != tc.status || !strings.Contains(reply.Error.Message, tc.want) {
			t.Errorf("%s %v: %d %q; want %d with %q", tc.path, tc.body, code, reply.Error.Message, tc.status, tc.want)
		}
	}
	status, _, body := corsDo(t, h, http.MethodPost, "/tokenize", `{"prompt":"Hi"}`, map[string]string{"Content-Type": "text/plain"})
	if status != http.StatusBadRequest || !strings.Contains(body, "Only 'application/json' is allowed") {
		t.Errorf("a text/plain body: %d %s", status, body)
	}
	if status, hdr, _ := corsDo(t, h, http.MethodGet, "/detokenize", "", nil); status != http.StatusMethodNotAllowed || hdr.Get("Allow") != "POST" {
		t.Errorf("GET /detokenize: %d %v", status, hdr)
	}
}

// TestProbes: vLLM's GET /version ({"version": ...}) and SageMaker's /ping, GET or POST, answered
// as /health is; another method is a 405 naming the allowed ones.
func TestProbes(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{Version: "v1.2.3"})
	if status, _, body := corsDo(t, h, http.MethodGet, "/version", "", nil); status != http.StatusOK || !strings.Contains(body, `"version":"v1.2.3"`) {
		t.Errorf("GET /version: %d %s", status, body)
	}
	if code := h.post("/ping", map[string]any{}, nil); code != http.StatusOK {
		t.Errorf("POST /ping: %d", code)
	}
	if status, _, body := corsDo(t, h, http.MethodGet, "/ping", "", nil); status != http.StatusOK || body != "" {
		t.Errorf("GET /ping: %d %q", status, body)
	}
	if status, hdr, _ := corsDo(t, h, http.MethodPut, "/ping", "", nil); status != http.StatusMethodNotAllowed || hdr.Get("Allow") != "GET, HEAD, POST" {
		t.Errorf("PUT /ping: %d %v", status, hdr)
	}
}
