package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestTiming checks the client's clock points against vLLM bench serve's definitions: the
// clock starts before the POST, TTFT is the first chunk with choices (the empty role chunk),
// E2EL the last one, keep-alives and the usage-only chunk move neither, and ITL is every gap
// between chunks. The server stamps each chunk on a fake clock and waits for the client to
// report it before writing the next, so every time is exact.
func TestTiming(t *testing.T) {
	clock := newFake(ms(1000))
	chunk := func(content string) string {
		return `data: {"choices":[{"index":0,"delta":{"content":"` + content + `"},"finish_reason":null}]}` + "\n\n"
	}
	srv := newScriptServer(t, clock, script{steps: []step{
		{at: ms(1050), write: `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n", ack: true},
		{at: ms(1060), write: chunk("a"), ack: true},
		{at: ms(1070), write: ": ping\n\n"},
		{at: ms(1085), write: chunk("bc"), ack: true},
		{at: ms(1300), write: `data: {"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":3}}` + "\n\n"},
		{at: ms(1400), write: "data: [DONE]\n\n"},
	}})
	c := newTestClient(t, srv.URL, Config{Clock: clock})
	res, err := do(t, c, request(Chat), srv.ackChunk)
	if err != nil {
		t.Fatal(err)
	}
	if res.Start != ms(1000) || res.Headers != ms(1050) || res.First != ms(1050) || res.Last != ms(1085) || res.End < ms(1400) {
		t.Fatalf("start %v headers %v first %v last %v end %v", res.Start, res.Headers, res.First, res.Last, res.End)
	}
	if res.TTFT() != ms(50) || res.E2EL() != ms(85) {
		t.Errorf("TTFT %v E2EL %v, want 50ms 85ms", res.TTFT(), res.E2EL())
	}
	if tpot, ok := res.TPOT(); !ok || tpot != ms(17.5) {
		t.Errorf("TPOT %v %v, want (85-50)/(3-1) = 17.5ms", tpot, ok)
	}
	if gaps := res.ChunkGaps(nil); !reflect.DeepEqual(gaps, []time.Duration{ms(10), ms(25)}) {
		t.Errorf("chunk gaps %v", gaps)
	}
	if _, ok := res.TokenGaps(nil); ok {
		t.Error("token gaps reported without per-chunk token counts")
	}
	if res.KeepAlives != 1 || res.OutputTokens != 3 || res.Tokens != TokensUsage {
		t.Errorf("keep-alives %d, output %d from %v", res.KeepAlives, res.OutputTokens, res.Tokens)
	}
}

func TestGaps(t *testing.T) {
	tests := []struct {
		name   string
		chunks []ChunkTime
		chunk  []time.Duration
		token  []time.Duration
		ok     bool
		output int
		tpot   time.Duration
	}{
		{
			name:   "one token per chunk",
			chunks: []ChunkTime{{ms(10), 1}, {ms(12), 1}, {ms(15), 1}},
			chunk:  []time.Duration{ms(2), ms(3)}, token: []time.Duration{ms(2), ms(3)}, ok: true, output: 3, tpot: ms(2.5),
		},
		{
			name:   "multi-token chunks split their gap",
			chunks: []ChunkTime{{ms(10), 2}, {ms(14), 4}, {ms(16), 1}},
			chunk:  []time.Duration{ms(4), ms(2)}, token: []time.Duration{ms(1), ms(1), ms(1), ms(1), ms(2)}, ok: true, output: 7, tpot: ms(1),
		},
		{
			name:   "empty role chunk first",
			chunks: []ChunkTime{{ms(10), 0}, {ms(11), 1}, {ms(15), 1}, {ms(16), 0}},
			chunk:  []time.Duration{ms(1), ms(4), ms(1)}, token: []time.Duration{ms(4)}, ok: true, output: 2, tpot: ms(6),
		},
		{
			name:   "unknown counts",
			chunks: []ChunkTime{{ms(10), -1}, {ms(11), 1}},
			chunk:  []time.Duration{ms(1)}, ok: false, output: 2, tpot: ms(1),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Result{Chunks: tt.chunks, First: tt.chunks[0].At, Last: tt.chunks[len(tt.chunks)-1].At, OutputTokens: tt.output}
			if g := r.ChunkGaps(nil); !reflect.DeepEqual(g, tt.chunk) {
				t.Errorf("chunk gaps %v, want %v", g, tt.chunk)
			}
			g, ok := r.TokenGaps(nil)
			if ok != tt.ok || (ok && !reflect.DeepEqual(g, tt.token)) {
				t.Errorf("token gaps %v %v, want %v %v", g, ok, tt.token, tt.ok)
			}
			if tpot, ok := r.TPOT(); !ok || tpot != tt.tpot {
				t.Errorf("TPOT %v, want %v", tpot, tt.tpot)
			}
		})
	}
	one := Result{OutputTokens: 1}
	if _, ok := one.TPOT(); ok {
		t.Error("TPOT defined for one output token")
	}
}

func TestRequestBody(t *testing.T) {
	seed := int64(7)
	extra, err := ParseExtraBody(`{"temperature": 0.5, "chat_template_kwargs": {"enable_thinking": false}}`)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		req   Request
		extra ExtraBody
		want  map[string]any // members that must be there, with these values
		not   []string       // members that must not be there
		path  string
	}{
		{
			name: "completions greedy",
			req:  Request{API: Completions, Model: "gpt2", Prompt: "Hello", MaxTokens: 16},
			want: map[string]any{"model": "gpt2", "prompt": "Hello", "max_tokens": 16.0, "temperature": 0.0,
				"stream": true, "stream_options": map[string]any{"include_usage": true}},
			not:  []string{"top_p", "top_k", "seed", "ignore_eos", "min_tokens", "messages"},
			path: "/v1/completions",
		},
		{
			name: "token ids and no eos stop",
			req:  Request{API: Completions, Model: "gpt2", PromptIDs: []int32{15496, 11}, MaxTokens: 8, MinTokens: 8, IgnoreEOS: true},
			want: map[string]any{"prompt": []any{15496.0, 11.0}, "ignore_eos": true, "min_tokens": 8.0},
			path: "/v1/completions",
		},
		{
			name: "chat sampling",
			req: Request{API: Chat, Model: "m", Prompt: "Hi", MaxTokens: 4, Temperature: 0.7, TopP: 0.9, TopK: 40,
				Seed: &seed, ContinuousUsage: true},
			want: map[string]any{"messages": []any{map[string]any{"role": "user", "content": "Hi"}}, "temperature": 0.7,
				"top_p": 0.9, "top_k": 40.0, "seed": 7.0,
				"stream_options": map[string]any{"include_usage": true, "continuous_usage_stats": true}},
			not:  []string{"prompt"},
			path: "/v1/chat/completions",
		},
		{
			name:  "extra body wins at the top level",
			req:   Request{API: Completions, Model: "gpt2", Prompt: "x", MaxTokens: 16},
			extra: extra,
			want:  map[string]any{"temperature": 0.5, "max_tokens": 16.0, "chat_template_kwargs": map[string]any{"enable_thinking": false}, "stream": true},
			path:  "/v1/completions",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			paths := make(chan string, 1)
			bodies := make(chan map[string]any, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var m map[string]any
				_ = json.NewDecoder(r.Body).Decode(&m)
				paths <- r.URL.Path
				bodies <- m
				fmt.Fprint(w, "data: {\"choices\":[{\"text\":\"a\",\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n")
			}))
			defer srv.Close()
			c := newTestClient(t, srv.URL, Config{Extra: tt.extra})
			if _, err := do(t, c, tt.req, nil); err != nil {
				t.Fatal(err)
			}
			if p := <-paths; p != tt.path {
				t.Errorf("path %q, want %q", p, tt.path)
			}
			body := <-bodies
			for k, v := range tt.want {
				if !reflect.DeepEqual(body[k], v) {
					t.Errorf("%s = %#v, want %#v", k, body[k], v)
				}
			}
			for _, k := range tt.not {
				if _, ok := body[k]; ok {
					t.Errorf("%s sent: %#v", k, body[k])
				}
			}
		})
	}
}

func TestParseExtraBody(t *testing.T) {
	tests := []struct {
		name, in string
		n        int
		ok       bool
	}{
		{"empty", "", 0, true},
		{"object", `{"top_k": 1, "repetition_penalty": 1.1}`, 2, true},
		{"array", `[1, 2]`, 0, false},
		{"number", `3`, 0, false},
		{"null", `null`, 0, false},
		{"two objects", `{} {}`, 0, false},
		{"broken", `{"a": `, 0, false},
		{"stream", `{"stream": false}`, 0, false},
		{"max_tokens", `{"max_tokens": 20}`, 0, false},
		{"max_completion_tokens", `{"top_k": 1, "max_completion_tokens": 16}`, 0, false},
		{"n of 3", `{"n": 3}`, 0, false},
		{"n of 0", `{"n": 0}`, 0, false},
		{"n as a string", `{"n": "3"}`, 0, false},
		{"best_of 2", `{"top_k": 1, "best_of": 2}`, 0, false},
		{"n of 1", `{"n": 1}`, 1, true},
		{"n of 1.0 and best_of null", `{"n": 1.0, "best_of": null}`, 2, true},
		{"best_of 1", `{"best_of": 1}`, 1, true},
		{"echo", `{"echo": true}`, 0, false},
		{"echo as a string", `{"echo": "yes"}`, 0, false},
		{"echo false", `{"echo": false, "logprobs": 2}`, 2, true},
		{"echo null", `{"echo": null}`, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := ParseExtraBody(tt.in)
			if (err == nil) != tt.ok || e.Len() != tt.n {
				t.Fatalf("ParseExtraBody(%q) = %d members, %v", tt.in, e.Len(), err)
			}
			if err != nil && (!errors.Is(err, ErrConfig) || strings.Contains(err.Error(), "\n")) {
				t.Errorf("error %q: want one line wrapping ErrConfig", err)
			}
			if strings.HasPrefix(tt.name, "n ") && !tt.ok && !strings.Contains(fmt.Sprint(err), `may not set "n" to `) ||
				strings.HasPrefix(tt.name, "best_of") && !tt.ok && !strings.Contains(fmt.Sprint(err), `may not set "best_of" to 2: the client reads one choice a request`) {
				t.Errorf("error %q: want it to name the member and its value", err)
			}
		})
	}
}

func TestRequestValidation(t *testing.T) {
	c, err := New(Config{BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bad := []Request{
		{API: Completions, MaxTokens: 0},
		{API: Completions, MaxTokens: 4, MinTokens: 5},
		{API: Chat, MaxTokens: 4, PromptIDs: []int32{1}},
		{API: Completions, MaxTokens: 4, Temperature: -1},
		{API: API(9), MaxTokens: 4},
	}
	for i, r := range bad {
		if _, err := c.Do(context.Background(), r, nil); !errors.Is(err, ErrConfig) {
			t.Errorf("request %d: error %v, want ErrConfig", i, err)
		}
	}
	for _, u := range []string{"", "localhost:8000", "ftp://h/v1", "http://user:pw@h/v1", "http:///v1", "http://h/v1 x", " http://h/v1"} {
		if _, err := New(Config{BaseURL: u}); !errors.Is(err, ErrConfig) || strings.Contains(err.Error(), "pw") {
			t.Errorf("New(%q): %v", u, err)
		}
	}
	for in, want := range map[string]string{
		"http://h:8000":        "http://h:8000/v1",
		"http://h:8000/":       "http://h:8000/v1",
		"https://h/openai/v1/": "https://h/openai/v1",
	} {
		if got, err := normalizeBase(in); err != nil || got != want {
			t.Errorf("normalizeBase(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestSecret: the API key goes out as a bearer token and nowhere else: not in printed configs,
// JSON exports or error messages, even when the server echoes it back.
func TestSecret(t *testing.T) {
	const key = "sk-live-0123456789"
	srv := newScriptServer(t, nil, script{status: http.StatusUnauthorized, steps: []step{
		{write: `{"error":{"message":"Incorrect API key provided: ` + key + `","type":"invalid_request_error"}}`},
	}})
	cfg := Config{APIKey: key}
	c := newTestClient(t, srv.URL, cfg)
	_, err := do(t, c, request(Completions), nil)
	if got := <-srv.auth; got != "Bearer "+key {
		t.Errorf("Authorization %q", got)
	}
	js, jerr := json.Marshal(cfg)
	if jerr != nil {
		t.Fatal(jerr)
	}
	for _, s := range []string{err.Error(), fmt.Sprintf("%v %+v %#v %s", cfg, cfg, cfg, cfg.APIKey), string(js)} {
		if strings.Contains(s, key) {
			t.Errorf("key leaked: %s", s)
		}
	}
	if !errors.Is(err, ErrStatus) || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "[redacted]") {
		t.Errorf("error %v: want the 401 with the echoed key redacted", err)
	}
}

func TestModels(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		first  string
		err    error
	}{
		{"vllm", 200, `{"object":"list","data":[{"id":"meta-llama/Llama-3.1-8B-Instruct","object":"model","created":1735689600,"owned_by":"vllm","root":"meta-llama/Llama-3.1-8B-Instruct","parent":null,"max_model_len":8192}]}`, "meta-llama/Llama-3.1-8B-Instruct", nil},
		{"two models", 200, `{"object":"list","data":[{"id":"a"},{"id":"b"}]}`, "a", nil},
		{"no model", 200, `{"object":"list","data":[]}`, "", ErrMalformed},
		{"not json", 200, `<html>`, "", ErrMalformed},
		{"not found", 404, `{"detail":"Not Found"}`, "", ErrStatus},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/models" || r.Method != http.MethodGet {
					w.WriteHeader(http.StatusTeapot)
					return
				}
				w.WriteHeader(tt.status)
				fmt.Fprint(w, tt.body)
			}))
			defer srv.Close()
			c := newTestClient(t, srv.URL, Config{})
			first, err := c.FirstModel(context.Background())
			if first != tt.first || !errors.Is(err, tt.err) {
				t.Fatalf("FirstModel = %q, %v; want %q, %v", first, err, tt.first, tt.err)
			}
		})
	}
}

// byteTokenizer counts one token per byte.
type byteTokenizer struct{}

func (byteTokenizer) Encode(s string) []int32 { return make([]int32, len(s)) }

// TestMissingUsage: a server that never sends usage is counted as such, and the output tokens
// come from the tokenizer when there is one.
func TestMissingUsage(t *testing.T) {
	stream := "data: {\"choices\":[{\"text\":\"abc\"}]}\n\ndata: {\"choices\":[{\"text\":\"de\",\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n"
	for _, tt := range []struct {
		name   string
		tok    Tokenizer
		output int
		from   TokenSource
	}{
		{"with tokenizer", byteTokenizer{}, 5, TokensTokenizer},
		{"without tokenizer", nil, -1, TokensUnknown},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := newScriptServer(t, nil, script{steps: events(stream)})
			c := newTestClient(t, srv.URL, Config{Tokenizer: tt.tok})
			res, err := do(t, c, request(Completions), nil)
			if err != nil {
				t.Fatal(err)
			}
			if !res.UsageMissing || res.OutputTokens != tt.output || res.Tokens != tt.from {
				t.Errorf("usage missing %v, output %d from %v; want true, %d from %v", res.UsageMissing, res.OutputTokens, res.Tokens, tt.output, tt.from)
			}
		})
	}
}

// A metadata request's timeout names its own deadline, not a completion request's.
func TestMetaDeadlineNamed(t *testing.T) {
	c := newTestClient(t, "http://127.0.0.1:1", Config{RequestTimeout: time.Hour})
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errMetaDeadline)
	f := c.classify(context.Background(), ctx, context.DeadlineExceeded, reachedNothing)
	if f.Reason != ReasonTimeout || f.Detail != "after "+metaTimeout.String() {
		t.Fatalf("classify = %+v; want a timeout after %v", f, metaTimeout)
	}
}
