package bench

import (
	"fmt"
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
}

// buildWorkload makes spec's requests for the model: from its dataset, or from the prompt flags
// (vocab bounds the marker ids: the model's vocabulary).
func buildWorkload(spec Workload, model ModelInfo) (*workload, error) {
	if spec.Dataset != nil {
		return buildDatasetWorkload(spec, model)
	}
	return buildPromptWorkload(spec, model.Codec, model.Vocab)
}

// buildDatasetWorkload samples the dataset. Random prompts and replayed traces run every output
// to its length, as vLLM runs them (it sets ignore_eos for both); file prompts stop at EOS unless
// the flags say otherwise.
func buildDatasetWorkload(spec Workload, model ModelInfo) (*workload, error) {
	d := spec.Dataset
	rows, err := d.sample(spec.NumRequests, model)
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
		w.longestTotal = max(w.longestTotal, len(r.tokens)+r.maxNew)
	}
	return w, nil
}

// buildPromptWorkload makes the prompt flags' requests.
func buildPromptWorkload(spec Workload, tok TextCodec, vocab int) (*workload, error) {
	base := strings.Repeat(spec.Prompt, spec.PromptRepeats)
	w := &workload{
		pretok: spec.Pretok, maxNew: spec.MaxNewTokens, stopOnEOS: spec.StopOnEOS, streamEvery: spec.StreamInterval,
		sampling: spec.Sampling,
	}
	var markers []string
	if spec.UniquePrompts {
		var err error
		if markers, err = UniqueMarkers(tok, spec.NumRequests, vocab); err != nil {
			return nil, err
		}
	}
	var shared []int32
	for i := 0; i < spec.NumRequests; i++ {
		text := base
		if markers != nil {
			text = markers[i] + " " + base
		}
		ids := shared
		if markers != nil || shared == nil {
			ids = tok.Encode(text)
		}
		if markers == nil {
			shared = ids
		}
		if len(ids) == 0 {
			return nil, fmt.Errorf("--prompt %q encodes to no tokens: a request needs at least one", spec.Prompt)
		}
		w.texts = append(w.texts, text)
		w.tokens = append(w.tokens, ids)
		w.longestTotal = max(w.longestTotal, len(ids)+spec.MaxNewTokens)
	}
	return w, nil
}

// fits checks that the longest request fits maxSeqLen (0: no such limit) and the model's
// positions, before any request is submitted.
func (w *workload) fits(maxSeqLen, positions int) error {
	longest := 0
	for i, ids := range w.tokens {
		if len(ids) > len(w.tokens[longest]) {
			longest = i
		}
	}
	n := len(w.tokens[longest])
	switch {
	case maxSeqLen > 0 && w.longestTotal > maxSeqLen:
		return &ConfigError{msg: fmt.Sprintf("--max-seq-len %d is shorter than the longest request: a prompt of %d tokens + --max-new-tokens %d = %d", maxSeqLen, n, w.maxNew, w.longestTotal)}
	case w.longestTotal > positions:
		return &ConfigError{msg: fmt.Sprintf("a prompt of %d tokens + --max-new-tokens %d = %d tokens exceeds the model's %d positions (n_positions)", n, w.maxNew, w.longestTotal, positions)}
	}
	return nil
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
		return nil, fmt.Errorf("--unique-prompts: the vocabulary has %d marker words, fewer than --num-requests %d", len(out), n)
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
