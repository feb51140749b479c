package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"testing"
	"unicode/utf8"

	"rosetop/engine"
)

// promptTol bounds how far a prompt logprob the scheduler reported may be from the reference's:
// the same model, its rows computed in another batch.
const promptTol = 1e-5

// promptReference is FillLogprobs over the tiny model's logits at each prompt position after the
// first (entry j is prompt[j+1]'s, with top alternatives), computed by a separate CPU engine over
// the whole prompt at once (Logits of every position), and those rows.
func promptReference(t *testing.T, h *harness, prompt []int32, top int) ([]engine.TokenLogprobs, [][]float32) {
	t.Helper()
	e, err := engine.New(h.te.model, engine.Options{Device: "cpu", MaxBatch: 1, MaxSeqLen: h.te.m.MaxSeqLen, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	rows, err := e.Backend.(*engine.CPUBackend).Logits(&engine.Batch{Seqs: []engine.SeqStep{{ID: 1, Tokens: prompt, Blocks: []int32{0}}}}, true)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]engine.TokenLogprobs, len(prompt)-1)
	for j := range want {
		engine.FillLogprobs(&want[j], rows[j], prompt[j+1], top)
	}
	return want, rows
}

// promptDiff says how the prompt logprobs got differ from the reference want (over rows): each
// entry the prompt token's, its logprob within promptTol, its rank off by no more than the
// logits within promptTol of its own, and the same number of alternatives, each within promptTol
// (the same ids where the reference's neighbours are further apart).
func promptDiff(got, want []engine.TokenLogprobs, rows [][]float32) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d prompt logprobs, want %d", len(got), len(want))
	}
	near := func(a, b float32) bool { return math.Abs(float64(a)-float64(b)) <= promptTol }
	for j, w := range want {
		g := got[j]
		if g.Sampled.Token != w.Sampled.Token || !near(g.Sampled.Logprob, w.Sampled.Logprob) || len(g.Top) != len(w.Top) {
			return fmt.Errorf("entry %d: %+v, want %+v", j, g, w)
		}
		x, slack := rows[j][w.Sampled.Token], 0
		for _, y := range rows[j] {
			if y != x && math.Abs(float64(y-x)) <= promptTol {
				slack++
			}
		}
		if d := g.Rank - w.Rank; d > slack || -d > slack {
			return fmt.Errorf("entry %d: rank %d, want %d", j, g.Rank, w.Rank)
		}
		for k, a := range w.Top {
			apart := (k == 0 || float64(w.Top[k-1].Logprob-a.Logprob) > promptTol) &&
				(k+1 == len(w.Top) || float64(a.Logprob-w.Top[k+1].Logprob) > promptTol)
			if !near(g.Top[k].Logprob, a.Logprob) || apart && g.Top[k].Token != a.Token {
				return fmt.Errorf("entry %d: alternative %d is %+v, want %+v", j, k, g.Top[k], a)
			}
		}
	}
	return nil
}

// engineScored is what the scheduler reported of a submitted request that asked for prompt
// logprobs with top alternatives and output logprobs: the prompt's (from its first token event,
// checked against the reference) and its output ids and their logprobs.
func engineScored(t *testing.T, h *harness, s submission, top int) (prompt []engine.TokenLogprobs, ids []int32, lps []engine.TokenLogprobs) {
	t.Helper()
	if !s.req.PromptLogprobs || s.req.PromptTopLogprobs != top {
		t.Fatalf("submitted with PromptLogprobs %v, PromptTopLogprobs %d; want true, %d", s.req.PromptLogprobs, s.req.PromptTopLogprobs, top)
	}
	for k, ev := range s.events {
		if k > 0 && ev.PromptLogprobs != nil {
			t.Fatalf("token event %d carries prompt logprobs again", k)
		}
	}
	if len(s.events) == 0 {
		t.Fatal("no token event")
	}
	prompt = s.events[0].PromptLogprobs
	want, rows := promptReference(t, h, s.req.Tokens, top)
	if err := promptDiff(prompt, want, rows); err != nil {
		t.Fatalf("the scheduler's prompt logprobs against the reference: %v", err)
	}
	ids, lps = engineOutput(t, s, s.req.TopLogprobs)
	return prompt, ids, lps
}

// echoLP is a completion's logprobs with echo, null entries kept.
type echoLP struct {
	TextOffset    []int             `json:"text_offset"`
	TokenLogprobs []*float64        `json:"token_logprobs"`
	Tokens        []string          `json:"tokens"`
	TopLogprobs   []json.RawMessage `json:"top_logprobs"`
}

func decodeEchoLP(t *testing.T, raw json.RawMessage) echoLP {
	t.Helper()
	var lp echoLP
	if err := json.Unmarshal(raw, &lp); err != nil || lp.Tokens == nil {
		t.Fatalf("logprobs %s: %v; want the four lists", raw, err)
	}
	n := len(lp.Tokens)
	if len(lp.TextOffset) != n || len(lp.TokenLogprobs) != n || len(lp.TopLogprobs) != n {
		t.Fatalf("logprobs %s: lists of different lengths", raw)
	}
	return lp
}

// checkEchoHead checks that a choice's echoed logprobs start as vLLM's: the prompt's tokens, the
// first decoded alone with null logprob and top_logprobs at text_offset 0, then each prompt token
// with the reference's logprob.
func checkEchoHead(t *testing.T, h *harness, lp echoLP, prompt []int32, ref []engine.TokenLogprobs) {
	t.Helper()
	if len(lp.Tokens) < len(prompt) {
		t.Fatalf("%d logprobs tokens for a prompt of %d", len(lp.Tokens), len(prompt))
	}
	first, _ := alone(h, prompt[0])
	if lp.Tokens[0] != first || lp.TokenLogprobs[0] != nil || string(lp.TopLogprobs[0]) != "null" || lp.TextOffset[0] != 0 {
		t.Fatalf("first entry %q %v %s at %d; want %q, null, null at 0", lp.Tokens[0], lp.TokenLogprobs[0], lp.TopLogprobs[0], lp.TextOffset[0], first)
	}
	for j, w := range ref {
		got := lp.TokenLogprobs[j+1]
		if got == nil || math.Abs(*got-float64(w.Sampled.Logprob)) > promptTol {
			t.Fatalf("prompt token %d: logprob %v, the reference's %v", j+1, got, w.Sampled.Logprob)
		}
	}
}

// TestEchoLogprobsEndToEnd: completions' echo with logprobs over the real scheduler and CPU engine,
// a batch of two prompts with n = 2, max_tokens 4 and 0, whole and streamed: every choice's
// request asks for the prompt's logprobs with logprobs' top; the scheduler reports them on the
// first token event, equal to FillLogprobs over the model's logits of the whole prompt; and the
// reply's logprobs are the prompt's positions (the first null) then the output's, as vLLM formats
// them, a stream's first chunk carrying the prompt's and its own tokens', text_offset running on.
func TestEchoLogprobsEndToEnd(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	tok := h.te.m.Tokenizer
	for _, maxTokens := range []int{4, 0} {
		for _, streamed := range []bool{false, true} {
			t.Run(fmt.Sprintf("max_tokens %d stream %v", maxTokens, streamed), func(t *testing.T) {
				before := len(h.te.requests(0))
				body := map[string]any{"prompt": []string{"Hello, my name is", "The capital of France"}, "echo": true, "logprobs": 2,
					"max_tokens": maxTokens, "n": 2, "seed": 7}
				var choices map[int][]lpChoice
				if streamed {
					choices = byIndex(h.streamLP(t, "/v1/completions", body))
				} else {
					choices = byIndex([]lpReply{*h.postLP(t, "/v1/completions", body)})
				}
				h.te.waitIdle()
				subs := h.te.requests(before)
				if len(subs) != 4 || len(choices) != 4 {
					t.Fatalf("%d requests, %d choices; want 4", len(subs), len(choices))
				}
				for i, s := range subs {
					promptLPs, ids, lps := engineScored(t, h, s, 2)
					prompt := s.req.Tokens
					ref, _ := promptReference(t, h, prompt, 2)
					ps := promptPositions(tok, prompt, promptLPs, &ids[0])
					if maxTokens > 0 {
						ps = append(ps, positions(tok, lps...)...)
					}
					want := completionLogprobsOf(ps, 2, 0, false)
					if !streamed {
						if got, w := string(choices[i][0].Logprobs), asWritten(t, want); got != w {
							t.Fatalf("choice %d: logprobs\n%s\nwant\n%s", i, got, w)
						}
						checkEchoHead(t, h, decodeEchoLP(t, choices[i][0].Logprobs), prompt, ref)
						continue
					}
					var all echoLP
					sent := 0 // code points of text sent before a chunk
					for k, ch := range choices[i] {
						lp := decodeEchoLP(t, ch.Logprobs)
						if k == 0 {
							checkEchoHead(t, h, lp, prompt, ref)
						} else if len(lp.TextOffset) > 0 && lp.TextOffset[0] != sent {
							t.Fatalf("choice %d chunk %d: text_offset %v, want from %d", i, k, lp.TextOffset, sent)
						}
						all.Tokens, all.TokenLogprobs = append(all.Tokens, lp.Tokens...), append(all.TokenLogprobs, lp.TokenLogprobs...)
						sent += utf8.RuneCountInString(ch.Text)
					}
					if !slices.Equal(all.Tokens, want.Tokens) || !slices.EqualFunc(all.TokenLogprobs, want.TokenLogprobs, func(a, b *float64) bool {
						return a == nil && b == nil || a != nil && b != nil && *a == *b
					}) {
						t.Fatalf("choice %d: streamed tokens %q; want %q", i, all.Tokens, want.Tokens)
					}
				}
			})
		}
	}
}

// TestLMEvalLoglikelihood: a loglikelihood request as lm-evaluation-harness's local-completions
// model sends it (a batch of context+continuation token ids, echo, logprobs 1, temperature 0,
// max_tokens 1 or 0): token_logprobs[1:len(prompt)] sum to the reference's prompt logprobs, the
// continuation's slice ([ctxlen:len(prompt)]) to the reference's over it, and is_greedy (each
// continuation token's logprob the top of its top_logprobs) says what the reference's argmax
// says; max_tokens 1 adds the sampled token's entry after the prompt's.
func TestLMEvalLoglikelihood(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	tok := h.te.m.Tokenizer
	var prompts [][]int32
	var ctxlens []int
	for _, c := range [][2]string{{"The quick brown fox", " jumps over the lazy dog"}, {"Question: 2+2=", " 4"}} {
		ctx, cont := tok.Encode(c[0]), tok.Encode(c[1])
		prompts, ctxlens = append(prompts, append(slices.Clone(ctx), cont...)), append(ctxlens, len(ctx))
	}
	for _, maxTokens := range []int{1, 0} {
		t.Run(fmt.Sprintf("max_tokens %d", maxTokens), func(t *testing.T) {
			r := h.postLP(t, "/v1/completions", map[string]any{"prompt": prompts, "echo": true, "logprobs": 1, "max_tokens": maxTokens,
				"temperature": 0, "seed": 1234})
			if len(r.Choices) != len(prompts) {
				t.Fatalf("%d choices, want %d", len(r.Choices), len(prompts))
			}
			for i, ch := range r.Choices {
				prompt, ctxlen := prompts[ch.Index], ctxlens[ch.Index]
				lp := decodeEchoLP(t, ch.Logprobs)
				if len(lp.TokenLogprobs) != len(prompt)+maxTokens {
					t.Fatalf("choice %d: %d token_logprobs, want %d", i, len(lp.TokenLogprobs), len(prompt)+maxTokens)
				}
				ref, rows := promptReference(t, h, prompt, 1)
				checkEchoHead(t, h, lp, prompt, ref)
				var got, want, gotCont, wantCont float64
				greedy, wantGreedy := true, true
				for j := 1; j < len(prompt); j++ {
					got += *lp.TokenLogprobs[j]
					want += float64(ref[j-1].Sampled.Logprob)
					if j < ctxlen {
						continue
					}
					gotCont += *lp.TokenLogprobs[j]
					wantCont += float64(ref[j-1].Sampled.Logprob)
					top := members(t, lp.TopLogprobs[j])
					best := slices.MaxFunc(top, func(a, b kv) int { return cmpFloat(a.v, b.v) })
					greedy = greedy && *lp.TokenLogprobs[j] == best.v
					wantGreedy = wantGreedy && slices.Index(rows[j-1], slices.Max(rows[j-1])) == int(prompt[j])
				}
				if math.Abs(got-want) > 1e-4 || math.Abs(gotCont-wantCont) > 1e-4 || greedy != wantGreedy {
					t.Fatalf("choice %d: prompt logprob sum %v (continuation %v, greedy %v); the reference's %v (%v, %v)",
						i, got, gotCont, greedy, want, wantCont, wantGreedy)
				}
				if maxTokens == 1 && (lp.TokenLogprobs[len(prompt)] == nil || lp.TextOffset[len(prompt)] != lp.TextOffset[len(prompt)-1]+utf8.RuneCountInString(lp.Tokens[len(prompt)-1])) {
					t.Fatalf("choice %d: the sampled token's entry %v at %d", i, lp.TokenLogprobs[len(prompt)], lp.TextOffset[len(prompt)])
				}
			}
		})
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// promptEntry is one token of a prompt_logprobs position.
type promptEntry struct {
	Logprob      float64 `json:"logprob"`
	Rank         int     `json:"rank"`
	DecodedToken string  `json:"decoded_token"`
}

// checkPromptField checks a prompt_logprobs field against the scheduler's report and the
// reference: null first, then for each prompt token a dict whose first key is that token (with
// its rank), then its top alternatives with ranks 1..top, each with the reported logprob (within
// promptTol of the reference's) and its text.
func checkPromptField(t *testing.T, h *harness, raw json.RawMessage, prompt []int32, reported []engine.TokenLogprobs, top int) {
	t.Helper()
	var ps []json.RawMessage
	if err := json.Unmarshal(raw, &ps); err != nil || len(ps) != len(prompt) || string(ps[0]) != "null" {
		t.Fatalf("prompt_logprobs %s: %v; want %d entries, the first null", raw, err, len(prompt))
	}
	ref, _ := promptReference(t, h, prompt, top)
	for j, x := range reported {
		ids := entryIDs(x)
		keys := keysInOrder(t, ps[j+1])
		if want := fmt.Sprint(ids); fmt.Sprint(keys) != want {
			t.Fatalf("position %d: keys %v, want %v", j+1, keys, want)
		}
		var dict map[string]promptEntry
		if err := json.Unmarshal(ps[j+1], &dict); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			e := dict[fmt.Sprint(id)]
			rank := x.Rank // the prompt token's own, unless it is among the top too: there the later value wins, as in vLLM's dict
			if i := slices.IndexFunc(x.Top, func(l engine.Logprob) bool { return l.Token == id }); i >= 0 {
				rank = i + 1
			}
			text, whole := alone(h, id)
			if e.Logprob != logprobOf(x, id) || e.Rank != rank || whole && e.DecodedToken != text {
				t.Fatalf("position %d token %d: %+v; want logprob %v rank %d text %q", j+1, id, e, logprobOf(x, id), rank, text)
			}
		}
		if math.Abs(dict[fmt.Sprint(prompt[j+1])].Logprob-float64(ref[j].Sampled.Logprob)) > promptTol {
			t.Fatalf("position %d: logprob %v, the reference's %v", j+1, dict[fmt.Sprint(prompt[j+1])].Logprob, ref[j].Sampled.Logprob)
		}
	}
}

// keysInOrder are a JSON object's keys as numbers, in order.
func keysInOrder(t *testing.T, raw json.RawMessage) []int32 {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tk, err := dec.Token(); err != nil || tk != json.Delim('{') {
		t.Fatalf("%s is not an object", raw)
	}
	var out []int32
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var id int32
		fmt.Sscan(k.(string), &id)
		out = append(out, id)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestPromptLogprobsEndToEnd: the prompt_logprobs field over the real scheduler and CPU engine:
// on each whole completion choice (n = 2: the prompt's first choice computes them for both) and
// at the top of a whole chat reply, vLLM's dicts of the logprobs the scheduler reported, which
// equal the reference's; the output's logprobs stay as asked (none, or their own).
func TestPromptLogprobsEndToEnd(t *testing.T) {
	h := newHarness(t, engineOpts{}, Options{})
	before := len(h.te.requests(0))
	var r struct {
		Choices []struct {
			Logprobs       json.RawMessage `json:"logprobs"`
			PromptLogprobs json.RawMessage `json:"prompt_logprobs"`
		} `json:"choices"`
		PromptLogprobs json.RawMessage `json:"prompt_logprobs"`
	}
	if code := h.post("/v1/completions", map[string]any{"prompt": "Hello, my name is", "max_tokens": 3, "n": 2, "prompt_logprobs": 3}, &r); code != 200 || len(r.Choices) != 2 {
		t.Fatalf("status %d, %d choices", code, len(r.Choices))
	}
	h.te.waitIdle()
	subs := h.te.requests(before)
	if len(subs) != 2 || subs[1].req.PromptLogprobs || subs[0].req.Logprobs {
		t.Fatalf("%d requests, the second asking for prompt logprobs %v, the first for output logprobs %v", len(subs), subs[1].req.PromptLogprobs, subs[0].req.Logprobs)
	}
	if !subs[0].req.PromptLogprobs || subs[0].req.PromptTopLogprobs != 3 {
		t.Fatalf("the first submitted with PromptLogprobs %v, PromptTopLogprobs %d; want true, 3", subs[0].req.PromptLogprobs, subs[0].req.PromptTopLogprobs)
	}
	reported := subs[0].events[0].PromptLogprobs
	for i, ch := range r.Choices {
		if string(ch.Logprobs) != "null" {
			t.Fatalf("choice %d: logprobs %s; want null", i, ch.Logprobs)
		}
		checkPromptField(t, h, ch.PromptLogprobs, subs[0].req.Tokens, reported, 3)
	}

	before = len(h.te.requests(0))
	r.Choices, r.PromptLogprobs = nil, nil
	if code := h.post("/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": "Hi there"}},
		"max_tokens": 3, "logprobs": true, "top_logprobs": 1, "prompt_logprobs": 2}, &r); code != 200 || r.Choices[0].PromptLogprobs != nil {
		t.Fatalf("chat: status %d, choice prompt_logprobs %s", code, r.Choices[0].PromptLogprobs)
	}
	h.te.waitIdle()
	s := h.te.requests(before)[0]
	prompt, ids, lps := engineScored(t, h, s, 2)
	checkPromptField(t, h, r.PromptLogprobs, s.req.Tokens, prompt, 2)
	checkChatLP(t, h, r.Choices[0].Logprobs, ids, lps, 1, false)

	// A prompt of one token has no scored position.
	one := h.postLP(t, "/v1/completions", map[string]any{"prompt": []int{15496}, "echo": true, "logprobs": 1, "max_tokens": 0})
	if got := string(one.Choices[0].Logprobs); got != `{"text_offset":[0],"token_logprobs":[null],"tokens":["Hello"],"top_logprobs":[null]}` {
		t.Fatalf("one token: logprobs %s", got)
	}
}
