package sched

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"rosetop/engine"
	"rosetop/engine/tokenizer"
)

func pagedOptions(blocks int, cfg Config) Options {
	return Options{Layout: engine.KVLayout{BlockSize: 4, NumBlocks: blocks, Paged: true}, Config: cfg, EOS: -1}
}

func TestNewValidation(t *testing.T) {
	good := Options{Backend: noopBackend{}, Layout: engine.KVLayout{BlockSize: 16, NumBlocks: 8, Paged: true},
		MaxSeqLen: 64, Config: Config{MaxBatch: 4, PrefillMaxBatch: 2}}
	cases := []struct {
		name string
		edit func(*Options)
		want string // "" = valid
	}{
		{"valid", func(o *Options) {}, ""},
		{"max batch 0", func(o *Options) { o.Config.MaxBatch = 0 }, "--max-batch-size"},
		{"prefill batch 0", func(o *Options) { o.Config.PrefillMaxBatch = 0 }, "--prefill-max-batch-size"},
		{"prefill batch above max batch", func(o *Options) { o.Config.PrefillMaxBatch = 5 }, "--prefill-max-batch-size 5 exceeds --max-batch-size 4"},
		{"negative prefill tokens", func(o *Options) { o.Config.PrefillMaxTokens = -1 }, "--prefill-max-tokens"},
		{"unknown policy", func(o *Options) { o.Config.Policy = 7 }, "--policy"},
		{"max batch above the engine's", func(o *Options) { o.BatchLimit = 2 }, "batch limit 2"},
		{"negative tokenize workers", func(o *Options) { o.TokenizeWorkers = -1 }, "--tokenize-workers"},
		{"workers without tokenizer", func(o *Options) { o.TokenizeWorkers = 2 }, "without a tokenizer"},
		{"no backend", func(o *Options) { o.Backend = nil }, "no backend"},
		{"empty KV layout", func(o *Options) { o.Layout.NumBlocks = 0 }, "KV layout"},
		{"max seq len 1", func(o *Options) { o.MaxSeqLen = 1 }, "max sequence length"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := good
			c.edit(&o)
			s, err := New(o)
			if c.want == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				s.Close()
				return
			}
			if err == nil || !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("New: error %v, want one line with %q", err, c.want)
			}
		})
	}
}

// TestTooLongNamesItsLimit: a request that cannot fit names the limit it hit, the max sequence
// length or the KV pool, and never states a limit larger than the one it hit.
func TestTooLongNamesItsLimit(t *testing.T) {
	s, err := New(Options{Backend: noopBackend{}, Layout: engine.KVLayout{BlockSize: 4, NumBlocks: 64, Paged: true},
		MaxSeqLen: 8, Config: Config{MaxBatch: 2, PrefillMaxBatch: 1}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Submit(Request{Tokens: make([]int32, 6), MaxNewTokens: 3})
	if err == nil || !strings.Contains(err.Error(), "exceeds the longest sequence: the max sequence length, 8 tokens") {
		t.Errorf("err = %v", err)
	}
}

func TestSubmitValidation(t *testing.T) {
	s, err := New(Options{Backend: noopBackend{}, Layout: engine.KVLayout{BlockSize: 4, NumBlocks: 4, Paged: true},
		MaxSeqLen: 32, Vocab: 100, Config: Config{MaxBatch: 2, PrefillMaxBatch: 1}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		r    Request
		want string
	}{
		{"max new tokens 0", Request{Tokens: []int32{1}}, "--max-new-tokens 0"},
		{"empty prompt", Request{MaxNewTokens: 1}, "empty prompt"},
		{"text without tokenizer", Request{Text: "hi", MaxNewTokens: 1}, "needs a tokenizer"},
		{"longer than max seq len", Request{Tokens: make([]int32, 30), MaxNewTokens: 3}, "exceeds the longest sequence: the 16 positions the KV pool"},
		{"longer than the KV pool", Request{Tokens: make([]int32, 10), MaxNewTokens: 7}, "the 16 positions the KV pool holds for one sequence"},
		{"negative token id", Request{Tokens: []int32{3, -1}, MaxNewTokens: 1}, "token id -1, want 0..99 (the vocabulary)"},
		{"token id past the vocabulary", Request{Tokens: []int32{3, 100}, MaxNewTokens: 1}, "prompt token id 100, want 0..99"},
		{"no room for a text prompt", Request{Text: "hi", MaxNewTokens: 16}, "--max-new-tokens 16 leaves no position for a prompt: the longest sequence is the 16 positions the KV pool"},
		{"min new tokens above max", Request{Tokens: []int32{1}, MaxNewTokens: 2, MinNewTokens: 3}, "min new tokens 3"},
		{"negative min new tokens", Request{Tokens: []int32{1}, MaxNewTokens: 2, MinNewTokens: -1}, "min new tokens -1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Submit(c.r)
			if err == nil || !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Submit: error %v, want one line with %q", err, c.want)
			}
		})
	}
	if _, err := s.Submit(Request{Tokens: make([]int32, 10), MaxNewTokens: 6}); err != nil {
		t.Fatalf("a request that exactly fits: %v", err)
	}
	s.Close()
	if _, err := s.Submit(Request{Tokens: []int32{1}, MaxNewTokens: 1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Submit after Close: %v, want ErrClosed", err)
	}
}

// TestStepInvariants runs mixed workloads under several configurations and checks, step by step,
// the batch limits, FIFO admission, exactly-once finished events, the timestamps, the outputs
// against the reference model, and the KV pool after the run.
func TestStepInvariants(t *testing.T) {
	cases := []struct {
		name   string
		o      Options
		prefix bool
	}{
		{"prefill-first", pagedOptions(512, Config{MaxBatch: 8, PrefillMaxBatch: 3, Policy: PrefillFirst}), false},
		{"decode-first", pagedOptions(512, Config{MaxBatch: 8, PrefillMaxBatch: 3, Policy: DecodeFirst}), false},
		{"mixed", pagedOptions(512, Config{MaxBatch: 8, PrefillMaxBatch: 3, Policy: Mixed}), false},
		{"mixed, prefix cache", pagedOptions(512, Config{MaxBatch: 6, PrefillMaxBatch: 2, Policy: Mixed}), true},
		{"prefill token budget", pagedOptions(512, Config{MaxBatch: 16, PrefillMaxBatch: 16, PrefillMaxTokens: 20}), false},
		{"batch of one", pagedOptions(512, Config{MaxBatch: 1, PrefillMaxBatch: 1}), false},
		{"prefix cache", pagedOptions(512, Config{MaxBatch: 6, PrefillMaxBatch: 2}), true},
		{"contiguous", Options{Layout: engine.KVLayout{BlockSize: 64, NumBlocks: 5}, MaxSeqLen: 64, EOS: -1,
			Config: Config{MaxBatch: 8, PrefillMaxBatch: 4}}, false},
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.o.PrefixCache = c.prefix
			h := newHarness(t, c.o)
			rng := rand.New(rand.NewPCG(7, uint64(ci)))
			for i := range 40 {
				n := 1 + rng.IntN(20)
				p := prompt(int32(i+1), n)
				if c.prefix && i%2 == 1 {
					p = slices.Clone(h.prompts[h.order[i-1]]) // same prompt as the previous one
				}
				h.submit(Request{Tokens: p, MaxNewTokens: 1 + rng.IntN(30)})
				if rng.IntN(3) == 0 {
					h.step()
				}
			}
			h.drain(10000)
			h.checkOutputs()
			var admitted []int32
			for _, m := range h.be.admits {
				if !slices.Contains(admitted, m) {
					admitted = append(admitted, m)
				}
			}
			want := make([]int32, 40)
			for i := range want {
				want[i] = h.prompts[h.order[i]][0]
			}
			if !c.prefix && !slices.Equal(admitted, want) {
				t.Errorf("admission order %v, want submission order %v", admitted, want)
			}
			for i := 1; i < len(h.order); i++ {
				if a, b := h.records[h.order[i-1]].Times.Admitted, h.records[h.order[i]].Times.Admitted; a > b {
					t.Errorf("request %d admitted at %v, after request %d at %v", h.order[i-1], a, h.order[i], b)
				}
			}
			if c.prefix && h.cached == 0 {
				t.Fatal("no prefix cache hit although every other prompt repeats the one before")
			}
		})
	}
}

// TestPreemption runs a workload that cannot fit a tiny KV pool: sequences are preempted and
// recomputed, and every request still produces exactly the reference tokens.
func TestPreemption(t *testing.T) {
	for _, prefix := range []bool{false, true} {
		name := map[bool]string{false: "no prefix cache", true: "prefix cache"}[prefix]
		t.Run(name, func(t *testing.T) {
			o := pagedOptions(12, Config{MaxBatch: 8, PrefillMaxBatch: 8})
			o.PrefixCache = prefix
			h := newHarness(t, o)
			for i := range 10 {
				h.submit(Request{Tokens: prompt(int32(i+1), 5+i%4), MaxNewTokens: 20 + i})
			}
			h.drain(5000)
			h.checkOutputs()
			var preempted int
			for _, r := range h.records {
				preempted += r.Preemptions
				if r.Reason != FinishLength {
					t.Errorf("request %d ended %s", r.ID, r.Reason)
				}
			}
			snap := h.s.Snapshot()
			if snap.Preemptions == 0 || uint64(preempted) != snap.Preemptions {
				t.Fatalf("preemptions: snapshot %d, records %d; want > 0 and equal", snap.Preemptions, preempted)
			}
		})
	}
}

// TestLiveConfig changes every knob between steps and sees it apply on the very next step.
func TestLiveConfig(t *testing.T) {
	h := newHarness(t, pagedOptions(512, Config{MaxBatch: 8, PrefillMaxBatch: 1}))
	for i := range 12 {
		h.submit(Request{Tokens: prompt(int32(i+1), 3), MaxNewTokens: 50})
	}
	if out := h.step(); out.Snapshot.Admitted != 1 || out.Snapshot.Kind != StepPrefill {
		t.Fatalf("step 1: %+v", out.Snapshot)
	}
	if err := h.s.SetConfig(Config{MaxBatch: 8, PrefillMaxBatch: 4, Policy: PrefillFirst}); err != nil {
		t.Fatal(err)
	}
	if out := h.step(); out.Snapshot.Admitted != 4 || out.Snapshot.Config.PrefillMaxBatch != 4 {
		t.Fatalf("after raising the prefill batch: %+v", out.Snapshot)
	}
	if h.be.kinds[len(h.be.kinds)-2] != StepPrefill || h.be.kinds[len(h.be.kinds)-1] != StepDecode {
		t.Fatalf("prefill-first ran %v", h.be.kinds)
	}
	if err := h.s.SetConfig(Config{MaxBatch: 8, PrefillMaxBatch: 2, Policy: DecodeFirst}); err != nil {
		t.Fatal(err)
	}
	if out := h.step(); out.Snapshot.Admitted != 2 || out.Snapshot.Kind != StepMixed {
		t.Fatalf("after lowering the prefill batch: %+v", out.Snapshot)
	}
	if h.be.kinds[len(h.be.kinds)-2] != StepDecode || h.be.kinds[len(h.be.kinds)-1] != StepPrefill {
		t.Fatalf("decode-first ran %v", h.be.kinds)
	}
	// Lowering the batch size preempts the newest sequences on the next step.
	if err := h.s.SetConfig(Config{MaxBatch: 3, PrefillMaxBatch: 2}); err != nil {
		t.Fatal(err)
	}
	out := h.step()
	if out.Snapshot.Running != 3 || out.Snapshot.Preemptions != 4 || out.Snapshot.Admitted != 0 {
		t.Fatalf("after lowering the batch size to 3: %+v", out.Snapshot)
	}
	if err := h.s.SetConfig(Config{MaxBatch: 3, PrefillMaxBatch: 4}); err == nil || !strings.Contains(err.Error(), "--prefill-max-batch-size") {
		t.Fatalf("bad config accepted: %v", err)
	}
	if h.s.Config().PrefillMaxBatch != 2 {
		t.Fatalf("a rejected config was applied: %+v", h.s.Config())
	}
	// The two preempted sequences at the front hold 3 prompt + 2 output tokens each: a budget of
	// 10 tokens to compute takes exactly them.
	if err := h.s.SetConfig(Config{MaxBatch: 16, PrefillMaxBatch: 16, PrefillMaxTokens: 10}); err != nil {
		t.Fatal(err)
	}
	if out := h.step(); out.Snapshot.Admitted != 2 || out.Snapshot.PrefillTokens != 10 {
		t.Fatalf("with a 10-token prefill budget: %+v", out.Snapshot)
	}
	// Mixed: the 5 running sequences' decode rows and the one admitted prompt in one call.
	if err := h.s.SetConfig(Config{MaxBatch: 16, PrefillMaxBatch: 1, Policy: Mixed}); err != nil {
		t.Fatal(err)
	}
	calls := h.be.calls
	if out := h.step(); out.Snapshot.Admitted != 1 || out.Snapshot.Kind != StepMixed || h.be.calls != calls+1 ||
		h.be.kinds[calls] != StepMixed || h.be.sizes[calls] != 6 || out.Snapshot.DecodeTokens != 5 {
		t.Fatalf("mixed: %d calls %v of %v sequences, snapshot %+v", h.be.calls-calls, h.be.kinds[calls:], h.be.sizes[calls:], out.Snapshot)
	}
	h.drain(1000)
	h.checkOutputs()
}

// TestPrefillTokenBudgetFirstAlwaysAdmitted: a prompt longer than the budget still runs, alone.
func TestPrefillTokenBudgetFirstAlwaysAdmitted(t *testing.T) {
	h := newHarness(t, pagedOptions(512, Config{MaxBatch: 8, PrefillMaxBatch: 8, PrefillMaxTokens: 10}))
	h.submit(Request{Tokens: prompt(1, 30), MaxNewTokens: 2})
	h.submit(Request{Tokens: prompt(2, 4), MaxNewTokens: 2})
	if out := h.step(); out.Snapshot.Admitted != 1 || out.Snapshot.PrefillTokens != 30 {
		t.Fatalf("step 1: %+v", out.Snapshot)
	}
	if out := h.step(); out.Snapshot.Admitted != 1 {
		t.Fatalf("step 2: %+v", out.Snapshot)
	}
	h.drain(100)
}

func TestPrefixCacheHit(t *testing.T) {
	o := pagedOptions(64, Config{MaxBatch: 4, PrefillMaxBatch: 4})
	o.PrefixCache = true
	h := newHarness(t, o)
	p := prompt(9, 18)
	a := h.submit(Request{Tokens: p, MaxNewTokens: 5})
	h.drain(100)
	b := h.submit(Request{Tokens: p, MaxNewTokens: 5})
	if out := h.step(); out.Snapshot.CachedTokens != 16 || out.Snapshot.PrefillTokens != 2 {
		t.Fatalf("second prefill: cached %d, computed %d; want 16 and 2", out.Snapshot.CachedTokens, out.Snapshot.PrefillTokens)
	}
	h.drain(100)
	if !slices.Equal(h.records[a].Output, h.records[b].Output) {
		t.Fatalf("outputs differ: %v vs %v", h.records[a].Output, h.records[b].Output)
	}
	h.checkOutputs()
}

func TestEOSAndText(t *testing.T) {
	o := pagedOptions(64, Config{MaxBatch: 4, PrefillMaxBatch: 4})
	o.Tokenizer = &byteTokenizer{}
	o.EOS = 7
	h := newHarness(t, o)
	// The model counts: it emits 'a', 'b', 'c', ... and EOS once the sequence is 9 tokens long.
	h.be.model = func(seq []int32) int32 {
		if len(seq) == 9 {
			return 7
		}
		return int32('a' + len(seq) - 3)
	}
	stop := h.submit(Request{Tokens: []int32{'x', 'y', 'z'}, MaxNewTokens: 20, StopOnEOS: true, StreamInterval: 4})
	run := h.submit(Request{Tokens: []int32{'x', 'y', 'z'}, MaxNewTokens: 8, StreamInterval: 3})
	pieces := map[RequestID][]string{}
	for len(h.records) < 2 {
		for _, e := range h.step().Events {
			if e.Kind == EventTokens && e.Text != "" {
				pieces[e.ID] = append(pieces[e.ID], e.Text)
			}
		}
	}
	cases := []struct {
		name   string
		id     RequestID
		reason FinishReason
		out    int
		text   string
		pieces []string
	}{
		{"stop on EOS", stop, FinishEOS, 7, "abcdef", []string{"abcd", "ef"}},
		{"EOS ignored", run, FinishLength, 8, "abcdef\x07h", []string{"abc", "def", "\x07h"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := h.records[c.id]
			if r.Reason != c.reason || len(r.Output) != c.out || r.Text != c.text || !slices.Equal(pieces[c.id], c.pieces) {
				t.Fatalf("reason %s, %d tokens, text %q, pieces %q; want %s, %d, %q, %q",
					r.Reason, len(r.Output), r.Text, pieces[c.id], c.reason, c.out, c.text, c.pieces)
			}
		})
	}
}

// TestMinNewTokens: an EOS sampled among the first MinNewTokens outputs stays in the output and
// the request goes on; one sampled after them finishes it (vLLM's min_tokens: its first
// min_tokens outputs are never EOS).
func TestMinNewTokens(t *testing.T) {
	cases := []struct {
		name   string
		min    int
		reason FinishReason
		text   string
	}{
		{"no minimum", 0, FinishEOS, "abcdef"},
		{"EOS just past min", 6, FinishEOS, "abcdef"},
		{"EOS is output min", 7, FinishLength, "abcdef\x07hij"},
		{"EOS before min", 8, FinishLength, "abcdef\x07hij"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := pagedOptions(64, Config{MaxBatch: 4, PrefillMaxBatch: 4})
			o.Tokenizer = &byteTokenizer{}
			o.EOS = 7
			h := newHarness(t, o)
			// EOS once the sequence is 9 tokens long (output 7), 'a' + position - 3 otherwise.
			h.be.model = func(seq []int32) int32 {
				if len(seq) == 9 {
					return 7
				}
				return int32('a' + len(seq) - 3)
			}
			id := h.submit(Request{Tokens: []int32{'x', 'y', 'z'}, MaxNewTokens: 10, MinNewTokens: c.min, StopOnEOS: true})
			h.drain(100)
			r := h.records[id]
			if r.Reason != c.reason || r.Text != c.text || r.Output[6] != 7 {
				t.Fatalf("reason %s, text %q, output %v; want %s, %q, EOS as output 7", r.Reason, r.Text, r.Output, c.reason, c.text)
			}
		})
	}
}

// TestBackendError: a failed engine step finishes every sequence holding KV with the error,
// returns it, releases the blocks, and leaves waiting requests to run afterwards.
func TestBackendError(t *testing.T) {
	h := newHarness(t, pagedOptions(64, Config{MaxBatch: 2, PrefillMaxBatch: 2}))
	h.be.fail = func(call int) bool { return call == 3 }
	for i := range 4 {
		h.submit(Request{Tokens: prompt(int32(i+1), 3), MaxNewTokens: 5})
	}
	h.step() // prefill 1, 2
	h.step() // decode 1, 2
	out, err := h.s.Step()
	if !errors.Is(err, errFake) {
		t.Fatalf("Step: %v, want the backend's error", err)
	}
	h.check(out)
	if len(out.Finished) != 2 || out.Snapshot.KVUsed != 0 || out.Snapshot.Waiting != 2 {
		t.Fatalf("after the failure: finished %v, %+v", out.Finished, out.Snapshot)
	}
	for _, id := range out.Finished {
		if r := h.records[id]; r.Reason != FinishError || !errors.Is(r.Err, errFake) {
			t.Fatalf("request %d: %s, %v", id, r.Reason, r.Err)
		}
	}
	h.drain(100)
	h.checkOutputs()
}

// TestPrefixCacheOnlyComputedBlocks: a block whose last position holds a token that was sampled
// but not yet fed back (its KV is unwritten) must not be hit. With prefill-first, the second
// request's prefill runs before the first request's decode writes that position.
func TestPrefixCacheOnlyComputedBlocks(t *testing.T) {
	o := pagedOptions(64, Config{MaxBatch: 4, PrefillMaxBatch: 4, Policy: PrefillFirst})
	o.PrefixCache = true
	h := newHarness(t, o)
	p := prompt(5, 7) // positions 0-6; the first output token goes to position 7, ending block 1
	h.submit(Request{Tokens: p, MaxNewTokens: 4})
	out := h.step()
	first := out.Events[0].Tokens[0]
	h.submit(Request{Tokens: append(slices.Clone(p), first, 1, 2, 3), MaxNewTokens: 2})
	if out := h.step(); out.Snapshot.CachedTokens != 4 {
		t.Fatalf("cached %d tokens, want 4 (block 0 only)", out.Snapshot.CachedTokens)
	}
	h.drain(100)
	h.checkOutputs()
}

// The real engine backend and GPT-2 tokenizer satisfy the scheduler's interfaces.
var (
	_ Backend   = engine.Backend(nil)
	_ Tokenizer = (*tokenizer.Tokenizer)(nil)
)

// TestStreamTextGPT2: with the real tokenizer, text pieces hold whole UTF-8 characters even when
// a character's bytes span tokens, and they add up to the decoded output.
func TestStreamTextGPT2(t *testing.T) {
	tok, err := tokenizer.GPT2()
	if err != nil {
		t.Fatal(err)
	}
	want := "naïve café — 東京 😀 done"
	target := tok.Encode(want)
	if !slices.ContainsFunc(target, func(id int32) bool { return !utf8.Valid(tok.TokenBytes(id)) }) {
		t.Fatal("no token of the text splits a character: the test would prove nothing")
	}
	promptIDs := tok.Encode("Say:")
	o := pagedOptions(64, Config{MaxBatch: 2, PrefillMaxBatch: 2})
	o.Tokenizer, o.EOS = tok, tok.EOS()
	h := newHarness(t, o)
	h.be.model = func(seq []int32) int32 { return target[len(seq)-len(promptIDs)] }
	id := h.submit(Request{Tokens: promptIDs, MaxNewTokens: len(target), StreamInterval: 1})
	var text strings.Builder
	for len(h.records) == 0 {
		for _, e := range h.step().Events {
			if e.Kind == EventTokens && e.ID == id {
				if !utf8.ValidString(e.Text) {
					t.Fatalf("piece %q is not whole UTF-8", e.Text)
				}
				text.WriteString(e.Text)
			}
		}
	}
	if r := h.records[id]; text.String() != want || r.Text != want {
		t.Fatalf("streamed %q, record %q, want %q", text.String(), r.Text, want)
	}
}

func TestParsePolicy(t *testing.T) {
	cases := []struct {
		in   string
		want Policy
		ok   bool
	}{
		{"decode-first", DecodeFirst, true},
		{"prefill-first", PrefillFirst, true},
		{"mixed", Mixed, true},
		{"fifo", 0, false},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			p, err := ParsePolicy(c.in)
			if (err == nil) != c.ok || (c.ok && (p != c.want || p.String() != c.in)) {
				t.Fatalf("ParsePolicy(%q) = %v, %v", c.in, p, err)
			}
			if !c.ok && (!errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "--policy")) {
				t.Fatalf("error %v does not name --policy", err)
			}
		})
	}
}

// TestRandomWorkloads runs random workloads under random settings, every knob at once: paged and
// contiguous pools down to a few blocks (preemption), the prefix cache, steps ahead, EOS with
// MinNewTokens, cancellations, settings changed between steps and a failing engine step. After
// every step the harness checks its invariants; at the end every request has ended exactly once,
// finished ones with the reference tokens, and the pool is empty.
func TestRandomWorkloads(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(1234, seed))
		o := pagedOptions(3+rng.IntN(40), Config{})
		o.PrefixCache = rng.IntN(2) == 0
		if rng.IntN(4) == 0 {
			o = Options{Layout: engine.KVLayout{BlockSize: 16 + rng.IntN(30), NumBlocks: 1 + rng.IntN(6)}}
		}
		o.EOS, o.MaxSeqLen = 7, 2+rng.IntN(60)
		randConfig := func() Config { return randKnobs(rng, 8) }
		o.Config = randConfig()
		h := newHarness(t, o)
		h.s.maxAhead = rng.IntN(4)
		h.be.model = func(seq []int32) int32 {
			if tok := nextToken(seq); tok%13 != 0 {
				return tok
			}
			return 7 // EOS
		}
		failAt := -1
		if rng.IntN(5) == 0 {
			failAt = 1 + rng.IntN(30)
		}
		h.be.fail = func(call int) bool { return call == failAt }
		shared := [][]int32{prompt(1, 40), prompt(2, 40), prompt(3, 40)} // prefixes to hit
		submitted := 0
		for step := 0; submitted < 40 || len(h.records) < len(h.order); step++ {
			if submitted < 40 && rng.IntN(2) == 0 {
				submitted++
				p := shared[rng.IntN(3)][:1+rng.IntN(30)]
				if rng.IntN(2) == 0 {
					p = prompt(int32(100+submitted), 1+rng.IntN(30))
				}
				r := Request{Tokens: p, MaxNewTokens: 1 + rng.IntN(30), StopOnEOS: rng.IntN(2) == 0}
				r.MinNewTokens = rng.IntN(r.MaxNewTokens + 1)
				if len(p)+r.MaxNewTokens <= h.s.seqCap {
					h.submit(r)
				} else if _, err := h.s.Submit(r); !errors.Is(err, ErrBadRequest) {
					t.Fatalf("seed %d: a request past the longest sequence: %v", seed, err)
				}
			}
			if len(h.order) > 0 && rng.IntN(8) == 0 {
				h.s.Cancel(h.order[rng.IntN(len(h.order))])
			}
			if rng.IntN(15) == 0 {
				if err := h.s.SetConfig(randConfig()); err != nil {
					t.Fatal(err)
				}
			}
			out, err := h.s.Step()
			if err != nil && !errors.Is(err, errFake) {
				t.Fatalf("seed %d: Step: %v", seed, err)
			}
			h.check(out)
			if t.Failed() || step > 20000 {
				t.Fatalf("seed %d, step %d: %d of %d requests finished; options %+v", seed, step, len(h.records), len(h.order), o)
			}
		}
		h.drain(10)
		h.checkOutputs()
		if t.Failed() {
			t.Fatalf("seed %d: options %+v", seed, o)
		}
	}
}

// randKnobs are random scheduler knobs of at most maxBatch sequences, for the randomized tests.
func randKnobs(rng *rand.Rand, maxBatch int) Config {
	c := Config{MaxBatch: 1 + rng.IntN(maxBatch), Policy: Policy(rng.IntN(3))}
	c.PrefillMaxBatch = 1 + rng.IntN(c.MaxBatch)
	if rng.IntN(2) == 0 {
		c.PrefillMaxTokens = 1 + rng.IntN(30)
	}
	return c
}
