package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"rosetop/engine"
	"rosetop/sched"
)

// scriptedEngine answers every request with hand-built events: a token event a token of out
// (up to the request's max tokens), each with logprobs from outLPs when asked, the first with the
// prompt's from promptLPs when asked, then a finished event. It records what was submitted.
type scriptedEngine struct {
	m   Model
	out []int32
	// outLPs and promptLPs give a token's logprobs with top alternatives; promptLPs gets the
	// prompt token's index (1 for the second).
	outLPs    func(k int, top int) engine.TokenLogprobs
	promptLPs func(prompt []int32, j int, top int) engine.TokenLogprobs
	// dropPrompt leaves the last prompt entry out: an engine that breaks the contract.
	dropPrompt bool

	mu   sync.Mutex
	reqs []sched.Request
}

func (e *scriptedEngine) Submit(ctx context.Context, r sched.Request) (Stream, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reqs = append(e.reqs, r)
	return &scriptedStream{id: sched.RequestID(len(e.reqs)), events: e.events(r)}, nil
}

func (e *scriptedEngine) Waiting() int { return 0 }
func (e *scriptedEngine) Model() Model { return e.m }

// submitted returns the requests submitted so far.
func (e *scriptedEngine) submitted() []sched.Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.reqs)
}

// events are r's events, as the scheduler's contract has them.
func (e *scriptedEngine) events(r sched.Request) []sched.Event {
	n := min(r.MaxNewTokens, len(e.out))
	var evs []sched.Event
	for k := range n {
		ev := sched.Event{Kind: sched.EventTokens, Tokens: []int32{e.out[k]}}
		if r.Logprobs {
			ev.Logprobs = []engine.TokenLogprobs{e.outLPs(k, r.TopLogprobs)}
		}
		if k == 0 && r.PromptLogprobs {
			for j := 1; j < len(r.Tokens); j++ {
				ev.PromptLogprobs = append(ev.PromptLogprobs, e.promptLPs(r.Tokens, j, r.PromptTopLogprobs))
			}
			if e.dropPrompt {
				ev.PromptLogprobs = ev.PromptLogprobs[:len(ev.PromptLogprobs)-1]
			}
		}
		evs = append(evs, ev)
	}
	rec := &sched.Record{PromptTokens: len(r.Tokens), Output: slices.Clone(e.out[:n]), Reason: sched.FinishLength}
	return append(evs, sched.Event{Kind: sched.EventFinished, Record: rec})
}

// scriptedStream replays its events.
type scriptedStream struct {
	id     sched.RequestID
	mu     sync.Mutex
	events []sched.Event
}

func (s *scriptedStream) ID() sched.RequestID { return s.id }
func (s *scriptedStream) Cancel()             {}
func (s *scriptedStream) Stop()               {}

func (s *scriptedStream) Next(ctx context.Context) (sched.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.events) == 0 {
		return sched.Event{}, io.EOF
	}
	ev := s.events[0]
	s.events = s.events[1:]
	return ev, nil
}

// newScriptedHarness runs a Server over e on a real listener; it stops with the test.
func newScriptedHarness(t *testing.T, e *scriptedEngine) *harness {
	t.Helper()
	srv, err := New(e, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return serveHarness(t, srv, nil, time.Minute, nil)
}

// The scripted prompt and output: "Hello" "," " world", then "." "!".
var (
	scriptPrompt = []int32{15496, idComma, idWorld}
	scriptOut    = []int32{idDot, idBang}
)

// scriptLPs are the scripted positions' alternatives, most likely first, and the rank of the token
// at each: the prompt's "," (rank 3) and " world" (rank 1; its third alternative -inf), the
// outputs' "." (rank 1) and "!" (rank 4).
var scriptLPs = map[int32]struct {
	top  []engine.Logprob
	rank int
	lp   float32
}{
	idComma: {[]engine.Logprob{lp(idThe, -0.5), lp(idDot, -1), lp(idComma, -2)}, 3, -2},
	idWorld: {[]engine.Logprob{lp(idWorld, -0.25), lp(idThe, -2.5), lp(idDot, float32(math.Inf(-1)))}, 1, -0.25},
	idDot:   {[]engine.Logprob{lp(idDot, -0.75), lp(idBang, -1.25), lp(idThe, -2)}, 1, -0.75},
	idBang:  {[]engine.Logprob{lp(idThe, -0.5), lp(idDot, -1), lp(idWorld, -2.75)}, 4, -3},
}

func scriptTLP(id int32, top int) engine.TokenLogprobs {
	s := scriptLPs[id]
	return engine.TokenLogprobs{Sampled: lp(id, s.lp), Top: slices.Clone(s.top[:min(top, len(s.top))]), Rank: s.rank}
}

func newScripted(t *testing.T) (*scriptedEngine, *harness) {
	tok := gpt2(t)
	e := &scriptedEngine{
		m:      Model{ID: "scripted", MaxSeqLen: 64, VocabSize: tok.VocabSize(), Tokenizer: tok, EOS: idEOS, Created: time.Unix(1700000000, 0)},
		out:    scriptOut,
		outLPs: func(k, top int) engine.TokenLogprobs { return scriptTLP(scriptOut[k], top) },
		promptLPs: func(prompt []int32, j, top int) engine.TokenLogprobs {
			return scriptTLP(prompt[j], top)
		},
	}
	return e, newScriptedHarness(t, e)
}

// rawChoice is a completion choice with its logprobs fields as written.
type rawChoice struct {
	Index          int             `json:"index"`
	Text           string          `json:"text"`
	Logprobs       json.RawMessage `json:"logprobs"`
	PromptLogprobs json.RawMessage `json:"prompt_logprobs"`
}

type rawReply struct {
	Choices        []rawChoice     `json:"choices"`
	PromptLogprobs json.RawMessage `json:"prompt_logprobs"`
	Error          *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// postRaw posts body and returns its reply and status.
func postRaw(t *testing.T, h *harness, path string, body map[string]any) (*rawReply, int) {
	t.Helper()
	var r rawReply
	code := h.post(path, body, &r)
	return &r, code
}

// streamRaw posts body with stream and returns each chunk's choices, in order.
func streamRaw(t *testing.T, h *harness, body map[string]any) []rawChoice {
	t.Helper()
	body["stream"] = true
	resp := h.do(context.Background(), http.MethodPost, "/v1/completions", body)
	defer resp.Body.Close()
	events := readSSE(t, resp.Body)
	if resp.StatusCode != http.StatusOK || len(events) == 0 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream: status %d, events %q", resp.StatusCode, events)
	}
	var out []rawChoice
	for _, ev := range events[:len(events)-1] {
		var r rawReply
		if err := json.Unmarshal([]byte(ev), &r); err != nil || r.Error != nil {
			t.Fatalf("event %s: %v", ev, err)
		}
		if r.PromptLogprobs != nil {
			t.Fatalf("chunk %s carries prompt_logprobs", ev)
		}
		out = append(out, r.Choices...)
	}
	return out
}

// compact is raw without insignificant spaces, "" for none.
func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	if raw == nil {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// The echoed logprobs of the scripted request with logprobs 1: the prompt's positions (the first
// unscored: null logprob and top_logprobs), then the output's, text_offset running across both.
const (
	echoPromptLP = `{"text_offset":[0,5,6],"token_logprobs":[null,-2,-0.25],"tokens":["Hello",","," world"],` +
		`"top_logprobs":[null,{",":-2," the":-0.5},{" world":-0.25}]}`
	echoFirstLP = `{"text_offset":[0,5,6,12],"token_logprobs":[null,-2,-0.25,-0.75],"tokens":["Hello",","," world","."],` +
		`"top_logprobs":[null,{",":-2," the":-0.5},{" world":-0.25},{".":-0.75}]}`
	echoWholeLP = `{"text_offset":[0,5,6,12,13],"token_logprobs":[null,-2,-0.25,-0.75,-3],"tokens":["Hello",","," world",".","!"],` +
		`"top_logprobs":[null,{",":-2," the":-0.5},{" world":-0.25},{".":-0.75},{"!":-3," the":-0.5}]}`
	echoLastLP = `{"text_offset":[13],"token_logprobs":[-3],"tokens":["!"],"top_logprobs":[{"!":-3," the":-0.5}]}`
	// a whole reply's choice carries them raw as well (vLLM's prompt_logprobs, computed for echo)
	echoPromptRaw = `[null,{"11":{"logprob":-2,"rank":3,"decoded_token":","},"262":{"logprob":-0.5,"rank":1,"decoded_token":" the"}},` +
		`{"995":{"logprob":-0.25,"rank":1,"decoded_token":" world"}}]`
)

// TestEchoLogprobsScripted: completions' echo with logprobs answers as vLLM's
// request_output_to_completion_response and completion_stream_generator do, over hand-built
// events: the prompt's positions first (the first token's logprob and top_logprobs null, its
// text_offset 0), then the output's, text_offset counting on across both; a stream sends the
// prompt's with the first chunk, the next chunk's offset after the echoed text; max_tokens 0 has
// the prompt's alone. A whole reply's choice also carries them raw in prompt_logprobs, as vLLM's
// (a stream's never). The scheduler is asked for the prompt's logprobs with logprobs' top.
func TestEchoLogprobsScripted(t *testing.T) {
	e, h := newScripted(t)
	for _, c := range []struct {
		name      string
		maxTokens int
		whole     string   // the whole reply's logprobs
		chunks    []string // the stream's
		text      string
	}{
		{"max_tokens 2", 2, echoWholeLP, []string{echoFirstLP, echoLastLP}, "Hello, world.!"},
		{"max_tokens 0", 0, echoPromptLP, []string{echoPromptLP}, "Hello, world"},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := func() map[string]any {
				return map[string]any{"prompt": scriptPrompt, "echo": true, "logprobs": 1, "max_tokens": c.maxTokens}
			}
			before := len(e.submitted())
			r, code := postRaw(t, h, "/v1/completions", body())
			if code != 200 || len(r.Choices) != 1 {
				t.Fatalf("status %d, reply %+v", code, r)
			}
			ch := r.Choices[0]
			if got, raw := compact(t, ch.Logprobs), compact(t, ch.PromptLogprobs); got != c.whole || ch.Text != c.text || raw != echoPromptRaw {
				t.Fatalf("text %q, logprobs\n%s\nprompt_logprobs %s\nwant %q,\n%s\n%s", ch.Text, got, raw, c.text, c.whole, echoPromptRaw)
			}
			chunks := streamRaw(t, h, body())
			if len(chunks) != len(c.chunks) {
				t.Fatalf("%d chunks, want %d", len(chunks), len(c.chunks))
			}
			for i, x := range chunks {
				if got := compact(t, x.Logprobs); got != c.chunks[i] || x.PromptLogprobs != nil {
					t.Fatalf("chunk %d: logprobs\n%s\nwant\n%s\nand no prompt_logprobs (%s)", i, got, c.chunks[i], x.PromptLogprobs)
				}
			}
			for _, s := range e.submitted()[before:] {
				if !s.PromptLogprobs || s.PromptTopLogprobs != 1 || !s.Logprobs || s.TopLogprobs != 1 {
					t.Fatalf("submitted %+v; want prompt and output logprobs, 1 alternative", s)
				}
			}
		})
	}
}

// TestEchoLogprobsTokensAsIDs: with return_tokens_as_token_ids every token, the unscored first
// prompt token's too, is "token_id:N", and text_offset counts those spellings.
func TestEchoLogprobsTokensAsIDs(t *testing.T) {
	_, h := newScripted(t)
	r, code := postRaw(t, h, "/v1/completions", map[string]any{"prompt": scriptPrompt, "echo": true, "logprobs": 0, "max_tokens": 0,
		"return_tokens_as_token_ids": true})
	want := `{"text_offset":[0,14,25],"token_logprobs":[null,-2,-0.25],"tokens":["token_id:15496","token_id:11","token_id:995"],` +
		`"top_logprobs":[null,{"token_id:11":-2},{"token_id:995":-0.25}]}`
	if code != 200 || compact(t, r.Choices[0].Logprobs) != want {
		t.Fatalf("status %d, logprobs\n%s\nwant\n%s", code, r.Choices[0].Logprobs, want)
	}
}

// TestPromptLogprobsScripted: the prompt_logprobs field, as vLLM answers it on a whole
// completion's every choice and at the top of a whole chat reply: null for the first prompt
// token, then each token's dict from id to logprob, rank and decoded token, the prompt token
// first (with its rank) and the top N after it (ranks 1..N; the prompt token among them keeps its
// first place and takes the later value), -inf as -9999. Without echo it leaves logprobs alone;
// explicit, it sets echo's prompt alternatives. A stream never carries it.
func TestPromptLogprobsScripted(t *testing.T) {
	e, h := newScripted(t)
	const want2 = `[null,` +
		`{"11":{"logprob":-2,"rank":3,"decoded_token":","},"262":{"logprob":-0.5,"rank":1,"decoded_token":" the"},"13":{"logprob":-1,"rank":2,"decoded_token":"."}},` +
		`{"995":{"logprob":-0.25,"rank":1,"decoded_token":" world"},"262":{"logprob":-2.5,"rank":2,"decoded_token":" the"}}]`
	const want3 = `[null,` +
		`{"11":{"logprob":-2,"rank":3,"decoded_token":","},"262":{"logprob":-0.5,"rank":1,"decoded_token":" the"},"13":{"logprob":-1,"rank":2,"decoded_token":"."}},` +
		`{"995":{"logprob":-0.25,"rank":1,"decoded_token":" world"},"262":{"logprob":-2.5,"rank":2,"decoded_token":" the"},"13":{"logprob":-9999,"rank":3,"decoded_token":"."}}]`
	before := len(e.submitted())
	r, code := postRaw(t, h, "/v1/completions", map[string]any{"prompt": []any{scriptPrompt, scriptPrompt}, "n": 2, "max_tokens": 2, "prompt_logprobs": 3})
	if code != 200 || len(r.Choices) != 4 {
		t.Fatalf("status %d, reply %+v", code, r)
	}
	for i, ch := range r.Choices {
		if got := compact(t, ch.PromptLogprobs); got != want3 || string(ch.Logprobs) != "null" {
			t.Fatalf("choice %d: prompt_logprobs\n%s\nwant\n%s\n(logprobs %s: want null)", i, got, want3, ch.Logprobs)
		}
	}
	// Only each prompt's first choice computes them (its choices share the prompt).
	for i, s := range e.submitted()[before:] {
		if s.PromptLogprobs != (i%2 == 0) || s.Logprobs {
			t.Fatalf("request %d submitted with PromptLogprobs %v, Logprobs %v", i, s.PromptLogprobs, s.Logprobs)
		}
	}
	// Explicit with echo: the prompt's dicts hold 2 alternatives, of which logprobs 1 shows entries 0..1.
	r, code = postRaw(t, h, "/v1/completions", map[string]any{"prompt": scriptPrompt, "echo": true, "logprobs": 1, "max_tokens": 0, "prompt_logprobs": 2})
	const echo2 = `{"text_offset":[0,5,6],"token_logprobs":[null,-2,-0.25],"tokens":["Hello",","," world"],` +
		`"top_logprobs":[null,{",":-2," the":-0.5},{" world":-0.25," the":-2.5}]}`
	if code != 200 || compact(t, r.Choices[0].PromptLogprobs) != want2 || compact(t, r.Choices[0].Logprobs) != echo2 {
		t.Fatalf("status %d, prompt_logprobs %s, logprobs %s", code, r.Choices[0].PromptLogprobs, r.Choices[0].Logprobs)
	}
	// Chat: at the top of the reply, not on its choices.
	r, code = postRaw(t, h, "/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": "Hi"}},
		"max_tokens": 1, "prompt_logprobs": 0})
	var top []json.RawMessage
	if code != 200 || json.Unmarshal(r.PromptLogprobs, &top) != nil || r.Choices[0].PromptLogprobs != nil {
		t.Fatalf("chat: status %d, prompt_logprobs %s, choice's %s", code, r.PromptLogprobs, r.Choices[0].PromptLogprobs)
	}
	var second map[string]json.RawMessage
	if len(top) < 2 || string(top[0]) != "null" || json.Unmarshal(top[1], &second) != nil || len(second) != 1 {
		t.Fatalf("chat prompt_logprobs %s: want null, then dicts of the prompt token alone", r.PromptLogprobs)
	}
	// prompt_logprobs 0 with stream is taken (vLLM refuses only more) and shows nothing, so nothing is computed.
	before = len(e.submitted())
	if chunks := streamRaw(t, h, map[string]any{"prompt": scriptPrompt, "max_tokens": 2, "prompt_logprobs": 0}); len(chunks) != 2 {
		t.Fatalf("stream: %d chunks", len(chunks))
	}
	if s := e.submitted()[before]; s.PromptLogprobs {
		t.Fatalf("stream with prompt_logprobs 0 asked for them")
	}
}

// TestPromptLogprobsOneToken: a prompt of one token has no scored position: echo's logprobs hold
// its unscored entry alone, prompt_logprobs [null].
func TestPromptLogprobsOneToken(t *testing.T) {
	_, h := newScripted(t)
	r, code := postRaw(t, h, "/v1/completions", map[string]any{"prompt": []int{15496}, "echo": true, "logprobs": 1, "max_tokens": 0, "prompt_logprobs": 1})
	want := `{"text_offset":[0],"token_logprobs":[null],"tokens":["Hello"],"top_logprobs":[null]}`
	if code != 200 || compact(t, r.Choices[0].Logprobs) != want || compact(t, r.Choices[0].PromptLogprobs) != "[null]" {
		t.Fatalf("status %d, logprobs %s, prompt_logprobs %s; want %s, [null]", code, r.Choices[0].Logprobs, r.Choices[0].PromptLogprobs, want)
	}
}

// TestPromptLogprobsEngineBroken: an engine whose first token event lacks a prompt entry gets a
// 500, not a reply with positions missing.
func TestPromptLogprobsEngineBroken(t *testing.T) {
	e, h := newScripted(t)
	e.dropPrompt = true
	r, code := postRaw(t, h, "/v1/completions", map[string]any{"prompt": scriptPrompt, "echo": true, "logprobs": 1, "max_tokens": 2})
	if code != http.StatusInternalServerError || r.Error == nil {
		t.Fatalf("status %d, reply %+v; want 500", code, r)
	}
}

// TestPromptPositionsPartialCharacters: a prompt token that is part of a character decodes as
// vLLM's processor does at prefill: with the entry before it in its position, else after the
// request's first output token when output logprobs were asked (vLLM has recorded it by then),
// else "". The unscored first token is decoded alone, U+FFFD and all.
func TestPromptPositionsPartialCharacters(t *testing.T) {
	tok := gpt2(t)
	prompt := []int32{idC3, idA9, idDot}
	lps := []engine.TokenLogprobs{
		{Sampled: lp(idA9, -1), Top: []engine.Logprob{lp(idC3, -0.5), lp(idA9, -1)}, Rank: 2},
		{Sampled: lp(idDot, -1), Rank: 7},
	}
	texts := func(ps []lpPosition) [][]string {
		var out [][]string
		for _, p := range ps {
			var s []string
			for _, e := range p {
				s = append(s, e.text)
			}
			out = append(out, s)
		}
		return out
	}
	first := idC3
	for _, c := range []struct {
		first *int32
		want  [][]string
	}{
		// The sampled A9 alone is "" (nothing before it); listed again after C3 it is "é", which the
		// dict keeps at its first place.
		{nil, [][]string{{"\uFFFD"}, {"é", ""}, {"."}}},
		// After the first output token C3, the sampled A9 is "é" already; C3 after it is "é\ufffd"
		// whichever way: "".
		{&first, [][]string{{"\uFFFD"}, {"é", ""}, {"."}}},
	} {
		ps := promptPositions(tok, prompt, lps, c.first)
		if got := texts(ps); !slices.EqualFunc(got, c.want, slices.Equal) {
			t.Fatalf("first %v: texts %q, want %q", c.first, got, c.want)
		}
		if ps[0].scored() || !ps[1].scored() || ps[1][0].rank != 2 || ps[2][0].rank != 7 {
			t.Fatalf("first %v: positions %+v", c.first, ps)
		}
	}
	// Without an entry before it, only the first output token completes it.
	lone := []engine.TokenLogprobs{{Sampled: lp(idA9, -1), Rank: 9}, {Sampled: lp(idDot, -1), Rank: 1}}
	if got := promptPositions(tok, prompt, lone, nil)[1][0].text; got != "" {
		t.Fatalf("no output token: %q, want \"\"", got)
	}
	if got := promptPositions(tok, prompt, lone, &first)[1][0].text; got != "é" {
		t.Fatalf("after the output token C3: %q, want \"é\"", got)
	}
}

// TestPromptPartialCharacterScripted: a prompt token that is part of a character, with nothing
// before it in its position, is completed by the request's first output token when output
// logprobs were asked (vLLM's processor has recorded that token when it decodes the prompt's),
// and is "" without them: a prompt A9 after a first output C3 is "é".
func TestPromptPartialCharacterScripted(t *testing.T) {
	e, h := newScripted(t)
	e.out = []int32{idC3, idA9}
	prompt := []int32{15496, idA9}
	for _, c := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"echo": true, "logprobs": 0, "max_tokens": 0, "prompt_logprobs": 0}, "é"},
		{map[string]any{"max_tokens": 1, "prompt_logprobs": 0}, ""},
	} {
		c.body["prompt"] = prompt
		r, code := postRaw(t, h, "/v1/completions", c.body)
		want := `[null,{"102":{"logprob":0,"rank":0,"decoded_token":"` + c.want + `"}}]`
		if code != 200 || compact(t, r.Choices[0].PromptLogprobs) != want {
			t.Fatalf("%v: status %d, prompt_logprobs %s; want %s", c.body, code, r.Choices[0].PromptLogprobs, want)
		}
	}
}

// TestPromptLPValue: prompt_logprobs clamp -inf alone to -9999, as vLLM's clamp_prompt_logprobs
// (the output logprobs' max(logprob, -9999) clamps any lower value too); NaN, not JSON, as -9999.
func TestPromptLPValue(t *testing.T) {
	for _, c := range []struct{ in, want float64 }{
		{math.Inf(-1), -9999}, {-12000, -12000}, {-0.5, -0.5}, {math.NaN(), -9999},
	} {
		if got := promptLPValue(float32(c.in)); got != c.want {
			t.Errorf("promptLPValue(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
