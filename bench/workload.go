package bench

import (
	"cmp"
	"fmt"
	"math"
	"strings"

	"rosetop/engine"
	"rosetop/sched"
)

// TextCodec is the part of the tokenizer the workload needs; *tokenizer.Tokenizer satisfies it.
type TextCodec interface {
	Encode(text string) []int32
	TokenBytes(id int32) []byte
}

// workload is one run's requests; every run of a session submits the same workload.
type workload struct {
	texts        []string  // request i's prompt text
	tokens       [][]int32 // request i's prompt ids (always computed: counts, --pretok, max seq len)
	pretok       bool      // submit tokens instead of text
	maxNew       int
	maxNews      []int // request i's output length when set (datasets); else maxNew for all
	stopOnEOS    bool
	sampling     engine.SamplingParams
	streamEvery  int
	longestTotal int // longest prompt + max new tokens
	totalNew     int // the output tokens of all requests, each run to its length
}

// buildWorkload makes spec's requests for the model: from its dataset (on b's workers), or from
// the prompt flags (vocab bounds the marker ids: the model's vocabulary). Every request must fit
// maxSeqLen (0: no such limit) and the model's positions; a prompt too long is refused before the
// rest are tokenized.
func buildWorkload(b build, spec Workload, model ModelInfo, maxSeqLen int) (*workload, error) {
	var w *workload
	var err error
	if spec.Dataset != nil {
		w, err = buildDatasetWorkload(b, spec, model)
	} else {
		w, err = buildPromptWorkload(spec, model, maxSeqLen)
	}
	if err != nil {
		return nil, err
	}
	if err := w.fits(maxSeqLen, model.MaxPositions); err != nil {
		return nil, err
	}
	return w, nil
}

// buildDatasetWorkload samples the dataset. Random prompts and replayed traces run every output
// to its length, as vLLM runs them (it sets ignore_eos for both); file prompts stop at EOS unless
// the flags say otherwise.
func buildDatasetWorkload(b build, spec Workload, model ModelInfo) (*workload, error) {
	d := spec.Dataset
	rows, err := d.sample(b, spec.NumRequests, model)
	if err != nil {
		return nil, err
	}
	w := &workload{
		pretok: spec.Pretok, stopOnEOS: spec.StopOnEOS, streamEvery: spec.StreamInterval, sampling: spec.Sampling,
		maxNews: make([]int, len(rows)),
	}
	if d.Kind == "random" || d.Kind == "trace" {
		w.stopOnEOS = false
	}
	for i, r := range rows {
		w.texts = append(w.texts, r.text)
		w.tokens = append(w.tokens, r.tokens)
		w.maxNews[i] = r.maxNew
		w.maxNew = max(w.maxNew, r.maxNew)
		w.totalNew += r.maxNew
		w.longestTotal = max(w.longestTotal, len(r.tokens)+r.maxNew)
	}
	return w, nil
}

// buildPromptWorkload makes the prompt flags' requests. Each prompt is checked against maxSeqLen
// and the model's positions as it is made: by its bytes (a lower bound on its tokens) before it is
// tokenized, then by its tokens.
func buildPromptWorkload(spec Workload, model ModelInfo, maxSeqLen int) (*workload, error) {
	tok := model.Codec
	base := strings.Repeat(spec.Prompt, spec.PromptRepeats)
	w := &workload{
		pretok: spec.Pretok, maxNew: spec.MaxNewTokens, stopOnEOS: spec.StopOnEOS, streamEvery: spec.StreamInterval,
		sampling: spec.Sampling, totalNew: spec.NumRequests * spec.MaxNewTokens,
	}
	var markers []string
	if spec.UniquePrompts {
		var err error
		if markers, err = UniqueMarkers(tok, spec.NumRequests, model.Vocab); err != nil {
			return nil, err
		}
	}
	tokenBytes := 0 // the longest token's bytes; found when a prompt's bytes could exceed the limit
	var shared []int32
	for i := 0; i < spec.NumRequests; i++ {
		text := base
		if markers != nil {
			text = markers[i] + " " + base
		}
		if len(text)+spec.MaxNewTokens > min(model.MaxPositions, cmp.Or(maxSeqLen, model.MaxPositions)) {
			if tokenBytes == 0 {
				tokenBytes = longestToken(tok, model.Vocab)
			}
			least := (len(text) + tokenBytes - 1) / tokenBytes
			prompt := fmt.Sprintf("a prompt of %d bytes (at least %d tokens of at most %d bytes)", len(text), least, tokenBytes)
			if err := tooLong(maxSeqLen, model.MaxPositions, prompt, w.outputDesc(spec.MaxNewTokens), least+spec.MaxNewTokens, "at least "); err != nil {
				return nil, err
			}
		}
		ids := shared
		if markers != nil || shared == nil {
			ids = tok.Encode(text)
		}
		if markers == nil {
			shared = ids
		}
		if len(ids) == 0 {
			return nil, &ConfigError{msg: fmt.Sprintf("--prompt %q encodes to no tokens: a request needs at least one", spec.Prompt)}
		}
		prompt := fmt.Sprintf("a prompt of %d tokens", len(ids))
		if err := tooLong(maxSeqLen, model.MaxPositions, prompt, w.outputDesc(spec.MaxNewTokens), len(ids)+spec.MaxNewTokens, ""); err != nil {
			return nil, err
		}
		w.texts = append(w.texts, text)
		w.tokens = append(w.tokens, ids)
		w.longestTotal = max(w.longestTotal, len(ids)+spec.MaxNewTokens)
	}
	return w, nil
}

// longestToken is the most bytes one token stands for, over the ids below vocab and any the codec
// has beyond it: a text of n bytes encodes to at least n/longestToken tokens (invalid UTF-8 only
// grows, to U+FFFD).
func longestToken(tok TextCodec, vocab int) int {
	n := 1
	for id := int32(0); ; id++ {
		b := tok.TokenBytes(id)
		if (b == nil && int(id) >= vocab) || id == math.MaxInt32 {
			return n
		}
		n = max(n, len(b))
	}
}

// fits checks that the longest request fits maxSeqLen (0: no such limit) and the model's
// positions, before any request is submitted.
func (w *workload) fits(maxSeqLen, positions int) error {
	longest := 0
	for i, ids := range w.tokens {
		if len(ids)+w.maxNewOf(i) > len(w.tokens[longest])+w.maxNewOf(longest) {
			longest = i
		}
	}
	n, out := len(w.tokens[longest]), w.maxNewOf(longest)
	return tooLong(maxSeqLen, positions, fmt.Sprintf("a prompt of %d tokens", n), w.outputDesc(out), n+out, "")
}

// outputDesc describes an output of n tokens by what set it.
func (w *workload) outputDesc(n int) string {
	if w.maxNews != nil {
		return fmt.Sprintf("an output of %d tokens", n)
	}
	return fmt.Sprintf("--max-new-tokens %d", n)
}

// tooLong refuses a request of total tokens, prompt + output (both described), that exceeds
// maxSeqLen (0: no such limit) or the model's positions; qual qualifies the total ("at least ").
func tooLong(maxSeqLen, positions int, prompt, output string, total int, qual string) error {
	switch {
	case maxSeqLen > 0 && total > maxSeqLen:
		return &ConfigError{msg: fmt.Sprintf("--max-seq-len %d is shorter than the longest request: %s + %s = %s%d", maxSeqLen, prompt, output, qual, total)}
	case total > positions:
		return &ConfigError{msg: fmt.Sprintf("%s + %s = %s%d tokens exceeds the model's %d positions (n_positions)", prompt, output, qual, total, positions)}
	}
	return nil
}

// shorter names the flags that make a run of this workload shorter.
func (w *workload) shorter() string {
	if w.maxNews != nil {
		return "--num-requests and --output-len"
	}
	return "--num-requests and --max-new-tokens"
}

// request returns request i of the workload.
func (w *workload) request(i int) sched.Request {
	r := sched.Request{MaxNewTokens: w.maxNewOf(i), StopOnEOS: w.stopOnEOS, Sampling: w.sampling, StreamInterval: w.streamEvery}
	// Each request draws from its own stream, reproducible from --seed.
	r.Sampling.Seed = w.sampling.Seed ^ (uint64(i+1) * 0x9e3779b97f4a7c15)
	if w.pretok {
		r.Tokens = w.tokens[i]
	} else {
		r.Text = w.texts[i]
	}
	return r
}

// maxNewOf is request i's output length.
func (w *workload) maxNewOf(i int) int {
	if w.maxNews != nil {
		return w.maxNews[i]
	}
	return w.maxNew
}

// UniqueMarkers returns n marker words for --unique-prompts. Request i's prompt is
// "<marker_i> <prompt>" where marker_i is the i-th token, in ascending id order below vocab, whose
// text is two or more ASCII letters and encodes back to that one token ("in", "er", "on", "re",
// ...). The first token of every prompt is therefore its marker: no two requests share a first
// token, so no prefix-cache block is ever shared between them.
func UniqueMarkers(tok TextCodec, n, vocab int) ([]string, error) {
	out := make([]string, 0, n)
	for id := int32(0); len(out) < n && int(id) < vocab; id++ {
		text := string(tok.TokenBytes(id))
		if !asciiWord(text) {
			continue
		}
		if ids := tok.Encode(text); len(ids) != 1 || ids[0] != id {
			continue
		}
		out = append(out, text)
	}
	if len(out) < n {
		return nil, &ConfigError{msg: fmt.Sprintf("--unique-prompts needs a marker word per request and the model's vocabulary has %d: --num-requests must be at most %d with --unique-prompts, got %d", len(out), len(out), n)}
	}
	return out, nil
}

func asciiWord(s string) bool {
	if len(s) < 2 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}
